"""``stepscope ui [ROOT] [--port N] [--host H] [--token T]``: serve the dashboard.

The socket is bound here, before uvicorn starts, so that ``--port 0`` (any
free port) prints the real URL, and a port in use is a clear one-line error.
The URL printed carries the token (``?token=...``): the page keeps it and
sends it with every control request. ``STEPSCOPE_UI_TOKEN`` may give the token
instead of ``--token`` (it then stays out of the process list).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Callable

from stepscope.errors import UsageError

DEFAULT_ROOT = "./stepscope-runs"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "STEPSCOPE_UI_TOKEN"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ui`` on the ``stepscope`` parser."""
    p = sub.add_parser("ui", help="serve the live dashboard of the jobs under a folder")
    p.add_argument("root", nargs="?", default=DEFAULT_ROOT,
                   help=f"folder (or URL) holding the jobs (default {DEFAULT_ROOT})")  # fmt: skip
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help="address to bind (default 127.0.0.1; beyond loopback --token is needed)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--token", help=f"access token, >= 16 characters (default: random; or ${TOKEN_ENV})"
    )
    p.set_defaults(fn=cmd_ui)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (UsageError when that fails)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}. "
                     "Give another --port (0 picks a free one).") from None  # fmt: skip
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def cmd_ui(args: argparse.Namespace) -> int:
    import uvicorn

    from stepscope.dashboard import create_app, new_token
    from stepscope.store import StoreError, open_store

    token = args.token or os.environ.get(TOKEN_ENV) or ""
    try:
        store = open_store(args.root)
        if not store.isdir():
            raise UsageError(f"no folder {args.root!r}: give the output folder of your jobs "
                         "(stepscope run -o FOLDER), or run one first.")  # fmt: skip
        app = create_app(store, args.host, token or new_token_if_loopback(args.host, new_token))
    except (ValueError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    sock = bind(args.host, args.port)
    port = sock.getsockname()[1]
    print(f"stepscope ui: serving {args.root} at {url_of(args.host, port, app.token)}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    print("stepscope ui: stopped", file=sys.stderr)
    return 0


def new_token_if_loopback(host: str, make: Callable[[], object]) -> str:
    """A fresh token on loopback; beyond it none (so that the binding is refused)."""
    from stepscope.dashboard import is_loopback

    return str(make()) if is_loopback(host) else ""
