"""A seccomp filter for sandboxed commands: no new Unix-domain sockets.

The sandbox's mounts make the file system read-only, but a Unix socket bound
in it can still be *connected to*, and the process on the other side is not
confined: Docker's socket starts a privileged container, the D-Bus user bus
starts a ``systemd-run --user`` service, an ssh agent signs for you. Abstract
sockets are already cut off with the network namespace; path-bound ones are
not. So a confined command may not create a Unix-domain socket at all:
``socket(AF_UNIX, …)`` fails with ``EACCES``. ``socketpair`` (a private pair
between a process and its children, as pipes are) stays allowed, and so does
every other address family (the network namespace decides what they reach).

The filter is a classic BPF program, built here (no libseccomp needed) and
handed to bwrap on a file descriptor (``--seccomp FD``). It knows x86-64
(and its i386 and x32 ABIs: the 32-bit ``socketcall`` multiplexer cannot be
inspected, so it is refused whole) and aarch64; on another architecture
:func:`filter_program` returns None and the command runs without it.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_ARCH_OFFSET = 4
_NR_OFFSET = 0
_ARG0_OFFSET = 16  # the low 32 bits of the first argument (little-endian)
AF_UNIX = 1
_X32_BIT = 0x40000000

# (audit arch, socket syscall numbers, syscalls refused whole)
_ARCHES: dict[str, list[tuple[int, tuple[int, ...], tuple[int, ...]]]] = {
    "x86_64": [
        (0xC000003E, (41, 41 | _X32_BIT), ()),  # x86-64 and x32
        (0x40000003, (359,), (102,)),  # i386: socket; socketcall refused
    ],
    "aarch64": [(0xC00000B7, (198,), ())],
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The BPF program for this machine's architecture, or None if unknown."""
    arches = _ARCHES.get(machine or platform.machine())
    if arches is None:
        return None
    deny = _RET_ERRNO | errno.EACCES
    body: list[bytes] = []
    for arch, sockets, refused in arches:
        block = [_insn(_LD_W_ABS, _NR_OFFSET)]
        for nr in refused:
            block.append(_insn(_JEQ_K, nr, jt=0, jf=1))
            block.append(_insn(_RET_K, deny))
        for nr in sockets:
            # if nr matches: check arg0 (next 3 insns); else skip them
            block.append(_insn(_JEQ_K, nr, jt=0, jf=3))
            block.append(_insn(_LD_W_ABS, _ARG0_OFFSET))
            block.append(_insn(_JEQ_K, AF_UNIX, jt=0, jf=1))
            block.append(_insn(_RET_K, deny))
            block.append(_insn(_LD_W_ABS, _NR_OFFSET))  # reload nr for the next test
        block.append(_insn(_RET_K, _RET_ALLOW))
        # load arch; if it is not this one, jump over this block
        body.append(_insn(_LD_W_ABS, _ARCH_OFFSET))
        body.append(_insn(_JEQ_K, arch, jt=0, jf=len(block)))
        body.extend(block)
    body.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(body)


def filter_fd(program: bytes) -> int:
    """A file descriptor holding ``program`` from its start (for ``bwrap --seccomp``);
    the caller passes it to the child and closes it after the child has started."""
    fd = os.memfd_create("infai-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


__all__ = ["filter_fd", "filter_program"]
