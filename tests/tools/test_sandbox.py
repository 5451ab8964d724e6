"""The shell sandbox, attacked for real and judged by effect.

Each attack runs through the ``bash`` tool under a real bubblewrap (CI installs
it) and checks what happened on the host: a file outside unchanged, a secret
absent from the output, a listener that never got a connection, a process gone.
Each also has a control (the same attack unconfined, or the host's own view)
showing that the check would see the attack succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext, ToolOutput
from infai.tools.git_hardening import GIT_OVERRIDES
from infai.tools.sandbox import STOPPED_NOTE, probe
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)


def bash(wd: Path, command: str, sandbox: Sandbox | None = None, **args: Any) -> ToolOutput:
    tool = Bash(sandbox=sandbox or Sandbox())
    return asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))


@pytest.fixture
def wd(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    return root


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the working directory and outside /tmp (which the sandbox
    replaces), so the command sees it and must not change it."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="infai-sbx-test-", dir=base))
    (path / "keep.txt").write_text("before")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_probe_works_here() -> None:
    """CI installs bwrap: a probe that fails there is a failure, not a skip."""
    found = probe()
    assert found.ok, found.reason
    assert Sandbox().available and Sandbox().notice is None


def test_writes_outside_the_working_dir_are_stopped(wd: Path, outside: Path) -> None:
    home_file = Path.home() / f".infai-sbx-test-{uuid.uuid4().hex}"
    try:
        out = bash(
            wd,
            f"echo changed > {outside}/keep.txt; echo x > {outside}/new.txt; "
            f"echo x > {home_file}; echo ok > inside.txt",
        )
        assert (outside / "keep.txt").read_text() == "before"
        assert not (outside / "new.txt").exists()
        assert not home_file.exists()
        assert (wd / "inside.txt").read_text() == "ok\n"  # the working dir stays writable
        assert "Read-only file system" in out.content
        assert STOPPED_NOTE in out.content  # the model is told what stopped it and what to do
        # control: outside the sandbox (what the user approved) the same write lands
        bash(wd, f"echo changed > {outside}/keep.txt", outside_sandbox=True)
        assert (outside / "keep.txt").read_text() == "changed\n"
    finally:
        home_file.unlink(missing_ok=True)


def test_git_dir_and_protected_paths_stay_read_only(wd: Path, tmp_path: Path) -> None:
    store = wd / "store"
    store.mkdir()
    (store / "session.log").write_text("mine")
    config_dir = wd / "cfg" / "infai"  # does not exist yet: the command may not create it
    sandbox = Sandbox(protected=(store, config_dir))
    bash(
        wd,
        "echo '[alias]' >> .git/config; mkdir .git/hooks; echo x > store/session.log; "
        "mkdir -p cfg/infai && echo 'trusted_projects = [\"/\"]' > cfg/infai/config.toml",
        sandbox,
    )
    assert (wd / ".git" / "config").read_text() == "[core]\n"
    assert not (wd / ".git" / "hooks").exists()
    assert (store / "session.log").read_text() == "mine"
    assert not (config_dir / "config.toml").exists()
    # .infai is read-only too, whether or not it existed: a missing one is made
    # empty before the command (`git init` may still make a missing .git)
    assert (wd / ".infai").is_dir() and not any((wd / ".infai").iterdir())
    bash(wd, "echo x > .infai/config.toml", sandbox)
    assert not (wd / ".infai" / "config.toml").exists()


def test_a_working_dir_inside_a_protected_dir_is_read_only(tmp_path: Path) -> None:
    store = tmp_path / "store"
    wd = store / "sessions" / "s1"
    wd.mkdir(parents=True)
    (wd / "events.log").write_text("mine")
    bash(wd, "echo x > events.log; echo x > new.txt", Sandbox(protected=(store,)))
    assert (wd / "events.log").read_text() == "mine" and not (wd / "new.txt").exists()


def test_root_cannot_unmount_what_is_read_only(wd: Path) -> None:
    """As root, bwrap keeps every capability unless told: without --cap-drop ALL,
    ``umount .git`` uncovers the writable directory underneath."""
    out = bash(wd, "umount .git; mount -o remount,rw .git; echo x >> .git/config")
    assert (wd / ".git" / "config").read_text() == "[core]\n", out.content


def test_writable_lets_git_be_written(wd: Path) -> None:
    sandbox = Sandbox(SandboxSettings(writable=(".git",)))
    bash(wd, "echo '# ok' >> .git/config", sandbox)
    assert (wd / ".git" / "config").read_text() == "[core]\n# ok\n"


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.3)
    return server


def _connects(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def test_network_is_stopped(wd: Path) -> None:
    with _listener() as server:
        port = server.getsockname()[1]
        connect = (
            f'{sys.executable} -c "import socket; s = socket.socket(); s.settimeout(2); '
            f"s.connect(('127.0.0.1', {port})); s.sendall(b'x')\""
        )
        out = bash(wd, connect)
        assert out.is_error and not _connects(server)
        # control: with the network on (or outside the sandbox) the listener is reached
        bash(wd, connect, Sandbox(SandboxSettings(network=True)))
        assert _connects(server)
    resolve = f"{sys.executable} -c \"import socket; socket.getaddrinfo('example.com', 80)\""
    out = bash(wd, resolve)
    assert out.is_error and STOPPED_NOTE in out.content


def _pids_of(marker: str) -> list[int]:
    """Host pids of processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "sh -c" not in cmdline and "bwrap" not in cmdline:
                found.append(int(entry.name))
    return found


