"""The user's context rules, registered by name, and the pipeline of a session.

:func:`register_context_rule` makes a rule available in this process (a plugin
loader calls it for the rules an installed package ships). A session's pipeline
is the built-in rules, then the registered ones: all of them in the order they
were registered, or, when the configuration says ``[context] rules = [...]``,
the ones it names in its order (an unknown name is an error that says which
rules there are).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from .parts import ContextDecision, ContextPart, ContextRuleFailed
from .pipeline import ContextPipeline
from .rules import (
    BUILTIN_RULES,
    OPTIONAL_RULES,
    ContextRule,
    FunctionRule,
    builtin_rules,
    pruned_outputs,
)

RuleFunction = Callable[[Sequence[ContextPart]], Iterable[ContextDecision] | None]
R = TypeVar("R", bound=ContextRule | RuleFunction | type[ContextRule])

_registered: dict[str, ContextRule] = {}
_lock = threading.Lock()


def _checked_name(name: Any, what: object) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ContextRuleFailed(f"context rule {what!r}: its name must be a non-empty word")
    if name in BUILTIN_RULES or name in OPTIONAL_RULES:
        raise ContextRuleFailed(f"context rule {name!r}: that is a built-in rule's name")
    return name


@overload
def register_context_rule(rule: R, *, name: str | None = None) -> R: ...
@overload
def register_context_rule(rule: None = None, *, name: str | None = None) -> Callable[[R], R]: ...
def register_context_rule(
    rule: R | None = None, *, name: str | None = None
) -> R | Callable[[R], R]:
    """Make ``rule`` available to sessions opened from now on, under ``name`` (default:
    its ``name`` attribute, else a function's name with ``_`` as ``-``).

    ``rule`` is an object with ``name`` and ``apply(parts)`` (see
    :class:`~infai.agent.context.ContextRule`), or a function of the parts that
    returns decisions, or a rule class (instantiated with no arguments); used
    bare as a decorator, it registers the function (or class).
    Registering the same rule again is a no-op; another rule under a taken
    name, or a built-in rule's name, is refused (:class:`ContextRuleFailed`).
    Returns ``rule``.
    """
    if rule is None:
        return lambda given: register_context_rule(given, name=name)
    if isinstance(rule, type):  # a rule class (a plugin's entry point): one instance
        with _lock:
            held = _registered.get(name or str(getattr(rule, "name", "")))
        if held is not None and type(held) is rule:
            return rule
        register_context_rule(rule(), name=name)
        return rule
    if isinstance(rule, ContextRule) and name in (None, rule.name):
        wrapped: ContextRule = rule
    elif callable(rule) and not hasattr(rule, "apply"):
        given = name or getattr(rule, "__name__", "").replace("_", "-")
        wrapped = FunctionRule(_checked_name(given, rule), rule)
    elif isinstance(rule, ContextRule):
        raise ContextRuleFailed(f"context rule {rule.name!r} cannot be registered as {name!r}")
    else:
        raise ContextRuleFailed(
            f"{rule!r} is not a context rule (an object with 'name' and 'apply', or a function)"
        )
    key = _checked_name(wrapped.name, rule)
    with _lock:
        held = _registered.get(key)
        same = held is rule or (isinstance(held, FunctionRule) and held.fn is rule)
        if held is not None and not same:
            raise ContextRuleFailed(f"a context rule named {key!r} is already registered")
        _registered[key] = held if held is not None else wrapped
    return rule


def unregister_context_rule(name: str) -> None:
    """Forget the rule registered as ``name`` (a test's, a plugin unloaded); none is fine."""
    with _lock:
        _registered.pop(name, None)


def registered_context_rules() -> tuple[str, ...]:
    """The registered rules' names, in the order they were registered."""
    with _lock:
        return tuple(_registered)


def context_pipeline(
    extra: Mapping[str, Any] | None = None, names: Sequence[str] | None = None
) -> ContextPipeline:
    """The pipeline of a session whose metadata's ``extra`` is ``extra``: the built-in
    rules, then the rules ``names`` in that order (None: every registered rule, in
    the order registered): registered ones, or an opt-in built-in rule
    (:data:`~.rules.OPTIONAL_RULES`). An unknown name raises :class:`ContextRuleFailed`."""
    with _lock:
        registered = dict(_registered)
    if names is None:
        chosen = list(registered.values())
    else:
        chosen = []
        for name in names:
            if name in OPTIONAL_RULES:
                chosen.append(OPTIONAL_RULES[name]())
                continue
            if name not in registered:
                known = ", ".join([*OPTIONAL_RULES, *registered])
                raise ContextRuleFailed(
                    f"[context] rules: no context rule named {name!r} (there are: {known})"
                )
            chosen.append(registered[name])
    return ContextPipeline([*builtin_rules(pruned_outputs(extra or {})), *chosen])
