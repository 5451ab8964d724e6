"""A real ``infai serve`` process for the tests of its clients (``--remote``, attach).

:class:`Serve` starts ``infai serve --port 0`` over a home of the test's (or a
store it names, such as a PostgreSQL URL), in a working directory of the
test's (where its new sessions work), with a token and a configuration file,
and reads the URL it prints; :meth:`Serve.close` stops it. ``with Serve(...) as
url:`` does both. :data:`SERVE` is the command line that runs this checkout's
``infai`` (the server, or a client in a process of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LAUNCH = "import sys\nfrom infai.shells import cli\ncli.main(sys.argv[1:], prog_name='infai')\n"
#: ``infai`` as a process of its own, from this checkout
SERVE = (sys.executable, "-c", LAUNCH)


class Serve:
    """One ``infai serve`` process: ``start()`` it (its API's URL), ``close()`` it."""

    def __init__(
        self,
        home: Path,
        work: Path,
        token: str,
        *args: str,
        config: Path | None = None,
        store: str | None = None,
    ) -> None:
        #: the server's home, and the directory it runs in (its sessions work there)
        self.home, self.work = home, work
        self.token = token
        #: ``serve``'s own options (``--model NAME``...)
        self.args = args
        self.config = config
        #: a store other than the home (``--store``: a postgresql:// URL)
        self.store = store
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        """Start the server and wait until it serves: its API's URL (``…/v1``)."""
        env = {**os.environ, "INFAI_SERVER_TOKEN": self.token}
        if self.config is not None:
            env["INFAI_CONFIG"] = str(self.config)
        root = ["--home", str(self.home), *(["--store", self.store] if self.store else [])]
        self.work.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [*SERVE, *root, "serve", "--port", "0", *self.args],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.work,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        assert line.startswith("infai: serving http://127.0.0.1:"), line
        self.url = line.split()[2]
        return self.url

    def close(self) -> None:
        """Stop the server (SIGTERM) and wait for it."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.terminate()
        proc.wait(timeout=20)
        assert proc.stderr is not None
        proc.stderr.close()

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
