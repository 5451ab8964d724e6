"""``infai search``: ranked hits with session, event, branch marker, time and a
highlighted snippet; filters; JSON; rebuild; bad queries; text printed as text."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from infai.shells.cli import main
from infai.store import MessageRecord, Store, ToolResultRecord


def run(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), "search", *args])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def fixture(home: Path) -> dict[str, str]:
    store = Store(home)
    one = store.create_session(name="alpha", working_dir="/proj/a").id
    two = store.create_session(name="beta", working_dir="/proj/b").id
    with store.open_writer(one) as w:
        root = w.append(MessageRecord(content="the wombat burrows"), "user")
        gone = w.append(MessageRecord(content="a wombat on a branch"), "assistant")
        w.select(root.id)
        w.append(MessageRecord(content="moving on"), "user")
    with store.open_writer(two) as w:
        tool = w.append(
            ToolResultRecord(call_id="c", name="ls", content="wombat\x1b[31m [bold]x[/bold]"),
            "tool",
        )
    store.close()
    return {"one": one, "two": two, "root": root.id, "gone": gone.id, "tool": tool.id}


def test_hits_show_session_event_branch_time_and_snippet(tmp_path: Path) -> None:
    ids = fixture(tmp_path / "home")
    out = run(tmp_path / "home", "wombat").stdout
    lines = out.splitlines()
    assert len(lines) == 6  # two lines per hit
    by_event = {line.split()[2]: line for line in lines[0::2]}
    assert set(by_event) == {ids["root"], ids["gone"], ids["tool"]}
    assert " branch " in by_event[ids["gone"]] and " * " in by_event[ids["root"]]
    assert "alpha" in by_event[ids["root"]] and "message/user" in by_event[ids["root"]]
    assert "\x1b" not in out  # not a raw escape from the session's text
    assert "[bold]x[/bold]" in out  # markup in the text is printed, not applied


def test_filters_limit_and_json(tmp_path: Path) -> None:
    ids = fixture(tmp_path / "home")
    answer = json.loads(run(tmp_path / "home", "wombat", "--json").stdout)
    assert answer["query"] == "wombat" and answer["window"] is None  # every match looked at
    hits = answer["hits"]
    assert {h["event_id"] for h in hits} == {ids["root"], ids["gone"], ids["tool"]}
    gone = next(h for h in hits if h["event_id"] == ids["gone"])
    assert gone["on_head_path"] is False and gone["session_name"] == "alpha"
    start, end = gone["marks"][0]
    assert gone["snippet"][start:end] == "wombat"
    only = json.loads(run(tmp_path / "home", "wombat", "--json", "--session", ids["two"]).stdout)[
        "hits"
    ]
    assert [h["event_id"] for h in only] == [ids["tool"]]
    in_dir = json.loads(run(tmp_path / "home", "wombat", "--json", "--dir", "/proj/a").stdout)[
        "hits"
    ]
    assert {h["session_id"] for h in in_dir} == {ids["one"]}
    kind = json.loads(run(tmp_path / "home", "wombat", "--json", "--kind", "tool_result").stdout)[
        "hits"
    ]
    assert [h["event_id"] for h in kind] == [ids["tool"]]
    assert (
        len(json.loads(run(tmp_path / "home", "wombat", "--json", "--limit", "1").stdout)["hits"])
        == 1
    )


def test_rebuild_and_no_matches(tmp_path: Path) -> None:
    fixture(tmp_path / "home")
    result = run(tmp_path / "home", "--rebuild", "platypus")
    assert "search index rebuilt" in result.stderr and "no matches" in result.stderr
    assert result.stdout == ""


def test_bad_input_exits_2_naming_it(tmp_path: Path) -> None:
    fixture(tmp_path / "home")
    result = run(tmp_path / "home", '"open', code=2)
    assert "search query '\"open'" in result.stderr and "never closed" in result.stderr
    result = run(tmp_path / "home", "x", "--session", "nope", code=2)
    assert "not a UUID" in result.stderr


def test_a_damaged_index_is_named_on_stderr(tmp_path: Path) -> None:
    ids = fixture(tmp_path / "home")
    run(tmp_path / "home", "wombat")
    index = tmp_path / "home" / "index" / "search.sqlite"
    for extra in index.parent.glob("search.sqlite-*"):
        extra.unlink()
    index.write_bytes(b"damaged" * 1000)
    result = run(tmp_path / "home", "wombat", "--json")
    assert "repaired" in result.stderr and "search.sqlite" in result.stderr
    assert len(json.loads(result.stdout)["hits"]) == 3 and ids
