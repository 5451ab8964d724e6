"""Where ``infai login`` keeps server tokens, so ``--remote URL`` needs no ``--token``.

One JSON file beside the user's configuration (``remotes.json`` in the
directory of ``~/.config/infai/config.toml``, or of ``$INFAI_CONFIG``), mode
0600, written whole by a rename: ``{"version": 1, "tokens": {API_URL: TOKEN}}``,
keyed by the API URL (:func:`~.client.api_url`), so ``http://box:8765`` and
``http://box:8765/v1`` are one server. A token given with ``--token`` or
``$INFAI_SERVER_TOKEN`` wins over a stored one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .client import RemoteError, api_url

FILE_NAME = "remotes.json"


def tokens_path() -> Path:
    """The token file's path (it may not exist)."""
    from infai.agent import user_config_path

    path: Path = user_config_path().parent / FILE_NAME
    return path


def _load(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RemoteError(f"{path}: cannot read the stored tokens ({exc})") from exc
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, dict):
        raise RemoteError(f"{path}: not a token file (expected {{'tokens': {{...}}}})")
    return {str(k): str(v) for k, v in tokens.items()}


def _save(path: Path, tokens: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"version": 1, "tokens": tokens}, out, indent=1, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def stored_token(url: str) -> str | None:
    """The token stored for the server at ``url`` (None: none)."""
    return _load(tokens_path()).get(api_url(url))


def store_token(url: str, token: str) -> Path:
    """Keep ``token`` for the server at ``url`` (replacing one); returns the file."""
    path = tokens_path()
    tokens = _load(path)
    tokens[api_url(url)] = token
    _save(path, tokens)
    return path


def forget_token(url: str) -> bool:
    """Drop the stored token of ``url``; whether there was one."""
    path = tokens_path()
    tokens = _load(path)
    if tokens.pop(api_url(url), None) is None:
        return False
    _save(path, tokens)
    return True
