"""A session as one self-contained HTML page to hand on (``infai session share``).

One file, no script, no external resource: its own Content-Security-Policy
allows only its one style sheet, by hash. The session's branch tree with HEAD,
the active path's conversation, tool calls and results folded in
``<details>``, and events off the path folded in the tree. Every string is
redacted first (:mod:`.redact`: the secret variables' values, known token
shapes, the home directory) and then HTML-escaped; labels are cut after
redaction, so a cut never leaves half a secret behind. What was redacted,
counted by kind, is shown at the top.
"""

from __future__ import annotations

import base64
import hashlib
import json
from html import escape
from typing import Any

from infai.store import Entry, SessionStore

from .redact import Redactor

#: characters of an event's label in the tree
LABEL = 80
#: the deepest indentation the tree shows (deeper branches line up)
DEEPEST = 12
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;
color:#1d2330;background:#f6f7f9}
h1{font-size:1.3rem;margin:.2rem 0}h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
.meta,.who{color:#5d6677;font-size:.85rem}
.redacted{border:1px solid #d8dce3;background:#fff;border-radius:.4rem;padding:.4rem .8rem}
ol{list-style:none;padding:0;margin:0}
.msg{background:#fff;border:1px solid #d8dce3;border-radius:.5rem;padding:.4rem .6rem;
margin:.4rem 0}
.msg.user{background:#e8f0fe}.who{text-transform:uppercase;display:block}
.text,pre{white-space:pre-wrap;overflow-wrap:anywhere}
pre{font:.82rem/1.4 ui-monospace,monospace;margin:.3rem 0}
details{background:#f3f1ea;border-radius:.35rem;padding:.2rem .5rem;margin:.3rem 0}
summary{cursor:pointer;overflow-wrap:anywhere}
.tree li{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;font-size:.85rem;
border-left:3px solid transparent;padding-left:.3rem}
.tree li.on-path{border-left-color:#2b5797}.tree details{background:none;margin:0;padding:0}
.tree details[open]{white-space:normal}
.head{background:#2b5797;color:#fff;border-radius:.2rem;padding:0 .3rem;font-size:.7rem}
""" + "".join(f".d{n}{{margin-left:{n * 0.9:.1f}rem}}" for n in range(1, DEEPEST + 1))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def _label(obj: dict[str, Any]) -> str:
    """An event's one-line label, from its (redacted) record; cut to :data:`LABEL`."""
    record = obj.get("record") or {}
    if obj["kind"] == "tool_call":
        args = json.dumps(record.get("arguments", {}), ensure_ascii=False)
        text = f"{record.get('name', '')}({args})"
    elif obj["kind"] == "tool_result":
        text = f"{record.get('name', '')}: {_text(record.get('content', ''))}"
    elif isinstance(record.get("content"), str):
        text = record["content"]
    else:
        text = json.dumps(record, ensure_ascii=False)
    line = " ".join(text.split())
    return line if len(line) <= LABEL else line[: LABEL - 1] + "…"


def _event_html(obj: dict[str, Any]) -> str:
    """One event of the conversation: a message in full, anything else folded."""
    record, kind, role = obj.get("record") or {}, obj["kind"], obj["role"]
    anchor = f'id="e-{escape(obj["id"])}"'
    if (
        kind == "message"
        and role in ("user", "assistant")
        and not record.get("metadata", {}).get("interrupted")
    ):
        reasoning = record.get("reasoning")
        folded = (
            f"<details><summary>reasoning</summary><pre>{escape(_text(reasoning))}</pre></details>"
            if reasoning
            else ""
        )
        return (
            f'<li {anchor} class="msg {escape(role)}"><span class="who">{escape(role)}</span>'
            f'{folded}<div class="text">{escape(_text(record.get("content", "")))}</div></li>'
        )
    summary = escape(f"{kind}/{role}: {_label(obj)}")
    body = escape(_body(obj))
    return f"<li {anchor}><details><summary>{summary}</summary><pre>{body}</pre></details></li>"


def _body(obj: dict[str, Any]) -> str:
    """What a folded event shows: a call's arguments, a result's or message's text."""
    record = obj.get("record") or {}
    if obj["kind"] == "tool_call":
        return _text(record.get("arguments", {}))
    if obj["kind"] in ("tool_result", "message") and "content" in record:
        return _text(record["content"])
    return _text(record)


def _layout(entries: list[Entry]) -> list[tuple[Entry, int]]:
    """The events depth-first, each with its depth (a branch after the first: one deeper)."""
    children: dict[int, list[Entry]] = {}
    for entry in entries:
        children.setdefault(entry.parent_seq, []).append(entry)
    order: list[tuple[Entry, int]] = []
    stack = [(e, 0) for e in reversed(children.get(-1, []))]
    while stack:
        entry, depth = stack.pop()
        order.append((entry, depth))
        kids = children.get(entry.seq, [])
        stack.extend((kid, depth + (1 if i else 0)) for i, kid in reversed(list(enumerate(kids))))
    return order


def _tree_html(
    entries: list[Entry], objs: dict[str, dict[str, Any]], path: set[str], head: str | None
) -> str:
    items = []
    for entry, depth in _layout(entries):
        obj = objs[entry.id]
        label = escape(f"{obj['kind']}/{obj['role']}: {_label(obj)}")
        mark = '<span class="head">HEAD</span> ' if entry.id == head else ""
        if entry.id in path:
            body = f'<a href="#e-{escape(entry.id)}">{label}</a>'
        else:
            body = f"<details><summary>{label}</summary><pre>{escape(_body(obj))}</pre></details>"
        classes = " ".join(c for c in ("on-path" if entry.id in path else "", _depth(depth)) if c)
        items.append(f'<li class="{classes}">{mark}{body}</li>')
    return "\n".join(items)


def _depth(depth: int) -> str:
    return f"d{min(depth, DEEPEST)}" if depth else ""


def page(
    info: dict[str, Any],
    entries: list[Entry],
    objs: dict[str, dict[str, Any]],
    path: list[str],
    head: str | None,
    summary: list[str],
) -> str:
    """The whole HTML file; every string in ``info`` and ``objs`` is already redacted."""
    style_hash = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; style-src 'sha256-{style_hash}'; base-uri 'none'; form-action 'none'"
    )
    title = escape(info.get("name") or info["id"])
    about = escape(
        f"session {info['id']} · {info.get('working_dir') or ''} · "
        f"model {info.get('model') or '-'} · {len(entries)} events · "
        f"created {info.get('created_at', '')}"
    )
    redacted = "".join(f"<li>{escape(line)}</li>" for line in summary)
    conversation = "\n".join(_event_html(objs[i]) for i in path)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title} · infai session</title>
<style>{STYLE}</style></head>
<body>
<header><h1>{title}</h1><p class="meta">{about}</p></header>
<section class="redacted"><h2>Redacted before sharing</h2>
<ul id="redacted">{redacted}</ul></section>
<h2>Branches</h2>
<ol class="tree" id="tree">
{_tree_html(entries, objs, set(path), head)}
</ol>
<h2>Conversation (the active path, to HEAD)</h2>
<ol id="conversation">
{conversation}
</ol>
</body></html>
"""


def shared_html(store: SessionStore, session_id: str, redactor: Redactor) -> tuple[str, int]:
    """The session's HTML, every string through ``redactor``; and its number of events."""
    info = store.info(session_id)
    with store.open_reader(session_id) as reader:
        entries = list(reader.entries())
        head = reader.head
        path = [e.id for e in reader.path(to_boundary=False)] if head else []
        objs = {e.id: redactor.value(reader.event(e.id, resolve=True).to_obj()) for e in entries}
    shown = redactor.value(info.to_obj())
    return page(shown, entries, objs, path, head, redactor.summary()), len(entries)


__all__ = ["page", "shared_html"]
