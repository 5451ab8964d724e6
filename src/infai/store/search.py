"""Full-text search over every session and every branch: what both backends share.

Model, in prose: search is a *derived* view of the store. Each backend keeps an
index of every event it holds, on every branch (not only the active path), built
from the events themselves and never the only copy of anything: the file store
in an SQLite FTS5 file under its home, PostgreSQL in ``tsvector`` columns with a
GIN index. An event's searchable text is what a reader of the session sees
(:func:`searchable_text`): a message's content and reasoning, a tool call's name
and argument values, a tool result's name and output, a compaction's or branch
summary's text, a snapshot's reason and the paths it skipped, a restore's paths
(never a digest); metadata is not searched. A record that lives in a blob is
indexed from the blob, once per digest.

Query syntax (one grammar for both backends, parsed here by
:func:`parse_query`):

* words separated by spaces must all match (``bug parser``);
* ``"a phrase"`` matches those words next to each other, in order;
* ``pref*`` matches any word starting with ``pref``;
* ``-word`` or ``-"a phrase"`` excludes events that contain it;
* ``a OR b`` matches either side (``OR`` in capitals; it binds looser than the
  implicit AND: ``a b OR c`` is ``(a AND b) OR c``).

Words are compared case-insensitively with diacritics folded (``Café`` finds
``cafe``), and only letters and digits count: ``foo-bar`` and ``src/app.py``
are the phrases ``"foo bar"`` and ``"src app py"``. No stemming and no stop
words, so both backends agree on what matches (their ranking may differ).
A query that cannot be parsed raises :class:`~infai.store.errors.InvalidInput`
naming the query and what is wrong with it.

A :class:`SearchHit` names the session and event, whether the event is on the
session's HEAD path (else it sits on another branch), and a one-line snippet of
the event's text with the matched words located by character offsets
(:attr:`SearchHit.marks`), so each shell renders them its own way (rich styles,
HTML ``<mark>``); :meth:`SearchHit.marked` wraps them in text markers.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .errors import InvalidInput

#: ``progress(done, total)`` while an index is (re)built, counted in sessions
Progress = Callable[[int, int], None]

#: the most hits a search returns, whatever ``limit`` asks for
MAX_LIMIT = 1000
#: characters of text around the first match in a snippet
SNIPPET_CHARS = 160

_TOKEN = re.compile(r"[^\W_]+")


class SearchHit:
    """One event that matched a search, with where it is and a snippet of its text."""

    __slots__ = (
        "event_id",
        "kind",
        "marks",
        "on_head_path",
        "role",
        "score",
        "seq",
        "session_id",
        "session_name",
        "snippet",
        "timestamp",
        "working_dir",
    )

    def __init__(
        self,
        *,
        session_id: str,
        event_id: str,
        seq: int,
        kind: str,
        role: str,
        timestamp: str,
        snippet: str,
        marks: list[tuple[int, int]],
        on_head_path: bool,
        score: float,
        session_name: str | None = None,
        working_dir: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.event_id = event_id
        #: the event's sequence number in its session
        self.seq = seq
        self.kind = kind
        self.role = role
        self.timestamp = timestamp
        #: one line of the event's text (printable characters only) around the match
        self.snippet = snippet
        #: ``(start, end)`` character offsets of the matched words in :attr:`snippet`
        self.marks = marks
        #: the event is an ancestor of (or is) the session's HEAD; else another branch
        self.on_head_path = on_head_path
        #: relevance, higher is better; comparable within one search only
        self.score = score
        self.session_name = session_name
        self.working_dir = working_dir

    def marked(self, open: str = "[", close: str = "]") -> str:
        """The snippet with each matched word wrapped in ``open`` … ``close``."""
        out, at = [], 0
        for start, end in self.marks:
            out += [self.snippet[at:start], open, self.snippet[start:end], close]
            at = end
        out.append(self.snippet[at:])
        return "".join(out)

    def to_obj(self) -> dict[str, Any]:
        """The hit as JSON-ready data (``infai search --json``, the server)."""
        return {
            "session_id": self.session_id,
            "session_name": self.session_name,
            "working_dir": self.working_dir,
            "event_id": self.event_id,
            "seq": self.seq,
            "kind": self.kind,
            "role": self.role,
            "timestamp": self.timestamp,
            "on_head_path": self.on_head_path,
            "score": self.score,
            "snippet": self.snippet,
            "marks": [list(m) for m in self.marks],
        }

    def __repr__(self) -> str:
        return f"SearchHit({self.session_id}, {self.event_id}, {self.marked()!r})"


class DamagedSession:
    """A session search could not index whole: some of its events (or all of it) do
    not verify, so they are left out of every search until it is repaired.

    Why this exists: one flipped byte in one session must not cost every other
    session its hits. The index keeps what verifies, remembers what it skipped,
    and each answer names the damaged sessions of its scope, so a search never
    looks complete when it is not.
    """

    __slots__ = ("events", "problem", "session_id")

    def __init__(self, session_id: str, events: int | None, problem: str) -> None:
        self.session_id = session_id
        #: how many events were left out; None when the session could not be read at all
        self.events = events
        #: the first problem found, with its file and offset (or table and row)
        self.problem = problem

    def note(self) -> str:
        """One line for people (the CLI's warning on stderr)."""
        what = (
            "could not be read, so none of its events is searched"
            if self.events is None
            else f"{self.events} damaged event(s) left out of search"
        )
        return (
            f"session {self.session_id}: {what} ({self.problem});"
            f" see infai session fsck {self.session_id}"
        )

    def to_obj(self) -> dict[str, Any]:
        """JSON-ready: ``{"session_id", "events", "problem"}``."""
        return {"session_id": self.session_id, "events": self.events, "problem": self.problem}

    def __repr__(self) -> str:
        return f"DamagedSession({self.session_id}, {self.events}, {self.problem!r})"


class SearchResults(list[SearchHit]):
    """The hits of one search, best first, and whether older matches were left out.

    A word found in very many events is answered from its newest matches
    (ranking all of them would cost time in proportion to the store's size):
    :attr:`window` is then how many of the newest matches were looked at, and the
    hits are those newest first; None when every match was looked at. A plain list
    otherwise, so code that only wants the hits iterates it as one.
    :attr:`damaged` names the sessions of the search's scope whose events could
    not all be indexed (:class:`DamagedSession`): their hits may be missing.
    """

    def __init__(
        self,
        hits: Iterable[SearchHit] = (),
        window: int | None = None,
        damaged: Iterable[DamagedSession] = (),
    ) -> None:
        super().__init__(hits)
        #: None: every match was ranked; a number: only the newest this many were looked at
        self.window = window
        #: sessions whose damaged events are left out of the index (their hits may be missing)
        self.damaged = list(damaged)

    def to_obj(self, query: str) -> dict[str, Any]:
        """The answer as JSON-ready data: ``{"query", "window", "hits", "damaged"}``
        (the CLI's ``--json`` and the server's body agree)."""
        return {
            "query": query,
            "window": self.window,
            "hits": [h.to_obj() for h in self],
            "damaged": [d.to_obj() for d in self.damaged],
        }

    def window_note(self) -> str | None:
        """One line for people when older matches were left out, else None."""
        if self.window is None:
            return None
        return (
            f"more than {self.window:,} events match: these hits are the newest of them,"
            " newest first (add words or filters to reach older ones)"
        )


# -- the text of a record ---------------------------------------------------------------


def _leaves(value: Any, out: list[str]) -> None:
    """Strings and numbers inside a JSON value (tool arguments), depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(str(item))


_LIST_FIELDS = ("goals", "constraints", "decisions", "files_changed", "unresolved", "facts")


def searchable_text(kind: str, obj: dict[str, Any]) -> str:
    """What search sees of a record, from its JSON object (as stored).

    Metadata is left out on purpose: it holds provider details, not what the
    session said. Unknown kinds give their string fields.
    """
    parts: list[str] = []
    if kind == "message":
        parts = [obj.get("content") or "", obj.get("reasoning") or ""]
    elif kind == "tool_call":
        parts = [obj.get("name") or ""]
        _leaves(obj.get("arguments") or {}, parts)
    elif kind == "tool_result":
        parts = [obj.get("name") or "", obj.get("content") or ""]
    elif kind in ("compaction", "branch_summary"):
        parts = [obj.get("summary") or ""]
        for field in _LIST_FIELDS:
            _leaves(obj.get(field) or [], parts)
    elif kind == "snapshot":  # why it was taken and the paths it left out, not digests
        skipped = obj.get("skipped")
        parts = [obj.get("reason") or "", *(skipped if isinstance(skipped, dict) else {})]
    elif kind == "restore":  # the paths it wrote or kept
        _leaves([obj.get("touched") or [], obj.get("kept") or []], parts)
    else:
        parts = [v for k, v in obj.items() if isinstance(v, str) and k != "metadata"]
    return "\n".join(p for p in parts if isinstance(p, str) and p)


# -- words --------------------------------------------------------------------------------


def fold(word: str) -> str:
    """A word as the index compares it: lower case, diacritics removed."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def words(text: str) -> list[str]:
    """The folded words of ``text`` (runs of letters and digits)."""
    return [fold(m.group()) for m in _TOKEN.finditer(text)]


def index_text(text: str) -> str:
    """``text`` as a space-separated run of folded words: what a backend whose own
    parser splits differently (PostgreSQL's, which keeps paths and URLs whole) is
    given, so both backends see the same words."""
    return " ".join(words(text))


# -- queries -------------------------------------------------------------------------------


class Term:
    """One word or phrase of a query: folded words, in order; ``prefix`` for ``word*``."""

    __slots__ = ("negated", "prefix", "words")

    def __init__(self, words: tuple[str, ...], prefix: bool, negated: bool) -> None:
        self.words = words
        self.prefix = prefix
        self.negated = negated

    def __repr__(self) -> str:
        return f"Term({self.words!r}, prefix={self.prefix}, negated={self.negated})"


class Query:
    """A parsed query: alternatives (OR), each a conjunction of terms (AND / NOT)."""

    __slots__ = ("alternatives", "text")

    def __init__(self, text: str, alternatives: list[list[Term]]) -> None:
        self.text = text
        self.alternatives = alternatives

    def positive_terms(self) -> list[Term]:
        """The terms a hit may contain (for highlighting); negated ones are left out."""
        return [t for alt in self.alternatives for t in alt if not t.negated]

    def to_fts5(self) -> str:
        """The query in SQLite FTS5 syntax (every word quoted, so none is an operator)."""

        def term(t: Term) -> str:
            return '"' + " ".join(t.words) + '"' + ("*" if t.prefix else "")

        out = []
        for alt in self.alternatives:
            pos = " AND ".join(term(t) for t in alt if not t.negated)
            neg = "".join(f" NOT {term(t)}" for t in alt if t.negated)
            out.append(f"({pos}{neg})")
        return " OR ".join(out)

    def to_tsquery(self) -> str:
        """The query in PostgreSQL ``tsquery`` syntax (words are letters and digits only)."""

        def term(t: Term) -> str:
            lexemes = [f"'{w}'" for w in t.words]
            if t.prefix:
                lexemes[-1] += ":*"
            body = " <-> ".join(lexemes)
            return f"!({body})" if t.negated else f"({body})"

        return " | ".join("(" + " & ".join(term(t) for t in alt) + ")" for alt in self.alternatives)


def _bad(query: str, detail: str) -> InvalidInput:
    return InvalidInput(f"search query {query!r}: {detail}")


def _lex(query: str) -> Iterator[tuple[str, bool, bool, int]]:
    """``(text, quoted, negated, offset)`` for each item; ``OR`` comes as itself."""
    i, n = 0, len(query)
    while i < n:
        if query[i].isspace():
            i += 1
            continue
        start, negated = i, False
        if query[i] == "-" and i + 1 < n and not query[i + 1].isspace():
            negated, i = True, i + 1
        if query[i] == '"':
            end = query.find('"', i + 1)
            if end < 0:
                raise _bad(query, f"the quote at offset {i} is never closed")
            text, i = query[i + 1 : end], end + 1
            if i < n and query[i] == "*":
                text, i = text + "*", i + 1
            yield text, True, negated, start
        else:
            end = i
            while end < n and not query[end].isspace() and query[end] != '"':
                end += 1
            yield query[i:end], False, negated, start
            i = end


def parse_query(query: str) -> Query:
    """Parse the search grammar (see the module docstring); bad syntax is InvalidInput."""
    if not query.strip():
        raise _bad(query, "nothing to search for")
    alternatives: list[list[Term]] = [[]]
    for text, quoted, negated, offset in _lex(query):
        if text == "OR" and not quoted and not negated:
            if not alternatives[-1]:
                raise _bad(query, f"OR at offset {offset} has nothing before it")
            alternatives.append([])
            continue
        prefix = text.endswith("*")
        found = words(text.rstrip("*") if prefix else text)
        if not found:
            if quoted:
                raise _bad(query, f"the phrase at offset {offset} has no words")
            continue  # punctuation alone, like " - ", matches nothing and everything
        alternatives[-1].append(Term(tuple(found), prefix, negated))
    if not alternatives[-1] and len(alternatives) > 1:
        raise _bad(query, "OR at the end has nothing after it")
    for alt in alternatives:
        if not any(not t.negated for t in alt):
            what = "nothing to search for" if not alt else "only excluded words; add a word to find"
            raise _bad(query, what)
    return Query(query, alternatives)


# -- snippets -----------------------------------------------------------------------------


def _matches(tokens: list[tuple[int, int, str]], terms: list[Term]) -> list[tuple[int, int]]:
    """Offsets of the tokens that are (part of) a match of one of ``terms``."""
    marked: set[int] = set()
    for term in terms:
        k = len(term.words)
        for i in range(len(tokens) - k + 1):
            ok = all(tokens[i + j][2] == term.words[j] for j in range(k - 1))
            last = tokens[i + k - 1][2]
            if ok and (last.startswith(term.words[-1]) if term.prefix else last == term.words[-1]):
                marked.update(range(i, i + k))
    return [(tokens[i][0], tokens[i][1]) for i in sorted(marked)]


def _first_hint(text: str, terms: list[Term]) -> int:
    """Where the first match probably is (case-insensitive scan; 0 if none is seen)."""
    best = -1
    lowered = text.lower() if text.isascii() else None
    for term in terms:
        needle = term.words[0]
        at = (
            lowered.find(needle)
            if lowered is not None
            else (m.start() if (m := re.search(re.escape(needle), text, re.I)) else -1)
        )
        if at >= 0 and (best < 0 or at < best):
            best = at
    return max(best, 0)


def make_snippet(
    text: str, query: Query, width: int = SNIPPET_CHARS
) -> tuple[str, list[tuple[int, int]]]:
    """One line of ``text`` around its first match, and the matched words' offsets in it.

    Only a window of the text is tokenised (a blob may hold megabytes). Control
    characters and line breaks become spaces and runs of spaces collapse, so the
    line is safe to print; an ellipsis marks text cut off on either side.
    """
    terms = query.positive_terms()
    hint = _first_hint(text, terms)
    start = max(0, hint - width // 3)
    while start > 0 and start > hint - width // 2 and not text[start - 1].isspace():
        start -= 1
    end = min(len(text), start + width)
    window = text[start:end]
    tokens = [(m.start(), m.end(), fold(m.group())) for m in _TOKEN.finditer(window)]
    spans = _matches(tokens, terms)
    # Collapse whitespace and replace unprintables, mapping old offsets to new.
    out: list[str] = []
    where: list[int] = []
    for ch in window:
        where.append(len(out))
        c = ch if ch.isprintable() else " "
        if c == " " and (not out or out[-1] == " "):
            continue
        out.append(c)
    where.append(len(out))
    line = "".join(out).rstrip()
    lead = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    shift = len(lead)
    marks = [(where[a] + shift, min(where[b], len(line)) + shift) for a, b in spans]
    return lead + line + tail, [(a, b) for a, b in marks if a < b]


# -- the HEAD path ----------------------------------------------------------------------


def path_bits(parents: dict[int, int], head: int) -> bytearray:
    """A bitmap of the sequence numbers on the path from the root to ``head``; an
    event whose parent is unknown (a damaged one) ends the path as a root would."""
    bits = bytearray((head >> 3) + 1 if head >= 0 else 0)
    seq = head
    while seq >= 0:
        bits[seq >> 3] |= 1 << (seq & 7)
        seq = parents.get(seq, -1)
    return bits


def on_path(bits: bytes | bytearray | None, seq: int) -> bool:
    """Whether ``seq`` is set in a :func:`path_bits` bitmap."""
    return bits is not None and (seq >> 3) < len(bits) and bool(bits[seq >> 3] >> (seq & 7) & 1)


def advance_path(
    bits: bytes | bytearray | None,
    new: dict[int, int],
    all_parents: Callable[[], dict[int, int]],
) -> bytearray:
    """The HEAD path after appending ``new`` (``seq -> parent seq``; HEAD is the newest).

    The common cases are cheap: an append after HEAD extends the path, and a
    branch from an event on the path cuts it there first. Only a branch from an
    event off the path (another branch) walks the whole tree, from ``all_parents``.
    """
    head = max(new)
    chain, seq = [], head
    while seq in new:
        chain.append(seq)
        seq = new[seq]
    if seq >= 0 and not on_path(bits, seq):
        return path_bits(all_parents(), head)
    out = bytearray((head >> 3) + 1)
    keep = bytes(bits or b"")[: (seq >> 3) + 1] if seq >= 0 else b""
    out[: len(keep)] = keep
    if seq >= 0:  # clear what lies past the fork (the abandoned part of the path)
        out[seq >> 3] &= (1 << ((seq & 7) + 1)) - 1
    for s in chain:
        out[s >> 3] |= 1 << (s & 7)
    return out


def check_limit(limit: int) -> int:
    """``limit`` if it is a sensible number of hits; else InvalidInput."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"search limit {limit!r} must be a positive integer")
    return min(limit, MAX_LIMIT)


def check_kind(kind: str | None) -> str | None:
    """``kind`` if it names an event kind (or is None); else InvalidInput."""
    from .records import KINDS

    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})")
    return kind


def dir_matches(working_dir: str | None, wanted: str) -> bool:
    """Whether a session working in ``working_dir`` is in ``wanted`` or below it."""
    if working_dir is None:
        return False
    have, want = os.path.normpath(working_dir), os.path.normpath(wanted)
    return have == want or have.startswith(want.rstrip("/") + "/")
