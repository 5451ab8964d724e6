"""Configuration in TOML: the user's file and the project's, merged.

Two files are read, both optional: the user's (``$INFAI_CONFIG``, else
``~/.config/infai/config.toml`` or the platform's equivalent) and the project's
(``.infai/config.toml`` in the working directory). The project's file is read
second and wins: top-level settings replace the user's, a model table is merged
key by key into the user's table of the same name, and permission rules add to
the user's (deny beats ask beats allow whichever file they come from). ::

    model = "local"                 # the default model (else "offline")
    trusted_projects = ["~/src"]    # user file only: projects whose file applies in full
    compact_at = 0.8                # auto-compaction: fraction of the window, or false

    [models.local]                  # use it as --model local
    provider = "openai"             # a registered provider: "openai" (and compatible
                                    # servers), "anthropic", "ollama", "openrouter", ...
    model = "qwen2.5-coder:14b"     # the provider's model id
    base_url = "http://127.0.0.1:11434/v1"
    key_env = "OLLAMA_API_KEY"      # where the key is (default: the SDK's variable)
    # api_key = "..."               # or the key itself (then keep the file 0600)
    context_window = 32768
    max_tokens = 4096               # optional
    thinking = "adaptive"           # anthropic only: "adaptive", or a thinking_budget

    [permissions]
    allow = ["bash git status*", "bash git diff*"]
    ask = ["write_file *.lock"]
    deny = ["bash rm -rf*"]

    [sandbox]                       # where shell commands run: see infai.tools.sandbox
    mode = "auto"                   # "auto" | "required" | "off" (or: sandbox = "auto")

    [[hooks.PreToolUse]]            # a hook, as Claude Code's: see infai.agent.hooks
    matcher = "Bash"
    command = "~/bin/guard.sh"

    [mcp.servers.github]            # an MCP server: see infai.agent.mcp_config
    command = "github-mcp-server"
    env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }

Anything unknown or mistyped is an error naming the file and the key, never
ignored: a misspelt ``deny`` must not quietly allow.

A project's file comes with the repository you run in, so by default it may
not decide where your keys go, which model answers, or what runs unasked: left
out, each with a warning the shells print (:attr:`Config.warnings`), are its
models with a ``base_url`` or ``key_env``, its tables for a model your own file
defines (a project may not change your model table) or under a built-in name
(``scripted:…``, ``openai:…``, ``anthropic:…``), a ``scripted:`` model (it
replays tool calls from a file the repository ships) as its default or in a
model table, a default naming a model it was refused, its ``allow`` rules,
its MCP servers and its hooks.
Its ``ask`` and ``deny`` rules, ``compact_at`` and plain models apply. To
trust a project, list its directory (or a parent) in your own file:
``trusted_projects = ["~/src/myproject"]``; its file then applies in full
but for one thing, trusted or not: a table for a model your own file defines
that changes its ``provider``, ``base_url`` or ``key_env`` is left out, with a
warning (a project may add models, never send yours, with your key, elsewhere).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infai.checkpoints import CheckpointSettings
from infai.errors import InfaiError
from infai.llm.provider_registry import ModelUnavailable, find_provider, provider_named
from infai.llm.providers import ModelSpec
from infai.tools import Rule, SandboxSettings, parse_sandbox
from infai.tools.mcp import ServerConfig
from infai.tools.policy import RuleError

from .compaction import DEFAULT_THRESHOLD
from .context.settings import DEFAULT_MAX_STEPS, parse_context, parse_max_steps
from .hooks import HookSpec, parse_hooks
from .mcp_config import parse_mcp
from .plugins import install as install_plugins
from .project_keys import keyless_elsewhere

PROJECT_FILE = Path(".infai") / "config.toml"
MODEL_KEYS = {
    "provider": str,
    "model": str,
    "base_url": str,
    "key_env": str,
    "api_key": str,
    "context_window": int,
    "max_tokens": int,
    "thinking_budget": int,
    "thinking": str,
}
#: settings a project's file may not give a model unless the user trusts the project:
#: they decide where your key is sent, and which key
KEY_SETTINGS = ("base_url", "key_env", "api_key")
#: settings of a model of the user's own file no project's file may change, trusted
#: or not: they decide where the user's prompts and key go
ROUTE_SETTINGS = ("provider", "base_url", "key_env", "api_key")
TRUST_HINT = "add its directory to trusted_projects in your own config"
#: model names the registry reads itself (``offline`` no file may define at all),
#: besides ``PROVIDER:MODEL`` for every registered provider (:func:`_builtin_name`)
BUILTIN_PREFIXES = ("scripted:", "openai:", "anthropic:")
VERDICTS = ("allow", "ask", "deny")


#: installed plugins' providers and tools may be named here before they are imported
install_plugins()


class ConfigError(InfaiError):
    """A configuration file is unreadable or says something infai cannot use."""


def parse_checkpoints(
    path: Path, table: Any, current: CheckpointSettings, project: bool
) -> CheckpointSettings:
    """``current`` updated by ``path``'s ``[checkpoints]`` table. A project's file
    may only lower the cap or disable (it comes with the repository)."""
    if table is None:
        return current
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: checkpoints must be a table")
    enabled, cap = current.enabled, current.size_cap
    for key, value in table.items():
        if key == "enabled":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: checkpoints.enabled must be true or false")
            enabled = value if not project else enabled and value
        elif key == "size_cap_mb":
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{path}: checkpoints.size_cap_mb must be a positive number")
            wanted = int(value * 1024 * 1024)
            cap = min(cap, wanted) if project else wanted
        else:
            raise ConfigError(
                f"{path}: unknown key checkpoints.{key} (known: enabled, size_cap_mb)"
            )
    return CheckpointSettings(enabled, cap)


@dataclass(frozen=True)
class Config:
    """The merged configuration; ``sources`` lists the files it came from."""

    default_model: str = "offline"
    compact_at: float | None = DEFAULT_THRESHOLD
    models: dict[str, ModelSpec] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    sources: tuple[Path, ...] = ()
    #: where each configured model was defined (for ``infai models``)
    model_sources: dict[str, Path] = field(default_factory=dict)
    #: what was left out of an untrusted project's file, for the shells to say
    warnings: tuple[str, ...] = ()
    #: the ``[sandbox]`` settings (:mod:`infai.tools.sandbox`; a project's file cannot loosen them)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    #: the ``[mcp.servers.NAME]`` tables (:mod:`.mcp_config`; a project's only if trusted)
    mcp_servers: tuple[ServerConfig, ...] = ()
    #: ``[checkpoints]`` (:mod:`.workfiles`; a project's file may only lower or disable)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    #: ``[[hooks.EVENT]]`` (:mod:`.hooks`): the user's, then a trusted project's
    hooks: tuple[HookSpec, ...] = ()
    #: ``max_steps``: model calls one turn may make (an untrusted project's may only lower it)
    max_steps: int = DEFAULT_MAX_STEPS
    #: ``[context] rules``: the registered context rules to run, in order (None: all)
    context_rules: tuple[str, ...] | None = None


def user_config_path() -> Path:
    """The user's configuration file: ``$INFAI_CONFIG``, else the platform's (Linux:
    ``~/.config/infai/config.toml``)."""
    env = os.environ.get("INFAI_CONFIG")
    if env:
        return Path(env)
    from platformdirs import user_config_path as platform_path

    return platform_path("infai") / "config.toml"


def _present(path: Path) -> bool:
    """Whether a configuration file is there to read; one that is something else
    (a directory, a FIFO, which would never finish reading) is an error, not a
    file silently not applied."""
    if path.is_file():
        return True
    if path.exists():
        raise ConfigError(f"{path}: not a regular file; make it one, or remove it")
    return False


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


#: how an error names the type a model key wants (TOML's words, with an article)
_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _check_model(path: Path, name: str, table: Any) -> dict[str, Any]:
    where = f"{path}: models.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    for key, value in table.items():
        kind = MODEL_KEYS.get(key)
        if kind is None:
            known = ", ".join(MODEL_KEYS)
            raise ConfigError(f"{where}: unknown key {key!r} (known: {known})")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: must be {_KIND_NAMES[kind]}, not {value!r}")
        if isinstance(value, int) and value <= 0:
            raise ConfigError(f"{where}.{key}: must be positive, not {value}")
    return dict(table)


def _spec(name: str, table: dict[str, Any], path: Path) -> ModelSpec:
    where = f"{path}: models.{name}"
    provider = table.get("provider")
    if not isinstance(provider, str):
        raise ConfigError(f"{where}.provider: the provider's name is required")
    try:
        info = provider_named(provider)
    except ModelUnavailable as exc:
        raise ConfigError(f"{where}.provider: {exc}") from None
    if not table.get("model"):
        raise ConfigError(f"{where}.model: the provider's model id is required")
    thinking = table.get("thinking", "budget" if "thinking_budget" in table else "off")
    if thinking not in ("off", "adaptive", "budget"):
        raise ConfigError(f"{where}.thinking: must be 'off', 'adaptive' or 'budget'")
    if not info.thinking and (thinking != "off" or "thinking_budget" in table):
        raise ConfigError(f"{where}: thinking settings apply to anthropic models only")
    if thinking == "budget" and "thinking_budget" not in table:
        raise ConfigError(f"{where}.thinking_budget: 'budget' thinking needs a token budget")
    return ModelSpec(
        provider=provider,
        model=table["model"],
        base_url=table.get("base_url"),
        key_env=table.get("key_env"),
        key=table.get("api_key"),
        context_window=table.get("context_window", info.context_window),
        max_tokens=table.get("max_tokens"),
        thinking_budget=table.get("thinking_budget") if thinking == "budget" else None,
        adaptive_thinking=thinking == "adaptive",
        name=name,
    )


def _rules(path: Path, table: Any) -> list[Rule]:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: permissions must be a table")
    rules = []
    for verdict, texts in table.items():
        if verdict not in VERDICTS:
            raise ConfigError(f"{path}: permissions: unknown key {verdict!r} (allow, ask, deny)")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ConfigError(f"{path}: permissions.{verdict}: must be a list of strings")
        for text in texts:
            try:
                rules.append(Rule.parse(verdict, text))
            except RuleError as exc:
                raise ConfigError(f"{path}: permissions.{verdict}: {exc}") from None
    return rules


def _trusted(path: Path, value: Any, working_dir: Path) -> bool:
    """Whether ``trusted_projects`` (a list of directories) covers ``working_dir``."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: trusted_projects: must be a list of directories")
    here = working_dir.resolve()
    for entry in value:
        root = Path(entry).expanduser().resolve()
        if here == root or root in here.parents:
            return True
    return False


