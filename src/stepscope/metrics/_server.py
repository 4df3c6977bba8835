"""A small HTTP server for ``/metrics``, in a thread of a helper process.

The live rule runner starts it (``stepscope run --metrics-port``): never the
training process. It answers ``GET /metrics`` with what ``text()`` returns now,
``404`` elsewhere, and writes no access log.

Each connection has its own thread and ``client_s`` seconds in all, to send its
request and read the answer: a client that connects and never sends, or reads
slowly, is cut then (its socket shut from the serving thread), and meanwhile the
next scrape is answered. At most ``max_clients`` connections are open: a new one
cuts the oldest. :meth:`MetricsServer.stop` cuts every open connection, so it
never waits for a client.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from stepscope.metrics._text import CONTENT_TYPE

DEFAULT_HOST = "127.0.0.1"
CLIENT_S = 5.0  # a scrape's whole exchange: Prometheus's default scrape_timeout is 10 s
MAX_CLIENTS = 8  # open connections: a scraper or two, and room for a stuck one


class _Server(ThreadingHTTPServer):
    # stop() cuts the connections, then joins their threads: no thread outlives it
    daemon_threads = False
    block_on_close = True
    text: Callable[[], str]
    on_error: Callable[[Exception], None] | None = None

    def __init__(self, address: tuple[str, int], client_s: float, max_clients: int) -> None:
        self.client_s, self.max_clients = client_s, max_clients
        self._open: dict[socket.socket, float] = {}  # connection -> its deadline (monotonic)
        self._lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self._lock:
            self._open[request] = time.monotonic() + self.client_s
            oldest = list(self._open)[: max(0, len(self._open) - self.max_clients)]
        for sock in oldest:
            _cut(sock)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Between accepts (every 0.5 s): cut the connections past their deadline."""
        now = time.monotonic()
        with self._lock:
            late = [sock for sock, deadline in self._open.items() if deadline <= now]
        for sock in late:
            _cut(sock)

    def cut_all(self) -> None:
        with self._lock:
            every = list(self._open)
        for sock in every:
            _cut(sock)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up or was cut: nothing for the job's log


def _cut(sock: socket.socket) -> None:
    """Wake the connection's thread, blocked in a read or a write: it ends at once
    (closing the socket is its own job, in ``shutdown_request``)."""
    with contextlib.suppress(OSError):  # already gone
        sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.client_s)  # no read or write waits longer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "stepscope serves /metrics only")
            return
        try:
            body = self.server.text().encode()
        except Exception as exc:  # the scraper sees a 500; the owner records it
            self.send_error(500, "stepscope could not render its metrics")
            if self.server.on_error is not None:
                self.server.on_error(exc)
            return
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # a scrape every few seconds would fill the job's log


class MetricsServer:
    """``/metrics`` on ``host:port`` (0: a free port) served from a daemon thread.

    Binding happens in the constructor: a port in use raises ``OSError`` there,
    for the caller to record as a fault. ``on_error`` hears a failure of ``text``
    (the scrape gets a 500). ``client_s`` and ``max_clients``: see the module.
    """

    def __init__(
        self,
        text: Callable[[], str],
        port: int,
        host: str = DEFAULT_HOST,
        on_error: Callable[[Exception], None] | None = None,
        client_s: float = CLIENT_S,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._server = _Server((host, port), client_s, max_clients)
        self._server.text, self._server.on_error = text, on_error
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stepscope-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut the open connections, close the socket, join the threads."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.cut_all()
        self._server.server_close()
