"""The OS sandbox every shell command runs in, and the environment it is given.

The model: a shell command can do anything its process can, so no rule that
reads the command's *text* can say what it will *touch*. The operating system
can: on Linux each ``bash`` command runs under bubblewrap (``bwrap``), in
fresh mount, PID, network, IPC and UTS namespaces with every capability
dropped:

- the whole filesystem is mounted read-only (``--ro-bind / /``), with a fresh
  ``/dev``, a ``/proc`` of the new PID namespace and a private, empty ``/tmp``;
- the session's working directory is mounted writable, and so are the
  absolute directories listed in ``sandbox.writable``;
- inside those, ``.git/`` and ``.infai/`` of the working directory are mounted
  read-only again (unless ``writable`` names them; a missing ``.infai/`` is made
  empty first, so a command cannot write the project's config into a new one),
  and so are the *protected*
  paths (infai's own configuration and store directories), whatever the
  configuration says: a command run in ``$HOME`` cannot rewrite infai's
  config or sessions. A protected directory that does not exist yet is
  created (empty) first, so a command cannot create it either; so are git
  config files the repository includes from the working tree
  (:func:`~infai.tools.git_hardening.included_config_files`);
- there is no network (only a loopback of its own) unless ``network = true``;
- the command is PID 1's only child in its namespace: when it ends, times out
  or is cancelled, the namespace dies and with it everything it started
  (``setsid``, ``nohup … &``, daemons); ``--die-with-parent`` covers infai
  itself dying;
- with no capabilities (``--cap-drop ALL``, which matters when infai runs as
  root) the command cannot unmount or remount what is read-only;
- it cannot get a Unix-domain socket to connect with (a seccomp filter,
  :mod:`infai.tools.seccomp`: no ``socket(AF_UNIX)``, no datagram
  ``socketpair``, no io_uring), so it cannot ask a process outside (Docker,
  the D-Bus user bus, an ssh agent, tmux) to act for it; and the usual socket
  paths (``/run/user``, ``$XDG_RUNTIME_DIR``, ``$SSH_AUTH_SOCK``, ``$TMUX``'s,
  PostgreSQL's, the system bus, Docker's…: :mod:`infai.tools.sandbox_sockets`)
  read as empty;
- the *hidden* paths read as empty (:mod:`infai.tools.sandbox_hide`): the
  well-known credential files and directories of :data:`DEFAULT_HIDDEN`
  (``~/.ssh``, ``~/.aws``, ``~/.netrc``…) and where the environment moves them
  (``$KUBECONFIG``, ``$XDG_CONFIG_HOME/gh``…), the user's ``hidden`` ones, and
  infai's own config and store (:attr:`Sandbox.private`), except the working
  directory and the way down to it.

- what one command writes is bounded (:mod:`infai.tools.write_budget`);
- ``$HOME`` outside the working directory is an empty tmpfs but for toolchain
  locations bound back read-only (``home = "hidden"``, the default:
  :mod:`infai.tools.sandbox_home`).

Not confined: reading anything else outside ``$HOME`` (and, with ``home =
"visible"``, in it: secrets in files not hidden included) and the CPU and memory it uses
while it runs. A command run *outside* the
sandbox (``outside_sandbox``, which the user approves each time) or with
``mode = "off"`` is confined by none of this.

Whatever the mode, every command gets a scrubbed environment: only the
variables of :data:`PASS_ENV` and the user's ``pass_env`` (names or ``*``
patterns) reach it, never one that looks like a secret
(:data:`SECRET_ENV`, the user's ``secret_env``, the key variables of the
configured models), and never one that changes how bash starts or parses
(:data:`~.bash_path.SHELL_STARTUP_ENV`: it runs under bash, :mod:`.bash_path`).
And git cannot run code a repository configured
(``core.fsmonitor``, hooks, pagers, external diff and filter drivers, ssh and
credential helpers, trailer commands, ``add -p``'s diff filter):
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` override those
settings for every git the command starts, and drivers named by a repository the command may open
(``filter.<name>.clean``…; :mod:`.git_repos` says which: the working
directory's, those its text names with ``cd``, ``-C`` or ``--git-dir``, and,
unconfined, every one beneath the working directory) are emptied too, so git
fails rather than run them. Unconfined, a command is refused where such a
repository's ``core.worktree`` points away from it (``git clean`` would clean
``$HOME``): no override can move it back.

Availability is probed once per ``bwrap`` binary (it must be on ``PATH`` and
able to run ``true`` in the namespaces above). Modes: ``auto`` confines
where the probe succeeds and otherwise runs unconfined after saying so once
(:attr:`Sandbox.notice`; the policy then asks before every command);
``required`` refuses to run a command it cannot confine; ``off`` never
confines. Configuration (user file only: a project's file may not loosen it)::

    sandbox = "auto"            # shorthand for [sandbox] mode
    [sandbox]
    mode = "auto"               # "auto" | "required" | "off"
    network = false
    home = "hidden"             # "visible": $HOME readable but for `hidden`
    pass_env = ["CARGO_HOME"]   # more variables commands may see
    secret_env = ["MY_DB_URL"]  # variables they must never see
    writable = [".git", "~/.cache"]
    hidden = ["~/secrets"]      # more paths commands cannot read (a project may add)
    unhide = ["~/.kube"]        # default hidden (or $HOME) paths they may read after all
    write_budget = "8GiB"       # what one command may write (or "off"): write_budget.py
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import sandbox_home as home_mod
from .bash_path import shell_argv, startup_variable
from .git_hardening import (
    FILE_TRANSPORT_NOTE,
    FILE_TRANSPORT_REFUSED,
    GIT_ENV,
    GIT_OVERRIDES,
    Hardening,
    WorkTreeMoved,
    harden,
    read_only_included_configs,
)
from .landlock import held_back, interpreter_paths, set_after, write_limited
from .sandbox_fifos import cover_args
from .sandbox_hide import (
    TooManyEntries,
    hidden_paths,
    mount_args,
    pin_args,
)
from .sandbox_settings import (
    MADE_READ_ONLY,
    MODES,
    PASS_ENV,
    READ_ONLY_ENTRIES,
    SECRET_ENV,
    Mode,
    SandboxSettings,
    _matches,
    parse_sandbox,
)
from .sandbox_sockets import socket_entries
from .seccomp import filter_fd, filter_program
from .write_budget import limit_files, ram_limits

#: what a command prints when the sandbox stopped it
STOPPED_MARKERS = (
    "Read-only file system",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "No address associated with hostname",
)
STOPPED_NOTE = (
    "[sandbox] infai's sandbox stopped part of this command: outside the working "
    "directory (and in .git/ and .infai/) nothing may be written, and there is no "
    "network. If the task needs it, ask the user, or run the command again with "
    "outside_sandbox=true (the user must approve each such call)."
)
PROBE_TIMEOUT = 10.0


class SandboxUnavailable(Exception):
    """The sandbox is required but cannot run here (the message says why)."""


# -- availability ----------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """Whether bwrap can confine commands here; ``reason`` says why not."""

    ok: bool
    bwrap: str | None
    reason: str = ""


_PROBES: dict[str, Probe] = {}
_PROBE_LOCK = threading.Lock()

#: namespaces and limits every confined command gets (the probe uses the same)
BASE_FLAGS = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)


def find_bwrap() -> str | None:
    """The ``bwrap`` on ``PATH`` (resolved), or None."""
    found = shutil.which("bwrap")
    return str(Path(found).resolve()) if found else None


def probe(bwrap: str | None = None) -> Probe:
    """Whether ``bwrap`` (default: the one on PATH) runs ``true`` in the
    sandbox's namespaces. Cached per binary: one process per infai at most."""
    path = bwrap or find_bwrap()
    if path is None:
        return Probe(False, None, "bwrap is not on PATH (install the bubblewrap package)")
    with _PROBE_LOCK:
        known = _PROBES.get(path)
        if known is None:
            known = _PROBES[path] = _run_probe(path)
        return known


