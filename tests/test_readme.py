"""The README's Python example runs as written (against a temporary home)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    code = blocks[0].replace('Path("~/.config/infai/harness").expanduser()', repr(str(tmp_path)))
    scope: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), scope)
    ctx = scope["ctx"]
    assert scope["result"].content == "x" * 100_000  # type: ignore[attr-defined]
    assert scope["lazy"].record is None  # type: ignore[attr-defined]
    assert [e.kind for e in ctx.events] == ["compaction"]  # type: ignore[attr-defined]
    assert scope["b"].branch_from == scope["a"].id  # type: ignore[attr-defined]


def test_readme_config_example_is_valid(tmp_path: Path) -> None:
    from infai.agent.config import load_config

    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no configuration example"
    user = tmp_path / "config.toml"
    for block in blocks:  # every example loads as a user's config file
        user.write_text(block)
        config = load_config(tmp_path, user)
        if "default_model" in block:  # the main example names a model it defines
            assert config.default_model in config.models
