"""``/metrics``'s server against clients that misbehave, with raw sockets on 127.0.0.1:
one that connects and never sends, one that asks and then reads nothing. The next
scrape is still answered, the live runner's scans go on beside them, and ``stop()``
cuts them instead of waiting (their deadline here is an hour: waiting would hang)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import rules_data as rd
import stepscope
from stepscope.metrics import JobMetrics, MetricsServer, render
from stepscope.rules import build_rules
from stepscope.rules._live_metrics import MetricsFeed
from stepscope.rules.runner import Runner

HOUR = 3600.0  # a client's deadline that no test waits out
GUARD_S = 60.0  # a hang guard, never a measure: each wait below ends at once when right
PAD = "# padding: more than the sockets' buffers hold\n" * 200_000  # about 9 MB


def _scrape(port: int) -> str:
    """One whole scrape over a raw socket: the body of a 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD_S) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        chunks = []
        while chunk := s.recv(1 << 16):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200"), head[:80]
    return body.decode()


def _silent(port: int) -> socket.socket:
    """Connects, sends nothing."""
    return socket.create_connection(("127.0.0.1", port), timeout=GUARD_S)


def _slow_reader(port: int) -> socket.socket:
    """Asks, reads the status line, then nothing more: the server's write blocks."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.settimeout(GUARD_S)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    assert s.recv(12).startswith(b"HTTP/1.0 200")
    return s


def _ended(sock: socket.socket) -> bool:
    """The server cut the connection: reading ends (EOF or reset) instead of waiting."""
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True  # a socket.timeout (the guard) would have raised


@contextmanager
def _server(text: Callable[[], str], **opts: float) -> Iterator[MetricsServer]:
    server = MetricsServer(text, 0, **opts).start()  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def _stops(server: MetricsServer) -> bool:
    """``stop()`` returns (in a thread: a hang fails the test, not the suite)."""
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(GUARD_S)
    return not stopper.is_alive()


def test_a_silent_and_a_slow_client_hold_neither_the_scrapes_nor_stop() -> None:
    before = set(threading.enumerate())
    with _server(lambda: "stepscope_up 1\n" + PAD, client_s=HOUR) as server:
        silent, slow = _silent(server.port), _slow_reader(server.port)
        body = _scrape(server.port)  # answered while both hold a connection
        assert body.startswith("stepscope_up 1\n") and len(body) == len(body.encode())
        assert _scrape(server.port) == body  # and again
        assert _stops(server)
        assert _ended(silent) and _ended(slow)  # cut, not waited for
        silent.close()
        slow.close()
    assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_a_client_past_its_deadline_is_cut_while_serving() -> None:
    with _server(lambda: "stepscope_up 1\n", client_s=0.2) as server:
        with _silent(server.port) as silent:
            assert _ended(silent)  # cut by the server, which still serves
        assert _scrape(server.port) == "stepscope_up 1\n"


def test_past_max_clients_the_oldest_connection_is_cut() -> None:
    with _server(lambda: "stepscope_up 1\n", client_s=HOUR, max_clients=2) as server:
        first, second = _silent(server.port), _silent(server.port)
        assert _scrape(server.port) == "stepscope_up 1\n"  # a third: the first is cut
        assert _ended(first)
        with first, second, _silent(server.port):  # the second is now the oldest
            assert _scrape(server.port) == "stepscope_up 1\n"
            assert _ended(second)


def _count(text: str) -> float:
    lines = [ln for ln in text.splitlines() if ln.startswith("stepscope_step_seconds_count")]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


def test_the_runner_scans_on_while_a_scraper_stalls(tmp_path: Path) -> None:
    store = rd.new_job(tmp_path / "j", status="Running")
    rd.node_info(store, gpus=0)
    rd.write_process_start(store)
    runner = Runner(stepscope.open(str(tmp_path / "j")), build_rules([]))
    metrics = JobMetrics("j")
    runner.observe(MetricsFeed(metrics, runner.faults))
    with _server(lambda: render([metrics]) + PAD, client_s=HOUR) as server:
        rd.write_steps(store, rd.steps_frame(30, start=rd.T0 + 5))
        runner.scan()
        silent, slow = _silent(server.port), _slow_reader(server.port)  # its write blocks
        frame = rd.steps_frame(20, start=rd.T0 + 20)
        frame["step"] += 30
        rd.write_steps(store, frame)
        runner.scan()  # the stalled write holds no lock the scan needs
        assert runner.scans == 2 and _count(_scrape(server.port)) == 50
        assert _stops(server)
        silent.close()
        slow.close()
