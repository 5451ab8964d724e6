"""Plugins as a user meets them: a real package, pip-installed, found by entry points.

The packages in tests/support/plugins are built into wheels and installed with a
real ``pip install --no-deps --no-index --target``; ``infai`` then runs as a
subprocess with that directory on PYTHONPATH, as if the user had installed the
package into infai's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_wheel import pip_install

INFAI = [sys.executable, "-m", "infai"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    return pip_install("demo", root / "site", root / "wheel")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("broken")
    return pip_install("broken", root / "site", root / "wheel")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "config.toml").write_text("")
    return tmp_path / "work"


def infai(
    site: Path, work: Path, *args: str, code: int = 0, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(site),
        "INFAI_CONFIG": str(work.parent / "config.toml"),
        "INFAI_HOME": str(work.parent / "home"),
        **env,
    }
    done = subprocess.run(
        [*INFAI, *args], cwd=work, env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_infai_plugins_lists_the_package_s_entry_points(demo: Path, work: Path) -> None:
    rows = json.loads(infai(demo, work, "plugins", "--json").stdout)
    assert [(r["group"], r["name"], r["status"]) for r in rows] == [
        ("infai.tools", "shout", "ok"),
        ("infai.providers", "demo", "ok"),
        ("infai.context", "demo-note", "ok"),
        ("infai.hooks", "demo_guard", "ok"),
    ]
    assert {(r["package"], r["version"]) for r in rows} == {("infai-demo-plugin", "1.2.0")}
    text = infai(demo, work, "plugins").stdout.splitlines()
    assert text[0].split() == ["infai.tools", "shout", "infai-demo-plugin", "1.2.0", "ok"]


@pytest.mark.slow  # several infai processes
def test_a_session_uses_the_plugin_s_tool_behind_the_policy(demo: Path, work: Path) -> None:
    (work / "note.txt").write_text("quiet words\n")
    call = {"id": "c1", "name": "shout", "arguments": {"path": "note.txt", "times": 2}}
    outside = {"id": "c2", "name": "shout", "arguments": {"path": "../config.toml"}}
    script = work.parent / "script.json"
    script.write_text(json.dumps([{"tool_calls": [call, outside]}, "done"]))
    done = infai(demo, work, "run", "--json", "--model", f"scripted:{script}", "shout it")
    results = [
        json.loads(line)["event"]["record"]
        for line in done.stdout.splitlines()
        if '"tool_result"' in line and json.loads(line).get("type") == "saved"
    ]
    first = results[0]
    assert (first["name"], first["content"], first.get("is_error", False)) == (
        "shout",
        "QUIET WORDS QUIET WORDS",
        False,
    )
    # a read outside the working directory asks, as read_file's does: headless, denied
    assert results[1]["is_error"] and "outside the working directory" in results[1]["content"]
    # a rule may name the plugin's tool before the plugin is imported
    (work.parent / "config.toml").write_text('[permissions]\ndeny = ["shout note.txt"]\n')
    again = infai(demo, work, "run", "--json", "--model", f"scripted:{script}", "shout it")
    assert "permission denied by rule 'deny shout note.txt'" in again.stdout


@pytest.mark.slow  # several infai processes
def test_the_plugin_s_provider_is_selectable_by_name(demo: Path, work: Path) -> None:
    done = infai(demo, work, "run", "--model", "demo:tiny", "hello there")
    assert done.stdout.startswith("demo model tiny heard: hello there")
    (work.parent / "config.toml").write_text(
        'model = "mine"\n[models.mine]\nprovider = "demo"\nmodel = "big"\n'
    )
    assert infai(demo, work, "run", "hi").stdout.startswith("demo model big heard: hi")
    models = infai(demo, work, "models")
    assert "mine" in models.stdout and "demo" in models.stdout
    assert "window 32000" in models.stdout
    assert "PROVIDER:MODEL names any model of anthropic, deepseek, demo, gemini" in models.stderr


@pytest.mark.slow  # several infai processes
def test_a_session_uses_the_plugin_s_context_rule(demo: Path, work: Path) -> None:
    """The rule from the package's ``infai.context`` entry point decides what the
    model (the package's own provider, which repeats what it heard) is sent; the
    session keeps the prompt whole, and --explain names the rule."""
    done = infai(demo, work, "run", "--model", "demo:tiny", "PRIVATE: the code is 1234")
    assert done.stdout.startswith("demo model tiny heard: [a private note, left out by demo-note]")
    assert "1234" not in done.stdout
    sid = done.stderr.strip().splitlines()[-1].removeprefix("session ")
    log = infai(demo, work, "session", "log", sid).stdout
    assert "PRIVATE: the code is 1234" in log  # stored as typed
    explained = infai(demo, work, "session", "context", sid, "--explain").stdout
    assert "demo-note" in explained and "marked PRIVATE" in explained


@pytest.mark.slow  # several infai processes
def test_plugins_are_imported_only_when_used(demo: Path, work: Path) -> None:
    mark = work.parent / "imported"
    infai(demo, work, "models", DEMO_PLUGIN_IMPORTED=str(mark))
    infai(demo, work, "session", "ls", DEMO_PLUGIN_IMPORTED=str(mark))
    assert not mark.exists()
    infai(demo, work, "run", "--model", "demo:x", "hi", DEMO_PLUGIN_IMPORTED=str(mark))
    assert mark.read_text().count("imported by") == 1


@pytest.mark.slow  # several infai processes
def test_a_broken_plugin_is_reported_and_skipped_in_one_line(broken: Path, work: Path) -> None:
    rows = json.loads(infai(broken, work, "plugins", "--json").stdout)
    errors = {r["name"]: r["error"] for r in rows}
    assert [r["status"] for r in rows] == ["error", "error", "error"]
    assert errors["explodes"] == ("ModuleNotFoundError: No module named 'infai_missing_dependency'")
    assert (
        "is a function, not a tool (decorate a function with infai.tools.tool)"
        in (errors["not_a_tool"])
    )
    assert "is a dict, not a ProviderInfo" in errors["wrongtype"]
    infai(broken, work, "plugins", "--check", code=1)
    done = infai(broken, work, "run", "hi")
    assert done.stdout.startswith("offline model: you said 'hi'")
    skipped = [line for line in done.stderr.splitlines() if "skipped" in line]
    assert skipped == [
        "infai: plugin tool 'explodes' (infai-broken-plugin 0.0.1) skipped: "
        "ModuleNotFoundError: No module named 'infai_missing_dependency'",
        "infai: plugin tool 'not_a_tool' (infai-broken-plugin 0.0.1) skipped: "
        "infai_broken_plugin:not_a_tool is a function, not a tool "
        "(decorate a function with infai.tools.tool)",
    ]
    failed = infai(broken, work, "run", "--model", "wrongtype:m", "hi", code=2)
    said = failed.stderr.strip().splitlines()
    assert said[0].endswith(
        "plugin provider 'wrongtype' (infai-broken-plugin 0.0.1) skipped: "
        "infai_broken_plugin:wrongtype is a dict, not a ProviderInfo"
    )
    assert said[-1].endswith("to set up a model: infai config model (`infai models` lists them)")
    assert "Traceback" not in failed.stderr


@pytest.mark.slow  # an infai process
def test_a_plugin_s_hook_handler_runs_as_a_configured_hook(demo: Path, work: Path) -> None:
    (work / "secret.txt").write_text("key\n")
    (work / "note.txt").write_text("fine\n")
    calls = [
        {"id": f"c{n}", "name": "shout", "arguments": {"path": path}}
        for n, path in enumerate(("secret.txt", "note.txt"))
    ]
    script = work.parent / "script.json"
    script.write_text(json.dumps([{"tool_calls": calls}, "done"]))
    (work.parent / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "shout"\nhandler = "demo_guard"\n'
        '[[hooks.PostToolUse]]\nhandler = "no_such_handler"\n'
    )
    done = infai(demo, work, "run", "--json", "--model", f"scripted:{script}", "shout")
    saved = [json.loads(line) for line in done.stdout.splitlines()]
    records = [s["event"]["record"] for s in saved if s.get("type") == "saved"]
    results = [r for r in records if r.get("name") == "shout" and "content" in r]
    blocked = "blocked by a PreToolUse hook: the demo guard keeps secrets quiet"
    assert [r["content"] for r in results] == [blocked, "FINE"]
    hooks = [r for r in records if r.get("command", "").startswith("handler:")]
    assert [(h["command"], h.get("decision")) for h in hooks][:2] == [
        ("handler:demo_guard", "block"),
        ("handler:demo_guard", None),
    ]
    assert "no hook handler plugin named 'no_such_handler' (demo_guard)" in done.stdout
