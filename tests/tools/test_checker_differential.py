"""The command checker against the shell that runs the commands: real bash.

Commands are generated from a grammar of words, quotes, ``${...}``, ``$(...)``,
backquotes, comments, ``$'...'``, groups and operators, and each one is run by
bash exactly as the ``bash`` tool runs it (:func:`~infai.tools.bash_path.shell_argv`)
in a temporary directory, with ``PATH`` holding only stub programs that record
their argv (and a ``command_not_found_handle`` recording any other name). For
each, either the checker says the command is unclear, or what bash ran is what
the checker saw: every program bash started is one the checker names, with the
words it names (a word the checker calls dynamic stands for any words), and,
where bash reported no error, every command the checker names did run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infai.tools.bash_path import shell_argv
from infai.tools.commands import Analysis, Command, analyse

#: the programs the grammar names (none is a bash builtin, so each runs a stub)
PROGRAMS = ("ls", "rm", "touch", "cat", "p", "q")
STUB = '#!/bin/sh\nprintf "%s\\0" "${0##*/}" "$@" > "$LOGDIR/$$"\n'
NOT_FOUND = (
    'command_not_found_handle() { printf "%s\\0" "$@" > "$LOGDIR/nf.$BASHPID"; return 0; }\n'
    "TIMEFORMAT=\n"  # time prints nothing: stderr stays for errors
)

# -- the grammar ---------------------------------------------------------------------------------

plain = st.sampled_from([*PROGRAMS, "a", "b", "-f", "x", "#", "}", "{", "a#b", "x=1"])
quoted_text = st.text(alphabet="ab }{);#|$`\"\\'\n", max_size=6)
single = quoted_text.map(lambda t: "'" + t.replace("'", "") + "'")
escaped = st.sampled_from(["\\;", "\\#", "\\}", "\\'", '\\"', "\\ ", "\\$", "\\\n"])
ansi = st.lists(
    st.sampled_from(
        ["l", "s", "r", "m", "\\x6c", "\\x73", "\\162", "\\'", "\\\\", "\\0", "\\z", "\\n",
         ";", "}", " ", '"', "\\c", "#"]
    ),
    max_size=4,
).map(lambda parts: "$'" + "".join(parts) + "'")  # fmt: skip


BRACE_OPERATORS = ("-", ":-", "#", "%")
OPERATORS = ("; ", " && ", " | ", "\n", " & ", ";")
#: (no "!": a negated status would stop a later && part)
PREFIXES = ("", "", "", "time ", "x=1 ", "x='a b' ", "x=$(p) ", "\\time ")
COMMENTS = ("", "", " #", " # )", " #'", " #`", " # }")


@st.composite
def words(draw: st.DrawFn, depth: int) -> str:
    """A word: one to three pieces, some of them expansions holding a script."""
    pieces = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["plain", "plain", "single", "double", "escaped", "ansi",
                                     "substitution", "backquoted", "braced"]))  # fmt: skip
        pieces.append(draw(piece(kind, depth)))
    return "".join(pieces)


def piece(kind: str, depth: int) -> st.SearchStrategy[str]:
    if kind in ("substitution", "backquoted", "braced", "double") and depth >= 2:
        kind = "plain"
    if kind == "substitution":
        return scripts(depth + 1).map(lambda s: f"$({s})")
    if kind == "backquoted":
        inner = scripts(depth + 1).filter(lambda s: "`" not in s and "\\" not in s)
        return inner.map(lambda s: f"`{s}`")
    if kind == "braced":
        return braced(depth)
    if kind == "double":
        return doubled(depth)
    return {"plain": plain, "single": single, "escaped": escaped, "ansi": ansi}[kind]


@st.composite
def braced(draw: st.DrawFn, depth: int) -> str:
    if draw(st.booleans()):
        return draw(st.sampled_from(["${x}", "${#}", "${x-}", "$x", "$#"]))
    body = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["a", "}", "{", "#", ";", "'}'", '"}"', "\\}", "single",
                                     "escaped", "ansi", "substitution"]))  # fmt: skip
        body.append(draw(piece(kind, depth)) if len(kind) > 3 else kind)
    return "${x" + draw(st.sampled_from(BRACE_OPERATORS)) + "".join(body) + "}"


@st.composite
def doubled(draw: st.DrawFn, depth: int) -> str:
    body = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["a", " ", "#", "}", ";", "'", "substitution", "braced",
                                     "escaped", "backquoted"]))  # fmt: skip
        body.append(draw(piece(kind, depth)) if len(kind) > 1 else kind)
    return '"' + "".join(body) + '"'


@st.composite
def heredocs(draw: st.DrawFn, depth: int) -> str:
    """``cat <<EOF`` with a body of words (substitutions among them) to its delimiter."""
    delimiter = draw(st.sampled_from(["EOF", "'EOF'", "E\\OF", '"EOF"', "-EOF"]))
    lines = [" ".join(draw(words(depth)) for _ in range(draw(st.integers(0, 2))))]
    lines += draw(st.lists(st.sampled_from(["EOF ", "\tEOF", "x'", "$(p)"]), max_size=2))
    end = "\tEOF" if delimiter == "-EOF" and draw(st.booleans()) else "EOF"
    return f"cat <<{delimiter}\n" + "\n".join(lines) + f"\n{end}"  # <<-EOF strips tabs


@st.composite
def scripts(draw: st.DrawFn, depth: int = 0) -> str:
    """Commands joined by operators; a part may be a group or a subshell."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(["command", "command", "words", "subshell", "group", "if", "heredoc"])
        )
        if kind == "heredoc":
            parts.append(draw(heredocs(depth)))
            continue
        if kind in ("subshell", "group", "if") and depth < 2:
            inner = draw(scripts(depth + 1))
            # a newline before the closer: a comment at the end of the part ends there
            shape = {"subshell": "( {}\n)", "group": "{{ {}\n}}", "if": "if p; then {}\nfi"}
            parts.append(shape[kind].format(inner))
            continue
        args = [draw(words(depth)) for _ in range(draw(st.integers(0, 3)))]
        first = draw(st.sampled_from(PROGRAMS)) if kind != "words" else draw(words(depth))
        prefix = draw(st.sampled_from(PREFIXES))
        parts.append(prefix + " ".join([first, *args]) + draw(st.sampled_from(COMMENTS)))
    joined = parts[0]
    for part in parts[1:]:
        joined += draw(st.sampled_from(OPERATORS)) + part
    return joined


