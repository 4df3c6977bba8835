"""A webhook endpoint for the tests: an HTTP server on 127.0.0.1 (a thread) that keeps
what it is POSTed; and a port that refuses connections (a dead endpoint)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hook(ThreadingHTTPServer):
    """The server; ``received`` holds (path, JSON body, headers) of each POST."""

    received: list[tuple[str, object, dict[str, str]]]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Hook

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((self.path, json.loads(body), dict(self.headers)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet in the test log
        pass


@contextmanager
def hook_server() -> Iterator[Hook]:
    """A webhook endpoint on an ephemeral port of 127.0.0.1, shut down on exit."""
    server = Hook(("127.0.0.1", 0), _Handler)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def dead_url() -> str:
    """A URL of 127.0.0.1 whose port nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
