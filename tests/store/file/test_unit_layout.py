"""Unit tests of infai.store.file.layout: ids, names and the default home."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.store import InvalidInput, default_home
from infai.store.codec import check_uuid
from infai.store.file.layout import SessionPaths, chunk_name, chunk_number

GOOD = "01a02f3f-a89d-7d25-b4ac-ac89a183258d"


def test_check_uuid_accepts_and_lowercases() -> None:
    assert check_uuid(GOOD) == GOOD
    assert check_uuid(GOOD.upper()) == GOOD
    assert check_uuid(f"  {GOOD}\n") == GOOD


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x",
        "..",
        ".",
        "/etc/passwd",
        f"../{GOOD}",
        f"{GOOD}/..",
        f"{GOOD}/x",
        f"x/{GOOD}",
        f"{GOOD}\x00",
        f"{GOOD}\nmore",
        GOOD.replace("-", ""),
        "{" + GOOD + "}",
        "urn:uuid:" + GOOD,
        GOOD[:-1],
        GOOD + "0",
        GOOD.replace("a", "g"),
        f".new-{GOOD}",
        f".trash-{GOOD}",
        "~",
    ],
)
def test_check_uuid_rejects_path_tricks_and_non_uuids(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_uuid(bad)


def test_check_uuid_error_names_what() -> None:
    with pytest.raises(InvalidInput, match=r"session id '\.\./x' is not a UUID"):
        check_uuid("../x", "session id")


def test_default_home_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INFAI_HOME", str(tmp_path / "custom"))
    assert default_home() == tmp_path / "custom"


@pytest.mark.parametrize("value", [None, ""])
def test_default_home_without_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("INFAI_HOME", raising=False)
    else:
        monkeypatch.setenv("INFAI_HOME", value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    home = default_home()
    assert home.parts[-2:] == ("infai", "harness")
    assert home == tmp_path / "xdg" / "infai" / "harness"


def test_chunk_names() -> None:
    assert chunk_name(0) == "000000.jsonl"
    assert chunk_name(42) == "000042.jsonl"
    assert chunk_number("000042.jsonl") == 42
    for bad in ("42.jsonl", "000042.json", "00004a.jsonl", ".000001.jsonl", "000001.jsonl.tmp"):
        assert chunk_number(bad) is None


def test_session_paths(tmp_path: Path) -> None:
    p = SessionPaths(tmp_path / GOOD)
    assert p.index == tmp_path / GOOD / "index.jsonl"
    assert p.meta.name == "session.json"
    assert p.head.name == "HEAD"
    assert p.lock.name == "LOCK"
    assert p.chunk(3) == tmp_path / GOOD / "chunks" / "000003.jsonl"
    assert p.blob("sha256:abc") == tmp_path / GOOD / "blobs" / "abc"
    assert p.chunk_numbers() == []  # no chunks/ directory yet
    p.chunks.mkdir(parents=True)
    for name in ("000002.jsonl", "000000.jsonl", "junk", "000001.jsonl", "000003.jsonl.tmp"):
        (p.chunks / name).write_bytes(b"")
    assert p.chunk_numbers() == [0, 1, 2]
