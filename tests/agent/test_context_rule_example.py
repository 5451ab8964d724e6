"""``examples/custom_context_rule.py`` run as a user runs it: a subprocess against
a fake OpenAI-compatible server that records every request. Its rule changes
what the model receives (a long tool output becomes one line) and nothing else;
the session keeps the whole output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakeapi import FakeOpenAI, Reply
from infai.store import Store, ToolResultRecord

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_context_rule.py"


def _run(tmp_path: Path, max_lines: int) -> tuple[list[dict[str, Any]], str, Path]:
    """Run the example once; the messages of the model's second request, its
    output, and the store."""
    work, home = tmp_path / f"work{max_lines}", tmp_path / f"home{max_lines}"
    work.mkdir()
    (work / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    replies = [
        Reply(text="reading", tool_calls=[("c1", "read_file", {"path": "long.txt"})]),
        Reply(text="it has 100 lines"),
    ]
    with FakeOpenAI(replies) as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            'model = "local"\n[models.local]\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{fake.base_url}"\n'
        )
        env = {**os.environ, "INFAI_CONFIG": str(config), "OPENAI_API_KEY": "sk-test"}
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--home", str(home), "--max-lines", str(max_lines),
             "read long.txt"],
            cwd=work, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(fake.requests) == 2
    return fake.requests[1].body["messages"], done.stdout, home


def _tool_message(messages: list[dict[str, Any]]) -> str:
    (tool,) = [m for m in messages if m["role"] == "tool"]
    content = tool["content"]
    assert isinstance(content, str)
    return content


def test_the_rule_shortens_a_long_output_the_model_receives(tmp_path: Path) -> None:
    messages, out, home = _run(tmp_path, max_lines=20)
    sent = _tool_message(messages)
    assert sent.startswith("[tool output of ") and "over 20 lines]" in sent
    assert "line 57" not in sent
    assert "it has 100 lines" in out
    assert "tool_result  shortened drop-long-outputs:" in out  # its explanation
    store = Store(home)
    [info] = store.list_sessions()
    with store.open_reader(info.id) as view:  # the session keeps the whole output
        [result] = [e.record for e in view.context().events if e.kind == "tool_result"]
    assert isinstance(result, ToolResultRecord) and "line 57" in result.content
