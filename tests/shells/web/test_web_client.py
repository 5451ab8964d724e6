"""The web client at ``/`` in a real headless Chromium, as a person on a phone uses it.

The server runs on a loopback port with a fake OpenAI-compatible provider that
streams slowly; the browser (a phone-sized window) logs in with the token, makes
a session, sends a prompt, sees the reply arrive in pieces, answers the
permission question, continues from an earlier event on a new branch, looks at
an event's files and diff, and cancels a turn; the console stays free of errors
(a violation of the page's Content-Security-Policy would be one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import Response

from browser import Browser, chromium
from fakeapi import FakeOpenAI, Reply
from infai.agent import Config, Harness
from infai.llm import Model, ScriptedModel
from infai.llm.openai_provider import OpenAIModel
from infai.llm.providers import ModelSpec
from infai.shells.server import create_app
from infai.shells.server.run import ServerThread
from infai.shells.server.webclient import CSP
from infai.store import SessionStore, Store

TOKEN = "web-token-0123456789abcdef"
FIRST = "Let me write the file now."
SECOND = "The file is written."
#: markup in a reply: shown as text, never run or rendered
HOSTILE = '<img src=x onerror="window.pwned=1"><b>bold?</b> On the other branch.'


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as opened:
        yield opened


class FakeProvider(Harness):
    """A harness whose every model is the fake provider's (checkpoints on, as for a user)."""

    def __init__(self, store: SessionStore, work: Path, base_url: str) -> None:
        self.spec = ModelSpec("openai", "m", base_url=base_url, key_env="FAKE_KEY")
        super().__init__(store, work, config=Config())

    def build_model(self, name: str) -> Model:
        return OpenAIModel(self.spec)


@dataclass
class Served:
    url: str
    work: Path
    fake: FakeOpenAI
    api: httpx.Client


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("FAKE_KEY", "sk-fake")
    work = tmp_path / "work"
    work.mkdir()
    replies = [
        Reply(text=FIRST, tool_calls=[("c1", "write_file", {"path": "a.txt", "content": "hi\n"})],
              pause=0.3),
        Reply(text=SECOND),
        Reply(text=HOSTILE),
        Reply(text="a long answer that will be cancelled " * 20, pieces=20, pause=1.0),
    ]  # fmt: skip
    with FakeOpenAI(replies) as fake:
        store = Store(tmp_path / "home")
        app = create_app(store, token=TOKEN, harness=FakeProvider(store, work, fake.base_url))
        with ServerThread(app) as server:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=server.url, headers=auth, timeout=10) as api:
                yield Served(server.url, work, fake, api)


