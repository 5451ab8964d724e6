"""Setting up a model in a minute (issue 25): ``infai config model`` writes the user's
config file, asked on a terminal or by flags, and says where; a person with no
usable model is told how to set one up instead of getting a traceback.

Every test runs the real ``infai`` as a subprocess with a home of its own
(``HOME`` and ``XDG_CONFIG_HOME`` under tmp, no ``INFAI_CONFIG``), so the file
lands where a user's would: ``$XDG_CONFIG_HOME/infai/config.toml``. The prompts
are answered through a real pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from fakeapi import FakeOpenAI, Reply

INFAI = [sys.executable, "-m", "infai"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    drop = ("INFAI_", "OPENAI_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    home = tmp_path / "home"
    return env | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "INFAI_HOME": str(tmp_path / "store"),
        **extra,
    }


def _config(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".config" / "infai" / "config.toml"


def infai(
    tmp_path: Path, *args: str, stdin: str = "", **extra: str
) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [*INFAI, *args],
        input=stdin,
        cwd=work,
        env=_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def on_terminal(
    tmp_path: Path, args: list[str], answers: list[tuple[str, str]], code: int = 0, **extra: str
) -> str:
    """Run ``infai ARGS`` on a pseudo-terminal; each (prompt, answer): wait until
    ``prompt`` is shown, then type ``answer`` and Enter. Returns all it showed; the
    exit code must be ``code``."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*INFAI, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=work,
        env=_env(tmp_path, **extra),
        close_fds=True,
    )
    os.close(follower)
    shown = ""

    def read_until(wanted: str | None) -> None:
        nonlocal shown
        deadline = time.monotonic() + 30
        while wanted is None or wanted not in shown:
            assert time.monotonic() < deadline, f"no {wanted!r} in:\n{shown}"
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    data = os.read(leader, 4096)
                except OSError:  # the process ended and closed the terminal
                    data = b""
                if not data:
                    assert wanted is None, f"ended without {wanted!r}:\n{shown}"
                    return
                shown += data.decode(errors="replace")

    try:
        for prompt, answer in answers:
            read_until(prompt)
            os.write(leader, answer.encode() + b"\r")
        read_until(None)
        assert process.wait(timeout=30) == code, shown
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    return shown