def _gone(pids: list[int], within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() for pid in pids):
            return True
        time.sleep(0.02)
    return False


def _spawner(marker: str) -> str:
    """A command that leaves a detached child (new session, immune to hangup,
    stdout closed) running: what escapes a process-group kill."""
    return f"setsid nohup sleep {marker} >/dev/null 2>&1 < /dev/null &"


def _marker() -> str:
    return f"{3000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"


@pytest.mark.parametrize("end", ["returns", "times_out", "cancelled"])
def test_nothing_the_command_started_outlives_it(wd: Path, end: str) -> None:
    marker = _marker()
    tail = {"returns": "sleep 0.3", "times_out": "sleep 30", "cancelled": "sleep 30"}[end]
    command = f"{_spawner(marker)} {tail}"
    seen: list[int] = []

    async def main() -> ToolOutput | None:
        task = asyncio.create_task(
            Bash(sandbox=Sandbox()).run(
                {"command": command, "timeout_seconds": 1}, ToolContext(wd, "s")
            )
        )
        while not seen and not task.done():
            await asyncio.sleep(0.02)
            seen.extend(_pids_of(f"sleep {marker}"))
        if end == "cancelled":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return None
        return await task

    try:
        out = asyncio.run(main())
        assert seen, "the child was started (recorded by its host pid)"
        assert _gone(seen), f"the detached child {seen} outlived the command ({end})"
    finally:
        for pid in seen:  # a failing run leaves nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
    if end == "times_out":
        assert out is not None and "timed out" in out.content


def test_unconfined_control_leaves_the_child_running(wd: Path) -> None:
    """The control for the test above: without the sandbox the same child survives."""
    marker = _marker()
    bash(wd, f"{_spawner(marker)} sleep 0.3", Sandbox.off())
    pids = _pids_of(f"sleep {marker}")
    try:
        assert pids and not _gone(pids, within=0.3)
    finally:
        for pid in pids:
            os.kill(pid, 9)


