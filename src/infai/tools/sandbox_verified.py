"""The approval mode for a verified sandbox: confined work runs without asking.

With ``[sandbox] approvals = "sandboxed"`` in the user's own configuration (a
project's file may not set it: it loosens what asks), infai stops asking about
what the sandbox itself confines, as Codex's ``workspace-write`` mode does:

- a shell command that runs in the sandbox, when the sandbox has no network
  (``sandbox.network = false``): it can write only in the working directory
  (``.git/`` and ``.infai/`` stay read-only) and reach nothing outside;
- writing and editing a file inside the working directory (not under ``.git/``
  or ``.infai/``, not a file with other hard links);
- reading, listing and searching system directories outside it (``/usr``,
  ``/etc``…), which every sandboxed command may read anyway; the home directory,
  ``/proc`` and the like still ask, because the read tools run in infai's own
  process, not in the sandbox.

Everything that needs more still asks: an escalation (``bash!``), a command
while the sandbox has network, a write or read outside, an MCP tool, and any
``ask`` rule of the user's. Deny rules deny as before.

The mode applies only where ``infai doctor`` has passed with the same sandbox:
the doctor records its pass (:func:`record_pass`) under a fingerprint of what
it checked (bubblewrap's path and version, the kernel and its Landlock ABI,
infai's version and the sandbox settings), and :func:`unverified` compares. A new
kernel, Landlock gone (a boot with another ``lsm=``), a new bubblewrap or changed
sandbox settings turn the mode off (with a notice) until
the doctor passes again. Each decision the mode makes says so (its ``by`` is
:data:`MODE_LABEL`), and that is recorded with the tool call in the session.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .landlock import abi
from .sandbox_settings import SandboxSettings

#: who decided, in a decision the mode made (recorded with the tool call)
MODE_LABEL = "approval mode 'sandboxed'"
#: where ``infai doctor`` records its passes, in the store's home
RECORD_NAME = "doctor-passed.json"
#: directories outside the working directory that the read tools may read without
#: asking in the mode: what the sandbox shows every command, read-only
SYSTEM_READ_ROOTS: tuple[Path, ...] = tuple(
    Path(p) for p in ("/usr", "/etc", "/opt", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/nix")
)
#: under them, what the read tools still ask about (machine secrets a root-run
#: agent could read; the sandbox runs commands without privileges)
SYSTEM_READ_EXCEPTIONS: tuple[Path, ...] = tuple(
    Path(p) for p in ("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private", "/etc/sudoers")
)


@functools.lru_cache(maxsize=8)
def _bwrap_version(bwrap: str | None) -> str:
    """``bwrap --version`` (asked once per binary: each session's policy checks it)."""
    if not bwrap:
        return ""
    try:
        done = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def fingerprint(bwrap: str | None, settings: SandboxSettings) -> str:
    """A digest of what a doctor's pass depends on: the bubblewrap binary and its
    version, the kernel and its Landlock ABI, infai's version and the sandbox
    settings (but the mode's own switch, so that turning it on after the doctor ran
    needs no second run)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        infai_version = version("infai")
    except PackageNotFoundError:  # a source tree run without an install
        infai_version = "source"
    parts = {
        "bwrap": bwrap or "",
        "bwrap_version": _bwrap_version(bwrap),
        "kernel": platform.release(),
        "infai": infai_version,
        "settings": repr(replace(settings, approvals="ask")),
        "landlock": abi(),  # what keeps a FIFO outside unwritten (:mod:`.landlock`)
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    passes = data.get("passes") if isinstance(data, dict) else None
    return passes if isinstance(passes, dict) else {}


def record_pass(home: Path, bwrap: str | None, settings: SandboxSettings) -> Path:
    """Record that the doctor passed with this sandbox (atomically, mode 0600);
    returns the record's path."""
    path = home / RECORD_NAME
    passes = _read(path)
    passes[fingerprint(bwrap, settings)] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{RECORD_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"version": 1, "passes": passes}, out, indent=1, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def unverified(home: Path, bwrap: str | None, settings: SandboxSettings) -> str:
    """Why the mode cannot apply with this sandbox ("" when the doctor passed with
    it): the sentence a shell shows."""
    if not bwrap:
        return "the sandbox is not available here"
    if fingerprint(bwrap, settings) not in _read(home / RECORD_NAME):
        return (
            "`infai doctor` has not passed with this sandbox (bubblewrap, kernel, "
            "infai or sandbox settings changed since, or it never ran): run it"
        )
    return ""


def system_read(path: Path | None) -> bool:
    """Whether the mode lets the read tools read ``path`` (resolved) without asking."""
    if path is None:
        return False
    if any(path == root or root in path.parents for root in SYSTEM_READ_EXCEPTIONS):
        return False
    return any(root in path.parents for root in SYSTEM_READ_ROOTS)
