"""The ``bash`` tool: a shell command in the working directory.

The command runs in its own process group with stdin closed, a timeout and a
cap on the output kept; a timeout or a cancelled turn kills everything it
started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .common import INT, MAX_TIMEOUT, OUTPUT_BYTES, STR, cap, error, schema


class Bash:
    """A shell command in the working directory, with a timeout and an output cap.

    The command runs in its own process group, so a timeout or a cancelled turn
    kills everything it started.
    """

    spec = ToolSpec(
        "bash",
        "Run a shell command in the working directory; returns exit code and output.",
        schema(["command"], command=STR, timeout_seconds=INT),
    )

    def __init__(self, default_timeout: float = 120.0) -> None:
        self.default_timeout = default_timeout

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run the command under ``sh`` with stdin closed and stderr merged into stdout;
        a non-zero exit is an error output, a cancel kills the group and propagates."""
        command = str(arguments.get("command", ""))
        timeout = float(arguments.get("timeout_seconds") or self.default_timeout)
        timeout = min(max(timeout, 0.1), MAX_TIMEOUT)
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=context.working_dir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        kept = bytearray()
        dropped = 0

        async def pump() -> None:
            """Read as it comes (memory stays bounded however much is printed)."""
            nonlocal dropped
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(1 << 16):
                room = max(0, OUTPUT_BYTES - len(kept))
                kept.extend(chunk[:room])
                dropped += len(chunk) - min(room, len(chunk))
            await proc.wait()

        try:
            await asyncio.wait_for(pump(), timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            await _stop(proc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return error(f"timed out after {timeout:g}s: {command}")
        text = cap(kept.decode(errors="replace"))
        if dropped:
            text += f"\n[... {dropped} more bytes cut]"
        code = proc.returncode
        return ToolOutput(
            f"exit code {code}\n{text}", is_error=code != 0, metadata={"exit_code": code}
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's process group and reap it. The pipe is drained to its
    end first: asyncio reaps a process only once its pipes are closed, and a pipe
    left full would wait for a reader forever."""
    _kill_group(proc.pid)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            while proc.stdout is not None and await proc.stdout.read(1 << 16):
                pass
            await proc.wait()
