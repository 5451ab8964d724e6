"""Programs that run their arguments as a command, and how to find that command.

``env X=1 rm x``, ``timeout 5 rm x``, ``xargs rm``, ``sudo -u root rm x``: rules
must see the ``rm``. Each wrapper here has a table of its options (which take a
value, as the next word or attached; which take one only attached), read as
its own ``getopt`` does (options end at the first operand or ``--``; a long
option may be a unique prefix). An option not in the table, or a long one two
of its options start with, leaves the command unknown: :func:`wrapped_command`
says so, and the checker makes the whole string unseen rather than guess.

:data:`UNFOLLOWED` are programs that run a command too, in ways not modelled
here (``strace``, ``setpriv``, ``systemd-run``…): always unseen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A wrapper's options: ``flags`` take no value, ``valued`` one (attached or the
    next word), ``attached`` one only if attached (``-l5``); the long names likewise.
    ``operands``: words between the options and the command (``timeout 5``)."""

    flags: str = ""
    valued: str = ""
    attached: str = ""
    longs: str = ""
    long_valued: str = ""
    long_attached: str = ""
    operands: int = 0
    #: ``nice -5``: a dash and digits is an option
    digits: bool = False
    #: ``NAME=value`` words before the command set its environment
    assignments: bool = False


WRAPPERS: dict[str, Wrapper] = {
    "command": Wrapper(flags="pvV"),
    "builtin": Wrapper(),
    "exec": Wrapper(flags="cl", valued="a"),
    "nohup": Wrapper(longs="help version"),
    "nice": Wrapper(valued="n", long_valued="adjustment", longs="help version", digits=True),
    "timeout": Wrapper(
        flags="v", valued="ks", longs="preserve-status foreground verbose help version",
        long_valued="kill-after signal", operands=1,
    ),
    "stdbuf": Wrapper(valued="ioe", long_valued="input output error", longs="help version"),
    "setsid": Wrapper(flags="cfwhV", longs="ctty fork wait help version"),
    "sudo": Wrapper(
        flags="AbBEeHiKklNnPSsVv", valued="aCcDgpRrTtUu", attached="h",
        longs="askpass background bell edit set-home help login remove-timestamp "
        "reset-timestamp list non-interactive preserve-groups stdin shell version validate",
        long_valued="close-from chdir group prompt chroot role type command-timeout "
        "other-user user host", long_attached="preserve-env", assignments=True,
    ),
    "doas": Wrapper(flags="Lns", valued="Cu"),
    "time": Wrapper(
        flags="apqvV", valued="fo", longs="append portability verbose quiet help version",
        long_valued="format output",
    ),
    "ionice": Wrapper(
        flags="thV", valued="cnpPu", longs="ignore help version",
        long_valued="class classdata pid pgid uid",
    ),
    "taskset": Wrapper(flags="apchV", longs="all-tasks pid cpu-list help version", operands=1),
    "chrt": Wrapper(
        flags="bdfioRrampvhV", valued="TPD",
        longs="batch deadline fifo idle other rr reset-on-fork all-tasks max pid verbose "
        "help version", long_valued="sched-runtime sched-period sched-deadline", operands=1,
    ),
    "unbuffer": Wrapper(flags="p"),
    "env": Wrapper(
        flags="i0v", valued="uCSP", longs="ignore-environment null debug "
        "list-signal-handling help version", long_valued="unset chdir split-string",
        long_attached="block-signal default-signal ignore-signal", assignments=True,
    ),
    "xargs": Wrapper(
        flags="0oprtx", valued="adEILnPs", attached="eil",
        longs="null open-tty interactive no-run-if-empty verbose exit show-limits help version",
        long_valued="arg-file delimiter max-args max-procs max-chars process-slot-var",
        long_attached="eof replace max-lines",
    ),
    "busybox": Wrapper(),
    "toybox": Wrapper(),
    "chroot": Wrapper(longs="skip-chdir help version", long_valued="groups userspec", operands=1),
    "flock": Wrapper(
        flags="sexunoFhV", valued="wE", longs="shared exclusive unlock nonblock close no-fork "
        "verbose help version", long_valued="timeout conflict-exit-code", operands=1,
    ),
    "unshare": Wrapper(
        flags="frchV", valued="RwSG", attached="muinpUCT",
        longs="fork map-root-user map-current-user map-auto keep-caps help version",
        long_valued="map-user map-group map-users map-groups propagation setgroups root wd "
        "setuid setgid monotonic boottime",
        long_attached="mount uts ipc net pid user cgroup time kill-child mount-proc",
    ),
    "nsenter": Wrapper(
        flags="aFZhVe", valued="tSGW", attached="muinpCUTrw",
        longs="all preserve-credentials no-fork follow-context help version env user-parent "
        "keep-caps", long_valued="target setuid setgid wdns",
        long_attached="mount uts ipc net pid cgroup user time root wd",
    ),
    "watch": Wrapper(
        flags="bceGgptwxhv", valued="qn", attached="d",
        longs="beep color no-color errexit chgexit precise no-title no-wrap no-linewrap exec "
        "help version", long_valued="equexit interval", long_attached="differences",
    ),
}  # fmt: skip

