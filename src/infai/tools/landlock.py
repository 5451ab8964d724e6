"""Writes a read-only mount does not stop: FIFOs outside the writable roots.

A read-only bind mount refuses to change a file system, and writing into a FIFO
(a named pipe) changes none: ``echo cmd > /var/run/x/ctl.fifo`` reaches
whatever process outside reads that pipe, from inside the sandbox, through the
``--ro-bind / /`` (checked with bubblewrap 0.8: the write succeeds and the
reader gets the line). Devices outside ``/dev`` cannot be opened (bubblewrap's
binds are ``nodev``), Unix sockets cannot be connected to (:mod:`.seccomp`
refuses the socket), but a FIFO is opened as a file.

So every confined command is started through a small Python program
(:data:`PROGRAM`, run as ``python -I -S -c``: the standard library only, no
``site``) that restricts itself with Landlock (Linux 5.13+) before it executes
the command: opening any file for writing is refused (``EACCES``) except beneath
the writable roots, the sandbox's own ``/tmp``, ``/dev`` and ``/proc``. Regular
files outside still fail as before, with ``EROFS`` (the mount is checked first);
a FIFO or any other file outside now fails too. The restriction holds for
everything the command starts and cannot be lifted.

Where the kernel has no Landlock (or it is disabled) the program executes the
command unrestricted: the sandbox is then as it was, and ``infai doctor`` says so.
The interpreter's own installation (:func:`interpreter_paths`; a venv's base
installation, not the venv) is bound read-only into the sandbox so the program
runs wherever infai's Python lives (under ``/tmp``, which is private there, or
in the hidden home); where it lies in a writable root it is mounted read-only
there (:mod:`.sandbox`), or one command could replace it and the next start
unrestricted.

Not covered: *reading* a FIFO outside (taking what a writer meant for another
reader): Landlock cannot tell a FIFO from a file, and files outside must stay
readable.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from collections.abc import Sequence
from fnmatch import fnmatchcase

#: the paths beneath which a confined command may open files for writing, beside
#: its writable roots: the sandbox's own memory file systems and ``/proc``
ALWAYS_WRITABLE = ("/tmp", "/dev", "/proc")
#: variables that make the dynamic loader (or glibc's iconv) load code: kept from
#: bwrap and the starter, set for the command once Landlock holds (:func:`held_back`)
LOADER_ENV = ("LD_*", "GCONV_PATH")
#: the program a confined command is started through (argv: the count of allowed
#: paths, the paths, then the command). Exit 126 if Landlock exists but refuses.
PROGRAM = """
import ctypes, errno, os, sys
n = int(sys.argv[1])
allowed, argv = sys.argv[2:2 + n], sys.argv[2 + n:]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
WRITE_FILE = 1 << 1
class Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent", ctypes.c_int32)]
def call(number, *args):
    got = libc.syscall(ctypes.c_long(number), *args)
    if got < 0:
        raise OSError(ctypes.get_errno(), "landlock")
    return got
def refuse(exc):
    print(f"infai sandbox: landlock: {os.strerror(exc.errno)}", file=sys.stderr)
    sys.exit(126)
try:
    handled = ctypes.c_uint64(WRITE_FILE)
    ruleset = call(444, ctypes.byref(handled), ctypes.c_size_t(8), ctypes.c_uint32(0))
except OSError as exc:
    if exc.errno not in (errno.ENOSYS, errno.EOPNOTSUPP):
        refuse(exc)
else:
    try:
        for path in allowed:
            try:
                parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rule = ctypes.byref(Beneath(WRITE_FILE, parent))
            call(445, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0))
            os.close(parent)
        if libc.prctl(38, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        call(446, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    except OSError as exc:
        refuse(exc)
    os.close(ruleset)
os.execvp(argv[0], argv)
"""


def abi() -> int:
    """The Landlock ABI version this kernel offers this process (0: none, it is not
    built in, disabled at boot or refused). Asked of the kernel each time: a
    reboot with another ``lsm=`` keeps the kernel's release but not its Landlock,
    and the approval mode's fingerprint (:mod:`.sandbox_verified`) must see that."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def interpreter() -> str:
    """The Python binary the starter (and ``infai doctor``'s probes) run on: this
    one's, links resolved. A venv's ``python`` is a link to its base
    installation's, which, run with ``-I -S``, needs nothing of the venv."""
    return os.path.realpath(sys.executable)


def interpreter_paths() -> list[str]:
    """Where :func:`interpreter` lives (its installation and its directory; the
    venv too when its binary is a copy inside it): what must be readable in the
    sandbox for it to run there."""
    real = interpreter()
    places = [sys.base_prefix, sys.base_exec_prefix, os.path.dirname(real)]
    if real.startswith(os.path.realpath(sys.prefix) + os.sep):
        places.append(sys.prefix)
    found: list[str] = []
    for where in places:
        path = os.path.realpath(where)
        if path != "/" and path not in found:
            found.append(path)
    return found


def held_back(env: dict[str, str]) -> list[str]:
    """Take the variables of :data:`LOADER_ENV` out of ``env`` (a command's
    environment, changed in place) and return them as ``NAME=VALUE``, for
    :func:`set_after` to set once Landlock holds.

    Why: they make the dynamic loader run code of their choosing in every program
    it starts. Left in bwrap's environment, a library a ``pass_env``-ed
    ``LD_PRELOAD`` or ``LD_LIBRARY_PATH`` names inside the working directory
    (which a command may rewrite) would run in bwrap itself, outside the sandbox,
    and in the starter before its rule."""
    held = [f"{name}={env.pop(name)}" for name in sorted(env) if _loader(name)]
    return held


def _loader(name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in LOADER_ENV)


def set_after(argv: Sequence[str], held: Sequence[str]) -> list[str]:
    """``argv`` started by ``env`` with the ``held`` variables (:func:`held_back`)
    set: what :func:`write_limited` starts, so that they apply from there on."""
    if not held:
        return list(argv)
    return [shutil.which("env") or "/usr/bin/env", *held, *argv]


def write_limited(argv: Sequence[str], writable: Sequence[str]) -> list[str]:
    """``argv`` (an absolute program and its arguments) started through
    :data:`PROGRAM`: it may open files for writing only beneath ``writable`` and
    :data:`ALWAYS_WRITABLE`."""
    allowed = [*writable, *ALWAYS_WRITABLE]
    return [interpreter(), "-I", "-S", "-c", PROGRAM, str(len(allowed)), *allowed, *argv]