def test_the_page_is_served_with_a_strict_policy_and_no_token(served: Served) -> None:
    page = httpx.get(served.url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    script = httpx.get(served.url + "/web/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert httpx.get(served.url + "/web/nothing.js").status_code == 404
    assert httpx.get(served.url + "/web/../app.py").status_code in (401, 404)
    assert httpx.get(served.url + "/v1/sessions").status_code == 401  # the API still needs it


class Prefixed:
    """A reverse proxy's view: the app under ``/infai/``, the prefix stripped as nginx's
    ``proxy_pass http://127.0.0.1:8421/;`` does; anything else is not infai's."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
        elif scope["path"].startswith("/infai/"):
            await self.app({**scope, "path": scope["path"][len("/infai") :]}, receive, send)
        else:
            await Response("not infai's", 404)(scope, receive, send)


def test_the_page_works_under_a_proxy_path_prefix(browser: Browser, tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    store.create_session(name="behind the proxy", working_dir=str(tmp_path))
    app = create_app(store, token=TOKEN, model_factory=lambda name: ScriptedModel(["hi"]))
    with ServerThread(Prefixed(app)) as server:  # type: ignore[arg-type]
        browser.get(server.url + "/infai/")
        browser.type("#token", TOKEN)
        browser.click("#login button[type=submit]")
        browser.wait(lambda: "behind the proxy" in browser.text("#sessions"), what="the list")
        assert browser.errors() == []


def _send(browser: Browser, text: str) -> None:
    browser.type("#prompt-text", text)
    browser.click("#prompt button[type=submit]")


def _idle(browser: Browser) -> None:
    browser.wait(lambda: browser.text("#status") == "idle", what="the turn to end")


def test_a_person_on_a_phone_runs_a_session(browser: Browser, served: Served) -> None:
    browser.get(served.url + "/")
    browser.type("#token", "not-the-token-0123456789")
    browser.click("#login button[type=submit]")
    browser.wait(lambda: "not the server's token" in browser.text("#login .error"))
    browser.console()  # the refused request is logged; what follows must log nothing

    browser.type("#token", TOKEN, replace=True)
    browser.click("#login button[type=submit]")
    browser.type("#new-name", "from my phone")
    browser.click("#new-session button[type=submit]")
    browser.find("#prompt-text")
    assert TOKEN not in browser.script("return location.href")
    assert browser.script("return sessionStorage.getItem('infai-token')") == TOKEN
    [session] = served.api.get("/v1/sessions").json()["sessions"]
    assert session["name"] == "from my phone"
    # the prompt box is built at once, the header once the session's info has loaded
    browser.wait(lambda: browser.text("#where") == "from my phone", what="the session's name")

    # every state the live reply goes through is recorded, to see it grow
    browser.script(
        "window.seen = []; new MutationObserver(() => {"
        " const t = document.querySelector('#live .live-text');"
        " if (t) window.seen.push(t.textContent); })"
        ".observe(document.getElementById('live'), {subtree: true, childList: true,"
        " characterData: true})"
    )
    _send(browser, "write a.txt please")
    browser.wait(lambda: browser.text("#status") == "working…", what="the turn to start")
    browser.find(".approval [data-answer=allow]")
    seen = browser.script("return window.seen")
    assert seen[-1] == FIRST
    assert any(0 < len(s) < len(FIRST) and FIRST.startswith(s) for s in seen), seen
    assert "write_file" in browser.text(".approval") and "a.txt" in browser.text(".approval")
    browser.click(".approval [data-answer=allow]")
    browser.wait(lambda: SECOND in browser.texts(".msg.assistant .text"), what="the reply")
    _idle(browser)
    assert (served.work / "a.txt").read_text() == "hi\n"
    assert browser.texts(".msg .text")[:2] == ["write a.txt please", FIRST]
    assert browser.text(".tool.call summary").startswith("write_file")
    assert not browser.script("return document.querySelector('.tool.call details').open")
    assert not browser.script("return document.querySelector('.approval')")

    # the files an event recorded, and what it changed
    events = served.api.get(f"/v1/sessions/{session['id']}/events").json()["events"]
    [result] = [e for e in events if e["kind"] == "tool_result"]
    after = next(e for e in events if e["seq"] > result["seq"] and e["kind"] == "snapshot")
    browser.click(f".tree-node[data-event-id='{after['id']}'] button")
    browser.click("[data-action=files]")
    browser.wait(lambda: "a.txt (3 bytes)" in browser.text("#event-detail .files"))
    browser.click("[data-action=diff]")
    browser.wait(lambda: "+hi" in browser.text("#event-detail .diff"), what="the diff")

    # continue from the first prompt: a new branch
    [prompt] = [e for e in events if e["kind"] == "message" and e["role"] == "user"]
    browser.click(f".tree-node[data-event-id='{prompt['id']}'] button")
    browser.click("[data-action=continue]")
    browser.wait(lambda: browser.texts(".msg .text") == ["write a.txt please"], what="the path")
    marked = f".tree-node[data-event-id='{prompt['id']}'] .mark.next"
    browser.wait(lambda: browser.text(marked) == "next", what="the event marked next")
    (served.work / "a.txt").write_text("mine\n")  # changed by hand: restoring asks first
    _send(browser, "another way")
    browser.wait(lambda: "a.txt" in browser.text("#restore"), what="the restore question")
    [refused] = browser.errors()  # the 409 is logged, and nothing else
    assert "/prompt" in refused and "409" in refused
    browser.click("#restore [data-restore=keep]")
    browser.wait(lambda: HOSTILE in browser.texts(".msg.assistant .text"), what="the branch")
    _idle(browser)
    assert (served.work / "a.txt").read_text() == "mine\n"
    assert browser.texts(".msg .text") == ["write a.txt please", "another way", HOSTILE]
    assert browser.script("return document.querySelectorAll('#messages img, #messages b')"
                          ".length === 0 && window.pwned === undefined")  # fmt: skip
    tree = served.api.get(f"/v1/sessions/{session['id']}/events?all=true").json()
    assert len(tree["leaves"]) == 2
    shown = "return document.querySelector('.mark.head').closest('li').dataset.eventId"
    browser.wait(lambda: browser.script(shown) == tree["head"], what="HEAD in the tree")

    # cancel a slow turn
    _send(browser, "tell me a long story")
    # as a person does: the prompt shows as stored, then Cancel (a cancel that
    # lands before the prompt is stored leaves no prompt and no marker to show)
    browser.wait(lambda: browser.texts(".msg .text")[-1:] == ["tell me a long story"])
    browser.click("#cancel")
    _idle(browser)
    assert served.api.get(f"/v1/sessions/{session['id']}").json()["turn"] is None
    browser.wait(lambda: browser.texts("#messages li")[-1] == "turn interrupted")
    assert browser.script("return document.getElementById('cancel').hidden")

    # a phone's width: nothing wider than the screen
    assert browser.script("return window.innerWidth") == 390
    assert browser.script("return document.documentElement.scrollWidth <= window.innerWidth")
    assert browser.errors() == []
