"""``infai config model``: set up a model in the user's config file, asked or by flags.

The command writes a ``[models.NAME]`` table for an OpenAI-compatible server
(any ``base_url``: vLLM, llama.cpp, LM Studio, OpenAI itself), Anthropic, or
Ollama (an OpenAI-compatible server at ``http://127.0.0.1:11434/v1``, which
needs no key), makes it the default model unless told not to, and says which
file it wrote. The key stays where it is: the file names the environment
variable that holds it (``key_env``). Only ``--key-in-file`` writes the key
itself, read from a hidden prompt or standard input (never from the command
line, where the process list shows it), and the file is then made 0600.

On a terminal, what no flag gave is asked; otherwise it must be given
(``--provider`` and ``--model``; the rest has defaults). The file is checked
before it is replaced (the result must load as a configuration) and replaced
atomically; an existing ``[models.NAME]`` is not overwritten.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click

from .common import echo
from .errors import BadInput, mapped_errors

OLLAMA_URL = "http://127.0.0.1:11434/v1"
#: what each choice of ``--provider`` writes: (provider, default base URL, default key variable)
KINDS: dict[str, tuple[str, str | None, str | None]] = {
    "openai": ("openai", None, "OPENAI_API_KEY"),
    "anthropic": ("anthropic", None, "ANTHROPIC_API_KEY"),
    "ollama": ("openai", OLLAMA_URL, None),
}
#: a model's name as a bare TOML key, usable with ``--model`` as it is
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the first table header of a TOML file (top-level keys come before it)
HEADER = re.compile(r"^\s*\[", re.M)
DEFAULT_LINE = re.compile(r"^model\s*=.*$", re.M)


@dataclass(frozen=True)
class Choice:
    """One model to write: the table's name and its settings."""

    name: str
    provider: str
    model: str
    base_url: str | None
    key_env: str | None
    key: str | None
    context_window: int | None


