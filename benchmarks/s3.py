"""Object storage: requests and bytes per minute per node, and reading a job from S3.

    python benchmarks/s3.py [--steps 550] [--repeat 3]

Starts a SeaweedFS server on 127.0.0.1 (tests/s3_server.py) behind a counting
HTTP proxy, runs real one-node jobs (tests/scripts/mlp.py, ~0.1 s steps) with
``stepscope run -o s3://...`` at 100 ms and 500 ms system sampling, and counts
every request each job made (all processes: agent, sampler, launcher, rule
runner). Then times ``stepscope rules`` and ``stepscope report`` on the 100 ms
job read from S3 and on the same job copied to a local folder (interleaved
pairs, medians). Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from s3_server import SeaweedServer, free_ports  # noqa: E402

BIN = Path(sys.executable).parent
MLP = str(ROOT / "tests" / "scripts" / "mlp.py")
BUCKET = "bench"
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


class Counts:
    """Requests and bytes seen by the proxy, by method and by job folder entry."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests: Counter[str] = Counter()
        self.by_part: Counter[str] = Counter()
        self.sent = self.received = 0

    def add(self, method: str, path: str, query: str, sent: int, received: int) -> None:
        params = parse_qs(query)
        listing = method == "GET" and ("list-type" in params or "prefix" in params)
        kind = "LIST" if listing else method
        key = params.get("prefix", [""])[0] if listing else unquote(path).split("/", 2)[-1]
        parts = key.split("/")  # runs, job, entry, ...
        entry = parts[2] if len(parts) > 2 and parts[2] else "(job folder)"
        with self.lock:
            self.requests[kind] += 1
            self.by_part[f"{kind} {entry}"] += 1
            self.sent, self.received = self.sent + sent, self.received + received


def proxy(upstream: str, counts: Counts) -> ThreadingHTTPServer:
    """A transparent HTTP proxy (headers untouched, so SigV4 signatures still hold)."""
    target = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            path, _, query = self.path.partition("?")
            counts.add(self.command, path, query, length, len(data))

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        def log_message(self, *args: Any) -> None:
            pass

    (port,) = free_ports(1)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_job(env: dict[str, str], job: str, interval_ms: int, steps: int) -> float:
    cmd = [str(BIN / "stepscope"), "run", "-o", f"s3://{BUCKET}/runs", "--job", job]
    cmd += ["--interval-ms", str(interval_ms), "--", sys.executable, MLP]
    cmd += ["--steps", str(steps), "--step-sleep", "0.1"]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def timed(env: dict[str, str], *args: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([str(BIN / "stepscope"), *args], env=env, capture_output=True)
    assert p.returncode in (0, 1), p.stderr.decode()
    return time.perf_counter() - t0


def copy_local(env: dict[str, str], url: str, dest: Path) -> None:
    code = (
        "import fsspec, sys; fs, p = fsspec.core.url_to_fs(sys.argv[1]); "
        "fs.get(p, sys.argv[2], recursive=True)"
    )
    subprocess.run([sys.executable, "-c", code, url, str(dest)], env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=550, help="training steps per job (~0.11 s each)")
    ap.add_argument("--repeat", type=int, default=3, help="timed reads of each kind")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stepscope-s3-bench-"))
    server = SeaweedServer(tmp / "data", buckets=(BUCKET,))
    server.start()
    counts = Counts()
    px = proxy(server.endpoint, counts)
    direct = {**os.environ, **server.env()}
    counted = {**direct, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{px.server_address[1]}"}
    try:
        print(
            "| sampling | job s | requests/min | PUT/min | GET+HEAD/min | LIST/min "
            "| KB up/min | KB down/min |"
        )
        print("|---|---|---|---|---|---|---|---|")
        breakdown = {}
        for ms in (100, 500):
            counts.reset()
            took = run_job(counted, f"j{ms}", ms, a.steps)
            per_min = 60.0 / took
            r = counts.requests
            total, reads = sum(r.values()), r["GET"] + r["HEAD"]
            print(
                f"| {ms} ms | {took:.0f} | {total * per_min:.0f} | {r['PUT'] * per_min:.0f} "
                f"| {reads * per_min:.0f} | {r['LIST'] * per_min:.0f} "
                f"| {counts.sent / 1024 * per_min:.0f} | {counts.received / 1024 * per_min:.0f} |"
            )
            breakdown[ms] = dict(counts.by_part.most_common(12))
        for ms, parts in breakdown.items():
            print(f"\nrequests of the {ms} ms job, by kind and job folder entry: {parts}")
        local = tmp / "local"
        copy_local(direct, f"s3://{BUCKET}/runs/j100", local / "j100")
        counts.reset()
        timed(counted, "rules", f"s3://{BUCKET}/runs/j100")
        rules_requests = sum(counts.requests.values())
        times: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            for cmd in ("rules", "report"):
                on_s3 = timed(direct, cmd, f"s3://{BUCKET}/runs/j100")
                times.setdefault(f"{cmd} s3", []).append(on_s3)
                times.setdefault(f"{cmd} local", []).append(timed(direct, cmd, str(local / "j100")))
        print(f"\n`stepscope rules` on S3 made {rules_requests} requests")
        print("\n| command (100 ms job) | S3 median s | local median s |")
        print("|---|---|---|")
        for cmd in ("rules", "report"):
            s3m, lm = (statistics.median(times[f"{cmd} {k}"]) for k in ("s3", "local"))
            print(f"| stepscope {cmd} | {s3m:.2f} | {lm:.2f} |")
    finally:
        px.shutdown()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
