"""Clock offsets between nodes: a tiny time service and Cristian's algorithm.

The launcher of node rank 0 is the job's reference clock: it serves its time
over TCP on the rendezvous address and writes where in ``clock/reference.json``.
Every other launcher connects before it starts training, asks for the time
``SAMPLES`` times and keeps the exchange with the shortest round trip:
``offset = t_reference - (t_sent + t_received) / 2``, wrong by at most half
that round trip (recorded as ``error_s``). docs/distributed.md explains why.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SAMPLES = 8
CONNECT_TIMEOUT_S = 5.0
_TIME = struct.Struct("!d")


@dataclass(frozen=True)
class Offset:
    """This node's clock against the reference: add ``offset_s`` to local times."""

    offset_s: float
    rtt_s: float

    @property
    def error_s(self) -> float:
        """The most the offset can be wrong by (half the shortest round trip)."""
        return self.rtt_s / 2


class TimeServer:
    """Answers every byte received with the reference time (8 bytes, network order)."""

    def __init__(self, host: str, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.5)
        self.host, self.port = host, int(self.sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="stepscope-time", daemon=True)

    def start(self) -> TimeServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # timeout: look at the stop flag again
                continue
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(CONNECT_TIMEOUT_S)
        try:
            while conn.recv(1):
                conn.sendall(_TIME.pack(self.clock()))
        except OSError:
            return  # a client that went away: nothing to answer


def measure(host: str, port: int, clock: Callable[[], float], samples: int = SAMPLES) -> Offset:
    """The offset of ``clock`` against the server at ``host:port`` (raises OSError)."""
    best: Offset | None = None
    with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            sent = clock()
            conn.sendall(b"t")
            (reference,) = _TIME.unpack(_recv_exact(conn, _TIME.size))
            received = clock()
            sample = Offset(reference - (sent + received) / 2, received - sent)
            if best is None or sample.rtt_s < best.rtt_s:
                best = sample
    assert best is not None
    return best


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the time server closed the connection")
        data += chunk
    return data


def skewed_clock(skew_s: float) -> Callable[[], float]:
    """This node's wall clock (``skew_s`` is 0 except in tests that inject an error)."""
    return lambda: time.time() + skew_s
