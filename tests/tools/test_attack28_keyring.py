"""Red team (attack28): the session keyring crossed the sandbox.

bwrap keeps the calling process's session keyring, so a key infai's session holds
(a Kerberos ticket in a ``KEYRING:session`` cache, a token a tool keeps there)
was read back by a confined command with ``keyctl``. The seccomp filter now
refuses ``add_key``, ``request_key`` and ``keyctl`` (``EPERM``, as Docker's
default profile does) on every ABI it knows."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bpf import run, seccomp_data
from infai.tools.seccomp import filter_program

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

EPERM, ALLOW, X32 = 0x00050001, 0x7FFF0000, 0x40000000
#: (machine, audit arch, add_key, request_key, keyctl), from the kernel's tables
KEY_CALLS = [
    ("x86_64", 0xC000003E, 248, 249, 250),
    ("x86_64", 0xC000003E, 248 | X32, 249 | X32, 250 | X32),
    ("x86_64", 0x40000003, 286, 287, 288),
    ("aarch64", 0xC00000B7, 217, 218, 219),
    ("aarch64", 0x40000028, 309, 310, 311),
]


@pytest.mark.parametrize(("machine", "arch", "add", "req", "keyctl"), KEY_CALLS)
def test_key_calls_are_refused_on_every_abi(
    machine: str, arch: int, add: int, req: int, keyctl: int
) -> None:
    program = filter_program(machine)
    assert program is not None
    for nr in (add, req, keyctl):
        assert run(program, seccomp_data(nr, arch)) == EPERM, (machine, hex(arch), nr)
    assert run(program, seccomp_data(keyctl + 1, arch)) == ALLOW  # control


#: joins a fresh session keyring, puts a secret in it, runs a command reading it back
#: (confined, then outside the sandbox as the control) and prints both outputs
CHILD = textwrap.dedent(
    """
    import asyncio, ctypes, sys
    from pathlib import Path
    from infai.tools import Sandbox, ToolContext
    from infai.tools.shell import Bash
    KEYCTL, ADD_KEY = {{"x86_64": (250, 248), "aarch64": (219, 217)}}[sys.argv[2]]
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(KEYCTL, 1, None) > 0  # KEYCTL_JOIN_SESSION_KEYRING
    assert libc.syscall(ADD_KEY, b"user", b"attack28", b"{secret}", {n}, -3) > 0
    read = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "k = libc.syscall(%d, 10, -3, b'user', b'attack28', 0); "
        "b = ctypes.create_string_buffer(64); "
        "print('got', k, libc.syscall(%d, 11, k, b, 64), b.value)" % (KEYCTL, KEYCTL)
    )
    tool, wd = Bash(sandbox=Sandbox()), ToolContext(Path(sys.argv[1]), "s")
    cmd = [sys.executable, "-c", read]
    import shlex
    for outside in (False, True):
        args = {{"command": shlex.join(cmd), "outside_sandbox": outside}}
        print("OUTSIDE" if outside else "CONFINED", asyncio.run(tool.run(args, wd)).content)
    """
)


def test_a_session_keyring_secret_does_not_reach_a_command(tmp_path: Path) -> None:
    import platform

    secret = "s3cret-keyring-attack28"
    code = CHILD.format(secret=secret, n=len(secret))
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), platform.machine()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    confined, _, outside = done.stdout.partition("OUTSIDE")
    assert "CONFINED" in confined and secret not in confined, done.stdout
    assert secret in outside  # the control: unconfined, the key is read back
