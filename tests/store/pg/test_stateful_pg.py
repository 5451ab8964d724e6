"""The session store's model-based test (tests/test_stateful.py) on PostgreSQL.

Same random appends, branches, selections, compactions, blobs and reopenings,
checked after every step against the in-memory model, through the PostgreSQL
backend; only what is about files (chunk rotation, torn tails) is left out.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import initialize, rule, run_state_machine_as_test
from test_stateful import BLOB_THRESHOLD, SessionMachine

from infai.store import StoreOptions
from infai.store.pg import PgStore
from infai.store.records import encode_record


class PgSessionMachine(SessionMachine):
    URL = ""

    @initialize()
    def open_session(self) -> None:
        self.options = StoreOptions(blob_threshold=BLOB_THRESHOLD)
        self.store: Any = PgStore(self.URL, self.options, pool_size=2)
        self.retired: list[PgStore] = []
        self.sid = self.s.create_session(name="stateful").id
        self.writer = self.s.open_writer(self.sid)

    @rule()
    def reopen(self) -> None:
        self.w.close()
        self.writer = None
        self.retired.append(self.store)  # a snapshot reader may still use its pool
        self.store = PgStore(self.URL, self.options, pool_size=2)
        self.writer = self.s.open_writer(self.sid)
        self.pending = None
        self.reopens += 1

    def crash_leftovers_then_reopen(self, *args: Any) -> None:
        """Not a rule here: a database has no chunk files to tear."""

    def teardown(self) -> None:
        try:
            if self.snapshot is not None:
                self.snapshot[0].close()
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            if self.store is not None and self.sid:
                report = self.s.fsck(self.sid)
                assert report.problems == []
                assert report.events == len(self.order)
                assert report.blobs == len(
                    {encode_record(e.record) for e in self.events.values() if e.blob}
                )
        finally:
            for store in [*self.retired, self.store]:
                if store is not None:
                    store.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("examples", "steps"),
    [(6, 20), pytest.param(25, 30, marks=pytest.mark.slow)],
    ids=["short", "long"],
)
def test_session_machine_on_postgresql(pg_url: str, examples: int, steps: int) -> None:
    """A short run in ``make test``; the long one is ``make crash``'s."""

    class Machine(PgSessionMachine):
        URL = pg_url

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
