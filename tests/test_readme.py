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


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_quickstart_names_real_commands_and_the_install_target() -> None:
    """Each `infai ...` line of the Quickstart is a command the command line has,
    and `make install` is a target of the Makefile."""
    import click

    from infai.shells.cli.main import main

    quick = _section(README.read_text(), "Quickstart")
    assert "make install" in quick and "\ninstall:" in (README.parent / "Makefile").read_text()
    lines = [
        line.split("#")[0].split()
        for block in re.findall(r"```sh\n(.*?)```", quick, re.S)
        for line in block.splitlines()
        if line.startswith("infai ")
    ]
    assert len(lines) >= 5
    for words in lines:
        command: click.Command | None = main
        for word in words[1:3]:
            if not isinstance(command, click.Group) or word.startswith(("-", '"')):
                break
            if word.isupper():  # a placeholder (SESSION, EVENT)
                break
            command = command.get_command(click.Context(command), word)
            assert command is not None, f"README Quickstart: no command {' '.join(words)}"


def test_the_benchmark_summary_quotes_the_printed_runs() -> None:
    """The README's one-line start-up figures are those docs/benchmarks.md shows
    as the script printed them, and every script named exists."""
    docs = (README.parent / "docs" / "benchmarks.md").read_text()
    summary = _section(README.read_text(), "Benchmark")
    row = r"^(?:infai run --model offline hi|infai \(TUI\), first frame) +"
    printed = re.findall(row + r"\| +([\d.]+) .*\| +([\d.]+)$", docs, re.M)
    # first a run after and one before; then the configured model's two runs
    assert len(printed) == 8, "docs/benchmarks.md shows a run after and one before, twice"
    after, before = printed[:2], printed[2:4]
    for median, cpu in after:  # the run after: its medians (the targets) and CPU seconds
        assert f"{median} s" in summary and cpu in summary, f"README lacks {median} / {cpu}"
    for _, cpu in before:
        assert cpu in summary, f"README's start-up summary lacks {cpu}"
    # with a model and an MCP server configured: the run before, then the run after
    mcp_row = r"^TUI \+ model \+ MCP, frame +\| +([\d.]+) .*\| +([\d.]+)$"
    mcp = re.findall(mcp_row, docs, re.M)
    assert len(mcp) == 2, "docs/benchmarks.md shows the MCP case before and after"
    for median, cpu in mcp:
        assert f"{median} s" in summary and cpu in summary, f"README lacks {median} / {cpu}"
    for name in set(re.findall(r"`(\w+_bench\.py)`", summary + docs)):
        assert (README.parent / "benchmarks" / name).is_file(), name
