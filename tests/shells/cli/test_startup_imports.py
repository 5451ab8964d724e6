"""What a command imports decides how fast it starts (issue 25): ``infai run`` with
the offline model, and the TUI up to its first frame, load none of the heavy
libraries that only some sessions use (the MCP SDK and the pydantic models
under it, the providers' SDKs, the server's stack, PostgreSQL's driver; for
``run``, the TUI's too; for the TUI's first frame, Markdown and syntax
highlighting).

Asserted on the modules a real process holds at exit, which is robust on a busy
machine where a timing would not be; ``benchmarks/startup_bench.py`` measures
the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: never needed to start: each is imported when a session uses what it serves
HEAVY = {
    "mcp": "the MCP SDK (only with an MCP server configured)",
    "mcp_types": "the MCP SDK's types",
    "pydantic": "pydantic (the MCP SDK's and the providers' models)",
    "openai": "the OpenAI SDK (only for an openai model)",
    "anthropic": "the Anthropic SDK (only for an anthropic model)",
    "httpx": "the providers' HTTP client",
    "httpx2": "the MCP SDK's HTTP client",
    "starlette": "the server's framework (infai serve)",
    "uvicorn": "the server (infai serve)",
    "sse_starlette": "the server's event streams",
    "psycopg": "PostgreSQL's driver (a postgresql:// store)",
    "psycopg_pool": "PostgreSQL's pool",
    "regex": "the grep tool's engine (only when a search runs)",
}
#: what the offline ``run`` does not need of the TUI either
TUI_ONLY = {"textual": "the TUI", "rich": "the TUI's rendering"}
#: what the TUI's first frame of a new session does not need
FIRST_FRAME_LATER = {
    "markdown_it": "Markdown (the first reply)",
    "pygments": "syntax highlighting (the first diff)",
}

#: runs the real command line in this process and writes the modules loaded at exit
PROBE = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["infai", *sys.argv[2:]]
from infai.shells.cli.main import entry
entry()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFAI_")}
    config = tmp_path / "config.toml"
    if not config.exists():  # a test may have written its own
        config.write_text("")
    return env | {
        "ANTHROPIC_API_KEY": "sk-test",
        "HOME": str(tmp_path),
        "INFAI_HOME": str(tmp_path / "store"),
        "INFAI_CONFIG": str(tmp_path / "config.toml"),
    }


def _loaded_by(tmp_path: Path, code: str, *args: str) -> set[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", code, str(out), *args],
        cwd=work,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(out.read_text())}


def _named(found: set[str], table: dict[str, str]) -> list[str]:
    return [f"{name}: {why}" for name, why in table.items() if name in found]


def test_an_offline_run_imports_no_heavy_library(tmp_path: Path) -> None:
    loaded = _loaded_by(tmp_path, PROBE, "run", "--model", "offline", "hi")
    assert "infai" in loaded and "click" in loaded  # the probe saw the real run
    assert _named(loaded, HEAVY | TUI_ONLY) == []


def test_the_tui_starts_without_the_sdks_markdown_or_highlighting(tmp_path: Path) -> None:
    """Everything ``infai`` (the TUI) imports before it draws: the command line and
    the app's modules (the first frame itself is timed by the benchmark in tmux)."""
    code = PROBE.replace("from infai.shells.cli.main import entry\nentry()", "")
    code += "from infai.shells.cli.main import main\nmain.get_command(None, 'tui')\n"
    code += "import infai.shells.tui\n"
    loaded = _loaded_by(tmp_path, code)
    assert "textual" in loaded
    assert _named(loaded, HEAVY | FIRST_FRAME_LATER) == []


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    """The root loads the one command a line runs: `session ls` loads neither the
    agent nor the importers nor the server's command."""
    out = tmp_path / "modules.json"
    _loaded_by(tmp_path, PROBE, "session", "ls")
    modules = set(json.loads(out.read_text()))
    unwanted = {"infai.agent", "infai.shells.cli.serve", "infai.shells.cli.imports"}
    assert modules & unwanted == set()


#: a configured model on an OpenAI-compatible server (as the quickstart sets up; the
#: port is loopback and unused: nothing is asked of it while the TUI starts) and an
#: Anthropic one (the key is read from the environment)
CONFIGURED = """\
model = "local"

[models.local]
provider = "openai"
model = "qwen2.5-coder:14b"
base_url = "http://127.0.0.1:9/v1"
context_window = 32768

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
"""


def test_building_the_tuis_harness_with_a_real_model_imports_no_sdk(tmp_path: Path) -> None:
    """What ``infai tui`` builds before the app starts (its harness, with a model on an
    OpenAI-compatible server or Anthropic's) imports neither SDK: each is imported on
    the model's first request, so the first frame does not wait for it."""
    code = PROBE.replace("from infai.shells.cli.main import entry\nentry()", "")
    code += (
        "import asyncio, os\n"
        "from pathlib import Path\n"
        "from infai.shells.cli.common import StoreSpec\n"
        "from infai.shells.cli.agent import harness\n"
        "store = StoreSpec().open()\n"
        "for name in ('local', 'claude'):\n"
        "    space = harness(store, Path.cwd(), name)\n"
        "    assert type(space.model).__name__ in ('OpenAIModel', 'AnthropicModel'), space.model\n"
        "    asyncio.run(space.aclose())\n"
        "store.close()\n"
    )
    (tmp_path / "config.toml").write_text(CONFIGURED)
    loaded = _loaded_by(tmp_path, code)
    assert "infai" in loaded
    assert _named(loaded, HEAVY) == []
