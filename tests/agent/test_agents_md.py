"""AGENTS.md comes with the repository and is trusted no further than the file
tools would trust it: read only if it resolves inside the working directory to a
regular file, and at most 64 KiB of it.

Judged by effect: the prompt is built at once (no hang on a FIFO, no endless
read of /dev/zero), and a file outside never reaches it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from infai.agent import system_prompt
from infai.agent.prompt import MAX_INSTRUCTIONS


def prompt_within(seconds: float, work: Path) -> str:
    """The system prompt, built in a daemon thread so a hang fails the test."""
    built: list[str] = []
    worker = threading.Thread(target=lambda: built.append(system_prompt(work)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert built, f"building the system prompt took over {seconds}s"
    return built[0]


def test_a_regular_agents_md_inside_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Run the tests with make test.\n")
    assert "Project instructions from AGENTS.md:\nRun the tests" in prompt_within(2, tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "docs" / "agents.md").write_text("Linked inside.\n")
    (tmp_path / "AGENTS.md").symlink_to(tmp_path / "docs" / "agents.md")
    assert "Linked inside." in prompt_within(2, tmp_path)


def test_agents_md_linked_outside_is_not_read(tmp_path: Path) -> None:
    """The old prompt followed the link and showed the model the file outside."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("sk-live-outside\n")
    (work / "AGENTS.md").symlink_to(tmp_path / "secret.txt")
    prompt = prompt_within(2, work)
    assert "sk-live-outside" not in prompt and "Project instructions" not in prompt


def test_agents_md_as_a_fifo_or_dev_zero_does_not_hang(tmp_path: Path) -> None:
    """The old prompt waited for a writer on the FIFO for ever, and read /dev/zero
    whole (without end, filling memory) before cutting it."""
    os.mkfifo(tmp_path / "AGENTS.md")
    assert "Project instructions" not in prompt_within(1, tmp_path)
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").symlink_to("/dev/zero")
    assert "Project instructions" not in prompt_within(1, tmp_path)
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").mkdir()
    assert "Project instructions" not in prompt_within(1, tmp_path)


def test_a_huge_agents_md_is_cut_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule\n" * (1 << 20))  # 5 MiB
    prompt = prompt_within(2, tmp_path)
    assert "[... AGENTS.md cut at 64 KiB]" in prompt
    assert len(prompt) < MAX_INSTRUCTIONS + 1000


def test_claude_md_is_read_where_agents_md_is_absent(tmp_path: Path) -> None:
    """The old prompt read AGENTS.md only: a repository set up for Claude Code
    gave the model no instructions."""
    from infai.agent.prompt import build_system_prompt

    (tmp_path / "CLAUDE.md").write_text("Use uv, never pip.\n")
    built = build_system_prompt(tmp_path)
    assert built.source == "CLAUDE.md"
    assert "Project instructions from CLAUDE.md:\nUse uv, never pip." in built.text
    (tmp_path / "AGENTS.md").write_text("Run make test.\n")
    built = build_system_prompt(tmp_path)  # AGENTS.md there: it alone is read
    assert built.source == "AGENTS.md" and "Use uv" not in built.text
    assert "Run make test." in built.text


def test_infai_run_says_which_instruction_file_the_model_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from fakeapi import FakeOpenAI, Reply
    from infai.shells.cli import main

    work = tmp_path / "work"
    work.mkdir()
    (work / "CLAUDE.md").write_text("Answer in French.\n")
    monkeypatch.chdir(work)
    with FakeOpenAI([Reply(text="bonjour")]) as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\n'
        )
        env = {"INFAI_CONFIG": str(config), "OPENAI_API_KEY": "sk-test"}
        result = CliRunner(env=env).invoke(main, ["--home", str(tmp_path / "home"), "run", "hi"])
    assert result.exit_code == 0, (result.output, result.stderr)
    assert "project instructions from CLAUDE.md" in result.stderr
    system = fake.requests[0].body["messages"][0]
    assert system["role"] == "system" and "Answer in French." in system["content"]
