"""The issue's scenario end to end: infai run in ``mono/pkg`` of a repository whose
root ``.gitignore`` lists ``.env``, ``node_modules/`` and ``dist/``. The
snapshots leave those out, ``session export`` does not carry the secret, and
going back to an earlier event leaves the ignored ``dist/`` the build made."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infai.shells.cli import main

SECRET = b"API_KEY=hunter2-secret-value"


def infai(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mono = tmp_path / "mono"
    mono.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=mono, check=True)
    _write(mono / ".gitignore", b".env\nnode_modules/\ndist/\n")
    pkg = mono / "pkg"
    _write(pkg / ".env", SECRET + b"\n")
    _write(pkg / "node_modules" / "left-pad" / "index.js", b"module.exports = 'pad'\n")
    _write(pkg / "src" / "app.js", b"console.log('app v1')\n")
    monkeypatch.chdir(pkg)
    return pkg


def _lines(result: Result) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_mono_pkg_secret_node_modules_and_dist_stay_out(tmp_path: Path, pkg: Path) -> None:
    home = tmp_path / "home"
    first = _lines(infai(home, "run", "--json", "one"))
    snapshot = first[0]["event"]
    assert isinstance(snapshot, dict) and snapshot["kind"] == "snapshot"
    assert snapshot["record"]["skipped"] == {".env": "ignored", "node_modules/": "ignored"}
    user_event = next(
        x["event"]["id"]  # type: ignore[index]
        for x in first
        if isinstance(x.get("event"), dict) and x["event"]["kind"] == "message"  # type: ignore[index]
    )
    sid = str(first[0]["session"])
    files = json.loads(infai(home, "session", "files", sid, "--json").stdout)
    listed = json.dumps(files["files"])
    assert "app.js" in listed and ".env" not in listed and "left-pad" not in listed

    # the build makes dist/, and the app changes; the next turn records the change
    _write(pkg / "dist" / "bundle.js", b"built bundle\n")
    (pkg / "src" / "app.js").write_bytes(b"console.log('app v2')\n")
    infai(home, "run", "--continue", "two")

    # going back to the first turn puts app.js back and leaves the ignored files;
    # app.js was changed by hand (not by a tool), so the restore asks for --force
    refused = infai(home, "run", "--continue", "--from", user_event, "instead", code=2)
    assert "src/app.js" in refused.stderr and "dist" not in refused.stderr
    infai(home, "run", "--continue", "--from", user_event, "--force", "instead")
    assert (pkg / "src" / "app.js").read_bytes() == b"console.log('app v1')\n"
    assert (pkg / "dist" / "bundle.js").read_bytes() == b"built bundle\n"
    assert (pkg / ".env").read_bytes() == SECRET + b"\n"
    assert (pkg / "node_modules" / "left-pad" / "index.js").exists()

    exported = infai(home, "session", "export", sid).stdout_bytes
    assert SECRET not in exported
    objects = [json.loads(line) for line in exported.splitlines() if line.startswith(b'{"object"')]
    datas = [base64.b64decode(o["data"]) for o in objects]
    assert any(b"app v1" in d for d in datas) and any(b"app v2" in d for d in datas)
    assert not any(SECRET in d or b"left-pad" in d or b"built bundle" in d for d in datas)
    assert os.listdir(pkg / "dist") == ["bundle.js"]
