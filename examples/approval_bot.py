"""An approval bot: reads are allowed, a network command asks a person, the rest is denied.

    python examples/approval_bot.py --dir PROJECT "update the vendored copy of foo"

The agent runs one prompt in PROJECT (its configuration, model and sandbox, as
``infai run``). Whenever the permission rules would ask, this program answers
instead of a dialog, through the policy, so the decision is recorded exactly as
the TUI records it (the tool result's ``permission`` metadata, ``by: user``):

- reads (``read_file``, ``list_files``, ``grep``, and shell commands that only
  read, such as ``cat`` or ``ls``) are allowed;
- a command that reaches the network (``curl``, ``wget``, ``ssh``, ``git
  push``...) is put to a person on the terminal (standard input): ``y`` allows
  it once, ``a`` always (kept with the session), anything else denies it, and
  the words after ``n`` are what the model is told;
- everything else is denied, and the model is told why.

The answer function is a plain one: infai runs it in a worker thread, so it may
block on ``input()`` while other work goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from infai import Ask, DenyWith, Harness, Reply, Saved, ToolResultRecord

READS = {"read_file", "list_files", "grep"}
READING_COMMANDS = {"cat", "ls", "head", "tail", "wc", "grep", "rg", "find", "pwd", "stat"}
NETWORK_COMMANDS = {"curl", "wget", "ssh", "scp", "rsync", "nc", "ping", "ftp"}
GIT_NETWORK = {"push", "pull", "fetch", "clone", "ls-remote"}


def reaches_network(words: list[str]) -> bool:
    """Whether a command line's first program talks to the network."""
    if not words:
        return False
    if words[0] == "git":
        return any(word in GIT_NETWORK for word in words[1:3])
    return words[0] in NETWORK_COMMANDS


def ask_a_person(ask: Ask) -> Reply:
    """Put the question on the terminal; read the answer from standard input."""
    print(f"\nThe agent wants to run: {ask.subject}\n  ({ask.reason})", file=sys.stderr)
    print("  y: allow once, a: allow always, n [why]: deny > ", end="", file=sys.stderr)
    sys.stderr.flush()
    line = sys.stdin.readline().strip()
    if not sys.stdin.isatty():  # piped: show the answer read, as a terminal would have
        print(line, file=sys.stderr)
    if line == "y":
        return "allow"
    if line == "a" and ask.always:
        return "allow-always"
    why = line[1:].strip() if line.startswith("n") else ""
    return DenyWith(why or "the person at the terminal said no")


def answer(ask: Ask) -> Reply:
    """The bot: what the rules ask about, answered (see the module docstring)."""
    if ask.tool in READS:
        print(f"bot: allowed the read {ask.tool} {ask.subject}", file=sys.stderr)
        return "allow"
    if ask.tool == "bash":
        words = ask.subject.split()
        if words and words[0] in READING_COMMANDS:
            print(f"bot: allowed the reading command {ask.subject}", file=sys.stderr)
            return "allow"
        if reaches_network(words):
            return ask_a_person(ask)
    print(f"bot: denied {ask.tool} {ask.subject}", file=sys.stderr)
    return DenyWith(f"the approval bot allows only reads and asked commands, not {ask.tool}")


async def main(argv: list[str]) -> int:
    """Run the prompt with the bot answering; print each tool's decision."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--dir", default=".", help="the project the agent works in")
    parser.add_argument("--model", help="a model name (default: the configuration's)")
    parser.add_argument("--store", help="a store directory or postgresql:// URL")
    args = parser.parse_args(argv)
    async with (
        Harness.for_directory(
            args.dir, store=args.store, model=args.model, approver=answer
        ) as harness,
        harness.session() as session,
    ):
        async for event in session.prompt(args.prompt):
            if isinstance(event, Saved) and isinstance(event.event.record, ToolResultRecord):
                result = event.event.record
                verdict = result.metadata.get("permission", {})
                print(
                    f"{result.name}: {verdict.get('verdict', 'allow')} "
                    f"({verdict.get('reason', 'by default')})"
                )
        print(f"session {session.session_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