def _quoted(text: str) -> str:
    """``text`` as a TOML basic string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'


def model_table(choice: Choice) -> str:
    """The ``[models.NAME]`` table for ``choice``, as TOML text."""
    lines = [
        f"[models.{choice.name}]",
        f"provider = {_quoted(choice.provider)}",
        f"model = {_quoted(choice.model)}",
    ]
    if choice.base_url:
        lines.append(f"base_url = {_quoted(choice.base_url)}")
    if choice.key_env:
        lines.append(f"key_env = {_quoted(choice.key_env)}")
    if choice.key:
        lines.append(f"api_key = {_quoted(choice.key)}")
    if choice.context_window:
        lines.append(f"context_window = {choice.context_window}")
    return "\n".join(lines) + "\n"


def with_model(text: str, choice: Choice, default: bool) -> str:
    """The config file's ``text`` with ``choice``'s table added (and, with
    ``default``, its top-level ``model`` naming it)."""
    if default:
        line = f"model = {_quoted(choice.name)}"
        header = HEADER.search(text)
        top = text[: header.start()] if header else text
        if DEFAULT_LINE.search(top):
            top = DEFAULT_LINE.sub(lambda _: line, top, count=1)
        else:
            top = f"{line}\n{top}"
        text = top + (text[header.start() :] if header else "")
    if text and not text.endswith("\n"):
        text += "\n"
    return f"{text}\n{model_table(choice)}" if text.strip() else model_table(choice)


def write_config(path: Path, text: str, private: bool) -> None:
    """Replace ``path`` with ``text`` atomically; 0600 when ``private`` (it holds a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o600 if private else (path.stat().st_mode & 0o777 if path.exists() else 0o644)
    fd, temp = tempfile.mkstemp(prefix=".config-", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _ask(
    value: str | None,
    prompt: str,
    interactive: bool,
    default: str | None = None,
    choices: list[str] | None = None,
) -> str:
    """``value`` if given, else the answer to ``prompt`` (asked again until it is one
    of ``choices``, if any); without a terminal, an error naming the flag to give."""
    if value:
        return value
    if not interactive:
        flag = "--" + prompt.split(" (")[0].lower().replace(" ", "-")
        raise BadInput(f"{flag} is needed (standard input is not a terminal to ask on)")
    kind = click.Choice(choices, case_sensitive=False) if choices else None
    answer: str = click.prompt(prompt, default=default, type=kind, err=True)
    return answer.strip()


def _read_key(interactive: bool) -> str:
    if interactive:
        key: str = click.prompt("API key (not shown)", hide_input=True, err=True)
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        raise BadInput("--key-in-file: no key was given (type it, or pipe it on standard input)")
    return key


def _choose(
    kind: str | None,
    name: str | None,
    model: str | None,
    base_url: str | None,
    key_env: str | None,
    key_in_file: bool,
    context_window: int | None,
) -> Choice:
    """What to write, from the flags and, on a terminal, the answers to what they left out."""
    interactive = sys.stdin is not None and sys.stdin.isatty()
    kind = _ask(kind, "Provider", interactive, "openai", list(KINDS)).lower()
    if kind not in KINDS:
        raise BadInput(f"--provider: {kind!r} is not one of {', '.join(KINDS)}")
    provider, url_default, env_default = KINDS[kind]
    model = _ask(model, "Model (the provider's model id)", interactive)
    if kind == "openai" and base_url is None and interactive:
        asked = click.prompt(
            "Base URL of an OpenAI-compatible server (empty: OpenAI's own)",
            default="",
            show_default=False,
            err=True,
        )
        base_url = asked.strip() or None
    base_url = base_url or url_default
    if key_in_file:
        key: str | None = _read_key(interactive)
        key_env = None
    else:
        key = None
        key_env = key_env or env_default
    if key_env is not None and not ENV_NAME.fullmatch(key_env):
        raise BadInput(f"--key-env: {key_env!r} is not an environment variable's name")
    name = name or kind
    if not NAME.fullmatch(name) or name == "offline":
        raise BadInput(
            f"--name: {name!r}: use letters, digits, '-' and '_' (and not 'offline', the built-in)"
        )
    return Choice(name, provider, model, base_url, key_env, key, context_window)


@click.group("config")
def config_group() -> None:
    """Set up infai's configuration (the user's file; `infai models` lists the result)."""


@config_group.command("model")
@click.option(
    "--provider",
    "kind",
    type=click.Choice(list(KINDS), case_sensitive=False),
    help="openai (OpenAI or any OpenAI-compatible server), anthropic, or ollama.",
)
@click.option("--model", help="The provider's model id (e.g. gpt-4.1, qwen2.5-coder:14b).")
@click.option("--name", help="The name to use with --model (default: the provider's).")
@click.option("--base-url", help=f"The server's URL (ollama: {OLLAMA_URL}).")
@click.option(
    "--key-env",
    metavar="VAR",
    help="The environment variable holding the key (default: OPENAI_API_KEY / "
    "ANTHROPIC_API_KEY; ollama needs none).",
)
@click.option(
    "--key-in-file",
    is_flag=True,
    help="Write the key itself into the file (asked hidden, or read from standard "
    "input); the file is made 0600.",
)
@click.option("--context-window", type=click.IntRange(min=1), help="The model's window, tokens.")
@click.option(
    "--default/--no-default",
    "make_default",
    default=True,
    show_default=True,
    help="Make it the default model.",
)
@mapped_errors
def config_model(
    kind: str | None,
    model: str | None,
    name: str | None,
    base_url: str | None,
    key_env: str | None,
    key_in_file: bool,
    context_window: int | None,
    make_default: bool,
) -> None:
    """Add a model to your config file and make it the default; says which file."""
    from infai.agent import ConfigError, load_config, user_config_path

    path = user_config_path()
    old = path.read_text() if path.is_file() else ""
    try:
        tables = tomllib.loads(old).get("models", {})
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML, left as it is: {exc}") from None
    choice = _choose(kind, name, model, base_url, key_env, key_in_file, context_window)
    if isinstance(tables, dict) and choice.name in tables:
        raise BadInput(
            f"{path} already defines models.{choice.name}: give another --name, or edit the file"
        )
    text = with_model(old, choice, make_default)
    with tempfile.TemporaryDirectory() as scratch:  # the result must load, or nothing changes
        trial = Path(scratch) / "config.toml"
        trial.write_text(text)
        try:
            load_config(Path(scratch), trial)
        except ConfigError as exc:
            raise BadInput(f"{path} would not load with models.{choice.name}: {exc}") from None
    private = choice.key is not None or (path.exists() and "api_key" in old)
    write_config(path, text, private)
    where = f" at {choice.base_url}" if choice.base_url else ""
    echo(f"infai: wrote models.{choice.name} ({choice.provider} {choice.model}{where}) to {path}")
    if make_default:
        echo("infai: it is the default model; try: infai run 'hello'")
    else:
        echo(f"infai: use it with --model {choice.name}")
    if choice.key is not None:
        echo("infai: the key is in the file, which only you can read (mode 600)")
    elif choice.key_env and not os.environ.get(choice.key_env):
        echo(f"infai: set {choice.key_env} to its API key (export {choice.key_env}=...)")


__all__ = ["KINDS", "OLLAMA_URL", "Choice", "config_group", "model_table", "with_model"]
