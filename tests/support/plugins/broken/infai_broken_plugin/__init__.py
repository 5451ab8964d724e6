"""A broken infai plugin: what it declares cannot be used."""


def not_a_tool(x: int) -> int:
    """A plain function: never decorated, so not a tool."""
    return x


wrongtype = {"name": "wrongtype"}
