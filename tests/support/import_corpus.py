"""Where the other tools' session files live for the import tests, and small readers.

The corpus (``shared/corpus`` beside the repository, or ``$INFAI_CORPUS``) holds
files other people's tools wrote; it is read in place, never copied into the
repository. A missing corpus fails the tests that need it (it does not skip
them): an import test that silently did not run would prove nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def corpus() -> Path:
    """The corpus directory; fails the test when it is not there."""
    root = Path(os.environ.get("INFAI_CORPUS") or REPO.parent / "shared" / "corpus")
    if not (root / "FORMATS.md").is_file():
        pytest.fail(
            f"the import corpus is missing at {root} (set INFAI_CORPUS to its directory)",
            pytrace=False,
        )
    return root


def json_values(path: Path) -> list[dict[str, Any]]:
    """Every JSON object in a JSON-lines file, two on a line included (a plain reader)."""
    decoder = json.JSONDecoder()
    out = []
    for line in path.read_text().splitlines():
        pos, text = 0, line.strip()
        while pos < len(text):
            value, pos = decoder.raw_decode(text, pos)
            out.append(value)
            while pos < len(text) and text[pos].isspace():
                pos += 1
    return out
