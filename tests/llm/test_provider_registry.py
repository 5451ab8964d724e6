"""Providers by name: the OpenAI-compatible profiles are registrations, a new provider
is one call, configuration names any registered provider, and an unknown one is an
error listing them. Profiles are driven through the real OpenAI SDK against a fake
server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakeapi import FakeOpenAI, Reply
from infai.agent.config import ConfigError, load_config
from infai.llm import FunctionModel, Message, Model, Request, TextDelta, close_model
from infai.llm.provider_registry import (
    ModelUnavailable,
    ProviderInfo,
    openai_compatible,
    provider_named,
    register_provider,
    registered,
    unregister_provider,
)
from infai.llm.providers import ModelSpec
from infai.llm.registry import build_model, spec_for

HELLO = Request(messages=(Message(role="user", content="hi"),))


def text_of(model: Model) -> str:
    async def go() -> str:
        try:
            return "".join([e.text async for e in model.stream(HELLO) if isinstance(e, TextDelta)])
        finally:
            await close_model(model)

    return asyncio.run(go())


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "OPENROUTER_API_KEY", "OLLAMA_API_KEY", "GROQ_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def scratch() -> Iterator[list[str]]:
    """Names of providers a test registers, forgotten afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_provider(name)


def test_the_profiles_are_registered_with_their_endpoints_keys_and_windows(
    clean_env: None,
) -> None:
    names = set(registered())
    assert {"openai", "anthropic", "openrouter", "ollama", "groq", "deepseek", "gemini"} <= names
    ollama = spec_for("ollama:qwen2.5-coder:14b")
    assert ollama is not None and ollama.model == "qwen2.5-coder:14b"
    assert ollama.context_window == 4_096
    assert ollama.resolved_base_url() == "http://localhost:11434/v1"
    assert ollama.require_key() == "not-needed"  # a local server needs no key
    gemini = spec_for("gemini:gemini-2.5-pro")
    assert gemini is not None and gemini.context_window == 1_048_576
    assert "generativelanguage.googleapis.com" in (gemini.resolved_base_url() or "")
    with pytest.raises(ModelUnavailable, match="set OPENROUTER_API_KEY"):
        build_model("openrouter:anthropic/claude-sonnet-4")


def test_a_profile_talks_through_the_openai_sdk_and_errors_carry_its_name(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, scratch: list[str]
) -> None:
    monkeypatch.setenv("LOCALAI_KEY", "k")
    with FakeOpenAI([Reply(text="hello from the profile"), Reply(status=401)]) as fake:
        scratch.append("localai")
        register_provider(openai_compatible("localai", fake.base_url, "LOCALAI_KEY", 8_192))
        model = build_model("localai:tiny")
        assert model.context_window == 8_192
        assert text_of(model) == "hello from the profile"
        failed = build_model("localai:tiny")

        async def error() -> str:
            events = [e async for e in failed.stream(HELLO)]
            await close_model(failed)
            return str(getattr(events[-1], "message", ""))

        assert asyncio.run(error()).startswith("localai: the API key was refused")
    assert fake.requests[0].headers["authorization"] == "Bearer k"
    assert fake.requests[0].body["model"] == "tiny"


