"""Snapshots apply the repository's ignore rules whatever directory infai runs in:
every ``.gitignore`` from the repository's top down, ``info/exclude`` and the
global excludes file, as git does from a subdirectory, a worktree and a
submodule; compared with ``git check-ignore`` on seeded random trees."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from ckpt_support import later, write
from infai.checkpoints import SnapshotResult, Snapshotter, tree_files
from infai.store.file.objects import FileObjects

_AUTHOR = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def _git(wd: Path, *args: str) -> str:
    """git in ``wd`` with the test's environment (conftest: no user configuration)."""
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=wd,
        env={**os.environ, **_AUTHOR},
        check=True,
        capture_output=True,
    )
    return done.stdout.decode("utf-8", "surrogateescape")


def _git_ignored(wd: Path, paths: list[str]) -> set[str]:
    """Which of ``paths`` (relative to ``wd``) ``git check-ignore`` says are ignored."""
    done = subprocess.run(
        ["git", "check-ignore", "--stdin", "-z", "--no-index"],
        cwd=wd,
        input="\0".join(paths).encode(),
        capture_output=True,
        env={**os.environ, **_AUTHOR},
    )
    assert done.returncode in (0, 1), done.stderr
    return set(filter(None, done.stdout.decode().split("\0")))


def _files_on_disk(wd: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(wd):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel = os.path.relpath(dirpath, wd)
        for name in filenames:
            if name != ".git":
                out.append(name if rel == "." else f"{rel}/{name}")
    return sorted(out)


def _snapshot(wd: Path, home: Path) -> tuple[SnapshotResult, set[str]]:
    snap = Snapshotter(FileObjects(home), wd, home=home, clock=later, watch=False)
    try:
        result = snap.snapshot()
        files = tree_files(snap.objects, result.tree)
        return result, {p for p, info in files.items() if info.type != "dir"}
    finally:
        snap.close()


def _agrees_with_git(wd: Path, home: Path) -> set[str]:
    """Snapshot ``wd``; assert it records exactly the files git does not ignore
    and that git ignores every path it left out as ignored. The recorded files."""
    result, recorded = _snapshot(wd, home)
    on_disk = _files_on_disk(wd)
    ignored = _git_ignored(wd, on_disk)
    assert recorded == set(on_disk) - ignored
    left_out = [p.rstrip("/") for p, why in result.every_skipped.items() if why == "ignored"]
    assert _git_ignored(wd, left_out) == set(left_out)
    return recorded


def _mono(top: Path) -> Path:
    """The issue's layout: mono/ with a root .gitignore, infai run in mono/pkg."""
    top.mkdir(parents=True)
    _git(top, "init", "-q", "-b", "main")
    write(
        top,
        [
            (".gitignore", ".env\nnode_modules/\ndist/\n"),
            ("pkg/.env", "API_KEY=hunter2-secret\n"),
            ("pkg/node_modules/lib/index.js", "module.exports = 1\n"),
            ("pkg/src/app.js", "console.log('app')\n"),
            ("pkg/package.json", "{}\n"),
        ],
    )
    return top / "pkg"


def test_a_subdirectory_snapshot_applies_the_root_gitignore(tmp_path: Path) -> None:
    pkg = _mono(tmp_path / "mono")
    write(pkg, [("dist/bundle.js", "built")])
    result, recorded = _snapshot(pkg, tmp_path / "home")
    assert recorded == {"src/app.js", "package.json"}
    assert result.skipped == {".env": "ignored", "node_modules/": "ignored", "dist/": "ignored"}
    assert _agrees_with_git(pkg, tmp_path / "home2") == recorded


def test_parent_rules_are_anchored_where_they_live(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q", "-b", "main")
    write(
        top,
        [
            (".gitignore", "/a/b/top.txt\n/b/\n*.log\n!/a/b/keep.log\nc/d/\nsub/*.tmp\n"),
            ("a/.gitignore", "b/mid.txt\n!b/**/deep.log\n/b/x/\nb/e/\n"),
            ("a/b/.gitignore", "own.txt\n!re.txt\n"),
            ("a/.git-not-a-repo", "x"),
        ],
    )
    wd = top / "a" / "b"
    paths = [
        "top.txt", "s/top.txt", "b/f", "b/b/f", "x.log", "keep.log", "s/keep.log",
        "q/deep.log", "deep.log", "mid.txt", "s/mid.txt", "x/f", "s/x/f", "c/d/f",
        "s/c/d/f", "e/f", "s/e/f", "sub/a.tmp", "s/sub/a.tmp", "own.txt", "s/own.txt",
        "re.txt", "plain.txt",
    ]  # fmt: skip
    write(wd, [(p, p) for p in paths])
    recorded = _agrees_with_git(wd, tmp_path / "home")
    assert {"top.txt", "x.log", "mid.txt", "x/f", "own.txt"}.isdisjoint(recorded)
    assert {"s/top.txt", "keep.log", "q/deep.log", "deep.log", "s/x/f", "plain.txt"} <= recorded


def test_a_working_directory_inside_an_ignored_one_records_nothing(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q", "-b", "main")
    write(top, [(".gitignore", "scratch/\n"), ("scratch/.gitignore", "!*\n")])
    wd = top / "scratch" / "in"
    write(wd, [("a.txt", "a"), ("d/b.txt", "b")])
    result, recorded = _snapshot(wd, tmp_path / "home")
    assert recorded == set()
    assert result.skipped == {"a.txt": "ignored", "d/": "ignored"}
    _agrees_with_git(wd, tmp_path / "home2")


def test_the_global_excludes_file_is_anchored_at_the_top(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q", "-b", "main")
    excludes = tmp_path / "my-ignore"
    excludes.write_text("/pkg/anchored.txt\n*.bak\n")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(f"[core]\n\texcludesFile = {excludes}\n")
    (top / ".git" / "info" / "exclude").write_text("pkg/info.txt\n!keep.bak\n")
    wd = top / "pkg"
    write(wd, [(p, p) for p in ["anchored.txt", "x/anchored.txt", "a.bak", "keep.bak", "info.txt"]])
    recorded = _agrees_with_git(wd, tmp_path / "home")
    assert recorded == {"x/anchored.txt", "keep.bak"}


def test_a_relative_core_excludes_file_is_relative_to_the_top(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    _git(top, "init", "-q", "-b", "main")
    _git(top, "config", "core.excludesFile", "my-ignore")  # the repository's own config
    (top / "my-ignore").write_text("*.q\n")
    wd = top / "pkg"
    write(wd, [("a.q", "q"), ("my-ignore", "*.txt\n"), ("b.txt", "b")])
    assert _agrees_with_git(wd, tmp_path / "home") == {"my-ignore", "b.txt"}


def test_a_worktree_subdirectory_uses_the_common_info_exclude(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    _git(main, "init", "-q", "-b", "main")
    write(main, [(".gitignore", "*.secret\nsub/local/\n"), ("sub/f.txt", "f")])
    _git(main, "add", "-A")
    _git(main, "commit", "-q", "-m", "one")
    (main / ".git" / "info" / "exclude").write_text("*.tmp\n")
    other = tmp_path / "other"
    _git(main, "worktree", "add", "-q", str(other))
    assert (other / ".git").is_file()
    wd = other / "sub"
    write(wd, [("w.secret", "s"), ("w.tmp", "t"), ("w.txt", "w"), ("local/x", "x")])
    recorded = _agrees_with_git(wd, tmp_path / "home")
    assert recorded == {"f.txt", "w.txt"}


def _super_with_submodule(tmp_path: Path) -> Path:
    """super/ with *.log, src/ and (info/exclude) *.bak ignored, and the
    submodule deps/lib ignoring *.out (.gitignore) and *.tmp (info/exclude)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _git(lib, "init", "-q", "-b", "main")
    write(lib, [(".gitignore", "*.out\n"), ("src/lib.c", "int x;\n")])
    _git(lib, "add", "-A")
    _git(lib, "commit", "-q", "-m", "lib")
    sup = tmp_path / "super"
    sup.mkdir()
    _git(sup, "init", "-q", "-b", "main")
    write(sup, [(".gitignore", "*.log\nsrc/\n"), ("top.txt", "t"), ("x.log", "x")])
    (sup / ".git" / "info" / "exclude").write_text("*.bak\n")
    _git(sup, "submodule", "add", "-q", str(lib), "deps/lib")
    module_git = sup / ".git" / "modules" / "deps" / "lib"
    (module_git / "info").mkdir(exist_ok=True)
    (module_git / "info" / "exclude").write_text("*.tmp\n")
    names = ["a.log", "a.bak", "a.out", "a.tmp", "a.txt"]
    write(sup / "deps" / "lib" / "src", [(p, p) for p in names])
    return sup


def test_a_submodule_is_its_own_repository(tmp_path: Path) -> None:
    wd = _super_with_submodule(tmp_path) / "deps" / "lib" / "src"
    # the superproject's *.log, src/ and *.bak do not apply; the submodule's own rules do
    recorded = _agrees_with_git(wd, tmp_path / "home")
    assert recorded == {"lib.c", "a.log", "a.bak", "a.txt"}


def test_a_nested_repository_met_by_the_walk_has_its_own_rules(tmp_path: Path) -> None:
    sup = _super_with_submodule(tmp_path)
    nested = sup / "vendor" / "tool"  # a clone inside the tree, no submodule
    nested.mkdir(parents=True)
    _git(nested, "init", "-q", "-b", "main")
    write(nested, [(".gitignore", "*.txt\n"), ("n.log", "n"), ("n.txt", "n"), ("n.c", "n")])
    result, recorded = _snapshot(sup, tmp_path / "home")
    for inner in (sup / "deps" / "lib", nested):
        under = inner.relative_to(sup).as_posix() + "/"
        on_disk = _files_on_disk(inner)
        mine = {p[len(under) :] for p in recorded if p.startswith(under)}
        assert mine == set(on_disk) - _git_ignored(inner, on_disk), inner
        assert mine  # (not left out whole)
    outer = [p for p in _files_on_disk(sup) if not p.startswith(("deps/lib/", "vendor/tool/"))]
    assert {p for p in recorded if p in outer} == set(outer) - _git_ignored(sup, outer)
    assert "x.log" in result.skipped and "deps/lib/src/a.log" in recorded


def test_a_changed_nested_info_exclude_applies_to_the_next_warm_snapshot(
    tmp_path: Path,
) -> None:
    sup = _super_with_submodule(tmp_path)
    exclude = sup / ".git" / "modules" / "deps" / "lib" / "info" / "exclude"
    home = tmp_path / "home"
    snap = Snapshotter(FileObjects(home), sup, home=home, clock=later)  # watching
    try:
        assert "deps/lib/src/a.tmp" in snap.snapshot().skipped
        assert "deps/lib/src/a.tmp" in snap.snapshot().skipped  # armed
        exclude.write_text("*.c\n")
        got = snap.snapshot()
        assert "deps/lib/src/lib.c" in got.skipped and "deps/lib/src/a.tmp" not in got.skipped
    finally:
        snap.close()


def test_outside_a_repository_only_the_working_directory_s_rules_apply(tmp_path: Path) -> None:
    outer = tmp_path / "plain"
    write(outer, [(".gitignore", "*.txt\n"), ("wd/a.txt", "a"), ("wd/.gitignore", "*.md\n")])
    write(outer, [("wd/b.md", "b"), ("wd/c.py", "c")])
    _, recorded = _snapshot(outer / "wd", tmp_path / "home")
    assert recorded == {".gitignore", "a.txt", "c.py"}


def test_a_changed_parent_gitignore_applies_to_the_next_warm_snapshot(tmp_path: Path) -> None:
    pkg = _mono(tmp_path / "mono")
    home = tmp_path / "home"
    snap = Snapshotter(FileObjects(home), pkg, home=home, clock=later)  # watching
    try:
        assert ".env" in snap.snapshot().skipped
        assert ".env" in snap.snapshot().skipped  # armed: only events are looked at now
        (tmp_path / "mono" / ".gitignore").write_text("node_modules/\n*.json\n")
        got = snap.snapshot()
        assert set(got.skipped) == {"node_modules/", "package.json"}
        assert set(tree_files(snap.objects, got.tree)) == {".env", "src/app.js"}
        (tmp_path / "mono" / ".gitignore").unlink()
        assert snap.snapshot().skipped == {}
        write(tmp_path / "mono", [(".gitignore", "src/\n")])  # a new one appears
        assert snap.snapshot().skipped == {"src/": "ignored"}
    finally:
        snap.close()


def test_a_parent_gitignore_is_read_again_only_when_its_stat_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infai.checkpoints import repo as repo_module

    pkg = _mono(tmp_path / "mono")
    parent = tmp_path / "mono" / ".gitignore"
    reads: list[int] = []
    real_read = repo_module.read_patterns

    def counting(files: list[repo_module.PatternFile]) -> list[bytes]:
        reads.append(1)
        return real_read(files)

    monkeypatch.setattr(repo_module, "read_patterns", counting)
    monkeypatch.setattr(repo_module, "_now_ns", later)  # nothing is racy
    home = tmp_path / "home"
    snap = Snapshotter(FileObjects(home), pkg, home=home, clock=later, watch=False)
    try:
        for _ in range(3):
            assert ".env" in snap.snapshot().skipped
        assert len(reads) == 1
        st = parent.stat()
        parent.write_bytes(b".env\nnode_modules/\nsrc/\n\n")  # the same size
        os.utime(parent, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: ctime tells
        assert parent.stat().st_size == st.st_size
        assert set(snap.snapshot().skipped) == {".env", "node_modules/", "src/"}
        assert len(reads) == 2
    finally:
        snap.close()


# --- seeded random trees against git check-ignore ---------------------------------

_NAMES = ["a", "b", "build", "dist", ".env", "node_modules", "x.log", "keep.log", "c.tmp", "q"]
_PATTERNS = [
    "*.log", "!keep.log", "build/", "/dist", "dist/", ".env", "!.env", "node_modules/",
    "/a", "a/", "b/c.tmp", "**/b", "q/**/x.log", "*.tmp", "!*.tmp", "a/**", "!b/", "/q/",
    "c.tmp/", "keep.*", "!/x.log", "d*/", "?.log", "!a", "b/*", "!b/x.log", "q/a/",
    "w/v/build", "/w/v/a/", "v/*.log", "!v/keep.log", "w/", "!w/", "v/", "**/v/dist",
    "/v/q/", "*", "!*/", "b/**/c.tmp", "#a", "\\!x",
]  # fmt: skip


def _random_repo(top: Path, rng: random.Random) -> Path:
    """A repository with random files under top/w/v (the working directory) and
    around it, and random pattern files at every level; the working directory."""
    top.mkdir()
    _git(top, "init", "-q", "--template=", "-b", "main")
    dirs = {"", "w/", "w/v/"}
    files: dict[str, str] = {}
    for _ in range(45):
        base = rng.choice(["w/v/", "w/v/", "w/v/", "w/", ""])
        parts = [rng.choice(_NAMES) for _ in range(rng.randint(1, 4))]
        path = base + "/".join(parts)
        prefixes = {path[: i + 1] for i, ch in enumerate(path) if ch == "/"}
        if path + "/" in dirs or any(p.rstrip("/") in files for p in prefixes):
            continue  # a file where a directory is, or the other way round
        files[path] = path
        dirs |= prefixes
    for d in sorted(dirs):
        if rng.random() < 0.6:
            files[d + ".gitignore"] = "".join(p + "\n" for p in rng.sample(_PATTERNS, 3))
    write(top, list(files.items()))
    (top / ".git" / "info").mkdir(exist_ok=True)
    (top / ".git" / "info" / "exclude").write_text(
        "".join(p + "\n" for p in rng.sample(_PATTERNS, rng.randint(0, 2)))
    )
    excludes = "".join(p + "\n" for p in rng.sample(_PATTERNS, rng.randint(0, 2)))
    (Path(os.environ["XDG_CONFIG_HOME"]) / "git").mkdir(exist_ok=True)
    (Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "ignore").write_text(excludes)
    return top / "w" / "v"


def test_random_trees_agree_with_git_check_ignore(tmp_path: Path) -> None:
    ignored_some = recorded_some = everything = 0
    for seed in range(30):
        rng = random.Random(seed)
        wd = _random_repo(tmp_path / f"r{seed}", rng)
        recorded = _agrees_with_git(wd, tmp_path / "home")
        on_disk = set(_files_on_disk(wd))
        ignored_some += bool(on_disk - recorded)
        recorded_some += bool(recorded)
        everything += not recorded
    # the seeds reach both outcomes, and some working directories git ignores whole
    assert ignored_some > 20 and recorded_some > 15 and everything > 0


_TOKENS = ["a", "b", "1", ".", "*", "**", "***", "?", "[ab]", "[!a]", "[^b]", "[a-c]", "[]a]"]
_TOKENS += ["[[:digit:]]", "[[:alpha:][:digit:]]", "[[:bogus:]]", "[[:x]", "[a", "[a-]", "[-a]"]
_TOKENS += ["[\\]]", "[a\\-c]", "[!]", "\\*", "\\[", "\\", "/", "/", "**/", "/**", "a**", "#", "x "]
# names with spaces, brackets, a backslash, and a two-byte character (git matches bytes)
_FILE_NAMES = ["a", "b", "ab", "a1", "1", "b.a", ".b", "*", "[a]", "ba", "aa", "c", "-", "!a"]
_FILE_NAMES += ["#a", "a ", "]", "a\\b", "A", "\u00e9", "b-a"]


def _random_pattern(rng: random.Random) -> str:
    body = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 4)))
    return rng.choice(["", "", "!"]) + body + rng.choice(["", "", "/", "\\ ", "  "])


def test_random_patterns_agree_with_git_check_ignore(tmp_path: Path) -> None:
    """Git's pattern language itself (sets, classes, ``**``, escapes, anchoring,
    trailing spaces) in a parent ``.gitignore`` and the working directory's."""
    matched = 0
    for seed in range(30):
        rng = random.Random(1000 + seed)
        top = tmp_path / f"p{seed}"
        top.mkdir()
        _git(top, "init", "-q", "--template=", "-b", "main")
        lines = [_random_pattern(rng) for _ in range(6)]
        (top / ".gitignore").write_text("\n".join(lines[:3]) + "\n")
        wd = top / "w"
        paths = {
            "/".join(rng.choice(_FILE_NAMES) for _ in range(rng.randint(1, 3))) + "/f"
            for _ in range(25)
        } | set(_FILE_NAMES)
        clash = {p for p in paths if any(q.startswith(p + "/") for q in paths)}
        write(wd, [(p, p) for p in sorted(paths - clash)])
        (wd / ".gitignore").write_text("\r\n".join(lines[3:]))
        recorded = _agrees_with_git(wd, tmp_path / "home")
        matched += len(set(_files_on_disk(wd)) - recorded)
    assert matched > 100  # the patterns did ignore things
