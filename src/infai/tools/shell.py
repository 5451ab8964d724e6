"""The ``bash`` tool: a shell command in the working directory.

The command runs in its own process group with stdin closed, a timeout and a
cap on the output kept; a timeout or a cancelled turn kills everything it
started. Where it runs is the :class:`~infai.tools.sandbox.Sandbox`'s call:
confined by bubblewrap (a command that ends takes everything it started with
it, daemons included), or not; either way with a scrubbed environment and git
hardened against repository-configured code. A ``Bash()`` built without a
sandbox is not confined (tests and embedders); the workspace always gives one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from infai.llm import ToolSpec

from .base import ToolContext, ToolOutput
from .bash_path import ShellMissing
from .common import INT, MAX_TIMEOUT, OUTPUT_BYTES, STR, cap, error, schema
from .read_denied import DeniedFiles, denied_files
from .sandbox import (
    STOPPED_NOTE,
    Launch,
    Sandbox,
    SandboxUnavailable,
    WorkTreeMoved,
    stopped_by_sandbox,
)
from .sandbox_hide import describe, mentioned
from .sandbox_home import home_note
from .write_budget import WriteGuard, notes

DESCRIPTION = "Run a shell command in the working directory; returns exit code and output."
CONFINED = (
    "Commands run in a sandbox: no writes outside the working directory or to .git/, no network."
)
OUTSIDE = {
    "type": "boolean",
    "description": (
        "Run this one command outside the sandbox (to write outside the working "
        "directory or reach the network). Needs the user's approval every time; "
        "use it only after the sandbox stopped the command and the task needs it."
    ),
}


class Bash:
    """A shell command in the working directory, with a timeout and an output cap.

    The command runs in its own process group, so a timeout or a cancelled turn
    kills everything it started. ``sandbox`` decides where it runs (default:
    :meth:`Sandbox.off`, unconfined but with the environment scrubbed).
    """

    spec = ToolSpec(
        "bash",
        f"{DESCRIPTION} {CONFINED}",
        schema(["command"], command=STR, timeout_seconds=INT, outside_sandbox=OUTSIDE),
    )

    def __init__(self, default_timeout: float = 120.0, sandbox: Sandbox | None = None) -> None:
        self.default_timeout = default_timeout
        self.sandbox = sandbox or Sandbox.off()
        if self.sandbox.mode == "off":  # the model is not told of a sandbox there is not
            self.spec = ToolSpec(
                "bash", DESCRIPTION, schema(["command"], command=STR, timeout_seconds=INT)
            )
        elif self.sandbox.mode == "auto" and not self.sandbox.confined:  # the fallback
            self.spec = ToolSpec(
                "bash",
                f"{DESCRIPTION} No sandbox works on this machine: every command is shown "
                "to the user, who may refuse it.",
                schema(["command"], command=STR, timeout_seconds=INT),
            )
        else:  # confined: the model is told what reads as empty there, and why
            hidden = describe(self.sandbox.settings.hidden, self.sandbox.private)
            hidden += home_note(self.sandbox.settings.home)
            self.spec = ToolSpec("bash", f"{DESCRIPTION} {CONFINED} {hidden}", Bash.spec.parameters)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run the command under bash (:mod:`.bash_path`; with none installed it is
        refused) with stdin closed and stderr merged into stdout; a non-zero exit
        is an error output, a cancel kills the group and propagates.

        ``outside_sandbox`` must be a boolean if given (the policy asks about a
        ``true`` one as ``bash!``): anything else runs nothing."""
        command = str(arguments.get("command", ""))
        timeout = float(arguments.get("timeout_seconds") or self.default_timeout)
        timeout = min(max(timeout, 0.1), MAX_TIMEOUT)
        outside = arguments.get("outside_sandbox", False)
        if not isinstance(outside, bool):
            return error(f"outside_sandbox must be true or false, not {outside!r}; nothing ran")
        denied = DeniedFiles()

        def launch_it() -> Launch:  # (a walk for the read rules' files, stat calls, git)
            nonlocal denied
            if not outside and context.denied_reads:
                denied = denied_files(context.working_dir, context.denied_reads)
            return self.sandbox.launch(
                command, context.working_dir, outside=outside, hide=denied.paths
            )

        job = asyncio.ensure_future(asyncio.to_thread(launch_it))
        try:
            launch = await asyncio.shield(job)  # (its stat calls and git may block)
        except SandboxUnavailable as exc:
            return error(f"{exc}; nothing ran (sandbox.mode is 'required')")
        except (ShellMissing, WorkTreeMoved) as exc:
            return error(f"{exc}; nothing ran")
        except asyncio.CancelledError:
            job.add_done_callback(_close_unused)  # the launch it makes holds a descriptor
            raise
        budget = self.sandbox.settings.write_budget if launch.confined else None
        try:
            proc = await asyncio.create_subprocess_exec(
                *launch.argv,
                cwd=context.working_dir,
                env=launch.env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=launch.fds,
            )
        finally:
            launch.close()
        guard = WriteGuard.start(proc.pid, budget, lambda: _kill_group(proc.pid))
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
        finally:
            written = guard.stop()
        text = cap(kept.decode(errors="replace"))
        if dropped:
            text += f"\n[... {dropped} more bytes cut]"
        code = proc.returncode
        text += self._notes(launch, text, command, context.working_dir, denied, code)
        if written is not None:
            text += f"\n{guard.report(written)}"
        return ToolOutput(
            f"exit code {code}\n{text}",
            is_error=code != 0 or written is not None,
            metadata={"exit_code": code},
        )

    def _notes(
        self,
        launch: Launch,
        text: str,
        command: str,
        working_dir: Path,
        denied: DeniedFiles,
        code: int | None,
    ) -> str:
        """What the result adds to the command's output: why git refused a local
        remote; confined, what the sandbox stopped or hid and its budget's verdict."""
        said = ""
        if launch.file_transport_note and "transport 'file' not allowed" in text:
            said += f"\n{launch.file_transport_note}"
        if launch.confined:
            if stopped_by_sandbox(text):
                said += f"\n{STOPPED_NOTE}"
            said += self._hidden_note(command, working_dir) + denied.note()
            said += notes(text + said, self.sandbox.settings.write_budget, code)
        return said

    def _hidden_note(self, command: str, working_dir: Path) -> str:
        """A line naming the hidden paths the command names (nothing if none): what
        it read there was empty because of the user's policy, not the machine."""
        entries: tuple[str | Path, ...] = (*self.sandbox.settings.hidden, *self.sandbox.private)
        named = mentioned(command, entries, working_dir.resolve())
        if not named:
            return ""
        shown = ", ".join(p if p.isprintable() else ascii(p) for p in named)
        return (
            f"\n[sandbox] hidden from commands by the user's policy (sandbox.hidden; "
            f"infai's own files always), so empty here whatever is on the machine: {shown}"
        )


def _close_unused(job: asyncio.Future[Launch]) -> None:
    if not job.cancelled() and job.exception() is None:
        job.result().close()


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
