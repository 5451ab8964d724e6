"""What ``infai models`` lists: the built-in models, then each configured one with
where it is reached, whether its key is set and which file defined it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import Config


def describe_models(config: Config) -> list[Mapping[str, Any]]:
    """What ``infai models`` shows: built-ins, then each configured model."""
    rows: list[Mapping[str, Any]] = [
        {"name": "offline", "provider": "built-in", "model": "offline", "source": "built-in"},
        {
            "name": "scripted:FILE",
            "provider": "built-in",
            "model": "replays FILE",
            "source": "built-in",
        },
    ]
    for name, spec in sorted(config.models.items()):
        rows.append(
            {
                "name": name,
                "provider": spec.provider,
                "model": spec.model,
                "base_url": spec.resolved_base_url(),
                "key_env": spec.key_env or f"(default: {spec.key_variable() or 'none'})",
                "key_set": spec.api_key() is not None,
                "context_window": spec.context_window,
                "source": str(config.model_sources[name]),
            }
        )
    return rows
