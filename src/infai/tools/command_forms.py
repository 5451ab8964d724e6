"""The normalised shapes ("forms") of one simple command, for deny and ask rules.

:mod:`.commands` finds every simple command a shell string runs; this module
turns one of them into the shapes rules are matched against: the program's
basename with its short flags merged into one cluster, in every order (long
options of the programs in :data:`LONG_FLAGS` and their unique prefixes mapped
to their letters), the cluster before and after a subcommand word, and for git
also without its global options (``git -C . push`` is also ``git push``). So
``rm -rf*`` matches ``rm -v -f -r x`` and ``rm --rec --force x``.
"""

from __future__ import annotations

import itertools

#: a flag cluster up to this long is tried in every order; a longer one with every
#: two of its flags first (so a rule naming one or two flags still matches)
MAX_PERMUTED = 4
#: a cluster longer than this is tried only as written and sorted
MAX_PAIRED = 8
#: long options that mean a short one, per program (GNU accepts unique prefixes too)
LONG_FLAGS: dict[str, dict[str, str]] = {
    "rm": {
        "recursive": "r", "force": "f", "dir": "d", "verbose": "v", "interactive": "i",
        "one-file-system": "", "no-preserve-root": "", "preserve-root": "",
        "help": "", "version": "",
    },
    "cp": {"recursive": "r", "force": "f", "archive": "a", "verbose": "v", "link": "l"},
    "mv": {"force": "f", "verbose": "v", "interactive": "i", "no-clobber": "n"},
    "chmod": {"recursive": "R", "verbose": "v", "changes": "c", "silent": "f", "quiet": "f"},
    "chown": {"recursive": "R", "verbose": "v", "changes": "c", "silent": "f", "quiet": "f"},
    "git": {},
}  # fmt: skip
#: short flags that mean another one, per program
SHORT_ALIASES: dict[str, dict[str, str]] = {"rm": {"R": "r"}, "cp": {"R": "r"}}
#: programs whose single-dash words are names (``-name``), not letter clusters
NO_CLUSTERS = frozenset({"find", "java", "gcc", "cc", "clang", "go"})


def forms_of(program: str, args: list[str]) -> list[str]:
    """The normalised shapes of one command: flags merged, in every order, before and
    after a subcommand; for git, also without its global options."""
    if program == "git":
        rest = _without_git_globals(args)
        if rest != args:
            return [*_flag_forms(program, args), *_flag_forms(program, rest)]
    return _flag_forms(program, args)


def _flag_forms(program: str, args: list[str]) -> list[str]:
    letters: list[str] = []
    longs: list[str] = []
    operands: list[str] = []
    table = LONG_FLAGS.get(program, {})
    aliases = SHORT_ALIASES.get(program, {})
    options_end = False
    for arg in args:
        if options_end or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        elif arg == "--":
            options_end = True
            operands.append(arg)
        elif arg.startswith("--"):
            name = _long_name(arg[2:], table)
            if name and table[name]:
                letters.append(table[name])
            else:
                longs.append(f"--{name}" if name else arg)
        elif program in NO_CLUSTERS:
            longs.append(arg)
        else:
            letters.extend(aliases.get(c, c) for c in arg[1:])
    forms = []
    for order in _orders(list(dict.fromkeys(letters))):
        cluster = [f"-{order}"] if order else []
        forms.append(" ".join([program, *cluster, *longs, *operands]))
        if operands:
            forms.append(" ".join([program, operands[0], *cluster, *longs, *operands[1:]]))
    return forms


def _orders(unique: list[str]) -> list[str]:
    """The orders a flag cluster is tried in (see :data:`MAX_PERMUTED`)."""
    if len(unique) <= MAX_PERMUTED:
        return ["".join(p) for p in itertools.permutations(unique)]
    orders = ["".join(unique), "".join(sorted(unique))]
    if len(unique) <= MAX_PAIRED:
        for first, second in itertools.permutations(unique, 2):
            rest = sorted(set(unique) - {first, second})
            orders.append(first + second + "".join(rest))
    return list(dict.fromkeys(orders))


def _long_name(given: str, table: dict[str, str]) -> str:
    """The long option ``given`` names in ``table`` (a unique prefix counts; GNU's rule)."""
    name = given.partition("=")[0]
    if name in table:
        return name
    candidates = [known for known in table if known.startswith(name)] if name else []
    return candidates[0] if len(candidates) == 1 else ""


GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                        "--config-env", "--super-prefix"})  # fmt: skip


def _without_git_globals(args: list[str]) -> list[str]:
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in GIT_VALUED else 1
    return args[at:]
