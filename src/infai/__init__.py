"""infai: an agent harness whose heart is a durable, branchable session store.

Layers (imports point only downward, enforced by a test):
``store`` <- ``llm`` <- ``tools`` <- ``agent`` <- ``shells``.
"""

__version__ = "0.1.0"