def test_ollama_by_flags_writes_a_default_model_and_names_the_file(tmp_path: Path) -> None:
    done = infai(tmp_path, "config", "model", "--provider", "ollama", "--model", "qwen2.5-coder")
    assert done.returncode == 0, done.stderr
    path = _config(tmp_path)
    assert str(path) in done.stdout
    written = tomllib.loads(path.read_text())
    assert written == {
        "model": "ollama",
        "models": {
            "ollama": {
                "provider": "openai",
                "model": "qwen2.5-coder",
                "base_url": "http://127.0.0.1:11434/v1",
            }
        },
    }
    listed = infai(tmp_path, "models", "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {"name": "ollama", "model": "qwen2.5-coder"}.items() <= rows[-1].items()


def test_a_key_stays_in_the_environment_the_file_names_its_variable(tmp_path: Path) -> None:
    secret = "sk-ant-not-in-any-file"
    done = infai(
        tmp_path,
        *("config", "model", "--provider", "anthropic", "--model", "claude-sonnet-4-5"),
        ANTHROPIC_API_KEY=secret,
    )
    assert done.returncode == 0, done.stderr
    text = _config(tmp_path).read_text()
    assert secret not in text
    table = tomllib.loads(text)["models"]["anthropic"]
    assert table["key_env"] == "ANTHROPIC_API_KEY" and table["provider"] == "anthropic"


def test_a_key_written_on_request_makes_the_file_private_and_is_used(tmp_path: Path) -> None:
    with FakeOpenAI([Reply(text="hello from the server")]) as fake:
        done = infai(
            tmp_path,
            *("config", "model", "--provider", "openai", "--model", "local-model"),
            *("--base-url", fake.base_url, "--key-in-file"),
            stdin="sk-mine-123\n",
        )
        assert done.returncode == 0, done.stderr
        path = _config(tmp_path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert tomllib.loads(path.read_text())["models"]["openai"]["api_key"] == "sk-mine-123"
        ran = infai(tmp_path, "run", "hi")
        assert ran.returncode == 0, ran.stderr
        assert "hello from the server" in ran.stdout
        assert fake.requests[0].headers["authorization"] == "Bearer sk-mine-123"
    path.chmod(0o644)  # a key others may read is pointed out
    listed = infai(tmp_path, "models")
    assert f"chmod 600 {path}" in listed.stderr


def test_an_existing_file_keeps_its_settings_and_gains_the_model(tmp_path: Path) -> None:
    path = _config(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        'model = "old"\ncompact_at = 0.7\n\n[models.old]\nprovider = "openai"\n'
        'model = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
    )
    done = infai(tmp_path, "config", "model", "--provider", "ollama", "--model", "llama3")
    assert done.returncode == 0, done.stderr
    written = tomllib.loads(path.read_text())
    assert written["model"] == "ollama" and written["compact_at"] == 0.7
    assert set(written["models"]) == {"old", "ollama"}
    before = path.read_bytes()
    again = infai(tmp_path, "config", "model", "--provider", "ollama", "--model", "other")
    assert again.returncode == 2 and "already defines models.ollama" in again.stderr
    assert path.read_bytes() == before  # nothing changed


def test_without_a_terminal_what_is_missing_is_named_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    done = infai(tmp_path, "config", "model", "--provider", "openai")
    assert done.returncode == 2
    assert "--model is needed" in done.stderr and "Traceback" not in done.stderr
    assert not _config(tmp_path).exists()


def test_on_a_terminal_the_command_asks(tmp_path: Path) -> None:
    shown = on_terminal(
        tmp_path,
        ["config", "model"],
        [
            ("Provider", "openia"),  # a typo is asked again
            ("is not one of", "openai"),
            ("Model", "qwen-local"),
            ("Base URL", "http://127.0.0.1:8000/v1"),
        ],
    )
    path = _config(tmp_path)
    assert str(path) in shown.replace("\r\n", "")
    table = tomllib.loads(path.read_text())["models"]["openai"]
    assert table["base_url"] == "http://127.0.0.1:8000/v1" and table["model"] == "qwen-local"


def test_no_model_configured_says_how_to_set_one_up(tmp_path: Path) -> None:
    shown = on_terminal(tmp_path, ["run", "hi"], [])
    assert "no model is configured" in shown and "infai config model" in shown
    assert "offline model: you said 'hi'" in shown
    piped = infai(tmp_path, "run", "hi")  # a script is not told (stderr is no terminal)
    assert piped.returncode == 0 and "no model is configured" not in piped.stderr


def test_an_unusable_model_says_how_to_set_one_up(tmp_path: Path) -> None:
    done = infai(tmp_path, "run", "--model", "openai:gpt-4.1", "hi")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "needs an API key: set OPENAI_API_KEY" in done.stderr
    assert "infai config model" in done.stderr


def test_the_ui_with_an_unusable_model_says_how_to_set_one_up(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "x"\n[models.x]\nprovider = "openai"\nmodel = "m"\n')
    shown = on_terminal(tmp_path, [], [], code=2, INFAI_CONFIG=str(config))
    assert "needs an API key: set OPENAI_API_KEY" in shown and "infai config model" in shown
    assert "Traceback" not in shown


def test_an_untrusted_projects_file_may_not_hold_a_key(tmp_path: Path) -> None:
    """A key in a repository's `.infai/config.toml` would decide which key your
    prompts go out under: left out, as base_url and key_env are, with a warning."""
    project = tmp_path / "work" / ".infai"
    project.mkdir(parents=True)
    (project / "config.toml").write_text(
        '[models.theirs]\nprovider = "openai"\nmodel = "m"\napi_key = "sk-theirs"\n'
    )
    listed = infai(tmp_path, "models", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "models.theirs left out" in listed.stderr and "api_key" in listed.stderr
    assert all(json.loads(line)["name"] != "theirs" for line in listed.stdout.splitlines())
