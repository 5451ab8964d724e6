"""The server's one table from the error tree to HTTP statuses, and what stays out of it.

Errors infai raises on purpose answer with the status the table gives; any
other exception (a ``ValueError`` from a bug) is not turned into "bad input".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_server import Running, harnesses

from infai.agent.compaction import CompactionFailed
from infai.errors import InfaiError
from infai.llm import Model, ScriptedModel
from infai.llm.providers import ModelUnavailable
from infai.shells.server import ApiError, Conflict, TokenError
from infai.shells.server.errors import STATUSES, message_of, status_of
from infai.store import (
    CorruptionError,
    EventNotFound,
    HeadConflict,
    InvalidInput,
    SessionBusy,
    SessionNotFound,
    StoreIOError,
    WriterLocked,
)
from infai.store.errors import BackendUnavailable


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def make(tmp_path: Path, work: Path) -> Iterator[Callable[..., Running]]:
    yield from harnesses(tmp_path / "home", work)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (SessionNotFound("s"), 404),
        (EventNotFound("e"), 404),
        (InvalidInput("bad id"), 400),
        (Conflict("busy"), 409),
        (WriterLocked("locked"), 409),
        (HeadConflict("moved"), 409),
        (SessionBusy("a turn runs elsewhere"), 409),
        (CompactionFailed("no summary"), 422),
        (ApiError(413, "too large"), 413),
        (BackendUnavailable("connection refused"), 503),
        (StoreIOError("fsync failed"), 500),
        (CorruptionError("f", 3, "bad checksum"), 500),
        (InfaiError("unnamed"), 500),
    ],
)
def test_each_error_of_the_tree_has_its_status(error: Exception, status: int) -> None:
    assert status_of(error) == status
    assert str(error) in message_of(error, status) or "too large" in message_of(error, status)


def test_errors_outside_the_tree_are_bugs_not_bad_input() -> None:
    for bug in (ValueError("x"), KeyError("x"), TypeError("x"), RuntimeError("x")):
        assert status_of(bug) is None


def test_the_server_errors_join_the_tree() -> None:
    for kind in (ApiError, Conflict, TokenError):
        assert issubclass(kind, InfaiError)
    assert not issubclass(TokenError, ValueError)


def test_no_entry_of_the_table_is_shadowed_by_an_earlier_one() -> None:
    kinds = [kind for kind, _ in STATUSES]
    for i, earlier in enumerate(kinds):
        for later in kinds[i + 1 :]:
            assert not issubclass(later, earlier), f"{later.__name__} after {earlier.__name__}"


def test_a_bug_while_checking_a_model_name_is_not_a_bad_model_name(
    make: Callable[..., Running],
) -> None:
    """A model factory that fails with a plain ValueError has a bug: the answer is a
    server error, not 422 'body.model'; a name that names no model is still 422."""

    def factory(name: str | None) -> Model:
        if name == "offline":  # the harness's default, built when the app is
            return ScriptedModel([])
        if name == "unknown":
            raise ModelUnavailable("unknown model 'unknown'")
        raise ValueError("a bug in the factory")

    h = make(factory)
    unknown = h.client.post("/v1/sessions", json={"model": "unknown"})
    assert unknown.status_code == 422 and "unknown model" in unknown.json()["error"]
    buggy = h.client.post("/v1/sessions", json={"model": "anything"})
    assert buggy.status_code == 500
    assert h.store.list_sessions() == []
