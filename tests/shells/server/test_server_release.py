"""Issue 13: the server holds a session's writer only while a turn runs.

Between turns a terminal's ``infai session append`` and ``infai run --session``
get the lock at once (``--lock-timeout 0``: no waiting), and the server's next
turn starts from what they appended: its model is sent those events, and its
stream publishes them in order. The commands run in this process through
click's runner: the file store's lock is an ``flock`` on a file opened anew by
each store, so it excludes them as it would another process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_server import Gated, Running, harnesses, settled_ids, store_ids

from infai.llm import ScriptedModel
from infai.shells.cli import main


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


def terminal(home: Path, *args: str) -> Result:
    """An ``infai`` command line that refuses to wait for any lock."""
    return CliRunner().invoke(main, ["--home", str(home), "--lock-timeout", "0", *args])


def test_after_a_turn_the_terminal_writes_at_once_and_the_next_turn_sees_it(
    make: Callable[..., Running], tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    model = ScriptedModel(["first answer", "second answer"])
    h = make(lambda name: model)
    sid = h.new_session()
    with h.watch(sid) as (stream, hello):
        h.prompt(sid, "from the server")
        first = stream.until("turn_ended")
        assert sid in h.sessions.open  # still open (watched), but its writer is released

        appended = terminal(
            home, "session", "append", sid, "--kind", "message", "--role", "user",
            "--content", "note from the terminal",
        )  # fmt: skip
        assert appended.exit_code == 0, (appended.stderr, appended.exception)
        monkeypatch.chdir(work)
        ran = terminal(home, "run", "--session", sid, "from run")
        assert ran.exit_code == 0, (ran.stderr, ran.exception)

        h.prompt(sid, "from the server again")
        second = stream.until("turn_ended")

    sent = [m.content for m in model.requests[-1].messages]
    assert "note from the terminal" in sent and "from run" in sent
    assert sent[-1] == "from the server again"
    # the stream published the terminal's events too, in the store's order, once each
    assert settled_ids([*hello, *first, *second]) == store_ids(h, sid)
    listed = h.client.get(f"/v1/sessions/{sid}/events").json()["events"]
    previews = [e["preview"] for e in listed if e["kind"] == "message"]  # `run` snapshots files
    assert previews[:4] == ["from the server", "first answer", "note from the terminal", "from run"]
    assert previews[-2:] == ["from the server again", "second answer"]


def test_during_a_turn_the_terminal_still_cannot_write(
    make: Callable[..., Running], tmp_path: Path
) -> None:
    """Released between turns, held during one: nothing writes beside the server."""
    gated = Gated("slow answer")
    h = make(lambda name: gated)
    sid = h.new_session()
    try:
        with h.watch(sid) as (stream, _):
            h.prompt(sid, "go")
            stream.until("delta")
            refused = terminal(
                tmp_path / "home", "session", "append", sid, "--kind", "message",
                "--role", "user", "--content", "too early",
            )  # fmt: skip
            assert refused.exit_code == 1
            assert "being written by another process" in refused.stderr
            gated.release()
            stream.until("turn_ended")
    finally:
        gated.release()
    assert "too early" not in [
        e["preview"] for e in h.client.get(f"/v1/sessions/{sid}/events").json()["events"]
    ]


def test_a_branch_picked_between_turns_is_kept_while_parked(make: Callable[..., Running]) -> None:
    h = make(lambda name: ScriptedModel(["one", "two"]))
    sid = h.new_session()
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "first")
        stream.until("turn_ended")
        first = store_ids(h, sid)[0]
        assert (
            h.client.post(f"/v1/sessions/{sid}/select", json={"event_id": first}).status_code == 200
        )
        assert h.detail(sid)["pending_parent"] == first
        h.prompt(sid, "instead")
        stream.until("turn_ended")
    events = h.client.get(f"/v1/sessions/{sid}/events", params={"all": "true"}).json()["events"]
    branch = next(e for e in events if e["preview"] == "instead")
    assert branch["parent_id"] == first


def test_the_session_list_gains_title_first_prompt_and_count(make: Callable[..., Running]) -> None:
    h = make(lambda name: ScriptedModel(["an answer"]))
    sid = h.new_session()
    named = h.new_session(name="named")
    with h.watch(sid) as (stream, _):
        h.prompt(sid, "what is here?")
        stream.until("turn_ended")
    listed = {s["id"]: s for s in h.client.get("/v1/sessions").json()["sessions"]}
    assert listed[sid]["title"] == listed[sid]["first_prompt"] == "what is here?"
    assert listed[sid]["events"] == 2 and listed[sid]["working_dir"] is not None
    assert (listed[named]["title"], listed[named]["events"]) == ("named", 0)
