"""Issue 28 performed for real: reaching a Unix socket outside from inside the sandbox.

A listener stands outside (in the working directory where the command can see
it, in a fake ``$XDG_RUNTIME_DIR``, a tmux and an ssh-agent directory); the
command, run by the ``bash`` tool under the real bubblewrap (or as an MCP stdio
server), runs ``uring_shim.py``: an ``AF_UNIX`` socket from io_uring's
``IORING_OP_SOCKET`` then ``connect``, from ``socket``, and a datagram
``socketpair`` re-pointed. Judged by the listener: no connection arrives. The
control runs the same shim outside the sandbox and the listener hears it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import uring_shim
from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.mcp import McpHub, ServerConfig
from infai.tools.sandbox_hide import hidden_paths
from infai.tools.sandbox_sockets import socket_entries
from infai.tools.shell import Bash
from mcp_servers import SCRIPT

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)
SHIM = str(Path(uring_shim.__file__).resolve())


def _kernel_has_io_uring() -> bool:
    try:
        fd, _ = uring_shim.io_uring_setup(1)
    except OSError:
        return False
    os.close(fd)
    return True


def listen(path: Path, stack: ExitStack) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    server = stack.enter_context(socket.socket(socket.AF_UNIX))
    server.bind(str(path))
    server.listen(8)
    server.setblocking(False)
    return server


def heard(server: socket.socket) -> int:
    """How many connections reached ``server`` (each accepted and closed)."""
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def attack(wd: Path, paths: list[Path], sandbox: Sandbox | None = None, **args: Any) -> list[Any]:
    command = shlex.join([sys.executable, SHIM, *map(str, paths)])
    tool = Bash(sandbox=sandbox or Sandbox())
    out = asyncio.run(tool.run({"command": command, **args}, ToolContext(wd, "s")))
    found = [json.loads(line) for line in out.content.splitlines() if line.startswith("{")]
    assert len(found) == len(paths), out.content
    return found


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory outside /tmp (the sandbox's /tmp is its own, which would hide
    anything there anyway) where a user's sockets could be."""
    where = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    path = Path(tempfile.mkdtemp(prefix="infai-sock-", dir=where))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def wd(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    root.mkdir()
    return root


@needs_bwrap
def test_io_uring_cannot_make_a_socket_for_a_visible_listener(wd: Path) -> None:
    """The finding's shim: io_uring's IORING_OP_SOCKET made the AF_UNIX socket the
    filter refused to ``socket()``, and ``connect`` is not filtered."""
    with ExitStack() as stack:
        server = listen(wd / "agent.sock", stack)
        [inside] = attack(wd, [wd / "agent.sock"])
        assert inside["visible"]  # only the filter stands between
        assert inside["uring"] == "EPERM", inside
        assert inside["socket"] == "EACCES" and inside["dgram"] == "EACCES", inside
        assert inside["socket_fds"] == []  # none inherited to connect with
        assert heard(server) == 0
        # control: unconfined, the same shim gets through, by io_uring too
        [outside] = attack(wd, [wd / "agent.sock"], outside_sandbox=True)
        assert outside["socket"] == "connected"
        if _kernel_has_io_uring():
            assert outside["uring"] == "connected"
        assert heard(server) >= 1


@needs_bwrap
def test_a_datagram_pair_cannot_be_pointed_at_a_datagram_socket_outside(wd: Path) -> None:
    """A datagram socket can be re-``connect``-ed, or ``sendto`` any path: a pair of
    them (allowed before) reached journald-like listeners outside."""
    path = wd / "journal.sock"
    send = (
        "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); "
        f"a.sendto(b'forged', {str(path)!r})"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.setblocking(False)
        tool = Bash(sandbox=Sandbox())
        command = shlex.join([sys.executable, "-c", send])
        out = asyncio.run(tool.run({"command": command}, ToolContext(wd, "s")))
        assert "Permission denied" in out.content, out.content
        with pytest.raises(BlockingIOError):
            server.recv(100)
        # control: outside the sandbox the datagram arrives
        asyncio.run(tool.run({"command": command, "outside_sandbox": True}, ToolContext(wd, "s")))
        assert server.recv(100) == b"forged"


@needs_bwrap
def test_the_users_socket_directories_are_hidden_and_unreachable(
    wd: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = base / "run-user"  # $XDG_RUNTIME_DIR: the D-Bus user bus, agents…
    tmux_dir = base / "tmuxtmp" / f"tmux-{os.getuid()}"
    agent_dir = base / f"ssh-{uuid.uuid4().hex[:8]}"
    docker = base / "docker" / "docker.sock"  # not a socket directory: the socket alone
    paths = [runtime / "bus", tmux_dir / "default", agent_dir / "agent.42", docker]
    monkeypatch.setenv("DOCKER_HOST", f"unix://{docker}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("TMUX_TMPDIR", str(base / "tmuxtmp"))
    monkeypatch.setenv("TMUX", f"{tmux_dir / 'default'},4242,0")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent_dir / "agent.42"))
    with ExitStack() as stack:
        servers = [listen(path, stack) for path in paths]
        for inside in attack(wd, paths):
            assert not inside["visible"], inside
            assert inside["uring"] == "EPERM" and inside["socket"] == "EACCES", inside
        assert [heard(s) for s in servers] == [0, 0, 0, 0]
        listing = Bash(sandbox=Sandbox())
        out = asyncio.run(
            listing.run(
                {"command": f"ls -A {runtime} {tmux_dir} {agent_dir}"}, ToolContext(wd, "s")
            )
        )
        names = set(out.content.split())
        assert not names & {"bus", "default", "agent.42"}, out.content  # empty directories
        # control: outside, each is there and answers
        for outside in attack(wd, paths, outside_sandbox=True):
            assert outside["visible"] and outside["socket"] == "connected", outside
        assert min(heard(s) for s in servers) >= 1


@needs_bwrap
def test_socket_directories_in_a_visible_tmp_are_hidden(wd: Path) -> None:
    """``sandbox.writable = ["/tmp"]`` shows the real /tmp: tmux's and ssh-agent's
    directories there are hidden all the same (other entries are not)."""
    tag = uuid.uuid4().hex[:8]
    tmux = Path(f"/tmp/tmux-infai{tag}/default")
    agent = Path(f"/tmp/ssh-infai{tag}/agent.1")
    plain = Path(f"/tmp/infai-plain-{tag}/sock")
    sandbox = Sandbox(SandboxSettings(writable=("/tmp",)))
    try:
        with ExitStack() as stack:
            servers = [listen(path, stack) for path in (tmux, agent, plain)]
            found = attack(wd, [tmux, agent, plain], sandbox)
            assert [f["visible"] for f in found] == [False, False, True], found
            assert {f["socket"] for f in found} == {"EACCES"}
            assert [heard(s) for s in servers] == [0, 0, 0]
    finally:
        for path in (tmux, agent, plain):
            shutil.rmtree(path.parent, ignore_errors=True)


@needs_bwrap
def test_an_mcp_stdio_server_gets_the_same_filter_and_hidden_sockets(
    tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stdio server starts in the sandbox through another path (a file opened as
    descriptor 3 by ``sh``): the shim runs first as the server's command, writes
    what it found, then becomes the real server."""
    work = tmp_path / "work"
    work.mkdir()
    runtime = base / "run-user"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    report = work / "report.jsonl"
    visible, hidden = work / "agent.sock", runtime / "bus"
    args: tuple[str, ...] = (SHIM, "--report", str(report), str(visible), str(hidden))
    args += ("--exec",)
    args += (sys.executable, str(SCRIPT), "stdio", str(work / "log"))
    hub = McpHub([ServerConfig("shim", command=sys.executable, args=args)], Sandbox(), work)

    async def start() -> Any:
        try:
            await hub.prepare()
            return hub.status()[0]
        finally:
            await hub.aclose()

    with ExitStack() as stack:
        servers = [listen(visible, stack), listen(hidden, stack)]
        status = asyncio.run(start())
        assert status["confined"] is True, status
        found = [json.loads(line) for line in report.read_text().splitlines()]
        assert [f["visible"] for f in found] == [True, False]
        for f in found:
            assert f["uring"] == "EPERM" and f["socket"] == "EACCES" and f["dgram"] == "EACCES"
            assert f["socket_fds"] == [], f  # stdin and stdout are pipes
        assert [heard(s) for s in servers] == [0, 0]


def test_socket_entries_follow_the_environment(tmp_path: Path) -> None:
    uid = os.getuid()
    env = {
        "XDG_RUNTIME_DIR": "/run/user/1000/",
        "SSH_AUTH_SOCK": "/home/u/.1password/agent.sock",
        "TMUX": "/var/tmp/tmux-1000/default,12,0",
        "TMUX_TMPDIR": "/srv/t",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/srv/bus/sock,guid=x;unix:abstract=/tmp/d",
        "DOCKER_HOST": "unix:///srv/docker.sock",
        "GPG_AGENT_INFO": "/srv/gpg/S.gpg-agent:0:1",
        "WAYLAND_DISPLAY": "wayland-0",  # relative: in the runtime directory
    }
    found = socket_entries(env, str(tmp_path))
    assert "/run/user" in found and "/run/user/1000" in found and "/run/postgresql" in found
    assert "/home/u/.1password/agent.sock" in found and "/home/u/.1password" not in found
    assert {"/var/tmp/tmux-1000/default", "/var/tmp/tmux-1000", f"/srv/t/tmux-{uid}"} <= set(found)
    assert {"/srv/bus/sock", "/srv/docker.sock", "/srv/gpg/S.gpg-agent"} <= set(found)
    assert not [e for e in found if e.startswith("/tmp") or "wayland" in e]
    # a runtime directory that is a general one, or holds the working directory, stays
    general = socket_entries({"XDG_RUNTIME_DIR": "/tmp"}, str(tmp_path), ["/tmp"])
    assert "/tmp" not in general
    assert str(tmp_path) not in socket_entries({"XDG_RUNTIME_DIR": str(tmp_path)}, str(tmp_path))


def test_a_socket_path_holding_the_working_directory_is_not_hidden(tmp_path: Path) -> None:
    """A runtime directory set to a directory the user works in (even through a
    link) would otherwise hide the work, or be split entry by entry."""
    wd = tmp_path / "home" / "proj"
    wd.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "home")
    (tmp_path / "home" / "agent.sock").write_text("")
    entries = [str(tmp_path / "link"), str(wd), str(tmp_path / "home" / "agent.sock")]
    found = hidden_paths((), wd.resolve(), unscanned=entries)
    assert found == {str((tmp_path / "home" / "agent.sock").resolve()): False}
