"""``infai session share S --html FILE``: one self-contained HTML file, secrets redacted.

A session whose prompts, tool calls and results (on the active path and on a
branch left behind) hold secrets of every kind the command knows: none of them
is in the file, the command prints what it redacted by kind and the file shows
the same, and the file opens in a real Chromium with no console error (its own
Content-Security-Policy admits its one style sheet and nothing else).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from browser import Browser, chromium
from infai.shells.cli import main

DB_URL = "postgres://app:Hunter2Hunter2@db.internal/prod"  # in secret_env
ODD_KEY = "zz-nothing-like-a-known-shape-42"  # in a *_API_KEY variable
OPENAI = "sk-proj-abcdefghijklmnopqrstuvwx1234"
ANTHROPIC = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-xyz"
GITHUB = "ghp_" + "a1B2c3D4e5" * 4
AWS = "AKIAIOSFODNN7EXAMPLE"
BEARER = "eyJhbGciOiJIUzI1NiJ9.cGF5bG9hZA.c2lnbmF0dXJl"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\nbXlzZWNyZXQ=\n-----END PRIVATE KEY-----\n"
SECRETS = [DB_URL, "Hunter2Hunter2", ODD_KEY, OPENAI, ANTHROPIC, GITHUB, AWS, BEARER, PEM_BODY]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as opened:
        yield opened


def run(home: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--home", str(home), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def append(home: Path, sid: str, kind: str, role: str, record: object, *more: str) -> str:
    args = ["session", "append", sid, "--kind", kind, "--role", role]
    return run(home, *args, "--record", json.dumps(record), *more).stdout.strip()


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Result]:
    user_home = tmp_path / "home-of-alice"
    (user_home / "project").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("MY_DB_URL", DB_URL)
    monkeypatch.setenv("WEIRD_API_KEY", ODD_KEY)
    Path(os.environ["INFAI_CONFIG"]).write_text('[sandbox]\nsecret_env = ["MY_DB_URL"]\n')
    home = tmp_path / "store"
    work = user_home / "project"
    made = run(home, "session", "new", "--name", "deploy notes", "--working-dir", str(work))
    sid_ = made.stdout.strip()
    first = append(home, sid_, "message", "user", {"content": f"connect to {DB_URL} please"})
    append(home, sid_, "tool_call", "assistant",
           {"call_id": "c1", "name": "write_file",
            "arguments": {"path": f"{work}/key.pem", "content": PEM}})  # fmt: skip
    output = (
        f"OPENAI={OPENAI}\nANTHROPIC={ANTHROPIC}\n{GITHUB} {AWS}\n"
        f"curl -H 'Authorization: Bearer {BEARER}' in {user_home}/project"
    )
    append(home, sid_, "tool_result", "tool", {"call_id": "c1", "name": "bash", "content": output})
    long = "x" * 70 + f" key {ODD_KEY}"  # a label cut at 80 characters would cut the secret
    append(home, sid_, "message", "assistant", {"content": long})
    append(home, sid_, "message", "user", {"content": f"on a branch: {GITHUB}"},
           "--parent", first)  # fmt: skip
    target = tmp_path / "out" / "shared.html"
    target.parent.mkdir()
    return str(target), run(home, "session", "share", sid_, "--html", str(target))


def test_no_secret_reaches_the_file_and_the_summary_says_what_went(
    shared: tuple[str, Result], tmp_path: Path
) -> None:
    target, result = shared
    html = Path(target).read_text()
    for secret in SECRETS:
        assert secret not in html, secret
    assert str(tmp_path / "home-of-alice") not in html and "home-of-alice" not in html
    assert "~/project" in html  # the home directory, shown as ~
    assert "[redacted: private key]" in html and "Bearer [redacted: bearer token]" in html
    expected = [
        "secret variable: 2",
        "api key: 1",
        "anthropic key: 1",
        "github token: 2",
        "aws key id: 1",
        "bearer token: 1",
        "private key: 1",
    ]
    for line in expected:
        assert f"  {line}\n" in result.stdout, result.stdout
        assert f"<li>{line}</li>" in html
    assert "home directory: " in result.stdout
    # self-contained: nothing fetched, nothing run
    assert "<script" not in html and "src=" not in html and "<link" not in html
    assert "http://" not in html and "https://" not in html


def test_the_file_opens_in_chromium_without_errors(
    shared: tuple[str, Result], browser: Browser
) -> None:
    target, _ = shared
    browser.get(Path(target).as_uri())
    assert browser.text("h1") == "deploy notes"
    assert browser.script("return getComputedStyle(document.body).maxWidth") != "none"
    tree = browser.texts("#tree li")
    assert len(tree) == 5 and "HEAD" in tree[-1] and "on a branch" in tree[-1]
    conversation = browser.texts("#conversation > li")
    assert len(conversation) == 2 and "on a branch" in conversation[-1]
    assert browser.script("return document.querySelectorAll('details[open]').length") == 0
    assert browser.errors() == []


def test_the_redactor_keeps_what_only_looks_alike() -> None:
    from infai.shells.redact import Redactor

    redactor = Redactor({"A_TOKEN": "abc", "B_SECRET": "s3cr3t-value"}, "/root")
    text = "/root/x and /rootfs/y and ~ abc s3cr3t-value sk-short"
    assert redactor.text(text) == "~/x and /rootfs/y and ~ abc [redacted: secret variable] sk-short"
    assert redactor.summary() == [
        "secret variable: 1",
        "home directory: 1",
        "not looked for (under 6 characters): A_TOKEN",
    ]


def test_bad_input_is_one_clear_line_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "store"
    target = tmp_path / "out.html"
    unknown = "01a24393-f6e6-721f-ab68-b5c14465ac62"
    missing = CliRunner().invoke(main, ["--home", str(home), "session", "share", unknown,
                                        "--html", str(target)])  # fmt: skip
    assert missing.exit_code != 0 and unknown in missing.stderr and not target.exists()
    sid = run(home, "session", "new").stdout.strip()
    nowhere = tmp_path / "no-such-dir" / "out.html"
    failed = CliRunner().invoke(main, ["--home", str(home), "session", "share", sid,
                                       "--html", str(nowhere)])  # fmt: skip
    assert failed.exit_code == 1 and f"cannot write {nowhere}" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