# -- running it ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stubs")
    (root / "bin").mkdir()
    (root / "work").mkdir()
    (root / "log").mkdir()
    for name in PROGRAMS:
        stub = root / "bin" / name
        stub.write_text(STUB)
        stub.chmod(0o755)
    (root / "not_found.bash").write_text(NOT_FOUND)
    return root


def run_in_bash(root: Path, command: str) -> tuple[list[tuple[str, ...]], str]:
    """The argv of every program bash ran for ``command``, and what it said on stderr."""
    log = root / "log"
    for old in log.iterdir():
        old.unlink()
    env = {"PATH": str(root / "bin"), "LOGDIR": str(log), "BASH_ENV": str(root / "not_found.bash")}
    done = subprocess.run(
        shell_argv(command),
        cwd=root / "work",
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )  # the pipes close only when every program it started (in the background too) ended
    ran = [tuple(p.read_bytes().decode(errors="replace").split("\0")[:-1]) for p in log.iterdir()]
    return ran, done.stderr.decode(errors="replace")


def matches(argv: Sequence[str], command: Command) -> bool:
    """Whether bash's ``argv`` is ``command`` (a dynamic word: any words, none too)."""
    words, dynamic = command.argv, command.dynamic

    def fits(i: int, j: int) -> bool:
        if j == len(words):
            return i == len(argv)
        if dynamic[j]:
            return any(fits(k, j + 1) for k in range(i, len(argv) + 1))
        return i < len(argv) and argv[i] == words[j] and fits(i + 1, j + 1)

    return fits(0, 0)


