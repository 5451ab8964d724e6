"""``Harness(models=...)``: every model built by the caller's factory, no subclass.

The server's ``create_app(model_factory=...)`` is built on it; here the harness
itself: its own model, a session's model of another name (in a directory with a
configuration of its own), a name checked for a new session, and a name the
factory refuses, which is refused as the factory says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infai.agent import Harness
from infai.llm import Model, ModelUnavailable, ScriptedModel
from infai.store import MessageRecord, Store


def test_every_model_comes_from_the_factory(tmp_path: Path) -> None:
    asked: list[str] = []

    def models(name: str) -> Model:
        asked.append(name)
        if name == "nope":
            raise ModelUnavailable("no model called nope here")
        return ScriptedModel([f"from {name}"], name=name)

    work = tmp_path / "work"
    other = tmp_path / "other"
    for directory in (work, other):
        directory.mkdir()
    (other / ".infai").mkdir()  # a directory with a configuration of its own
    (other / ".infai" / "config.toml").write_text("compact_at = 0.5\n")
    store = Store(tmp_path / "home")

    async def scenario() -> tuple[str, str, str]:
        harness = Harness(store, work, model_name="mine", models=models)
        try:
            sid = harness.new_session(working_dir=other)
            async with harness.session(sid, model_name="theirs") as session:
                assert session.model.name == "theirs"
                said = [e async for e in session.prompt("hi")]
            assert "outcome='done'" in repr(said[-1])
            with store.open_reader(sid) as reader:  # the reply came from the factory's model
                reply = reader.context().events[-1].record
                assert isinstance(reply, MessageRecord)
                assert (reply.content, reply.model) == ("from theirs", "theirs")
            checked = await harness.check_model("checked", other)
            with pytest.raises(ModelUnavailable, match="no model called nope here"):
                await harness.check_model("nope")
            return harness.model.name, checked, session.model.name
        finally:
            await harness.aclose()

    own, checked, theirs = asyncio.run(scenario())
    assert (own, checked, theirs) == ("mine", "checked", "theirs")
    assert asked == ["mine", "theirs", "checked", "nope"]
