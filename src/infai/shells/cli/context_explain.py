"""``infai session context --explain``: which rule kept, shortened or dropped each
event on the path, and why (see :mod:`infai.agent.context`).

The rules are the built-in ones, then the registered ones the configuration of
the session's working directory names (``[context] rules``; all registered if
it names none): installed plugins' rules are registered first, as a session
does. A rule named there but not registered in this process (one a program
registers for itself) cannot run here: it is listed as missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infai.store import SessionStore

from ..inert import inert
from .common import echo, emit_json


def explain(store: SessionStore, session_id: str, at: str | None, as_json: bool) -> None:
    """Print the explanation of the session's context at ``at`` (default HEAD)."""
    from infai.agent import explain_context, load_config, load_context_rules

    for notice in load_context_rules():  # installed plugins' rules, as a session has them
        echo(f"infai: {notice}", err=True)
    info = store.info(session_id)
    names = None
    if info.working_dir and Path(info.working_dir).is_dir():
        names = load_config(Path(info.working_dir)).context_rules
    with store.open_reader(session_id) as reader:
        obj = {"session": session_id, **explain_context(reader, info.extra, names, at)}
    if as_json:
        emit_json(obj)
        return
    for line in explain_lines(obj):
        echo(line)


def explain_lines(obj: dict[str, Any]) -> list[str]:
    """The explanation as text: the rules, one line per event (then its other
    steps, indented), and what is sent in the end."""
    lines = [f"rules: {', '.join(obj['rules'])}"]
    if obj["missing_rules"]:
        lines.append(f"not registered here (left out): {', '.join(obj['missing_rules'])}")
    for event in obj["events"]:
        preview = " ".join(event["preview"].split())
        preview = preview[:48] + ("…" if len(preview) > 48 else "")
        lines.append(
            f"{event['seq']:>5} {event['id'][:8]} {event['kind'] + '/' + event['role']:<22}"
            f" {event['action']:<9} {event['rule']}: {inert(event['why'])}  | {inert(preview)}"
        )
        decided = (event["rule"], event["why"])
        for step in event["steps"]:
            if (step["rule"], step["why"]) != decided:
                lines.append(f"{'':>38}also {step['rule']}: {inert(step['why'])}")
    sent = obj["messages"]
    counts = {a: sum(1 for e in obj["events"] if e["action"] == a) for a in ("kept", "shortened")}
    dropped = len(obj["events"]) - counts["kept"] - counts["shortened"]
    lines.append(
        f"{len(obj['events'])} events: {counts['kept']} kept, {counts['shortened']} shortened, "
        f"{dropped} dropped; {len(sent)} messages sent"
    )
    if obj["error"]:
        lines.append(f"no model can be sent this context: {inert(obj['error'])}")
    return lines
