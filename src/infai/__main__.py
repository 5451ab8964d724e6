"""``python -m infai``: the same as the ``infai`` command."""

from infai.shells.cli.main import entry

entry()
