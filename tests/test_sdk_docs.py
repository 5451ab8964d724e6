"""Every Python example of ``docs/sdk.md`` runs, as a reader would run it.

Each ``python`` block of the page is a whole program. It is run as a script
(``__name__ == "__main__"``, a namespace of its own) in this process, which
spares each block the interpreter's and infai's start-up, in an empty directory
of its own, with a store of its own (``$INFAI_HOME``) and no user configuration
(the test-wide ``$INFAI_CONFIG``); the examples assert what they show, so a
block that runs but does something else fails too. A page whose blocks cannot
all run is a page that has drifted from the API. (The programs of
``examples/`` run as processes: ``tests/examples/test_sdk_examples.py``.)
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "sdk.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.DOTALL | re.MULTILINE)


def test_the_page_has_its_examples() -> None:
    assert len(BLOCKS) >= 8
    assert BLOCKS[0].strip() == "from infai import Harness"


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_each_example_runs(
    number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    program = tmp_path / f"example_{number}.py"
    program.write_text(BLOCKS[number])
    monkeypatch.delenv("INFAI_STORE", raising=False)
    monkeypatch.setenv("INFAI_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(work)
    runpy.run_path(str(program), run_name="__main__")
    capsys.readouterr()  # what it printed is the reader's; its asserts are the test


def test_the_page_names_every_example_program() -> None:
    programs = sorted(p.name for p in (PAGE.parent.parent / "examples").glob("*.py"))
    listed = PAGE.read_text().split("## Example programs", 1)[1].split("\n## ", 1)[0]
    assert [name for name in programs if f"- `{name}`" not in listed] == []


@pytest.mark.slow  # a cold mypy run over infai: tens of seconds
def test_the_examples_type_check_as_a_typed_program_would(tmp_path: Path) -> None:
    """The API is typed: a reader's program written like the page's passes
    ``mypy --strict`` (no attribute that only some records have, no untyped call)."""
    programs = []
    for number, block in enumerate(BLOCKS):
        (program := tmp_path / f"example_{number}.py").write_text(block)
        programs.append(str(program))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "c"), *programs],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout
