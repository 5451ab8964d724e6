"""``infai --remote URL session export`` from an ``infai serve`` on PostgreSQL.

The export a client writes is the bytes ``infai session export`` writes over the
same PostgreSQL store (``--store URL``): the header, every event with a blob's
record inlined, and the snapshots' objects (version 2). The directory store's
case is in test_remote_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from infai.shells.cli import main
from serveproc import Serve

TOKEN = "remote-pg-token-0123456789abcdef"


def infai(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def test_the_export_of_a_pg_servers_session_is_the_local_export_of_its_store(
    pg_url: str, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["the first answer", "the second answer"]))
    model = f"scripted:{script}"
    with Serve(home, work, TOKEN, "--model", model, store=pg_url) as url:
        remote = ("--remote", url, "--token", TOKEN)
        big = "a prompt kept as a blob " * 1000  # over the store's 16 KiB: a blob
        ran = infai(*remote, "run", big)
        sid = ran.stderr.strip().splitlines()[-1].removeprefix("session ")
        (work / "a.txt").write_text("two\n")  # the next turn's snapshot differs
        infai(*remote, "run", "--session", sid, "the second prompt")

        exported = infai(*remote, "session", "export", sid).stdout_bytes
        out = tmp_path / "out.jsonl"  # -o: written here, all at once
        infai(*remote, "session", "export", sid, "-o", str(out))
    local = infai("--home", str(home), "--store", pg_url, "session", "export", sid).stdout_bytes
    assert exported == local and out.read_bytes() == local

    lines = [json.loads(line) for line in local.splitlines()]
    assert lines[0]["infai_export"] == 2 and lines[0]["session"]["id"] == sid
    events = [x for x in lines[1:] if "kind" in x]
    assert any(x["kind"] == "snapshot" for x in events)
    assert any(set(x) == {"object", "data"} for x in lines[1:])  # the files' objects
    prompts = [x["record"]["content"] for x in events if x.get("role") == "user"]
    assert prompts == [big, "the second prompt"]
    log = infai("--home", str(home), "--store", pg_url, "session", "log", sid, "--json").stdout
    blobs = [e["blob"] for e in json.loads(log) if e["kind"] == "message" and e["role"] == "user"]
    assert blobs == [True, False]  # stored as a blob, exported inline
