"""Unit tests of infai.store.file.blobs: content addressing, dedup, verification."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from infai.store import BlobDigestError, CorruptionError, FileIO
from infai.store.file.blobs import digest_of, put_blobs, read_blob
from infai.store.file.layout import SessionPaths


class CountingIO(FileIO):
    def __init__(self) -> None:
        self.opened: list[str] = []
        self.dir_syncs: list[str] = []

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self.opened.append(path)
        return super().open(path, flags, mode)

    def fsync_dir(self, path: str) -> None:
        self.dir_syncs.append(path)
        super().fsync_dir(path)


@pytest.fixture
def paths(tmp_path: Path) -> SessionPaths:
    p = SessionPaths(tmp_path / "s")
    p.blobs.mkdir(parents=True)
    return p


def test_digest_is_sha256_of_the_bytes() -> None:
    assert digest_of(b"hello") == "sha256:" + hashlib.sha256(b"hello").hexdigest()


def test_put_then_read(paths: SessionPaths) -> None:
    data = b'{"content":"big"}'
    digest = digest_of(data)
    put_blobs(FileIO(), paths, [(digest, data)])
    assert paths.blob(digest).read_bytes() == data
    assert read_blob(paths, digest) == data
    assert os.listdir(paths.blobs) == [digest.removeprefix("sha256:")]  # no temp left


def test_same_payload_is_written_once(paths: SessionPaths) -> None:
    data = b"x" * 1000
    digest = digest_of(data)
    io = CountingIO()
    put_blobs(io, paths, [(digest, data), (digest, data)])
    assert len(io.opened) == 1
    assert io.dir_syncs == [str(paths.blobs)]
    io2 = CountingIO()
    put_blobs(io2, paths, [(digest, data)])
    assert io2.opened == [] and io2.dir_syncs == []  # already present: nothing to do
    assert len(os.listdir(paths.blobs)) == 1


def test_many_new_blobs_one_directory_sync(paths: SessionPaths) -> None:
    io = CountingIO()
    payloads = [(digest_of(b"%d" % i), b"%d" % i) for i in range(5)]
    put_blobs(io, paths, payloads)
    assert len(io.opened) == 5
    assert io.dir_syncs == [str(paths.blobs)]


def test_read_verifies_digest(paths: SessionPaths) -> None:
    data = b"payload"
    digest = digest_of(data)
    put_blobs(FileIO(), paths, [(digest, data)])
    paths.blob(digest).write_bytes(b"payloaD")
    with pytest.raises(BlobDigestError) as info:
        read_blob(paths, digest)
    assert info.value.path == str(paths.blob(digest))
    assert digest in str(info.value)
    assert isinstance(info.value, CorruptionError)


def test_missing_blob_is_corruption(paths: SessionPaths) -> None:
    digest = digest_of(b"never written")
    with pytest.raises(CorruptionError, match="missing"):
        read_blob(paths, digest)
