"""A search answered from a cut window says so: ``SearchResults.window`` in the store,
``"window"`` in the CLI's ``--json`` and the server's body, one line on stderr for
people; a search that looked at every match says nothing (``window`` null)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from infai.llm.registry import build_model
from infai.shells.cli import main
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.store import MessageRecord, SearchResults, Store
from infai.store.file import search_rank

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_rank, "RANK_WINDOW", 4)


def seed(home: Path) -> list[str]:
    """Ten events with ``heron`` (more than the window of 4), one with ``egret``."""
    store = Store(home)
    sid = store.create_session().id
    with store.open_writer(sid) as w:
        ids = [w.append(MessageRecord(content=f"heron number {i}"), "user").id for i in range(10)]
        w.append(MessageRecord(content="an egret"), "user")
    store.close()
    return ids


def test_the_store_says_when_the_window_was_cut(tmp_path: Path, small_window: None) -> None:
    ids = seed(tmp_path / "home")
    store = Store(tmp_path / "home")
    hits = store.search("heron", limit=3)
    assert isinstance(hits, SearchResults) and hits.window == 4
    assert [h.event_id for h in hits] == ids[-1:-4:-1]  # the newest, newest first
    note = hits.window_note()
    assert note is not None and "more than 4 events match" in note
    assert hits.to_obj("heron")["window"] == 4
    rare = store.search("egret")
    assert rare.window is None and rare.window_note() is None and len(rare) == 1
    assert store.search("heron", limit=50).window is None  # grew until every match was seen
    prefix = store.search("her*", limit=3)  # a prefix is windowed like a word
    assert prefix.window == 4 and [h.event_id for h in prefix] == ids[-1:-4:-1]
    both = store.search("heron -egret number", limit=3)  # an exclusion, several words
    assert both.window == 4 and [h.event_id for h in both] == ids[-1:-4:-1]


def test_the_cli_says_so_in_json_and_in_one_line(tmp_path: Path, small_window: None) -> None:
    seed(tmp_path / "home")
    home = ["--home", str(tmp_path / "home"), "search"]
    cut = CliRunner().invoke(main, [*home, "heron", "--json", "--limit", "2"])
    assert cut.exit_code == 0, cut.output
    answer = json.loads(cut.stdout)
    assert answer["window"] == 4 and answer["query"] == "heron" and len(answer["hits"]) == 2
    human = CliRunner().invoke(main, [*home, "heron", "--limit", "2"])
    assert [line for line in human.stderr.splitlines() if "more than 4" in line] != []
    whole = CliRunner().invoke(main, [*home, "egret"])
    assert "more than" not in whole.stderr and "egret" in whole.stdout
    assert json.loads(CliRunner().invoke(main, [*home, "egret", "--json"]).stdout)["window"] is None


def test_the_server_says_so_in_its_body(tmp_path: Path, small_window: None) -> None:
    seed(tmp_path / "home")
    store = Store(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    app = create_app(
        store, token=TOKEN, model_factory=lambda n: build_model(n or "offline"), working_dir=work
    )
    server = ServerThread(app).start()
    try:
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ) as client:
            cut = client.get("/v1/search", params={"q": "heron", "limit": 2}).json()
            assert cut["window"] == 4 and len(cut["hits"]) == 2
            whole = client.get("/v1/search", params={"q": "egret"}).json()
            assert whole["window"] is None and len(whole["hits"]) == 1
    finally:
        server.stop()