@pytest.mark.parametrize("sandbox", [Sandbox(), Sandbox.off()], ids=["confined", "off"])
def test_secrets_never_reach_a_command(
    wd: Path, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-openai-4d2",
        "ANTHROPIC_API_KEY": "sk-ant-9f1",
        "GITHUB_TOKEN": "ghp_77aa",
        "INFAI_SERVER_TOKEN": "srv-5c3",
        "AWS_SECRET_ACCESS_KEY": "aws-0b8",
        "MY_DB_URL": "postgres://u:pw-e61@db",  # configured as secret_env
        "LOCAL_KEY": "local-key-31f",  # a model's key_env (the harness passes those)
        "UNLISTED": "unlisted-a90",  # not in any pass-through list
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EXTRA_VISIBLE", "visible-123")
    settings = SandboxSettings(
        mode=sandbox.mode, pass_env=("EXTRA_*", "UNLISTED_NOT"), secret_env=("MY_DB_URL",)
    )
    configured = Sandbox(settings, secret_env=("LOCAL_KEY",))
    out = bash(wd, "env; cat /proc/self/environ", configured)
    for value in secrets.values():
        assert value not in out.content
    assert "visible-123" in out.content and f"HOME={os.environ['HOME']}" in out.content
    # the control: the tool's output does show what the environment holds
    out = bash(wd, "echo $EXTRA_VISIBLE", configured)
    assert "visible-123" in out.content


def _evil_repo(root: Path) -> tuple[Path, Path]:
    """A repository whose .git/config runs a script from fsmonitor, a hook, a
    clean filter and external diffs; the script leaves a marker file in
    ``marks``, inside the working directory (writable even when confined)."""
    import subprocess

    repo = root / "repo"
    marks = repo / "marks"
    marks.mkdir(parents=True)
    script = marks / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marks}/ran-$1"\n')
    script.chmod(0o755)

    def git(*args: str) -> None:
        env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    (repo / "f.txt").write_text("one\n")
    (repo / ".gitattributes").write_text("f.txt filter=evil diff=evil\n")
    git("add", "f.txt", ".gitattributes")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    git("config", "core.fsmonitor", f"{script} fsmonitor")
    git("config", "filter.evil.clean", f"{script} clean")
    git("config", "diff.evil.command", f"{script} diffdriver")
    git("config", "diff.external", f"{script} external")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\n{script} hook\n")
    (hooks / "pre-commit").chmod(0o755)
    (repo / "f.txt").write_text("two\n")
    return repo, marks


@pytest.mark.parametrize("sandbox", [Sandbox(), Sandbox.off()], ids=["confined", "off"])
def test_git_runs_no_repository_configured_code(tmp_path: Path, sandbox: Sandbox) -> None:
    repo, marks = _evil_repo(tmp_path)
    settings = SandboxSettings(mode=sandbox.mode, writable=(".git",))  # so a commit can run
    out = bash(
        repo,
        "git status; git diff; git add f.txt; git -c user.name=t -c user.email=t@t commit -qm two",
        Sandbox(settings),
    )
    assert sorted(p.name for p in marks.iterdir()) == ["evil.sh"], out.content
    # the control: the same git status, run plainly, does run the fsmonitor script
    import subprocess

    subprocess.run(["git", "status"], cwd=repo, capture_output=True, check=False)
    assert (marks / "ran-fsmonitor").exists()


def test_outside_sandbox_must_be_a_boolean(wd: Path) -> None:
    out = bash(wd, "echo x > ran.txt", outside_sandbox="yes")
    assert out.is_error and "outside_sandbox" in out.content
    assert not (wd / "ran.txt").exists()


def test_the_schema_offers_outside_sandbox() -> None:
    prop = Bash.spec.parameters["properties"]["outside_sandbox"]
    assert prop["type"] == "boolean" and "approval" in prop["description"]


def test_unix_sockets_outside_cannot_be_reached(wd: Path) -> None:
    """A path-bound Unix socket (Docker's, the D-Bus user bus, an ssh agent) would let
    a command ask an unconfined process to act for it: socket(AF_UNIX) is refused."""
    path = wd / "agent.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)
        server.settimeout(0.3)
        connect = shlex.join(
            [
                sys.executable,
                "-c",
                f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r})",
            ]
        )
        out = bash(wd, connect)
        assert out.is_error and "Permission denied" in out.content
        assert not _connects(server)
        # socketpair (a private pair, like a pipe) still works
        pair = shlex.join([sys.executable, "-c", "import socket; socket.socketpair()"])
        assert not bash(wd, pair).is_error
        # control: outside the sandbox the same command reaches the listener
        bash(wd, connect, outside_sandbox=True)
        assert _connects(server)


def test_the_seccomp_filter_knows_its_architectures() -> None:
    from infai.tools.seccomp import filter_program

    assert filter_program("sparc") is None
    x86, arm = filter_program("x86_64"), filter_program("aarch64")
    assert x86 and arm and len(x86) % 8 == 0 and len(arm) % 8 == 0


