"""Red team (gitsec): a repository's own ``http.cookieFile`` with
``http.saveCookies`` makes git (libcurl) write its cookie jar there, over any
file: with the sandbox off, a ``git fetch`` from an http remote replaced a file
outside the working directory with the cookies the server set.

Judged by effect: the file outside, after the command."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gitattack import git
from infai.tools import Sandbox, ToolContext
from infai.tools.shell import Bash


class _SetsACookie(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # git's first request: info/refs
        self.send_response(200)
        self.send_header("Set-Cookie", "k=v; Path=/")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SetsACookie)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/x"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("scope", ["http", "http.{url}"])
def test_git_writes_no_cookie_jar_where_the_repository_says(
    tmp_path: Path, server: str, scope: str
) -> None:
    victim = tmp_path / "outside" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "remote", "add", "origin", server)
    git(repo, "config", f"{scope.format(url=server)}.cookieFile", str(victim))
    git(repo, "config", f"{scope.format(url=server)}.saveCookies", "true")
    command = "git ls-remote origin"
    out = asyncio.run(Bash(sandbox=Sandbox.off()).run({"command": command}, ToolContext(repo, "s")))
    assert victim.read_text() == "precious\n", out.content
    # the control: the same command without infai's overrides writes the jar there
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["sh", "-c", command], cwd=repo, env=env, capture_output=True, timeout=30)
    assert "k\tv" in victim.read_text()