def load_config(working_dir: Path, user_path: Path | None = None) -> Config:
    """The user's and the project's configuration, merged (either may be absent).

    A project's file is trusted only if the user's ``trusted_projects`` lists its
    directory (or a parent). Untrusted, what it says about where keys go (a
    model with ``base_url`` or ``key_env``) and what it allows (``allow`` rules)
    is left out, with a warning in :attr:`Config.warnings`; the rest applies.
    """
    user = user_path or user_config_path()
    project = working_dir / PROJECT_FILE
    chosen: dict[Path, str] = {}  # each file's default model
    compact_at: float | None = DEFAULT_THRESHOLD
    tables: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    rules: list[Rule] = []
    read: list[Path] = []
    warnings: list[str] = []
    sandbox = SandboxSettings()
    trusted = False
    left_out: set[str] = set()  # names only an untrusted project's refused tables define
    servers: dict[str, ServerConfig] = {}
    checkpoints = CheckpointSettings()
    hooks: list[HookSpec] = []
    steps, context_rules = DEFAULT_MAX_STEPS, None
    project_keys: tuple[str, ...] = ()
    for path in (user, project):
        if not _present(path):
            continue
        data = _read(path)
        read.append(path)
        warnings += _open_key(path, data)
        sandbox = _sandbox(path, data.pop("sandbox", None), sandbox, path == project, warnings)
        untrusted = path == project and not trusted
        checkpoints = parse_checkpoints(
            path, data.pop("checkpoints", None), checkpoints, path == project
        )
        _mcp(path, data.pop("mcp", None), servers, untrusted, warnings)
        hooks += _hooks(path, data.pop("hooks", None), untrusted, warnings)
        steps, context_rules = _turn_keys(path, data, untrusted, (steps, context_rules), warnings)
        for key, value in data.items():
            if key == "model":
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"{path}: model: must be a model name")
                chosen[path] = value
            elif key == "compact_at":
                compact_at = _threshold(path, value)
            elif key == "models":
                if not isinstance(value, dict):
                    raise ConfigError(f"{path}: models must be a table of tables")
                for name, table in value.items():
                    refused = _merge_model(path, name, table, tables, untrusted, path == project)
                    if refused:
                        if name not in tables:  # not the user's model, which stands
                            left_out.add(name)
                        warnings.append(refused)
                    else:
                        sources[name] = path
            elif key == "permissions":
                rules += _permission_rules(path, value, untrusted, warnings)
            elif key == "trusted_projects" and path == user:
                trusted = _trusted(path, value, working_dir)
            elif key == "project_keys" and path == user:
                project_keys = _names(path, key, value)
            else:
                known = (
                    "model, compact_at, models, permissions, sandbox, mcp, checkpoints, hooks, "
                    "max_steps, context"
                    + (", trusted_projects, project_keys" if path == user else "")
                )
                raise ConfigError(f"{path}: unknown key {key!r} (known: {known})")
    default_model = _default_model(chosen, user, project, trusted, left_out, warnings)
    models = {name: _spec(name, table, sources[name]) for name, table in tables.items()}
    models = {
        name: keyless_elsewhere(project, spec, project_keys, warnings)
        if sources[name] == project and spec.base_url
        else spec
        for name, spec in models.items()
    }
    return Config(
        default_model,
        compact_at,
        models,
        tuple(rules),
        tuple(read),
        sources,
        tuple(warnings),
        sandbox,
        tuple(servers.values()),
        checkpoints,
        tuple(hooks),
        steps,
        context_rules,
    )


