"""``infai import`` shows what the commit itself reports, not only what reading found.

Growing an imported session can earn warnings only the commit knows (a reply
completed since the last import, a session the user continued in infai, a parent
linked late): they must reach stderr and ``--json`` like the reader's warnings.
A Claude Code corpus file is imported cut inside a response, then whole.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from import_corpus import corpus
from infai.shells.cli.main import main

NAME = "8a283a61-e3f0-4e8f-ba06-6711e2fcf2ed.jsonl"


def test_a_completed_reply_is_reported_by_the_command(tmp_path: Path) -> None:
    source = corpus() / "claude-code" / "feipi" / NAME
    lines = source.read_bytes().splitlines(keepends=True)
    project = tmp_path / "p"
    project.mkdir()
    target = project / NAME
    target.write_bytes(b"".join(lines[:14]))  # line 14 ends inside a response
    home = ["--home", str(tmp_path / "home")]
    first = CliRunner().invoke(main, [*home, "import", "claude-code", str(project), "--json"])
    assert first.exit_code == 0, first.output
    target.write_bytes(b"".join(lines))
    second = CliRunner().invoke(main, [*home, "import", "claude-code", str(project), "--json"])
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    warnings = [w for f in data["files"] for r in f["reports"] for w in r["warnings"]]
    assert any("still being written" in w for w in warnings)
    table = CliRunner().invoke(main, [*home, "import", "claude-code", str(project)])
    assert "still being written" not in table.output  # the third run: nothing changed
