"""A seccomp filter for sandboxed commands: no Unix-domain socket can reach outside.

The sandbox's mounts make the file system read-only, but a Unix socket bound
in it can still be *connected to*, and the process on the other side is not
confined: Docker's socket starts a privileged container, the D-Bus user bus
starts a ``systemd-run --user`` service, an ssh agent signs for you, tmux's
server types into the user's own pane. Abstract sockets are cut off with the
network namespace; path-bound ones are not. So a confined command may not get
a Unix-domain socket that could be pointed at one:

- ``socket(AF_UNIX, …)`` fails with ``EACCES``;
- ``socketpair(AF_UNIX, …)`` is allowed for ``SOCK_STREAM`` and
  ``SOCK_SEQPACKET`` only (a private, already connected pair between a process
  and its children, as pipes are: ``connect`` on it fails with ``EISCONN`` and
  ``sendto`` ignores or refuses an address); a datagram pair fails with
  ``EACCES``, since a datagram socket can be ``connect``-ed again, or
  ``sendto`` any path-bound datagram socket (journald's, a notify socket);
- ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register`` fail with
  ``EPERM``, as under Docker's default profile: a ring creates sockets with
  ``IORING_OP_SOCKET`` and connects them with ``IORING_OP_CONNECT`` without
  either system call, so seccomp would never see them. Programs that use
  io_uring when they can (libuv, for one) fall back to ordinary calls;
- ``add_key``, ``request_key`` and ``keyctl`` fail with ``EPERM``, as under
  Docker's default profile: the session keyring is inherited across bwrap (a
  Kerberos ticket, a token some tool keeps there would be read back);
- on 32-bit x86 and ARM, the ``socketcall`` multiplexer (whose arguments are
  behind a pointer seccomp cannot read) is refused whole.

Every other address family stays allowed (the network namespace decides what
it reaches), and so does ``connect`` itself: with no way to obtain an
unconnected Unix socket (the command inherits none: its stdin is
``/dev/null`` or a pipe, its stdout and stderr pipes, and bubblewrap closes
the filter's descriptor), there is nothing to connect.

The filter is a classic BPF program, built here (no libseccomp needed) and
handed to bwrap on a file descriptor (``--seccomp FD``). It knows x86-64 with
its x32 and i386 ABIs (a 64-bit kernel runs all three: ``int 0x80`` is an
i386 call) and aarch64 with its 32-bit ARM (EABI) one; a call of any other
ABI is refused with ``EPERM``. On another machine :func:`filter_program`
returns None and the command runs without it. The numbers of the io_uring
calls (425-427) are the same on every architecture.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h)
LD_W_ABS = 0x20
JEQ_K = 0x15
AND_K = 0x54
RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
#: offsets in ``struct seccomp_data``: nr, arch, then args[6] (the low 32 bits of
#: each, little-endian; socket's domain and type are ints, so the high half is ignored)
NR_OFFSET = 0
ARCH_OFFSET = 4
ARG0_OFFSET = 16
ARG1_OFFSET = 24
AF_UNIX = 1
SOCK_STREAM = 1
SOCK_SEQPACKET = 5
SOCK_TYPE_MASK = 0xF
X32_BIT = 0x40000000
IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register
X86_64_KEYS = (248, 249, 250)  # add_key, request_key, keyctl
#: what a refused socket call and a refused io_uring call fail with
SOCKET_ERRNO = errno.EACCES
URING_ERRNO = errno.EPERM


@dataclass(frozen=True)
class Abi:
    """One system-call ABI the filter knows: its audit architecture and numbers."""

    name: str
    arch: int
    socket: tuple[int, ...]
    socketpair: tuple[int, ...]
    #: refused whole with ``EACCES`` (socketcall) and with ``EPERM`` (io_uring, keys)
    socketcall: tuple[int, ...] = ()
    uring: tuple[int, ...] = IO_URING
    keys: tuple[int, ...] = ()


_X86_64 = Abi("x86_64", 0xC000003E, (41,), (53,), keys=X86_64_KEYS)
_X32 = Abi(
    "x32",
    0xC000003E,
    (41 | X32_BIT,),
    (53 | X32_BIT,),
    uring=tuple(nr | X32_BIT for nr in IO_URING),
    keys=tuple(nr | X32_BIT for nr in X86_64_KEYS),
)
_I386 = Abi("i386", 0x40000003, (359,), (360,), socketcall=(102,), keys=(286, 287, 288))
_AARCH64 = Abi("aarch64", 0xC00000B7, (198,), (199,), keys=(217, 218, 219))
_ARM = Abi("arm", 0x40000028, (281,), (288,), socketcall=(102,), keys=(309, 310, 311))

#: per ``platform.machine()``: the ABIs a process on that machine can call
ABIS: dict[str, tuple[Abi, ...]] = {
    "x86_64": (_X86_64, _X32, _I386),
    "aarch64": (_AARCH64, _ARM),
    **{f"i{n}86": (_X86_64, _X32, _I386) for n in (3, 4, 5, 6)},
    "armv7l": (_AARCH64, _ARM),
    "armv8l": (_AARCH64, _ARM),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _refuse(nr: int, err: int) -> list[bytes]:
    """If the call is ``nr``, fail it with ``err`` (the accumulator holds nr)."""
    return [_insn(JEQ_K, nr, jt=0, jf=1), _insn(RET_K, RET_ERRNO | err)]


def _refuse_unix_socket(nr: int) -> list[bytes]:
    """If the call is ``nr`` and its domain AF_UNIX, fail it; nr is reloaded after."""
    return [
        _insn(JEQ_K, nr, jt=0, jf=3),
        _insn(LD_W_ABS, ARG0_OFFSET),
        _insn(JEQ_K, AF_UNIX, jt=0, jf=1),
        _insn(RET_K, RET_ERRNO | SOCKET_ERRNO),
        _insn(LD_W_ABS, NR_OFFSET),
    ]


def _refuse_unix_datagram_pair(nr: int) -> list[bytes]:
    """If the call is ``nr`` (socketpair) with domain AF_UNIX and a type other than
    stream or seqpacket (flags masked off), fail it; nr is reloaded after."""
    return [
        _insn(JEQ_K, nr, jt=0, jf=7),
        _insn(LD_W_ABS, ARG0_OFFSET),
        _insn(JEQ_K, AF_UNIX, jt=0, jf=5),
        _insn(LD_W_ABS, ARG1_OFFSET),
        _insn(AND_K, SOCK_TYPE_MASK),
        _insn(JEQ_K, SOCK_STREAM, jt=2, jf=0),
        _insn(JEQ_K, SOCK_SEQPACKET, jt=1, jf=0),
        _insn(RET_K, RET_ERRNO | SOCKET_ERRNO),
        _insn(LD_W_ABS, NR_OFFSET),
    ]


def _block(abi: Abi) -> list[bytes]:
    """The checks of one ABI, ending in "allow" (entered with nothing loaded)."""
    block = [_insn(LD_W_ABS, NR_OFFSET)]
    for nr in (*abi.uring, *abi.keys):
        block += _refuse(nr, URING_ERRNO)
    for nr in abi.socketcall:
        block += _refuse(nr, SOCKET_ERRNO)
    for nr in abi.socket:
        block += _refuse_unix_socket(nr)
    for nr in abi.socketpair:
        block += _refuse_unix_datagram_pair(nr)
    return [*block, _insn(RET_K, RET_ALLOW)]


def filter_program(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this one's ``platform.machine()``),
    or None for a machine the filter does not know."""
    abis = ABIS.get(machine or platform.machine())
    if abis is None:
        return None
    body: list[bytes] = []
    by_arch: dict[int, list[Abi]] = {}
    for abi in abis:  # x86-64 and x32 share an audit arch: one block checks both
        by_arch.setdefault(abi.arch, []).append(abi)
    for arch, same in by_arch.items():
        merged = Abi(
            "+".join(a.name for a in same),
            arch,
            tuple(nr for a in same for nr in a.socket),
            tuple(nr for a in same for nr in a.socketpair),
            tuple(nr for a in same for nr in a.socketcall),
            tuple(nr for a in same for nr in a.uring),
            tuple(nr for a in same for nr in a.keys),
        )
        block = _block(merged)
        # load arch; if it is not this one, jump over this block
        body.append(_insn(LD_W_ABS, ARCH_OFFSET))
        body.append(_insn(JEQ_K, arch, jt=0, jf=len(block)))
        body.extend(block)
    body.append(_insn(RET_K, RET_ERRNO | URING_ERRNO))  # an ABI of no known kind
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


__all__ = ["ABIS", "IO_URING", "URING_ERRNO", "Abi", "filter_fd", "filter_program"]
