"""Unit tests of infai.store.file.lock: one writer per session."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from infai.store import StoreError, WriterLocked
from infai.store.file.lock import WriterLock


def test_second_lock_fails_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    first = WriterLock(path, timeout=0)
    try:
        assert path.read_text().strip() == str(os.getpid())
        with pytest.raises(WriterLocked) as info:
            WriterLock(path, timeout=0)
        message = str(info.value)
        assert f"pid {os.getpid()}" in message
        assert isinstance(info.value, StoreError)
    finally:
        first.release()


def test_lock_waits_for_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    first = WriterLock(path, timeout=0)
    try:
        start = time.monotonic()
        with pytest.raises(WriterLocked, match=r"0\.15s"):
            WriterLock(path, timeout=0.15)
        assert time.monotonic() - start >= 0.14
    finally:
        first.release()


def test_released_lock_can_be_reacquired(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    first = WriterLock(path, timeout=0)
    first.release()
    assert path.read_text() == ""  # the pid is cleared on release
    second = WriterLock(path, timeout=0)
    try:
        assert path.read_text().strip() == str(os.getpid())
    finally:
        second.release()
    third = WriterLock(path, timeout=0)
    third.release()


def test_release_is_idempotent(tmp_path: Path) -> None:
    lock = WriterLock(tmp_path / "LOCK", timeout=0)
    lock.release()
    lock.release()


def test_failed_attempt_leaks_no_fd(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    first = WriterLock(path, timeout=0)
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            with pytest.raises(WriterLocked):
                WriterLock(path, timeout=0)
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        first.release()
