"""Shells: thin I/O over the lower layers (CLI now; TUI and HTTP server later)."""
