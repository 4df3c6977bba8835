"""``stepscope ui [ROOT] [--port N] [--host H] [--token T] ...``: serve the dashboard.

The socket is bound here, before uvicorn starts, so that ``--port 0`` (any
free port) prints the real URL, and a port in use is a clear one-line error.
The URL printed carries the token (``?token=...``): the page keeps it and
sends it with every control request. ``STEPSCOPE_UI_TOKEN`` may give the token
instead of ``--token`` (it then stays out of the process list).

Beyond loopback the names the server answers to are printed (``--allow-host`` adds
one), and plain HTTP is warned about once: ``--certfile``/``--keyfile`` serve TLS,
checked here (readable, a certificate and its key) before anything is bound.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

from stepscope.cli._jobs import OUTPUT_ENV, output_folder
from stepscope.errors import UsageError

if TYPE_CHECKING:
    import uvicorn

DEFAULT_ROOT = "./stepscope-runs"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "STEPSCOPE_UI_TOKEN"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``ui`` on the ``stepscope`` parser."""
    p = sub.add_parser(
        "ui", help="serve the live dashboard (and Prometheus /metrics) of the jobs under a folder"
    )
    p.add_argument(
        "root",
        nargs="?",
        metavar="ROOT",
        help=f"folder (or URL) holding the jobs (default ${OUTPUT_ENV}, else {DEFAULT_ROOT})",
    )
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
        "--token", help=f"access token, >= 16 characters (default ${TOKEN_ENV}, else random)"
    )
    p.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="another host name or address the server is reached by (repeatable; bound to "
             "0.0.0.0, the machine's names and addresses are in already; default: none)",
    )  # fmt: skip
    p.add_argument(
        "--certfile",
        metavar="FILE",
        help="serve HTTPS with this PEM certificate (chain) (default: plain HTTP)",
    )
    p.add_argument(
        "--keyfile",
        metavar="FILE",
        help="the certificate's PEM private key, unencrypted (default: in --certfile)",
    )
    p.add_argument(
        "--follow-symlinks", action="store_true",
        help="also serve job folders, and links in them, that resolve outside ROOT "
             "(default: not served)",
    )  # fmt: skip
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


def url_of(host: str, port: int, token: str, tls: bool = False) -> str:
    """The URL to open; bound to all interfaces, with the machine's host name."""
    from stepscope.dashboard import is_all_interfaces

    shown = socket.gethostname().lower() if is_all_interfaces(host) else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"{'https' if tls else 'http'}://{shown}:{port}/?token={token}"


def check_tls(certfile: str | None, keyfile: str | None) -> bool:
    """Whether TLS is asked for; UsageError when its files are missing, unreadable or wrong."""
    if certfile is None:
        if keyfile is not None:
            raise UsageError("--keyfile needs --certfile (the certificate it goes with).")
        return False
    for flag, path in (("--certfile", certfile), ("--keyfile", keyfile)):
        if path is not None and not os.access(path, os.R_OK):
            why = "no such file" if not os.path.exists(path) else "not readable"
            raise UsageError(f"{flag} {path!r}: {why}. Give a readable PEM file.")
    import ssl  # here: `stepscope run` parses these options too, and needs no TLS

    try:  # what uvicorn will do, here, so that a bad pair is one line and not a traceback
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certfile, keyfile, password=lambda: b"")
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise UsageError(
            f"--certfile {certfile!r} / --keyfile {keyfile!r} are not a PEM certificate and "
            f"its unencrypted private key ({exc}). A self-signed pair: openssl req -x509 "
            "-newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 365 -subj /CN=HOST"
        ) from None
    return True


def announce(app_hosts: tuple[str, ...], host: str, tls: bool) -> None:
    """Beyond loopback: the names served, and (once) that plain HTTP crosses the network."""
    from stepscope.dashboard import is_loopback

    if is_loopback(host):
        return
    print(f"stepscope ui: answering to {', '.join(app_hosts)} (add one with --allow-host NAME)",
          file=sys.stderr)  # fmt: skip
    if not tls:
        print("stepscope ui: warning: plain HTTP: the token and the job's data cross the network "
              "unencrypted. Serve TLS with --certfile/--keyfile, put a TLS reverse proxy in "
              "front, or bind 127.0.0.1 and use an SSH tunnel (ssh -L 8765:127.0.0.1:8765 HOST).",
              file=sys.stderr)  # fmt: skip


def cmd_ui(args: argparse.Namespace) -> int:
    import uvicorn

    from stepscope.dashboard import check_name, create_app, new_token
    from stepscope.store import StoreError, open_store

    args.root = args.root or output_folder(None)[0]  # where `stepscope ls` looks
    token = args.token or os.environ.get(TOKEN_ENV) or ""
    tls = check_tls(args.certfile, args.keyfile)
    try:
        allowed = tuple(check_name(n) for n in args.allow_host)
        store = open_store(args.root)
        if not store.isdir():
            raise UsageError(f"no folder {args.root!r}: give the output folder of your jobs "
                         "(stepscope run -o FOLDER), or run one first.")  # fmt: skip
        app = create_app(store, args.host, token or new_token_if_loopback(args.host, new_token),
                         allowed, follow_links=args.follow_symlinks)  # fmt: skip
    except (ValueError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    sock = bind(args.host, args.port)
    port = sock.getsockname()[1]
    url = url_of(args.host, port, app.token, tls)
    print(f"stepscope ui: serving {args.root} at {url}", flush=True)
    announce(tuple(sorted(app.hosts)), args.host, tls)
    tls_files = {"ssl_certfile": args.certfile, "ssl_keyfile": args.keyfile} if tls else {}
    config = uvicorn.Config(app, log_level="warning", access_log=False, **tls_files)
    serve(uvicorn.Server(config), sock)
    print("stepscope ui: stopped", file=sys.stderr)
    return 0


def serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """Run ``server`` until Ctrl-C. uvicorn takes SIGINT over only once its loop runs: a
    Ctrl-C in its start-up raised KeyboardInterrupt in the middle of it (a traceback, a
    coroutine never awaited). Until then, and after, a Ctrl-C asks the server to stop.
    Started with SIGINT ignored (a shell's ``&`` without job control), it keeps it
    ignored, as a background program should; SIGTERM stops it."""

    def stop(_signum: int, _frame: FrameType | None) -> None:
        server.force_exit = server.should_exit  # a second Ctrl-C: no graceful wait
        server.should_exit = True  # uvicorn's own start-up checks it, then shuts down

    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:  # started so (`&` in a shell without job control): keep it so
        server.capture_signals = functools.partial(_on_sigterm, server)  # type: ignore[method-assign]
    before = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else stop)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # a uvicorn that raises the Ctrl-C again once shut down
        pass
    finally:
        signal.signal(signal.SIGINT, before)
        sock.close()


@contextlib.contextmanager
def _on_sigterm(server: uvicorn.Server) -> Iterator[None]:
    """uvicorn's ``capture_signals`` for SIGTERM alone: SIGINT stays as it was."""
    before = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def new_token_if_loopback(host: str, make: Callable[[], object]) -> str:
    """A fresh token on loopback; beyond it none (so that the binding is refused)."""
    from stepscope.dashboard import is_loopback

    return str(make()) if is_loopback(host) else ""
