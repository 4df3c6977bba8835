"""A small HTTP server for ``/metrics``, in a thread of a helper process.

The live rule runner starts it (``stepscope run --metrics-port``): never the
training process. It answers ``GET /metrics`` with what ``text()`` returns now,
``404`` elsewhere, and writes no access log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from stepscope.metrics._text import CONTENT_TYPE

DEFAULT_HOST = "127.0.0.1"


class _Server(ThreadingHTTPServer):
    # stop() joins the scrapes in flight (no thread outlives the server); a scraper
    # that stalls is cut by the handler's socket timeout, so it holds the exit 2 s at most
    daemon_threads = False
    block_on_close = True
    text: Callable[[], str]
    on_error: Callable[[Exception], None] | None = None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 2.0  # seconds a scraper may stall a read or a write

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
    (the scrape gets a 500).
    """

    def __init__(
        self,
        text: Callable[[], str],
        port: int,
        host: str = DEFAULT_HOST,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._server = _Server((host, port), _Handler)
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
        """Stop serving, close the socket and wait for the thread."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
