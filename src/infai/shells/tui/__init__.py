"""The terminal UI (Textual): see :mod:`infai.shells.tui.app`."""

from .app import InfaiApp

__all__ = ["InfaiApp"]
