"""Unit tests of infai.store.records: strict decoding, previews, round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infai.store import (
    KINDS,
    RECORD_TYPES,
    BranchSummaryRecord,
    CompactionRecord,
    GapRecord,
    HookRecord,
    InvalidInput,
    MessageRecord,
    Record,
    RestoreRecord,
    SnapshotRecord,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
    decode_record,
    record_from_obj,
)
from infai.store.records import PREVIEW_CHARS, encode_record, preview, record_to_obj

# -- strict decoding ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "data", "field"),
    [
        ("message", b'{"content":1}', "$.content"),
        ("message", b'{"content":"x","usage":{"input_tokens":"many"}}', "$.usage.input_tokens"),
        ("message", b'{"content":"x","metadata":[]}', "$.metadata"),
        ("tool_call", b'{"call_id":"c","name":"n","arguments":"x"}', "$.arguments"),
        ("tool_result", b'{"call_id":"c","name":"n","content":"x","is_error":"no"}', "$.is_error"),
        ("compaction", b'{"summary":"s","goals":[1]}', "$.goals"),
        ("compaction", b'{"summary":"s","facts":"f"}', "$.facts"),
        ("message", b'{"content":"x","usage":{"input_tokens":true}}', "$.usage.input_tokens"),
        ("message", b'{"content":"x","usage":{"input_tokens":1.5}}', "$.usage.input_tokens"),
        ("message", b'{"content":"x","usage":[]}', "$.usage"),
        ("compaction", b'{"summary":"s","tokens_before":"lots"}', "$.tokens_before"),
        ("branch_summary", b'{"summary":7}', "$.summary"),
    ],
)
def test_decode_error_names_the_field(kind: str, data: bytes, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_record(kind, data)
    assert field in str(info.value)
    assert kind in str(info.value)


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("message", "content"),
        ("tool_call", "call_id"),
        ("tool_result", "content"),
        ("compaction", "summary"),
        ("branch_summary", "summary"),
    ],
)
def test_decode_missing_required_field_is_named(kind: str, missing: str) -> None:
    full = {
        "message": {"content": "c"},
        "tool_call": {"call_id": "c", "name": "n"},
        "tool_result": {"call_id": "c", "name": "n", "content": "x"},
        "compaction": {"summary": "s"},
        "branch_summary": {"summary": "s"},
    }[kind]
    obj = {k: v for k, v in full.items() if k != missing}
    with pytest.raises(InvalidInput, match=missing):
        decode_record(kind, json.dumps(obj).encode())
    with pytest.raises(InvalidInput, match=missing):
        record_from_obj(kind, obj)


def test_decode_unknown_kind_lists_known_kinds() -> None:
    with pytest.raises(InvalidInput) as info:
        decode_record("telepathy", b'{"content":"x"}')
    assert "telepathy" in str(info.value)
    for kind in KINDS:
        assert kind in str(info.value)
    with pytest.raises(InvalidInput, match="telepathy"):
        record_from_obj("telepathy", {"content": "x"})


@pytest.mark.parametrize("data", [b"", b"{", b'{"content":"x"', b"[1,2", b"nul", b"\xff\xfe"])
def test_decode_malformed_json(data: bytes) -> None:
    with pytest.raises(InvalidInput, match="message"):
        decode_record("message", data)


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("message", b'{"content":"x","colour":"red"}'),
        ("compaction", b'{"summary":"s","colour":1}'),
        ("message", b'{"content":"x","usage":{"colour":1}}'),
    ],
)
def test_decode_unknown_field_is_named(kind: str, data: bytes) -> None:
    with pytest.raises(InvalidInput, match="colour"):
        decode_record(kind, data)


def test_decode_null_means_default() -> None:
    assert decode_record("message", b'{"content":"x","reasoning":null,"metadata":null}') == (
        MessageRecord(content="x")
    )
    with pytest.raises(InvalidInput, match="content"):
        decode_record("message", b'{"content":null}')


def test_decode_not_an_object() -> None:
    with pytest.raises(InvalidInput):
        decode_record("message", b'"just a string"')
    with pytest.raises(InvalidInput):
        record_from_obj("message", ["content"])


def test_invalid_input_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_record("message", b"{}")


def test_kinds_table() -> None:
    assert set(KINDS) == {
        "message",
        "tool_call",
        "tool_result",
        "compaction",
        "branch_summary",
        "snapshot",
        "restore",
        "gap",
        "hook",
    }
    for kind, rtype in RECORD_TYPES.items():
        assert rtype.kind == kind


def test_records_compare_by_value() -> None:
    assert MessageRecord(content="a") == MessageRecord(content="a")
    assert MessageRecord(content="a") != MessageRecord(content="b")
    assert MessageRecord(content="a") != BranchSummaryRecord(summary="a")
    assert CompactionRecord(summary="s", goals=None) == CompactionRecord(summary="s", goals=[])


def test_defaults_are_omitted_from_encoding() -> None:
    assert encode_record(MessageRecord(content="hi")) == b'{"content":"hi"}'
    assert encode_record(CompactionRecord(summary="s")) == b'{"summary":"s"}'
    assert b"is_error" not in encode_record(ToolResultRecord(call_id="c", name="n", content="x"))


# -- round trips -------------------------------------------------------------------

_text = st.text(max_size=30)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_meta = st.dictionaries(_text, _json_value, max_size=3)
_strs = st.lists(_text, max_size=3)

RECORDS: dict[str, st.SearchStrategy[Record]] = {
    "message": st.builds(
        MessageRecord,
        content=_text,
        reasoning=st.none() | _text,
        model=st.none() | _text,
        stop_reason=st.none() | _text,
        usage=st.none()
        | st.builds(
            Usage,
            input_tokens=st.integers(0, 2**40),
            output_tokens=st.integers(0, 2**40),
            cache_read_tokens=st.integers(0, 2**40),
            cache_write_tokens=st.integers(0, 2**40),
        ),
        metadata=_meta,
    ),
    "tool_call": st.builds(
        ToolCallRecord, call_id=_text, name=_text, arguments=_meta, metadata=_meta
    ),
    "tool_result": st.builds(
        ToolResultRecord,
        call_id=_text,
        name=_text,
        content=_text,
        is_error=st.booleans(),
        metadata=_meta,
    ),
    "compaction": st.builds(
        CompactionRecord,
        summary=_text,
        goals=_strs,
        constraints=_strs,
        decisions=_strs,
        files_changed=_strs,
        unresolved=_strs,
        facts=_strs,
        tokens_before=st.none() | st.integers(0, 2**40),
    ),
    "branch_summary": st.builds(
        BranchSummaryRecord,
        summary=_text,
        abandoned_tip=st.none() | _text,
        common_ancestor=st.none() | _text,
    ),
    "snapshot": st.builds(
        SnapshotRecord,
        tree=_text,
        reason=_text,
        files=st.integers(0, 2**40),
        bytes=st.integers(0, 2**40),
        changed=st.integers(0, 2**40),
        skipped=_meta,
        metadata=_meta,
    ),
    "restore": st.builds(
        RestoreRecord,
        tree=_text,
        source=_text,
        before=st.none() | _text,
        touched=_strs,
        kept=_strs,
        metadata=_meta,
    ),
    "gap": st.builds(GapRecord, summary=_text, lost=_strs),
    "hook": st.builds(
        HookRecord,
        event=_text,
        command=_text,
        exit_code=st.none() | st.integers(-255, 255),
        decision=st.none() | _text,
        duration_ms=st.integers(0, 10**6),
        timed_out=st.booleans(),
        stdout=st.none() | _text,
        context=st.none() | _text,
    ),
}


def test_every_kind_has_a_strategy() -> None:
    assert set(RECORDS) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(RECORDS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_kind_roundtrips(kind: str, data: st.DataObject) -> None:
    record = data.draw(RECORDS[kind])
    assert record.kind == kind
    encoded = encode_record(record)
    assert decode_record(kind, encoded) == record
    assert record_from_obj(kind, json.loads(encoded)) == record
    assert record_from_obj(kind, record_to_obj(record)) == record
    assert json.loads(encoded) == record_to_obj(record)
    # A record never decodes as another kind by accident of shape.
    assert type(decode_record(kind, encoded)) is RECORD_TYPES[kind]
    text = preview(record)
    assert len(text) <= PREVIEW_CHARS
    assert text.isprintable()


# -- previews --------------------------------------------------------------------------


def test_preview_short_message_is_verbatim() -> None:
    assert preview(MessageRecord(content="Build the feature.")) == "Build the feature."


def test_preview_truncates_to_80_chars_with_ellipsis() -> None:
    text = preview(MessageRecord(content="a" * 200))
    assert len(text) == PREVIEW_CHARS == 80
    assert text == "a" * 79 + "…"
    exact = preview(MessageRecord(content="b" * 80))
    assert exact == "b" * 80


def test_preview_replaces_control_chars_and_collapses_whitespace() -> None:
    text = preview(MessageRecord(content="line one\nline\ttwo\r\n\x00\x1b[31mred\x7f  end  "))
    assert text.isprintable()
    assert text.split() == ["line", "one", "line", "two", "[31mred", "end"]
    assert text.startswith("line one line two ")


def test_preview_unicode_separators_are_not_kept() -> None:
    text = preview(MessageRecord(content="a\u2028b\u2029c\u0085d"))
    assert text == "a b c d"


def test_preview_of_whitespace_only_is_empty() -> None:
    assert preview(MessageRecord(content=" \n\t ")) == ""


def test_preview_keeps_printable_unicode() -> None:
    assert preview(MessageRecord(content="héllo wörld 🎉 日本")) == "héllo wörld 🎉 日本"


def test_preview_per_kind() -> None:
    assert preview(ToolCallRecord(call_id="c", name="read", arguments={"path": "a.py"})) == (
        'read({"path": "a.py"})'
    )
    assert preview(ToolCallRecord(call_id="c", name="ls")) == "ls({})"
    assert preview(ToolResultRecord(call_id="c", name="bash", content="ok")) == "bash: ok"
    assert (
        preview(ToolResultRecord(call_id="c", name="bash", content="boom", is_error=True))
        == "bash error: boom"
    )
    assert preview(CompactionRecord(summary="sum\nmary")) == "sum mary"
    assert preview(BranchSummaryRecord(summary="abandoned A")) == "abandoned A"


def test_preview_of_huge_content_is_bounded() -> None:
    text = preview(MessageRecord(content="\n" * 10_000 + "tail"))
    # Only the first 4096 characters are considered: all whitespace here.
    assert len(text) <= PREVIEW_CHARS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_preview_properties(content: str) -> None:
    text = preview(MessageRecord(content=content))
    assert len(text) <= PREVIEW_CHARS
    assert text.isprintable()
    if len(text) == PREVIEW_CHARS and len(content) > PREVIEW_CHARS:
        assert text.endswith("…")
    # The words of a short message survive (control characters become spaces).
    if len(content) <= 40:
        clean = "".join(ch if ch.isprintable() else " " for ch in content)
        assert text.split() == clean.split()
