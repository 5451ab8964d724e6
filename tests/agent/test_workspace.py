"""The one composition root: sessions opened with their own approver and model,
models checked without leaking, and a session closing the model it owns."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from infai.agent import Harness
from infai.agent.config import Config
from infai.llm import Model, ModelUnavailable, OfflineModel
from infai.llm.openai_provider import OpenAIModel
from infai.llm.providers import ModelSpec
from infai.store import Store
from infai.tools import Ask, Policy, Reply


class Closable(OfflineModel):
    """The offline model, with connections to close (as an SDK model has)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.label = name
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class Space(Harness):
    built: list[Closable]

    def build_model(self, name: str) -> Model:
        if name == "missing":
            raise ModelUnavailable("unknown model 'missing'")
        model = Closable(name)
        self.__dict__.setdefault("built", []).append(model)
        return model


def space(tmp_path: Path) -> Space:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Space(Store(tmp_path / "home"), work, config=Config())


def test_checking_a_model_closes_what_it_built(tmp_path: Path) -> None:
    ws = space(tmp_path)
    assert asyncio.run(ws.check_model("other")) == "offline"
    assert [m.closed for m in ws.built] == [0, 1]  # the harness's own stays open
    with pytest.raises(ModelUnavailable):
        asyncio.run(ws.check_model("missing"))


def test_a_session_with_its_own_model_and_approver_closes_that_model(tmp_path: Path) -> None:
    ws = space(tmp_path)
    asked: list[str] = []

    async def approve(ask: Ask) -> Reply:
        asked.append(ask.tool)
        return "deny"

    async def scenario() -> None:
        shared = await asyncio.to_thread(ws.open)
        own = await asyncio.to_thread(ws.open, approver=approve, model_name="other")
        assert own.model is not ws.model and shared.model is ws.model
        assert isinstance(own.permissions, Policy) and own.permissions.approver is approve
        assert isinstance(shared.permissions, Policy) and shared.permissions.approver is None
        assert own.toolbox.get("task") is not None  # subagents, as in every shell
        await own.aclose()
        await shared.aclose()
        await shared.aclose()  # twice is harmless

    asyncio.run(scenario())
    workspace_model, own_model = ws.built
    assert (own_model.closed, workspace_model.closed) == (1, 0)  # the shared one is not theirs
    asyncio.run(ws.aclose())
    assert workspace_model.closed == 1


def test_new_session_here_or_elsewhere_and_latest(tmp_path: Path) -> None:
    ws = space(tmp_path)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    first = ws.new_session("first")
    other = ws.new_session(working_dir=elsewhere, model_name="named")
    info = ws.store.info(other)
    assert (info.working_dir, info.model) == (str(elsewhere.resolve()), "named")
    latest = ws.latest_here()
    assert latest is not None and latest.id == first


def test_an_sdk_model_closes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[Any] = []

    class Client:
        async def close(self) -> None:
            closed.append(1)

    model = OpenAIModel(ModelSpec(provider="openai", model="m", name="m"), client=Client())  # type: ignore[arg-type]

    async def twice() -> None:
        await model.aclose()
        await model.aclose()

    asyncio.run(twice())
    assert closed == [1]
