"""docs/plugins.md says what the code does: its provider table is the registry's,
and its Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

from infai.llm.provider_registry import registered, unregister_provider
from infai.tools import FunctionTool
from infai.tools.effects import effects_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_the_provider_table_is_the_registry() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| `(\w+)`.*? \| (\d+) \|$", DOC.read_text(), re.M)
    assert rows, "no provider table"
    providers = registered()
    assert {name for name, *_ in rows} == set(providers)
    for name, endpoint, key, window in rows:
        info = providers[name]
        assert (info.key_env, info.context_window) == (key, int(window)), name
        expected = f"`{info.base_url}`" if info.base_url else f"`${info.base_env}`, else"
        assert endpoint.startswith(expected), name


def test_the_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    scope: dict[str, object] = {}
    exec(compile(blocks[0], str(DOC), "exec"), scope)
    word_count = scope["word_count"]
    assert isinstance(word_count, FunctionTool)
    assert word_count.spec.parameters["required"] == ["path"]
    assert effects_of("word_count") == word_count.effects
    try:
        exec(compile(blocks[1], str(DOC), "exec"), {})
        assert registered()["together"].base_url == "https://api.together.xyz/v1"
        assert registered()["mine"].build == "my_package.models:MyModel"
    finally:
        unregister_provider("together")
        unregister_provider("mine")
