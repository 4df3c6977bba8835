"""Serving to other machines (issue 20, item 2), for real: two network namespaces.

The server runs in one new namespace, bound to 0.0.0.0; a client in a second one
reaches it over a veth pair by the server's address, as another machine would:
with the token it views and controls, without it (or under another ``Host``) it
is refused. The namespaces are held by two ``sleep`` processes started with
``unshare -n``, set up with ``nsenter ... ip``; killing the holders removes the
namespaces and the veth pair with them (nothing is named, nothing touches the
test's own namespace). Skipped, with the reason, where namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import BIN, env_for_tests
from stepscope.testing import SyntheticJob, write_synthetic_job

pytestmark = pytest.mark.process

TOKEN = "netns-token-0123456789abcdef"
SERVER_IP, CLIENT_IP = "10.231.7.1", "10.231.7.2"
TOOLS = ("unshare", "nsenter", "ip")

CLIENT = r"""
import json, sys, urllib.error, urllib.request
base, token = sys.argv[1], sys.argv[2]

def call(path, headers=None, data=None):
    req = urllib.request.Request(base + path, data=data, headers=headers or {},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return [r.status, r.headers.get("set-cookie") or "", r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, "", e.read().decode()]

tok = {"X-Stepscope-Token": token}
post = {**tok, "Content-Type": "application/json"}
print(json.dumps({
    "bare": call("/api/jobs"),
    "page_bare": call("/"),
    "wrong": call("/api/jobs", {"X-Stepscope-Token": "w" * 28}),
    "header": call("/api/jobs", tok),
    "query": call("/?token=" + token),
    "rebound": call("/api/jobs", {**tok, "Host": "evil.example"}),
    "stop_bare": call("/api/jobs/live/stop", {"Content-Type": "application/json"}, b"{}"),
    "stop": call("/api/jobs/live/stop", post, b"{}"),
}))
"""


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)


class Netns:
    """Two network namespaces (server, client) joined by a veth pair; close() removes them."""

    def __init__(self) -> None:
        self.holders: list[subprocess.Popen[bytes]] = []

    def hold(self) -> int:
        p = subprocess.Popen(["unshare", "-n", "sleep", "300"], stderr=subprocess.PIPE)
        self.holders.append(p)
        mine = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if p.poll() is not None:
                err = p.stderr.read().decode().strip() if p.stderr else ""
                pytest.skip(f"cannot create a network namespace (unshare -n: {err})")
            try:
                if os.readlink(f"/proc/{p.pid}/ns/net") != mine:
                    return p.pid
            except OSError:
                pass
            time.sleep(0.02)
        pytest.skip("unshare -n did not enter a new network namespace within 10 s")

    def up(self) -> tuple[int, int]:
        server, client = self.hold(), self.hold()
        on_s = ("nsenter", "-t", str(server), "-n")
        on_c = ("nsenter", "-t", str(client), "-n")
        try:
            run(*on_s, "ip", "link", "add", "ss-s0", "type", "veth", "peer", "name", "ss-c0",
                "netns", str(client))  # fmt: skip
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create a veth pair between namespaces: {exc.stderr.strip()}")
        for on, dev, ip in ((on_s, "ss-s0", SERVER_IP), (on_c, "ss-c0", CLIENT_IP)):
            run(*on, "ip", "link", "set", "lo", "up")
            run(*on, "ip", "addr", "add", f"{ip}/24", "dev", dev)
            run(*on, "ip", "link", "set", dev, "up")
        return server, client

    def close(self) -> None:
        for p in self.holders:
            p.kill()
            p.communicate(timeout=10)


@pytest.fixture
def netns() -> Iterator[Netns]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root here (unshare -n, ip link add)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} to build network namespaces")
    ns = Netns()
    try:
        yield ns
    finally:
        ns.close()


def running_job(root: Path) -> None:
    store = write_synthetic_job(str(root / "live"), SyntheticJob(name="live", hours=0.01))
    store.write_json("job.json", store.read_json("job.json") | {"status": "Running",
                                                                  "end_time": None})  # fmt: skip
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})


def test_all_interfaces_serve_another_namespace_with_the_token_only(
    netns: Netns, tmp_path: Path
) -> None:
    running_job(tmp_path)
    server, client = netns.up()
    cmd = ["nsenter", "-t", str(server), "-n", str(BIN / "stepscope"), "ui", str(tmp_path),
           "--host", "0.0.0.0", "--port", "0", "--token", TOKEN]  # fmt: skip
    ui = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env_for_tests())  # fmt: skip
    try:
        assert ui.stdout is not None
        line = ui.stdout.readline()
        assert "serving" in line, line
        port = line.rsplit(":", 1)[1].split("/", 1)[0]
        base = f"http://{SERVER_IP}:{port}"
        answer = subprocess.run(
            ["nsenter", "-t", str(client), "-n", sys.executable, "-c", CLIENT, base, TOKEN],
            capture_output=True, text=True, timeout=120, env=env_for_tests(),
        )  # fmt: skip
        assert answer.returncode == 0, answer.stderr
        got = json.loads(answer.stdout)
    finally:
        ui.terminate()
        _, err = ui.communicate(timeout=30)
    assert got["bare"][0] == 401 and got["page_bare"][0] == 401
    assert got["wrong"][0] == 403
    assert got["header"][0] == 200, got["header"]
    assert [j["name"] for j in json.loads(got["header"][2])["jobs"]] == ["live"]
    assert got["query"][0] == 200 and "HttpOnly" in got["query"][1]
    assert got["rebound"][0] == 403 and "--allow-host" in got["rebound"][2]
    assert got["stop_bare"][0] == 401
    assert got["stop"][0] == 202, got["stop"]
    assert len(list((tmp_path / "live" / "control").glob("stop-*.json"))) == 1
    assert err.count("plain HTTP") == 1, err  # warned once
    assert SERVER_IP in err.split("answering to", 1)[1].splitlines()[0], err
