"""Token counts estimated from text, for when no tokenizer is at hand.

Sizing a request before it is sent (auto-compaction) and the built-in models'
usage reports need a count that is cheap and good enough; four characters a
token is the usual rough measure for English text and code. It is an estimate,
never billed: a provider's reported usage always wins where there is one.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """A rough token count (four characters a token), for models without a tokenizer."""
    return (len(text) + 3) // 4


__all__ = ["estimate_tokens"]
