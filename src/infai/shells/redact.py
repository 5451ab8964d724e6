"""Secrets out of text meant for other people: what ``infai session share`` writes.

A session holds what its tools saw: a command's output may print an API key, a
file read may be a private key, and every absolute path names the user's home.
Before a session leaves the machine as a shared file, every string in it goes
through one :class:`Redactor`, which replaces

- the values of the secret environment variables (``secret`` kinds: the names
  and patterns infai already keeps from commands, see :func:`secret_values`),
- known token shapes (:data:`SHAPES`: API keys, GitHub, AWS and Slack tokens,
  bearer credentials, PEM private keys),
- the home directory's path (by ``~``),

and counts what it replaced by kind, for the summary the command prints and
the file shows. It works on values before they are encoded (JSON, HTML), so an
escape cannot split a secret out of reach of its pattern. What it cannot know
(a password of no known shape, in no secret variable) it leaves: the summary
says what was found, not that nothing else is there.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: known token shapes, by kind; each match is replaced whole (a bearer
#: credential keeps its scheme word)
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("api key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("aws key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("bearer token", re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9._~+/=-]{12,}")),
)
#: a secret variable's value shorter than this is not looked for (it would
#: match ordinary words and numbers); the summary counts such variables
MIN_SECRET = 6
#: what stands for a removed secret
MARK = "[redacted: {kind}]"


def secret_values(
    is_secret: Callable[[str], bool], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The values of the variables ``is_secret`` names (the sandbox's rule), by name."""
    environ = os.environ if environ is None else environ
    return {name: value for name, value in environ.items() if value.strip() and is_secret(name)}


class Redactor:
    """Replaces secrets in strings and counts them (:attr:`found`, by kind)."""

    def __init__(self, secrets: Mapping[str, str], home: str | None = None) -> None:
        values = {v for v in secrets.values() if len(v) >= MIN_SECRET}
        #: secret variables whose value was too short to look for
        self.too_short = sorted(k for k, v in secrets.items() if len(v) < MIN_SECRET)
        ordered = sorted(values, key=len, reverse=True)  # a longer secret first
        self._values = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        homes = {h for h in (home, _resolved(home)) if h and h.rstrip("/")}
        self._home = (
            re.compile(
                "|".join(re.escape(h.rstrip("/")) for h in sorted(homes, key=len, reverse=True))
                + r"(?![\w.-])"
            )
            if homes
            else None
        )
        self.found: Counter[str] = Counter()

    def _sub(self, pattern: re.Pattern[str], kind: str, text: str, mark: str | None) -> str:
        def replace(match: re.Match[str]) -> str:
            self.found[kind] += 1
            return MARK.format(kind=kind) if mark is None else mark

        return pattern.sub(replace, text)

    def text(self, text: str) -> str:
        """``text`` with every secret it holds replaced."""
        if self._values is not None:
            text = self._sub(self._values, "secret variable", text, None)
        for kind, pattern in SHAPES:
            text = self._sub(pattern, kind, text, None)
        if self._home is not None:
            text = self._sub(self._home, "home directory", text, "~")
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it (keys too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def summary(self) -> list[str]:
        """What was redacted, one line per kind (most first); a note on short secrets."""
        lines = [f"{kind}: {count}" for kind, count in self.found.most_common()]
        if not lines:
            lines.append("nothing found to redact")
        if self.too_short:
            names = ", ".join(self.too_short)
            lines.append(f"not looked for (under {MIN_SECRET} characters): {names}")
        return lines


def _resolved(home: str | None) -> str | None:
    if not home:
        return None
    try:
        return str(Path(home).resolve())
    except OSError:
        return None


__all__ = ["MIN_SECRET", "SHAPES", "Redactor", "secret_values"]
