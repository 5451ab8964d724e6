"""Build a plugin package's wheel by hand and install it with a real ``pip install``.

The package's ``pyproject.toml`` is the source of truth: its name, version and
entry points become the wheel's ``dist-info``, its ``*.py`` files the wheel's
contents. Building by hand needs no build backend and no network (a wheel is a
zip with a manifest); installing goes through pip itself, as a user's would.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
PLUGINS = SUPPORT / "plugins"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(source: Path, out: Path) -> Path:
    """The wheel of the package whose ``pyproject.toml`` is in ``source``, in ``out``."""
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files: dict[str, bytes] = {
        path.relative_to(source).as_posix(): path.read_bytes()
        for path in sorted(source.rglob("*.py"))
        if "__pycache__" not in path.parts
    }
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {project.get('description', '')}\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: infai-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    groups = project.get("entry-points", {})
    files[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in entries.items()) + "\n"
        for group, entries in groups.items()
    ).encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for arcname, data in files.items():
            archive.writestr(arcname, data)
    return wheel


def pip_install(package: str, target: Path, scratch: Path) -> Path:
    """Install the support package ``package`` (a directory under ``plugins/``) into
    ``target`` with pip (no dependencies, no index: nothing from the network)."""
    wheel = build_wheel(PLUGINS / package, scratch)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    return target
