"""The seccomp program, decoded and run for every ABI it knows, then run by the kernel.

The numbers below are the kernel's own (its syscall tables), written here again
rather than imported from the builder, so a wrong number there fails here. The
io_uring calls let a ring create and connect a Unix socket without the
``socket`` call the filter inspects (issue 28): they must fail with ``EPERM``,
as under Docker's default profile, whatever the kernel supports.
"""

from __future__ import annotations

import errno
import json
import platform
import struct
import subprocess
import sys

import pytest

from bpf import run, seccomp_data
from infai.tools.seccomp import filter_program

ALLOW = 0x7FFF0000
ERRNO = 0x00050000
EPERM = ERRNO | errno.EPERM
EACCES = ERRNO | errno.EACCES
X32 = 0x40000000
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
STREAM, DGRAM, RAW, SEQPACKET = 1, 2, 3, 5
CLOEXEC, NONBLOCK = 0x80000, 0x800

# (machine, ABI, audit arch, socket, socketpair, socketcall or None, read)
ABIS = [
    ("x86_64", "x86_64", 0xC000003E, 41, 53, None, 0),
    ("x86_64", "x32", 0xC000003E, 41 | X32, 53 | X32, None, 0 | X32),
    ("x86_64", "i386", 0x40000003, 359, 360, 102, 3),
    ("aarch64", "aarch64", 0xC00000B7, 198, 199, None, 63),
    ("aarch64", "arm", 0x40000028, 281, 288, 102, 3),
]
FIELDS = ("machine", "abi", "arch", "sock", "pair", "socketcall", "read")
URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}


def verdict(machine: str, nr: int, arch: int, *args: int) -> int:
    program = filter_program(machine)
    assert program is not None
    return run(program, seccomp_data(nr, arch, *args))


@pytest.mark.parametrize(FIELDS, ABIS, ids=[a[1] for a in ABIS])
def test_io_uring_is_refused_on_every_abi(
    machine: str, abi: str, arch: int, sock: int, pair: int, socketcall: int | None, read: int
) -> None:
    bit = X32 if abi == "x32" else 0
    for name, nr in URING.items():
        assert verdict(machine, nr | bit, arch, 4, 0) == EPERM, (abi, name)
    # control: the calls around them are let through
    assert verdict(machine, 424 | bit, arch) == ALLOW  # pidfd_send_signal
    assert verdict(machine, 428 | bit, arch) == ALLOW  # open_tree
    assert verdict(machine, read, arch, 0, 0, 10) == ALLOW


@pytest.mark.parametrize(FIELDS, ABIS, ids=[a[1] for a in ABIS])
def test_unix_sockets_are_refused_on_every_abi(
    machine: str, abi: str, arch: int, sock: int, pair: int, socketcall: int | None, read: int
) -> None:
    assert verdict(machine, sock, arch, AF_UNIX, STREAM) == EACCES
    assert verdict(machine, sock, arch, AF_UNIX, DGRAM | CLOEXEC) == EACCES
    # the kernel reads the domain as an int: junk in the high half changes nothing
    assert verdict(machine, sock, arch, AF_UNIX | (1 << 32), STREAM) == EACCES
    assert verdict(machine, sock, arch, AF_INET, STREAM) == ALLOW
    assert verdict(machine, sock, arch, AF_INET6, DGRAM) == ALLOW
    # a connected pair stays (stream, seqpacket); a datagram one could be re-pointed
    for kind in (STREAM, STREAM | CLOEXEC, SEQPACKET | NONBLOCK):
        assert verdict(machine, pair, arch, AF_UNIX, kind) == ALLOW, kind
    for kind in (DGRAM, DGRAM | CLOEXEC | NONBLOCK, RAW):
        assert verdict(machine, pair, arch, AF_UNIX, kind) == EACCES, kind
    if socketcall is not None:
        assert verdict(machine, socketcall, arch, 1, 0) == EACCES  # its args: a pointer


def test_a_call_of_an_abi_the_filter_does_not_know_is_refused() -> None:
    mips = 0x40000008
    assert verdict("x86_64", 0, mips) == EPERM
    assert verdict("aarch64", 63, 0xC000003E) == EPERM  # not an ABI of that machine
    assert filter_program("sparc") is None
    assert filter_program("i686") == filter_program("x86_64")
    assert filter_program("armv7l") == filter_program("aarch64")


CHILD = r"""
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
program = open(sys.argv[1], "rb").read()
buf = ctypes.create_string_buffer(program)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
before = call(425, 1, ctypes.addressof(ctypes.create_string_buffer(120)))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
    raise SystemExit("prctl: " + os.strerror(ctypes.get_errno()))
params = ctypes.addressof(ctypes.create_string_buffer(120))
out = {"before": before}
out["setup"] = call(425, 1, params)
out["enter"] = call(426, 0, 0, 0, 0, 0, 0)
out["register"] = call(427, 0, 0, 0, 0)
if sys.argv[2] == "x86_64":
    out["x32_setup"] = call(425 | 0x40000000, 1, params)
def attempt(f):
    try:
        f()
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "ok"
out["socket"] = attempt(lambda: socket.socket(socket.AF_UNIX).close())
out["dgram_pair"] = attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
out["stream_pair"] = attempt(lambda: socket.socketpair())
out["inet"] = attempt(lambda: socket.socket(socket.AF_INET).close())
print(json.dumps(out))
"""


def _in_child(program: bytes, tmp_path: object) -> dict[str, str]:
    path = f"{tmp_path}/filter.bpf"
    with open(path, "wb") as handle:
        handle.write(program)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, path, platform.machine()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


def _with_errno(program: bytes, old: int, new: int) -> bytes:
    """``program`` with each ``return ERRNO(old)`` made ``return ERRNO(new)``."""
    out = bytearray(program)
    for at in range(0, len(out), 8):
        code, jt, jf, k = struct.unpack_from("=HBBI", out, at)
        if code == 0x06 and k == ERRNO | old:
            struct.pack_into("=HBBI", out, at, code, jt, jf, ERRNO | new)
    return bytes(out)


@pytest.mark.skipif(filter_program() is None, reason="no filter for this machine")
def test_the_kernel_running_the_filter_refuses_io_uring(tmp_path: object) -> None:
    """Loaded into a child with ``prctl(PR_SET_SECCOMP)``, the real program refuses
    the io_uring calls whether or not this kernel has io_uring. To tell the filter's
    answer from the kernel's own (``EPERM`` also means io_uring is disabled here),
    it is run again with that answer changed to ``ENOTRECOVERABLE``, which no io_uring
    call returns by itself."""
    program = filter_program()
    assert program is not None
    seen = _in_child(program, tmp_path)
    assert seen["setup"] == seen["enter"] == seen["register"] == "EPERM", seen
    assert seen["socket"] == seen["dgram_pair"] == "EACCES", seen
    assert seen["stream_pair"] == seen["inet"] == "ok", seen
    marked = _in_child(_with_errno(program, errno.EPERM, errno.ENOTRECOVERABLE), tmp_path)
    assert marked["setup"] == marked["enter"] == marked["register"] == "ENOTRECOVERABLE", marked
    if platform.machine() == "x86_64":
        # x32's numbers reach the filter even where the kernel has no x32 ABI
        assert seen["x32_setup"] == "EPERM" and marked["x32_setup"] == "ENOTRECOVERABLE"
    # control: unfiltered, the call is the kernel's to answer (a ring, or its refusal)
    assert marked["before"] != "ENOTRECOVERABLE"