def _permission_rules(path: Path, value: Any, untrusted: bool, warnings: list[str]) -> list[Rule]:
    """``path``'s ``[permissions]``: an untrusted project's allow rules left out."""
    found = _rules(path, value)
    if untrusted and any(r.verdict == "allow" for r in found):
        warnings.append(
            f"{path}: its allow rules were left out: a project's config may only "
            f"ask or deny unless you trust it ({TRUST_HINT})"
        )
        found = [r for r in found if r.verdict != "allow"]
    return found


def _names(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{path}: {key} must be a list of variable names")
    return tuple(value)


def _turn_keys(
    path: Path,
    data: dict[str, Any],
    untrusted: bool,
    current: tuple[int, tuple[str, ...] | None],
    warnings: list[str],
) -> tuple[int, tuple[str, ...] | None]:
    """``max_steps`` and ``[context]`` from ``path`` (taken out of ``data``): an
    untrusted project may only lower ``max_steps``, and its ``[context]`` is left
    out (it could turn off a rule of yours)."""
    steps, rules = current
    try:
        if "max_steps" in data:
            wanted = parse_max_steps(path, data.pop("max_steps"))
            steps = min(steps, wanted) if untrusted else wanted
        if "context" in data:
            found = parse_context(path, data.pop("context"))
            if untrusted:
                warnings.append(
                    f"{path}: its [context] rules were left out: a project's config "
                    f"chooses your context rules only if you trust it ({TRUST_HINT})"
                )
            else:
                rules = found
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return steps, rules


def _open_key(path: Path, data: dict[str, Any]) -> list[str]:
    """A warning when ``path`` holds an API key (``api_key``) other users may read."""
    models = data.get("models")
    if not isinstance(models, dict) or not any(
        isinstance(t, dict) and "api_key" in t for t in models.values()
    ):
        return []
    mode = path.stat().st_mode & 0o777
    if not mode & 0o077:
        return []
    return [f"{path} holds an API key and others may read it (mode {mode:o}): chmod 600 {path}"]


def _hooks(path: Path, value: Any, untrusted: bool, warnings: list[str]) -> list[HookSpec]:
    """``path``'s hooks; an untrusted project's are left out, with a warning (they
    would run its commands with your rights)."""
    if value is None:
        return []
    try:
        found = parse_hooks(path, value)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if untrusted and found:
        events = ", ".join(dict.fromkeys(spec.event for spec in found))
        warnings.append(
            f"{path}: its hooks ({events}) were left out: a project's hooks run only "
            f"if you trust it ({TRUST_HINT})"
        )
        return []
    return found


def _mcp(
    path: Path, value: Any, servers: dict[str, ServerConfig], untrusted: bool, warnings: list[str]
) -> None:
    """Add ``path``'s MCP servers to ``servers`` (a project's replace the user's of
    the same name); an untrusted project's are left out, with a warning."""
    if value is None:
        return
    try:
        found = parse_mcp(path, value)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if untrusted and found:
        warnings.append(
            f"{path}: its MCP servers ({', '.join(found)}) were left out: a project's "
            f"servers start only if you trust it ({TRUST_HINT})"
        )
        return
    servers.update(found)


def _merge_model(
    path: Path,
    name: str,
    table: Any,
    tables: dict[str, dict[str, Any]],
    untrusted: bool,
    project: bool,
) -> str | None:
    """Merge ``[models.NAME]`` from ``path`` into ``tables``; or, for a project's
    table that may not stand, leave it out and say why."""
    if name == "offline":
        raise ConfigError(
            f"{path}: models.offline: 'offline' is the built-in model "
            "(local, no network); give yours another name"
        )
    checked = _check_model(path, name, table)
    refused = _untrusted_model(name, checked, tables) if untrusted else None
    if refused:
        return f"{path}: models.{name} left out: {refused} ({TRUST_HINT})"
    redirected = _redirected(name, checked, tables) if project else None
    if redirected:
        return f"{path}: models.{name} left out: {redirected}"
    tables.setdefault(name, {}).update(checked)
    return None


def _default_model(
    chosen: dict[Path, str],
    user: Path,
    project: Path,
    trusted: bool,
    left_out: set[str],
    warnings: list[str],
) -> str:
    """The default model: the project's choice, unless an untrusted project chose a
    scripted model or one of its models that was left out (then the user's, else
    ``offline``, and a warning says so)."""
    mine = chosen.get(user, "offline")
    theirs = chosen.get(project)
    if theirs is None or trusted:
        return theirs or mine
    if theirs.startswith("scripted:"):
        why = "a project's config may not choose a scripted model (it replays tool calls)"
    elif theirs in left_out:
        why = "that model was left out"
    else:
        return theirs
    warnings.append(f"{project}: model = {theirs!r} ignored: {why} ({TRUST_HINT})")
    return mine


def _builtin_name(name: str) -> bool:
    """Whether the model registry reads ``name`` itself (``scripted:FILE``, or
    ``PROVIDER:MODEL`` for a registered provider)."""
    provider, sep, _ = name.partition(":")
    return name.startswith(BUILTIN_PREFIXES) or bool(sep and find_provider(provider))


def _untrusted_model(name: str, table: dict[str, Any], user: dict[str, Any]) -> str | None:
    """Why an untrusted project's ``[models.NAME]`` is left out (None: it may stand).

    ``user`` holds the model tables read before it, the user's own: a project may
    add models, never change one of them (a merged ``model`` or ``provider``
    would send the user's prompts, under the user's key, somewhere else).
    """
    if any(k in table for k in KEY_SETTINGS):
        return "a project's config may not set base_url, key_env or api_key unless you trust it"
    if name in user:
        return f"{name!r} is a model of your own config, which a project's config may not change"
    if _builtin_name(name):
        return f"{name!r} is a built-in model name, which a project's config may not redefine"
    if str(table.get("model", "")).startswith("scripted:"):
        return "a project's config may not choose a scripted model (it replays tool calls)"
    return None


def _redirected(name: str, table: dict[str, Any], user: dict[str, Any]) -> str | None:
    """Why a project's ``[models.NAME]`` is left out even when the project is
    trusted (None: it may be merged): it changes where a model of the user's own
    file sends the prompts, or with which key (:data:`ROUTE_SETTINGS`).

    Trust covers what the project's authors wrote, but the file can be written
    by others too (a command run in the project, a restored snapshot): a project
    may add models, never point the user's own elsewhere."""
    mine = user.get(name)
    if mine is None:
        return None
    changed = [k for k in ROUTE_SETTINGS if k in table and table[k] != mine.get(k)]
    if not changed:
        return None
    return (
        f"it would change {', '.join(changed)} of {name!r}, a model of your own config: "
        "a project's config may add models, never send yours elsewhere"
    )


def _sandbox(
    path: Path, value: Any, current: SandboxSettings, project: bool, warnings: list[str]
) -> SandboxSettings:
    """``current`` updated by a file's ``sandbox`` value (None: absent); what a
    project's file may not loosen is ignored, with a warning."""
    if value is None:
        return current
    try:
        settings, notices = parse_sandbox(value, current, project=project)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    warnings += [f"{path}: {notice}" for notice in notices]
    return settings


def _threshold(path: Path, value: Any) -> float | None:
    if value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{path}: compact_at: a fraction in (0, 1] or false, not {value!r}")
    return float(value)