def disagreement(found: Analysis, ran: list[tuple[str, ...]], errors: str) -> str:
    """How the checker's reading and bash's run differ ("" when they do not)."""
    seen = [c for c in found.commands if c.argv]  # not a bare assignment
    for argv in ran:
        if not any(matches(argv, c) for c in seen):
            return f"bash ran {argv!r}, which the checker does not name"
    if not errors:  # bash read it all: each command it names ran (a wrapper's: if it is there)
        for command in (c for c in seen if not c.wrapped):
            if not any(matches(argv, command) for argv in ran):
                return f"the checker names {command.argv!r}, which bash did not run"
    return ""


@pytest.mark.slow  # over 10 s on 2 cores: in `make crash`
def test_what_bash_runs_is_what_the_checker_sees_or_it_says_unclear(stubs: Path) -> None:
    tally = {"clear": 0, "unclear": 0, "strict": 0}

    @settings(
        max_examples=200,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(scripts())
    def check(command: str) -> None:
        found = analyse(command)
        if found.unclear:
            tally["unclear"] += 1
            return
        ran, errors = run_in_bash(stubs, command)
        tally["clear"] += 1
        tally["strict"] += not errors
        why = disagreement(found, ran, errors)
        assert not why, f"{command!r}: {why}\nbash said: {errors}"

    check()
    # the grammar must not be so wild that every command is unclear or an error
    assert tally["clear"] >= 50 and tally["strict"] >= 40, tally  # about 100 and 85


@pytest.mark.parametrize(
    "command",
    [
        "ls $(p #)\ntouch p\n)",  # a comment inside $(...) hides the )
        "ls $(p #'\ntouch p\np ')')",
        "ls #; touch p",
        "ls a#b #c",
        "(ls)#x\ntouch p",
        "ls ${x-a}}",
        "$'\\x6c\\x73' a",  # $'...' decoded as bash does
        "$'l\\0zz's a",  # a NUL ends $'...'
        "ls $'r\\zm' $'\\x' $'\\u' $'\\c'",  # unknown escapes keep their backslash
        'ls `p \\"a\\"` "`p \\"a\\"`"',  # \" in backquotes in double quotes
        "cat <<EOF\n$(p a) `q` \"$(ls)\" '$(p b)'\nEOF\nls",  # a heredoc's body substitutes
        "cat <<'EOF'\n$(p a)\nEOF\nls",  # ... unless its delimiter is quoted
        "cat <<E\\OF\n$(p a)\nEOF\nls",
        "cat <<-EOF\n\t$(p)\n\tEOF\nls",
        "cat <<A <<B\n$(p)\nA\n$(q)\nB\nls",
        "cat <<EOF; p 'a\nb'\n$(q)\nEOF\nls",
        "cat <<EOF\nx'\nEOF\nls",
        "time -fx p",  # bash's keyword time, then a program named -fx
    ],
)
def test_constructs_the_checker_reads_as_bash_does(stubs: Path, command: str) -> None:
    found = analyse(command)
    assert not found.unclear, found.unclear
    ran, errors = run_in_bash(stubs, command)
    assert ran and not errors, (ran, errors)
    assert not disagreement(found, ran, errors), (command, ran, found.commands)


@pytest.mark.parametrize(
    "command",
    [
        "ls ${x-'}'}; touch p #'",  # a quoted } inside ${...}
        "ls \"${x-'}'}\"; touch p #'",
        "ls ${x-\\}}; touch p",
        "ls ${x-{}; touch p; }",
        "ls ${x-$'}'}; touch p #'",
        "ls ${ p; }",
        "p $(cat <<EOF\nx\nEOF\ntouch;touch b\n)",  # bash 5.2 runs "touch touch b"
        "sh -c \"ls $'\\x3b' touch p\"",  # dash reads $'...' as $ and '...'
    ],
)
def test_readings_shells_differ_on_are_unseen(command: str) -> None:
    found = analyse(command)
    assert found.hidden and found.unclear
