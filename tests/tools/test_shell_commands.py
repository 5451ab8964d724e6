"""Shell command analysis: every command a string runs, in the shapes rules see."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infai.tools.commands import MAX_DEPTH, analyse


def started(command: str) -> list[str]:
    return [c.written for c in analyse(command).started]


def runs(command: str) -> set[str]:
    """Every normalised form of every command (what deny rules see)."""
    return {form for c in analyse(command).commands for form in c.forms}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", ["git status"]),
        ("a; b && c || d | e & f\ng", ["a", "b", "c", "d", "e", "f", "g"]),
        ("echo $(id) `whoami`", ["id", "whoami", "echo $(id) `whoami`"]),
        ('echo "x $(id -u) y"', ["id -u", "echo x $(id -u) y"]),
        ("(cd a && make) ; { ls; }", ["cd a", "make", "ls"]),
        ("diff <(ls a) <(ls b)", ["ls a", "ls b", "diff <(...) <(...)"]),
        ("'git' \"status\"", ["git status"]),
        ("/usr/bin/git status", ["git status"]),  # a system directory: the program itself
        ("./git status", ["./git status"]),  # a local file of that name is another program
        ("X=1 Y=2 make", ["X=1 Y=2 make"]),  # allow rules see the assignments
        ("# just a comment", []),
        ("echo 'a;b' \"c|d\" e\\;f", ["echo a;b c|d e;f"]),
        ("if true; then ls; fi", ["true", "ls"]),
        ("for f in a b; do rm $f; done", ["rm $f"]),
        ("time -p a | time b | { time c; }", ["a", "time b", "c"]),  # the keyword starts a pipeline
        ("''x=1 a", ["x=1 a"]),  # a quoted name is no assignment: the program is x=1
        ("a #b; c\nd # e", ["a", "d"]),  # a comment runs to the end of the line
        ("cat <<EOF\n$(a)\nEOF\nb", ["a", "cat", "b"]),
    ],
)
def test_the_commands_the_shell_starts(command: str, expected: list[str]) -> None:
    assert started(command) == expected


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ("env A=1 rm -fr x", "rm -rf x"),
        ("env -u HOME -- rm -fr x", "rm -rf x"),
        ("env -S 'rm -fr x'", "rm -rf x"),
        ("env -S 'rm -fr' x", "rm -rf x"),  # the words after the string are its arguments
        ("command -p rm -fr x", "rm -rf x"),
        ("exec -a name rm -fr x", "rm -rf x"),
        ("sudo -u root rm -fr x", "rm -rf x"),
        ("timeout -s KILL 5 rm -fr x", "rm -rf x"),
        ("xargs -0 -n1 rm -fr", "rm -rf {}"),  # with the words it reads
        ("xargs", "echo {}"),
        ("find . -type f -exec rm -f {} ;", "rm -f {}"),
        ("find a b -delete", "rm -rf a b"),
        ("find -delete", "rm -rf ."),
        ("bash -lc 'rm -fr x'", "rm -rf x"),
        ("su -c 'rm -fr x' root", "rm -rf x"),
        ("watch -n 1 rm -fr x", "rm -rf x"),
        ("eval rm -fr x", "rm -rf x"),
        ("git -C repo -c a=b --no-pager push -f origin", "git push -f origin"),
        ("git push origin -f", "git push -f origin"),
        ("rm --recursive --force x", "rm -rf x"),
        ("rm --recu --fo x", "rm -rf x"),
        ("rm -R -f x", "rm -rf x"),
        ("rm -fvr x", "rm -rfv x"),
        ("rm x -r -f", "rm -rf x"),
        ("chmod --recursive 777 x", "chmod -R 777 x"),
        ("xargs -i rm -f {}", "rm -f {}"),  # -i takes its value attached only
        ("xargs -I {} rm -f {}", "rm -f {}"),
        ("xargs --max-args 1 rm -f", "rm -f {}"),
        ("sudo -Eu root rm -fr x", "rm -rf x"),  # a cluster ending in a valued option
        ("sudo X=1 rm -fr x", "rm -rf x"),
        ("env - rm -fr x", "rm -rf x"),
        ("env --un X rm -fr x", "rm -rf x"),  # a unique prefix: --unset X
        ("nice -5 rm -fr x", "rm -rf x"),
        ("time -p rm -fr x", "rm -rf x"),
        ("sh -c 'time -f %e rm -fr x'", "rm -rf x"),  # sh has no time keyword: /usr/bin/time
        ("watch -d rm -fr x", "rm -rf x"),
        ("flock f rm -fr x", "rm -rf x"),
        ("flock -w 5 f -c 'rm -fr x'", "rm -rf x"),
        ("unshare --mount=/m -r rm -fr x", "rm -rf x"),
        ("nsenter -t 1 -m rm -fr x", "rm -rf x"),
        ("ionice -c 3 rm -fr x", "rm -rf x"),
        ("taskset -c 0 rm -fr x", "rm -rf x"),
        ("chroot --userspec u:g / rm -fr x", "rm -rf x"),
        ("find -L / -delete", "rm -rf /"),
        ("trap 'rm -fr x' EXIT", "rm -rf x"),
        ("function f { rm -fr x; }", "rm -rf x"),
    ],
)
def test_wrapped_commands_and_normalised_flags(command: str, inner: str) -> None:
    assert inner in runs(command)


def test_what_is_not_rm_rf_stays_so() -> None:
    assert "rm -rf x" not in runs("rm -r x") | runs("rm -- -rf x") | runs("echo rm -rf x")
    assert not any(form.startswith("rm -rf") for form in runs("rm --dry -f x"))  # ambiguous


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("$RM -rf x", "known only when the command runs"),
        ("/bin/r? -rf x", "known only when the command runs"),
        ("{rm,-rf,x}", "known only when the command runs"),
        ("cat <<EOF $(p\n)\nx\nEOF", "heredoc"),  # where does its body start?
        ("cat <<EOF\na \\\nEOF\nb\nEOF", "heredoc"),  # bash joins the lines first
        ("echo $((1 + 2))", "arithmetic"),
        ("case x in a) ls;; esac", ")"),  # its patterns' parentheses are not shell syntax here
        ("echo 'open", "not closed"),
        ('echo "open', "not closed"),
        ("echo $(open", "missing"),
        ("ls )", "unexpected"),
        ("$(" * (MAX_DEPTH + 3), "levels deep"),
        ("~/rm -rf x", "known only when the command runs"),  # ~ is the home directory
        ("x=1; ${x:-$'\\x72m'} -rf y", "quoting inside ${...}"),
        ("echo ${a[$i]}", "arithmetic"),
    ],
)
def test_what_cannot_be_followed_is_unclear(command: str, why: str) -> None:
    found = analyse(command)
    assert found.unclear and why in found.unclear and not found.simple


def test_output_redirections_are_writes_and_duplications_are_not() -> None:
    assert analyse("echo a > f 2>&1 >>g &> h").writes == ("f", "g", "h")
    assert analyse("echo a 2>/dev/null >&2 < in").writes == ()
    assert analyse("ls > out").simple is False and analyse("ls 2>&1").simple


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"ab $()`'\"\\;&|<>{}*\n#=-c", "rm", "eval "])).map("".join))
def test_any_text_is_analysed_without_error(command: str) -> None:
    found = analyse(command)
    assert all(c.forms for c in found.commands)


def test_deep_or_huge_input_stays_fast() -> None:
    started_at = time.monotonic()
    for command in ("$(" * 5000, "(" * 5000, "`" * 5000, "${" * 5000, "eval " * 2000):
        assert analyse(command).unclear or analyse(command).commands
    assert time.monotonic() - started_at < 5


@pytest.mark.parametrize(
    "command",
    [
        "timeout --bogus 5 rm x",  # an option the table does not have
        "sudo -Z rm x",
        "env --i rm x",  # --ignore-environment or --ignore-signal: not one option
        "xargs -n",  # a value missing
        "strace rm x",
        "zsh -c 'rm x'",
        "/lib64/ld-linux-x86-64.so.2 /bin/rm x",
        "echo rm x | bash",
        "bash -s",
        "bash -o pipefail",  # -o's value is not a script
        "bash --rcfile x -",
        "sh /dev/stdin",
        "coproc rm x",
        "let 'x=1'",
        "declare -i x=1",
        "alias ls='rm x'",
        "PS4='$(rm x)'",
        "[[ $x -eq 1 ]]",
        "((x))",
    ],
)
def test_what_a_runner_starts_unseen_when_it_cannot_be_read(command: str) -> None:
    assert analyse(command).hidden


def test_a_script_file_is_not_a_shell_reading_its_input() -> None:
    assert not analyse("bash script.sh").hidden and not analyse("sh -e ./x").hidden
