"""A real headless Chromium for tests, driven over WebDriver (chromedriver speaks HTTP).

A tiny client (httpx, no selenium): open a page, find elements by CSS, click
them and type into them as a person does (WebDriver's element click and send
keys dispatch real input events), run a script to read what the page shows,
wait for a condition, and read the browser's console log.

Debian's ``chromium`` and ``chromium-driver`` packages provide both binaries
(``.ci/run`` installs them). Where they are absent a test is skipped, saying
so, except under CI (``$CI`` set), where that is a failure: CI must run them.
The browser gets no network but loopback: background services, updates and
sync are off.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import pytest

T = TypeVar("T")
#: how long a wait may take on a loaded 2-core machine
WAIT = 20.0
#: the key WebDriver uses for an element reference
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
#: what the browser is started with: headless, a phone's window, no network services
ARGS = (
    "--headless=new",
    "--no-sandbox",  # CI runs as root, where Chromium's own sandbox cannot start
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--window-size=500,900",
)
#: the page sees a phone: its width, pixel density and touch
PHONE = {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0, "touch": True}}


def chromium_binaries() -> tuple[str, str]:
    """The paths of chromium and chromedriver; skip (fail under CI) when absent."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    why = "Chromium is absent: `apt-get install chromium chromium-driver` to run the browser tests"
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI must run them: .ci/run installs both packages)")
    pytest.skip(why)


class WebDriverError(AssertionError):
    """A WebDriver command failed (the driver's error and message)."""


class Browser:
    """One WebDriver session: a Chromium window."""

    def __init__(self, driver: str, client: httpx.Client, session: str) -> None:
        self.driver = driver
        self.client = client
        self.session = session

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"{self.driver}/session/{self.session}{path}"
        response = self.client.request(method, url, json=body if method == "POST" else None)
        value = response.json().get("value")
        if response.status_code != 200:
            error = value.get("error") if isinstance(value, dict) else value
            message = value.get("message", "") if isinstance(value, dict) else ""
            raise WebDriverError(f"{method} {path}: {error}: {message.splitlines()[0:1]}")
        return value

    def get(self, url: str) -> None:
        """Open ``url`` and wait for it to load."""
        self._call("POST", "/url", {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        """The value of ``source`` (a function body; ``arguments`` are ``args``) in the page."""
        return self._call("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find(self, css: str) -> str:
        """The element ``css`` selects (the first), waiting for it to appear."""
        found = self.wait(lambda: self.script("return document.querySelector(arguments[0])", css))
        return str(found[ELEMENT])

    def click(self, css: str) -> None:
        """Click the element ``css`` selects, as a person does (waiting for it)."""

        def clicked() -> bool:  # the page may redraw the element meanwhile: find it again
            element = self.find(css)
            try:
                if not self._displayed(element):
                    return False
                self._call("POST", f"/element/{element}/click", {})
            except WebDriverError as exc:
                if "stale element" in str(exc):
                    return False
                raise
            return True

        self.wait(clicked, what=f"a click on {css}")

    def _displayed(self, element: str) -> bool:
        return bool(self._call("GET", f"/element/{element}/displayed"))

    def type(self, css: str, text: str, *, replace: bool = False) -> None:
        """Type ``text`` into the element ``css`` selects (keystrokes, as a person);
        with ``replace``, what it held is cleared first."""
        element = self.find(css)
        if replace:
            self._call("POST", f"/element/{element}/clear", {})
        self._call("POST", f"/element/{element}/value", {"text": text})

    def text(self, css: str) -> str:
        """The text the element ``css`` selects shows ('' when there is none)."""
        got = self.script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", css
        )
        return str(got)

    def texts(self, css: str) -> list[str]:
        """The text of every element ``css`` selects, in document order."""
        got = self.script(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", css
        )
        return [str(t) for t in got]

    def wait(self, condition: Callable[[], T], timeout: float = WAIT, what: str = "") -> T:
        """``condition()`` once it is truthy; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = condition()
            if got:
                return got
            if time.monotonic() > deadline:
                logged = [e.get("message") for e in self.console()]
                raise AssertionError(f"timed out waiting for {what or condition}: {logged}")
            time.sleep(0.05)

    def screenshot(self) -> bytes:
        """The window as a PNG (to look at what a test saw)."""
        import base64

        return base64.b64decode(self._call("GET", "/screenshot"))

    def console(self) -> list[dict[str, Any]]:
        """The console entries logged since the last call (level, message)."""
        got = self._call("POST", "/se/log", {"type": "browser"})
        return list(got or [])

    def errors(self) -> list[str]:
        """The console's errors since the last call (a CSP violation is one)."""
        return [e["message"] for e in self.console() if e.get("level") == "SEVERE"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium under chromedriver, closed (both processes) at the end."""
    browser_path, driver_path = chromium_binaries()
    port = _free_port()
    profile = tempfile.mkdtemp(prefix="infai-chromium-")
    driver = subprocess.Popen(
        [driver_path, f"--port={port}", "--allowed-ips=127.0.0.1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(timeout=60)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                if client.get(f"{url}/status").json()["value"]["ready"]:
                    break
            except httpx.TransportError:
                pass
            if driver.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.05)
        options = {
            "binary": browser_path,
            "args": [*ARGS, f"--user-data-dir={profile}"],
            "mobileEmulation": PHONE,
        }
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
        capabilities["goog:loggingPrefs"] = {"browser": "ALL"}
        made = client.post(f"{url}/session", json={"capabilities": {"alwaysMatch": capabilities}})
        value = made.json()["value"]
        if made.status_code != 200:
            raise RuntimeError(f"chromedriver could not start Chromium: {value}")
        browser = Browser(url, client, value["sessionId"])
        try:
            yield browser
        finally:
            client.delete(f"{url}/session/{browser.session}")
    finally:
        client.close()
        driver.terminate()
        try:
            driver.wait(10)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
        shutil.rmtree(profile, ignore_errors=True)
