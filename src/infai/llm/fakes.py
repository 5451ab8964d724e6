"""The models a test drives, shipped with the package (as pydantic-ai ships its own).

A test scripts a whole conversation with :class:`ScriptedModel` (and then checks
what the model was sent), answers each request with a function of it with
:class:`FunctionModel`, or uses the deterministic :class:`OfflineModel`. They
live in :mod:`infai.llm.local` beside the built-in ``offline`` model; production
code imports them from there, never from here (``tests/test_layers.py`` checks).
"""

from .local import FunctionModel, OfflineModel, Reply, ScriptedModel
from .tokens import estimate_tokens

__all__ = ["FunctionModel", "OfflineModel", "Reply", "ScriptedModel", "estimate_tokens"]
