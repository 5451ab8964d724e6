"""A classic-BPF interpreter for seccomp programs, written from the kernel's rules
(not from infai's builder), so a test can ask what a program answers for a call.

Only what a seccomp filter may use and infai's builder emits is known (loads of
``seccomp_data`` words, ALU with a constant, conditional and unconditional
jumps, returns); anything else, a jump out of the program or a load outside
``seccomp_data`` is an AssertionError: a program the kernel would refuse fails
the test rather than being guessed at.
"""

from __future__ import annotations

import struct

LD, ALU, JMP, RET = 0x00, 0x04, 0x05, 0x06
W, ABS = 0x00, 0x20
K = 0x00
JA, JEQ, JGT, JGE, JSET = 0x00, 0x10, 0x20, 0x30, 0x40
AND, OR = 0x50, 0x40
MAX_INSNS = 4096
DATA_SIZE = 64  # struct seccomp_data: nr, arch, instruction_pointer, args[6]


def seccomp_data(nr: int, arch: int, *args: int) -> bytes:
    """``struct seccomp_data`` for a call (little-endian, as on x86 and arm)."""
    full = [*args, *[0] * (6 - len(args))]
    return struct.pack("<iIQ6Q", nr, arch, 0, *[a & 0xFFFFFFFFFFFFFFFF for a in full])


def run(program: bytes, data: bytes) -> int:
    """The 32-bit value the program returns for ``data``."""
    assert len(program) % 8 == 0 and 0 < len(program) // 8 <= MAX_INSNS
    insns: list[tuple[int, int, int, int]] = [
        struct.unpack_from("<HBBI", program, at) for at in range(0, len(program), 8)
    ]
    acc = pc = 0
    while True:
        assert 0 <= pc < len(insns), f"ran off the program at {pc}"
        code, jt, jf, k = insns[pc]
        pc += 1
        cls = code & 0x07
        if cls == LD:
            assert code == LD | W | ABS, f"unknown load {code:#x}"
            assert k % 4 == 0 and k + 4 <= DATA_SIZE, f"load outside seccomp_data: {k}"
            acc = struct.unpack_from("<I", data, k)[0]
        elif cls == ALU:
            op = code & 0xF0
            assert code & 0x08 == K and op in (AND, OR), f"unknown alu {code:#x}"
            acc = (acc & k) if op == AND else (acc | k)
        elif cls == JMP:
            op = code & 0xF0
            assert code & 0x08 == K, f"unknown jump {code:#x}"
            if op == JA:
                pc += k
                continue
            taken = {JEQ: acc == k, JGT: acc > k, JGE: acc >= k, JSET: bool(acc & k)}[op]
            pc += jt if taken else jf
        elif cls == RET:
            assert code == RET | K, f"unknown return {code:#x}"
            return int(k)
        else:
            raise AssertionError(f"unknown instruction {code:#x}")