#: programs that run a command in a way not followed here: what they run is unseen
UNFOLLOWED = frozenset({
    "strace", "ltrace", "valgrind", "gdb", "perf", "catchsegv", "prlimit", "runuser",
    "setpriv", "systemd-run", "firejail", "bwrap", "proot", "fakeroot", "faketime", "script",
    "parallel", "pkexec", "sg", "cgexec", "numactl", "rlwrap", "chpst", "tini", "dumb-init",
    "start-stop-daemon", "daemonize", "expect", "at", "batch", "ssh-agent", "dbus-run-session",
    "xvfb-run", "torsocks", "proxychains", "proxychains4", "coproc",
})  # fmt: skip
LOADER = re.compile(r"ld(-linux)?[-.\w]*\.so(\.\d+)*")


@dataclass(frozen=True, slots=True)
class Wrapped:
    """What a wrapper runs: the command's words (empty: none), its options' values,
    and why the command could not be found ("" when it could)."""

    command: list[str]
    values: list[tuple[str, str]]
    unknown: str = ""
    #: the index in the wrapper's arguments where ``command`` starts
    at: int = 0


def wrapped_command(program: str, args: list[str]) -> Wrapped:
    """The command ``program`` (a key of :data:`WRAPPERS`) runs, read from ``args``."""
    spec = WRAPPERS[program]
    values: list[tuple[str, str]] = []
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            at += 1
            break
        if (program == "env" and arg == "-") or (spec.digits and re.fullmatch(r"-\d+", arg)):
            at += 1  # env's "-" is -i; nice's "-5" is -n 5
            continue
        if not arg.startswith("-") or arg == "-":
            break
        taken, why = (
            _long(spec, arg, args, at, values) if arg.startswith("--")
            else _short(spec, arg, args, at, values)
        )  # fmt: skip
        if why:
            return Wrapped([], values, f"{program} {why}")
        at += taken
    at += spec.operands
    while spec.assignments and at < len(args) and _assignment(args[at]):
        at += 1
    return Wrapped(args[at:], values, "", at)


def _assignment(word: str) -> bool:
    return re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word) is not None


def _short(
    spec: Wrapper, arg: str, args: list[str], at: int, values: list[tuple[str, str]]
) -> tuple[int, str]:
    """How many words a cluster like ``-Eu root`` takes, or why it is not understood."""
    for n, letter in enumerate(arg[1:], start=1):
        rest = arg[n + 1 :]
        if letter in spec.valued:
            if rest:
                values.append((letter, rest))
                return 1, ""
            if at + 1 >= len(args):
                return 1, f"-{letter} has no value"
            values.append((letter, args[at + 1]))
            return 2, ""
        if letter in spec.attached:
            values.append((letter, rest))
            return 1, ""
        if letter not in spec.flags:
            return 0, f"has an option -{letter} this checker does not know"
    return 1, ""


def _long(
    spec: Wrapper, arg: str, args: list[str], at: int, values: list[tuple[str, str]]
) -> tuple[int, str]:
    """How many words ``--name[=value]`` takes (a unique prefix names an option)."""
    given, equals, value = arg[2:].partition("=")
    known = [*spec.longs.split(), *spec.long_valued.split(), *spec.long_attached.split()]
    names = [given] if given in known else [k for k in known if k.startswith(given)]
    if len(names) != 1:
        return 0, f"has an option --{given} this checker does not know (or not only one)"
    name = names[0]
    if name in spec.long_valued and not equals:
        if at + 1 >= len(args):
            return 1, f"--{name} has no value"
        values.append((name, args[at + 1]))
        return 2, ""
    if equals and name in spec.longs:
        return 0, f"--{name} takes no value"
    values.append((name, value))
    return 1, ""
