"""The files ``@`` offers in the TUI are the files a snapshot records: the listing
walks with the snapshot's ignore machinery (the repository's levels from above
the working directory, nested ``.gitignore`` files, ``!`` re-includes, a nested
repository's own rules, ``.git`` never), compared with a real snapshot's tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ckpt_support import later, write
from infai.checkpoints import Snapshotter, tree_files
from infai.checkpoints.listing import working_files
from infai.store.file.objects import FileObjects


def _recorded(wd: Path, home: Path) -> set[str]:
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=later, watch=False)
    try:
        result = snap.snapshot()
        files = tree_files(snap.objects, result.tree)
        return {p for p, info in files.items() if info.type != "dir"}
    finally:
        snap.close()


def test_the_listing_is_what_a_snapshot_records(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    write(
        top,
        [
            (".gitignore", "*.log\nbuild/\n"),
            ("app/.gitignore", "!keep.log\nsecret/\n"),
            ("app/main.py", "x"),
            ("app/keep.log", "kept"),
            ("app/drop.log", "ignored by the top"),
            ("app/build/out.o", "ignored dir"),
            ("app/secret/key", "ignored here"),
            ("app/lib/util.py", "u"),
            ("app/vendor/.git/HEAD", "ref: refs/heads/main\n"),
            ("app/vendor/x.log", "a nested repository: the top's rules do not apply"),
            ("app/vendor/y.py", "y"),
        ],
    )
    wd = top / "app"  # run below the repository's top: its levels still apply
    listed = working_files(str(wd))
    assert set(listed) == _recorded(wd, tmp_path / "home")
    assert "keep.log" in listed and "drop.log" not in listed
    assert "vendor/x.log" in listed and not any(".git/" in path for path in listed)
    assert listed.index("main.py") < listed.index("lib/util.py")  # the top level first


def test_the_listing_stops_at_its_limit(tmp_path: Path) -> None:
    write(tmp_path, [(f"d/f{n}.txt", "x") for n in range(30)] + [("top.txt", "t")])
    listed = working_files(str(tmp_path), limit=10)
    assert len(listed) == 10 and listed[0] == "top.txt"