def test_only_the_repositorys_own_drivers_are_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's own global drivers (git-lfs's filter) keep working; the ones the
    repository's config names are emptied; a repository naming none costs no git."""
    repo, _ = _evil_repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[filter "lfs"]\n\tclean = git-lfs clean -- %f\n')
    monkeypatch.setenv("HOME", str(home))
    env = Sandbox().environment(working_dir=repo)
    keys = {v for k, v in env.items() if k.startswith("GIT_CONFIG_KEY_")}
    assert {"filter.evil.clean", "diff.evil.command", "diff.external"} <= keys
    assert "filter.lfs.clean" not in keys
    plain = tmp_path / "plain"
    (plain / ".git").mkdir(parents=True)
    (plain / ".git" / "config").write_text("[core]\n\tbare = false\n")
    assert Sandbox().environment(working_dir=plain)["GIT_CONFIG_COUNT"] == str(len(GIT_OVERRIDES))


def _remote_running_repo(root: Path) -> tuple[Path, Path, Any]:
    """A repository whose own config makes a fetch, a push and an alias run a
    script (``remote.origin.uploadpack``/``receivepack``: for a local remote they run
    here), with the remote inside the working directory so the sandbox sees it."""
    import subprocess

    repo, marks = _evil_repo(root)
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str, cwd: Path = repo) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    git("clone", "-q", "--bare", str(repo), str(repo / "remote.git"))
    git("remote", "add", "origin", str(repo / "remote.git"))
    script = marks / "evil.sh"
    git("config", "remote.origin.uploadpack", f"{script} uploadpack; git-upload-pack")
    git("config", "remote.origin.receivepack", f"{script} receivepack; git-receive-pack")
    git("config", "alias.st", f"!{script} alias")
    git("config", "submodule.sub.update", f"!{script} submodule")
    return repo, marks, git


@pytest.mark.parametrize("sandbox", [Sandbox(), Sandbox.off()], ids=["confined", "off"])
def test_fetch_push_and_aliases_run_no_repository_configured_program(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """Finding (issue 28, medium): ``remote.*.uploadpack``/``receivepack`` and an
    ``alias.* = !cmd`` from ``.git/config`` ran under a narrowly allowed git command."""
    repo, marks, git = _remote_running_repo(tmp_path)
    settings = SandboxSettings(mode=sandbox.mode, writable=(".git",))
    out = bash(
        repo,
        "git fetch -q origin; git push -q origin HEAD:refs/heads/other; git st",
        Sandbox(settings),
    )
    assert sorted(p.name for p in marks.iterdir()) == ["evil.sh"], out.content
    env = Sandbox(settings).environment(working_dir=repo)
    given = {env[k]: env[k.replace("KEY", "VALUE")] for k in env if k.startswith("GIT_CONFIG_KEY_")}
    assert given["submodule.sub.update"] == "checkout" and given["alias.st"] == ""
    assert given["protocol.file.allow"] == "never"  # git keeps the first uploadpack
    # the control: the same commands run plainly do run the scripts
    git("fetch", "-q", "origin")
    git("push", "-q", "origin", "HEAD:refs/heads/plain")
    git("st")
    assert {p.name for p in marks.iterdir()} >= {"ran-uploadpack", "ran-receivepack", "ran-alias"}


def test_a_harmless_alias_or_submodule_setting_is_kept(tmp_path: Path) -> None:
    repo, _, git = _remote_running_repo(tmp_path)
    git("config", "alias.lg", "log --oneline")
    git("config", "submodule.other.update", "rebase")
    env = Sandbox().environment(working_dir=repo)
    keys = {v for k, v in env.items() if k.startswith("GIT_CONFIG_KEY_")}
    assert "alias.lg" not in keys and "submodule.other.update" not in keys


@pytest.mark.parametrize("sandbox", [Sandbox(), Sandbox.off()], ids=["confined", "off"])
def test_a_command_that_begins_with_a_dash_is_run_as_a_command(wd: Path, sandbox: Sandbox) -> None:
    """Bash would take ``-O extglob`` as its own options (it lists its shell
    options and runs nothing the checker read); it is run as the command it is."""
    out = bash(wd, "-O extglob", sandbox)
    assert "-O: command not found" in out.content, out.content
    assert "checkwinsize" not in out.content  # not bash's option listing