def test_configuration_names_a_profile_and_its_defaults_apply(
    tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "config.toml"
    monkeypatch.setenv("INFAI_CONFIG", str(config_file))
    with FakeOpenAI([Reply(text="ollama says hi")]) as fake:
        config_file.write_text(
            f'[models.local]\nprovider = "ollama"\nmodel = "qwen"\nbase_url = "{fake.base_url}"\n'
            '[models.router]\nprovider = "openrouter"\nmodel = "x/y"\n'
        )
        config = load_config(tmp_path)
        assert config.models["local"].context_window == 4_096
        assert config.models["router"].resolved_base_url() == "https://openrouter.ai/api/v1"
        assert text_of(build_model("local", config.models)) == "ollama says hi"
    config_file.write_text('[models.a]\nprovider = "ollamma"\nmodel = "m"\n')
    with pytest.raises(ConfigError, match=r"unknown provider 'ollamma' \(registered: .*ollama"):
        load_config(tmp_path)
    config_file.write_text('[models.a]\nprovider = "groq"\nmodel = "m"\nthinking = "adaptive"\n')
    with pytest.raises(ConfigError, match="thinking settings apply to anthropic models only"):
        load_config(tmp_path)


def test_a_new_provider_is_a_registration_not_an_edit(scratch: list[str]) -> None:
    built: list[ModelSpec] = []

    def echo(spec: ModelSpec) -> Model:
        built.append(spec)
        return FunctionModel(lambda request: f"echo {spec.model}", name=spec.display_name)

    scratch.append("echo")
    register_provider(ProviderInfo("echo", echo, key_env=None, context_window=1_000))
    assert text_of(build_model("echo:m1")) == "echo m1"
    assert built[0].context_window == 1_000 and built[0].provider == "echo"
    assert provider_named("echo").build is echo
    with pytest.raises(ValueError, match="already registered"):
        register_provider(ProviderInfo("echo", lambda spec: echo(spec)))
    with pytest.raises(ValueError, match="provider name 'Bad Name'"):
        register_provider(ProviderInfo("Bad Name", echo))
    with pytest.raises(ValueError, match="not offline or scripted"):
        register_provider(ProviderInfo("scripted", echo))


def test_unknown_names_list_the_registered_providers() -> None:
    with pytest.raises(ModelUnavailable) as caught:
        build_model("nope:model")
    assert "'PROVIDER:MODEL' (providers: anthropic, deepseek, gemini" in str(caught.value)
    with pytest.raises(ModelUnavailable, match=r"unknown provider 'nope' \(registered: "):
        provider_named("nope")


def test_registering_the_profiles_imports_no_sdk() -> None:
    code = (
        "import sys, infai.llm.registry, infai.agent.config\n"
        "infai.llm.registry.spec_for('groq:llama')\n"
        "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_model_imports_its_sdk_on_prepare_not_when_built() -> None:
    """Building an OpenAI or Anthropic model is cheap (a shell builds one before its
    first frame); the SDK comes with the first request or :meth:`prepare` (which the
    TUI calls in a thread once its session is open)."""
    code = (
        "import os, sys\n"
        "os.environ['ANTHROPIC_API_KEY'] = 'sk-test'\n"
        "from infai.llm.registry import build_model\n"
        "models = [build_model(n) for n in ('ollama:llama3.1', 'anthropic:claude-x')]\n"
        "loaded = lambda: sorted(m for m in ('openai', 'anthropic') if m in sys.modules)\n"
        "print(loaded())\n"
        "for model in models:\n"
        "    model.prepare()\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "['anthropic', 'openai']"]


def test_the_first_request_imports_the_sdk_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server builds its model cheaply and streams in its event loop: the SDK's
    half-second import on the first request runs in a worker thread, so the
    server's other sessions do not stall behind it (once imported: not again)."""
    from infai.llm.openai_provider import OpenAIModel

    monkeypatch.setenv("FAKE_KEY", "sk-test")
    threads: list[str] = []
    real = OpenAIModel._sdk.__func__  # type: ignore[attr-defined]

    def sdk(cls: type[OpenAIModel]) -> Any:
        threads.append(threading.current_thread().name)
        return real(cls)

    monkeypatch.setattr(OpenAIModel, "_sdk", classmethod(sdk))

    async def go(model: OpenAIModel) -> list[Any]:
        loop_thread = threading.current_thread().name
        try:
            for _ in range(2):
                [event async for event in model.stream(HELLO)]
        finally:
            await model.aclose()
        return [loop_thread]

    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        spec = ModelSpec("openai", "m", base_url=fake.base_url, key_env="FAKE_KEY")
        [loop_thread] = asyncio.run(go(OpenAIModel(spec)))
    assert threads, "the SDK was never asked for"
    assert threads[0] != loop_thread  # the import: in a worker thread
