"""How the client commands find their server and token: options, the environment, or what
`gpuarena login` saved."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    from gpuarena.client import Client

ServerOpt = Annotated[
    str | None, typer.Option("--server", envvar="GPUARENA_SERVER", help="Server URL [default: from `gpuarena login`]")
]
TokenOpt = Annotated[
    str | None, typer.Option("--token", envvar="GPUARENA_TOKEN", help="API token [default: from `gpuarena login`]")
]


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gpuarena" / "credentials.json"


def server_client(server: str | None, token: str | None, need_token: bool = True) -> Client:
    """A client for the server given, else the one `gpuarena login` saved (with its token only
    when it is the same server)."""
    from gpuarena.client import Client

    saved = {}
    if credentials_path().is_file():
        saved = json.loads(credentials_path().read_text())
    server = (server or saved.get("server") or "").rstrip("/")  # http://host:port/ is http://host:port
    saved_server = (saved.get("server") or "").rstrip("/")
    token = token or (saved.get("token") if saved_server in ("", server) else None)
    if not server:
        raise GpuarenaError("no server: pass --server URL, set GPUARENA_SERVER, or run `gpuarena login`")
    if need_token and not token:
        raise GpuarenaError(f"no token for {server}: pass --token, set GPUARENA_TOKEN, or run `gpuarena login`")
    return Client(server, token)
