"""Red team (attack28): credential files the hidden list did not name.

A service-account key named by ``$GOOGLE_APPLICATION_CREDENTIALS`` (the usual way
to hand one to Google's SDKs), the token file ``$AWS_WEB_IDENTITY_TOKEN_FILE``
names, ``$NETRC``, ``$TF_CLI_CONFIG_FILE``, ``$HF_TOKEN_PATH`` and
``$HF_HOME/token``, and at home Hugging Face's token, GitHub Copilot's OAuth
tokens, rclone's, s3cmd's, boto's, MySQL's, OCI's and Databricks' files were
read back by a confined ``cat``. Judged by the output: no marker may appear;
the control, run outside the sandbox, shows each one.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from infai.tools import Sandbox, SandboxSettings, ToolContext
from infai.tools.shell import Bash

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (CI installs it)"
)

AT_HOME = {
    ".cache/huggingface/token": "MARKER-hf",
    ".huggingface/token": "MARKER-hf-old",
    ".config/github-copilot/hosts.json": "MARKER-copilot",
    ".config/rclone/rclone.conf": "MARKER-rclone",
    ".s3cfg": "MARKER-s3cmd",
    ".boto": "MARKER-boto",
    ".my.cnf": "MARKER-mysql",
    ".mylogin.cnf": "MARKER-mysql-login",
    ".oci/config": "MARKER-oci",
    ".databrickscfg": "MARKER-databricks",
}
#: (variable, its value under the root, the file under the root, marker)
MOVED = (
    ("GOOGLE_APPLICATION_CREDENTIALS", "sa.json", "sa.json", "MARKER-gcp-sa"),
    ("AWS_WEB_IDENTITY_TOKEN_FILE", "web/token", "web/token", "MARKER-aws-web"),
    ("NETRC", "n/netrc", "n/netrc", "MARKER-netrc"),
    ("TF_CLI_CONFIG_FILE", "tf.rc", "tf.rc", "MARKER-terraform"),
    ("HF_TOKEN_PATH", "hf/tok", "hf/tok", "MARKER-hf-path"),
    ("HF_HOME", "hfhome", "hfhome/token", "MARKER-hf-home"),
)


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    top = Path(tempfile.mkdtemp(prefix="infai-a28-", dir=base)).resolve()
    home = top / "home"
    for name, marker in AT_HOME.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(marker)
    (home / "proj").mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name, value, file, marker in MOVED:
        (top / file).parent.mkdir(parents=True, exist_ok=True)
        (top / file).write_text(marker)
        monkeypatch.setenv(name, str(top / value))
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_more_credential_files_read_as_empty(root: Path) -> None:
    home = root / "home"
    files = [home / n for n in AT_HOME] + [root / f for _, _, f, _ in MOVED]
    command = "cat " + " ".join(shlex.quote(str(f)) for f in files) + "; echo END"
    tool = Bash(sandbox=Sandbox(SandboxSettings()))  # hidden: the defaults, this environment
    context = ToolContext(home / "proj", "s")
    out = asyncio.run(tool.run({"command": command}, context)).content
    markers = [*AT_HOME.values(), *(m for *_, m in MOVED)]
    assert "END" in out and not [m for m in markers if m in out], out
    # the control: outside the sandbox, every file is there to read
    plain = asyncio.run(tool.run({"command": command, "outside_sandbox": True}, context)).content
    assert all(m in plain for m in markers), plain