def _run_probe(path: str) -> Probe:
    fds = _seccomp_fds()
    try:
        done = subprocess.run(
            [path, *BASE_FLAGS, *_seccomp_flags(fds), "--", "true"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", os.defpath)},
            pass_fds=fds,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(False, path, f"{path} could not be run: {exc}")
    finally:
        for fd in fds:
            os.close(fd)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        why = said[-1] if said else f"exit code {done.returncode}"
        return Probe(False, path, f"{path} cannot create the sandbox's namespaces: {why}")
    return Probe(True, path)


def _seccomp_fds() -> tuple[int, ...]:
    program = filter_program()
    return () if program is None else (filter_fd(program),)


def _seccomp_flags(fds: tuple[int, ...]) -> list[str]:
    return [flag for fd in fds for flag in ("--seccomp", str(fd))]


# -- the sandbox -----------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """How to start one command: its argv, environment, whether it is confined,
    and file descriptors the child must inherit (``pass_fds``; :meth:`close`
    them once it has started)."""

    argv: list[str]
    env: dict[str, str]
    confined: bool
    fds: tuple[int, ...] = ()
    #: a line for the result should git refuse the file transport (see
    #: :data:`~.git_hardening.FILE_TRANSPORT_NOTE`); "" when it was not refused
    file_transport_note: str = ""

    def close(self) -> None:
        """Close the parent's copies of :attr:`fds` (the child keeps its own)."""
        for fd in self.fds:
            os.close(fd)


@dataclass
class Sandbox:
    """The sandbox of one workspace: settings, protected paths and secret names.

    ``protected``: paths never writable by a command (infai's config and store
    directories). ``private``: paths never readable by one, hidden like
    ``sandbox.hidden`` whatever the configuration (infai's config and store: other
    sessions' transcripts, the server's token). ``secret_env``: more variable names
    commands never see (the configured models' key variables). ``bwrap``: the
    binary to use (default: found on PATH when first needed).
    """

    settings: SandboxSettings = field(default_factory=SandboxSettings)
    protected: tuple[Path, ...] = ()
    secret_env: tuple[str, ...] = ()
    bwrap: str | None = None
    private: tuple[Path, ...] = ()

    @classmethod
    def off(cls) -> Sandbox:
        """No confinement: the environment is still scrubbed and git hardened."""
        return cls(SandboxSettings(mode="off"))

    @property
    def mode(self) -> Mode:
        """``auto``, ``required`` or ``off``."""
        return self.settings.mode

    def probe(self) -> Probe:
        """The (cached) availability probe; for mode ``off``, not available."""
        if self.mode == "off":
            return Probe(False, None, "the sandbox is off in your config (sandbox.mode)")
        return probe(self.bwrap)

    @property
    def available(self) -> bool:
        """Whether commands run confined here (bwrap works and the mode is not off)."""
        return self.probe().ok

    @property
    def confined(self) -> bool:
        """The same as :attr:`available`: what the policy's ``shell_confined`` takes."""
        return self.available

    @property
    def reason(self) -> str:
        """Why commands are not confined ("" when they are)."""
        return self.probe().reason

    @property
    def notice(self) -> str | None:
        """What a shell says once when commands will not be confined (None: they will,
        or the user turned the sandbox off)."""
        if self.mode == "off" or self.available:
            return None
        if self.mode == "required":
            return (
                f"sandbox required but not available: {self.reason}; shell commands "
                "will be refused (`infai doctor` says more)"
            )
        return (
            f"sandbox not available: {self.reason}; every shell command will be asked "
            "about first (`infai doctor` says more)"
        )

    # -- environment -------------------------------------------------------------------

    def is_secret(self, name: str) -> bool:
        """Whether the variable ``name`` must never reach a command."""
        secrets = (*SECRET_ENV, *self.settings.secret_env, *self.secret_env)
        return _matches(name, secrets)

    def environment(
        self,
        source: Mapping[str, str] | None = None,
        *,
        confined: bool = False,
        working_dir: Path | None = None,
        command: str | None = None,
    ) -> dict[str, str]:
        """The environment a command gets: the pass-through variables of ``source``
        (default: infai's own) without secrets, plus git's hardening (for the
        repositories ``command`` may open: :func:`~.git_hardening.harden`)."""
        return self._environment(source, confined, working_dir, command)[0]

    def _environment(
        self,
        source: Mapping[str, str] | None,
        confined: bool,
        working_dir: Path | None,
        command: str | None = None,
    ) -> tuple[dict[str, str], Hardening, list[str]]:
        """The environment, git's hardening, and (confined) the loader variables
        held back from bwrap for the starter to set (:func:`~.landlock.held_back`)."""
        source = os.environ if source is None else source
        allowed = (*PASS_ENV, *self.settings.pass_env)
        env = {
            k: v
            for k, v in source.items()
            if _matches(k, allowed) and not self.is_secret(k) and not startup_variable(k)
        }
        held: list[str] = []
        if confined:
            env["TMPDIR"] = "/tmp"  # the private /tmp; another would be read-only
            held = held_back(env)  # not for bwrap, nor git run here: set in the sandbox
        # unconfined, the repositories beneath are looked at too (a script's git may
        # open one); confined, what their config runs is confined as well
        hardening = harden(
            working_dir, env, command=command, nested=not confined, local_remotes=not confined
        )
        overrides = [*GIT_OVERRIDES, *hardening.overrides]
        env.update(GIT_ENV)
        env["GIT_CONFIG_COUNT"] = str(len(overrides))
        for n, (key, value) in enumerate(overrides):
            env[f"GIT_CONFIG_KEY_{n}"] = key
            env[f"GIT_CONFIG_VALUE_{n}"] = value
        return env, hardening, held

    # -- launching ---------------------------------------------------------------------

    def launch(
        self,
        command: str,
        working_dir: Path,
        *,
        outside: bool = False,
        hide: Sequence[str] = (),
    ) -> Launch:
        """How to run ``command`` in ``working_dir``: confined unless ``outside`` (the
        user approved running it outside), the mode is off, or (mode auto) bwrap does
        not work here; ``hide``: more paths it may not read (the read rules' files).
        Confined, it starts through :func:`~.landlock.write_limited`: no file outside
        the writable roots is opened for writing, a FIFO included.
        Raises :class:`SandboxUnavailable` for mode required,
        :class:`~.git_hardening.WorkTreeMoved` when it would run unconfined where a
        repository it may open moves git's work tree away, and
        :class:`~.bash_path.ShellMissing` where bash is not installed."""
        shell = shell_argv(command)
        found = self.probe()
        if outside or self.mode == "off" or (not found.ok and self.mode == "auto"):
            env, hardening, _ = self._environment(None, False, working_dir, command)
            if hardening.moved:
                raise WorkTreeMoved(hardening.moved)
            refused = FILE_TRANSPORT_REFUSED in hardening.overrides
            note = FILE_TRANSPORT_NOTE if refused else ""
            return Launch(shell, env, confined=False, file_transport_note=note)
        if not found.ok or found.bwrap is None:
            raise SandboxUnavailable(f"the sandbox is required but cannot run here: {found.reason}")
        env, _, held = self._environment(None, True, working_dir, command)
        args = self.bwrap_args(found.bwrap, working_dir, hide, with_interpreter=True)
        fds = _seccomp_fds()
        limited = limit_files(shell, self.settings.write_budget)
        roots = [str(r) for r in self._roots(working_dir.resolve())]
        landlocked = write_limited(set_after(limited, held), roots)
        argv = [*args[:-1], *_seccomp_flags(fds), "--", *landlocked]
        return Launch(argv, env, confined=True, fds=fds)

    def launch_argv(
        self,
        argv: Sequence[str],
        working_dir: Path,
        *,
        network: bool = False,
        seccomp_fd: int | None = None,
    ) -> Launch:
        """How to start a long-lived program given as an argv (an MCP server), not a
        shell string: the same confinement and scrubbed environment as a command,
        with the network reachable only if ``network`` (the program's own setting,
        not the commands' ``sandbox.network``), started through
        :func:`~.landlock.write_limited` as well. ``seccomp_fd``: the descriptor number
        at which the caller hands the child the seccomp program itself (a launcher
        that cannot pass descriptors redirects a file there); None: :attr:`Launch.fds`
        carries one, as for :meth:`launch`. Raises :class:`SandboxUnavailable` for
        mode required."""
        found = self.probe()
        if self.mode == "off" or (not found.ok and self.mode == "auto"):
            return Launch(list(argv), self.environment(working_dir=working_dir), confined=False)
        if not found.ok or found.bwrap is None:
            raise SandboxUnavailable(f"the sandbox is required but cannot run here: {found.reason}")
        env, _, held = self._environment(None, True, working_dir)
        own = replace(self, settings=replace(self.settings, network=network))
        args = own.bwrap_args(found.bwrap, working_dir, with_interpreter=True)
        if seccomp_fd is None:
            fds = _seccomp_fds()
            flags = _seccomp_flags(fds)
        else:
            fds, flags = (), (_seccomp_flags((seccomp_fd,)) if filter_program() else [])
        roots = [str(r) for r in self._roots(working_dir.resolve())]
        started = write_limited(set_after(argv, held), roots)
        return Launch([*args[:-1], *flags, "--", *started], env, confined=True, fds=fds)

    def _roots(self, wd: Path) -> list[Path]:
        """The writable roots: the (resolved) working directory ``wd``, then the
        ``writable`` directories that exist (not ``.git`` or ``.infai``)."""
        roots = [wd]
        for entry in self.settings.writable:
            if entry.rstrip("/") not in READ_ONLY_ENTRIES:
                extra = Path(entry).expanduser().resolve()
                if extra.is_dir():
                    roots.append(extra)
        return roots

    def bwrap_args(
        self,
        bwrap: str,
        working_dir: Path,
        hide: Sequence[str] = (),
        *,
        with_interpreter: bool = False,
    ) -> list[str]:
        """bwrap's command line up to ``--``: see the module docstring for the layout.
        ``with_interpreter``: infai's Python is bound read-only where it lives (a
        command starts through it, :mod:`.landlock`). Later mounts win, so
        read-only ones come after the writable roots, and the
        hidden paths last; the directories between a writable root and a read-only
        or hidden path in it are bound onto themselves first (mount points cannot
        be renamed, :func:`~infai.tools.sandbox_hide.pin_args`). Raises
        :class:`SandboxUnavailable` when a hidden path around the working directory
        cannot be hidden but for it."""
        wd = working_dir.resolve()
        args = [bwrap, *ram_limits(bwrap, BASE_FLAGS, self.settings.write_budget)]
        if self.settings.network:
            args.append("--share-net")
        roots = self._roots(wd)
        protected: list[str] = []
        for path in self.protected:
            target = path.expanduser().resolve()
            if not any(target == r or r in target.parents or target in r.parents for r in roots):
                continue  # not in (nor around) a writable root: read-only already
            if not target.exists():
                target.mkdir(mode=0o700, parents=True, exist_ok=True)  # or a command could
            protected.append(str(target))
        sockets = socket_entries(os.environ, str(wd), [str(r) for r in roots[1:]])
        try:
            hidden = hidden_paths(
                (*self.settings.hidden, *self.private, *hide), wd, unscanned=sockets
            )
        except TooManyEntries as exc:
            raise SandboxUnavailable(str(exc)) from None
        protected += read_only_included_configs(wd, roots)
        if with_interpreter:  # the starter must not be rewritten by the command before it
            protected += _interpreter_in(roots)
        tops = [str(r) for r in roots]
        home = home_mod.home_view(self.settings.home, tops, self.settings.home_unhide)
        hidden = home_mod.keep_hidden(home, hidden, tops)
        args += home_mod.home_args(home)  # before the roots: later mounts win
        if with_interpreter:  # under the private /tmp (in $HOME, the home view binds it)
            for where in interpreter_paths():
                if Path(where).is_relative_to("/tmp"):
                    args += ["--ro-bind-try", where, where]
        for root in roots:
            args += ["--bind", str(root), str(root)]
        args += pin_args([*protected, *hidden], roots)  # so their parents cannot be moved
        writable = {e.rstrip("/") for e in self.settings.writable}
        wd_writable = not any(wd == Path(p) or Path(p) in wd.parents for p in protected)
        for name in READ_ONLY_ENTRIES:
            if name not in writable:
                if name in MADE_READ_ONLY and wd_writable:
                    _mount_point(wd / name)
                args += ["--ro-bind-try", str(wd / name), str(wd / name)]
        read_only = [str(wd / n) for n in READ_ONLY_ENTRIES if n not in writable]
        for kept in protected:
            args += ["--ro-bind", kept, kept]
        args += cover_args([*read_only, *protected])  # a FIFO there takes writes
        return [*args, *mount_args(hidden), *home_mod.home_tail(home), "--chdir", str(wd), "--"]


def _interpreter_in(roots: Sequence[Path]) -> list[str]:
    """The places of infai's Python (:func:`~.landlock.interpreter_paths`) that lie in
    a writable root, to be mounted read-only (and their parents pinned) like the
    protected paths. Why: every command starts through that interpreter, before
    Landlock holds; one that lives in the working directory (a venv of copies, a
    conda environment, a Python under ``$HOME`` run from there) could otherwise be
    replaced by one command so that the next starts without the restriction."""
    found = []
    for where in interpreter_paths():
        path = Path(where)
        if any(path == r or r in path.parents for r in roots):
            found.append(where)
    return found


def _mount_point(path: Path) -> None:
    """Make ``path`` an empty directory if nothing is there, to be mounted read-only.

    Why on the host: a mount point bwrap made itself would be made there too
    (through the writable bind of the working directory), and one removed after
    the command could be removed under another command still running (the kernel
    then detaches that command's mount). Left when it cannot be made (a working
    directory infai's user may not write): a command cannot make it either."""
    with contextlib.suppress(OSError):
        os.mkdir(path, 0o755)


def stopped_by_sandbox(output: str) -> bool:
    """Whether a confined command's output shows the sandbox stopped it."""
    return any(marker in output for marker in STOPPED_MARKERS)


__all__ = [
    "MODES",
    "PASS_ENV",
    "SECRET_ENV",
    "STOPPED_NOTE",
    "Launch",
    "Probe",
    "Sandbox",
    "SandboxSettings",
    "SandboxUnavailable",
    "WorkTreeMoved",
    "find_bwrap",
    "parse_sandbox",
    "probe",
    "stopped_by_sandbox",
]
