"""Where other processes listen: Unix-socket paths hidden from every sandboxed command.

Why: a path-bound Unix socket is a door to a process the sandbox does not
confine (tmux types into the user's pane, an ssh agent signs, the D-Bus user
bus starts services, Docker starts containers, PostgreSQL trusts a peer of the
same user). The seccomp filter (:mod:`infai.tools.seccomp`) leaves a command
no socket to connect with; hiding the paths is the second wall, should a way
to get one turn up: a socket that cannot be found cannot be connected to.

What is hidden, whatever the configuration (like infai's own files), with the
same empty mounts as ``sandbox.hidden`` (:mod:`infai.tools.sandbox_hide`):

- the runtime directories: all of ``/run/user`` (each user's
  ``$XDG_RUNTIME_DIR``: the D-Bus user bus, systemd's user manager, gpg and
  ssh agents, keyrings, PipeWire, Wayland, Podman) and ``$XDG_RUNTIME_DIR``
  wherever it is;
- well-known system sockets (:data:`SYSTEM_SOCKETS`): the D-Bus system bus,
  PostgreSQL's and MySQL's socket directories, Docker, containerd, Podman,
  snapd, screen, systemd's private manager socket;
- the sockets infai's environment names: ``$SSH_AUTH_SOCK``, ``$TMUX``'s,
  ``$TMUX_TMPDIR/tmux-UID``, the D-Bus addresses, ``unix://`` in
  ``$DOCKER_HOST``, ``$PULSE_SERVER``, ``$GPG_AGENT_INFO``, an absolute
  ``$WAYLAND_DISPLAY``, ``$NOTIFY_SOCKET``, ``$SCREENDIR``; each socket itself
  and, when its directory is one made for sockets (``ssh-*``, ``tmux-*``,
  ``dbus-*``, ``screen*``), that directory;
- in ``/tmp``: nothing while it is the sandbox's own, empty one; when
  ``sandbox.writable`` makes the real one visible, ``/tmp/.X11-unix``,
  ``/tmp/.ICE-unix``, ``/tmp/tmux-*``, ``/tmp/ssh-*``, ``/tmp/dbus-*`` too.

Not hidden: ``/run`` as a whole (``/etc/resolv.conf`` often lives there, and
on NixOS every program), nor sockets elsewhere under other names. The
directories are not scanned for symlinks (unlike a hidden credential
directory: a link in ``/run/user/1000`` says nothing about secrets).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping

#: always hidden (when they exist): system services' sockets and their directories
SYSTEM_SOCKETS: tuple[str, ...] = (
    "/run/user",
    "/run/dbus",
    "/var/run/dbus",
    "/run/postgresql",
    "/var/run/postgresql",
    "/run/mysqld",
    "/var/run/mysqld",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/screen",
    "/run/systemd/private",
)
#: socket directories in /tmp, hidden when the real /tmp is visible in the sandbox
TMP_SOCKETS: tuple[str, ...] = (".X11-unix", ".ICE-unix", "tmux-*", "ssh-*", "dbus-*")
#: a socket's directory named so is hidden with it (it holds sockets, nothing else)
SOCKET_DIRS: tuple[str, ...] = ("ssh-*", "tmux-*", "dbus-*", "screen*", ".X11-unix")
#: directories never hidden as socket directories, whatever the environment says
NEVER: tuple[str, ...] = ("/", "/tmp", "/var/tmp", "/run", "/var/run", "/var", "/home")
#: how many entries of /tmp are looked at for TMP_SOCKETS
MAX_TMP_SCAN = 4096


def socket_entries(
    environ: Mapping[str, str], working_dir: str, roots: Iterable[str] = ()
) -> list[str]:
    """The socket paths to hide for a command started now in ``working_dir``
    (resolved), absolute and unresolved; missing ones are skipped later.
    ``environ``: infai's own environment (the command's is scrubbed, but the
    user's agents are named here). ``roots``: the other writable directories
    bound in the sandbox (one that is ``/tmp`` or contains it makes the real
    ``/tmp`` visible).

    A path that is, or contains, the working directory is left out (a runtime
    directory set to ``$HOME`` is not hidden: the user works there; through a
    symlink, :func:`~infai.tools.sandbox_hide.hidden_paths` leaves it out once
    resolved), and so is one of the general directories of :data:`NEVER`."""
    tmp_visible = any(_within("/tmp", os.path.normpath(r)) for r in (working_dir, *roots))
    entries = list(SYSTEM_SOCKETS)
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        entries.append(os.path.normpath(runtime))
    for path in _named_sockets(environ):
        entries.append(path)
        parent = os.path.dirname(path)
        if any(fnmatch.fnmatchcase(os.path.basename(parent), p) for p in SOCKET_DIRS):
            entries.append(parent)
    if tmp_visible:
        entries += _tmp_sockets()
    never = {*NEVER, os.path.expanduser("~")}
    return [
        e
        for e in dict.fromkeys(entries)
        if (tmp_visible or not _within(e, "/tmp"))
        and e not in never
        and not _within(working_dir, e)
    ]


def _named_sockets(environ: Mapping[str, str]) -> list[str]:
    """The socket paths infai's environment names (see the module docstring)."""
    found: list[str] = []
    for name in ("SSH_AUTH_SOCK", "NOTIFY_SOCKET", "SCREENDIR"):
        found.append(environ.get(name, ""))
    found.append(environ.get("TMUX", "").split(",")[0])  # "socket,pid,session"
    found.append(environ.get("GPG_AGENT_INFO", "").split(":")[0])  # "socket:pid:1"
    if tmux_tmpdir := environ.get("TMUX_TMPDIR"):
        found.append(os.path.join(tmux_tmpdir, f"tmux-{os.getuid()}"))
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS"):
        found += _dbus_paths(environ.get(name, ""))
    found.append(_after(environ.get("DOCKER_HOST", ""), "unix://"))
    found.append(_after(environ.get("PULSE_SERVER", ""), "unix:"))
    found.append(environ.get("WAYLAND_DISPLAY", ""))
    return [os.path.normpath(p) for p in found if os.path.isabs(p)]


def _dbus_paths(address: str) -> list[str]:
    """The ``path=`` and ``dir=`` values of a D-Bus address (``;``-separated
    transports of ``unix:key=value,…``)."""
    out = []
    for transport in address.split(";"):
        kind, _, params = transport.partition(":")
        if kind != "unix":
            continue
        for pair in params.split(","):
            key, _, value = pair.partition("=")
            if key in ("path", "dir", "tmpdir"):
                out.append(value)
    return out


def _after(value: str, prefix: str) -> str:
    return value[len(prefix) :] if value.startswith(prefix) else ""


def _tmp_sockets() -> list[str]:
    """The entries of the real /tmp matching :data:`TMP_SOCKETS`."""
    found = []
    try:
        with os.scandir("/tmp") as listing:
            for n, item in enumerate(listing):
                if n >= MAX_TMP_SCAN:
                    break
                if any(fnmatch.fnmatchcase(item.name, p) for p in TMP_SOCKETS):
                    found.append(item.path)
    except OSError:
        pass
    return found


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


__all__ = ["SYSTEM_SOCKETS", "TMP_SOCKETS", "socket_entries"]
