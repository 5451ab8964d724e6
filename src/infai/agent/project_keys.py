"""Which of your keys a project's model may take (``project_keys``).

A model a project's file defines with a ``base_url`` of its own choosing gets no
key from your environment unless your own file lists the variable: trusted or
not, the project's file may be written by others too (a command run in it, a
restored snapshot), and ``$OPENAI_API_KEY`` must not go where it says.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from infai.llm.providers import ModelSpec


def keyless_elsewhere(
    project: Path, spec: ModelSpec, allowed: tuple[str, ...], warnings: list[str]
) -> ModelSpec:
    """A project's model that sends to a ``base_url`` of its own choosing gets no key
    from your environment unless your file lists its variable in ``project_keys``:
    trusted or not, the project's file may be written by others too (a command run
    in it, a restored snapshot), and ``$OPENAI_API_KEY`` must not go where it says."""
    variable = spec.key_variable()
    if variable is None or variable in allowed:
        return spec
    if os.environ.get(variable):
        warnings.append(
            f"{project}: models.{spec.name} sends to its own base_url, so it gets no key "
            f"from ${variable} (list {variable} in your file's project_keys to allow it)"
        )
    return replace(spec, keyless=True)
