"""A module whose import fails, as a plugin with a missing dependency does."""

import infai_missing_dependency  # type: ignore[import-not-found]  # noqa: F401

tool = None
