"""The dashboard's HTTP API: every refusal of the security model, traversal, controls, data.

Most tests drive the ASGI app in process (Starlette's TestClient); the last ones
run the real ``stepscope ui`` (uvicorn) on an ephemeral port of 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import stepscope
from stepscope.dashboard import create_app
from stepscope.jobfolder import control
from stepscope.store import open_store
from stepscope.testing import SyntheticJob, write_synthetic_job

TOKEN = "t0ken-for-the-tests-0123456789"
LOCAL = "http://127.0.0.1:8765"
GOOD = {"X-Stepscope-Token": TOKEN}
POST_PATHS = [
    "/api/jobs/live/stop", "/api/jobs/live/interval", "/api/jobs/live/profile",
    "/api/jobs/nope/stop", "/api/jobs/..%2F..%2Fetc/stop", "/nowhere", "/", "/openapi.json",
    "/api/jobs", "/static/dashboard.js",
]  # fmt: skip
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
BODIES = [b"", b"not json", b'{"interval_ms": 100}', b'{"reason": "x"}']


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A finished job ``done`` and a running one ``live`` (fresh heartbeat), both synthetic."""
    spec = SyntheticJob(name="done", hours=0.05, cores=4, gpus=1)
    write_synthetic_job(str(tmp_path / "done"), spec)
    store = write_synthetic_job(str(tmp_path / "live"), SyntheticJob(name="live", hours=0.02))
    meta = store.read_json("job.json") | {"status": "Running", "end_time": None}
    store.write_json("job.json", meta)
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})
    art = tmp_path / "done" / "profiling" / "rank-0"
    art.mkdir(parents=True)
    (art / "python-3-3.pstats").write_bytes(b"PSTATS")
    (art / "python-3-3.html").write_text("<script>window.parent.pwned = 1</script>")
    (tmp_path / "secret.txt").write_text("outside the job")
    os.symlink(tmp_path / "secret.txt", art / "link.txt")
    return tmp_path


@pytest.fixture
def client(root: Path) -> Any:
    before = set(threading.enumerate())
    with TestClient(create_app(str(root), "127.0.0.1", TOKEN), base_url=LOCAL) as c:
        yield c
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


def requests_written(root: Path, job: str = "live") -> list[str]:
    folder = root / job / "control"
    return sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []


@pytest.mark.parametrize("path", POST_PATHS)
def test_a_post_without_the_token_is_refused_first_whatever_its_path_or_body(
    client: TestClient, root: Path, path: str
) -> None:
    for body in BODIES:
        for headers, status in (({}, 401), ({"X-Stepscope-Token": "wrong" * 5}, 403)):
            r = client.post(path, content=body, headers={"content-type": "application/json",
                                                         **headers})  # fmt: skip
            assert r.status_code == status, (path, body, r.text)
            assert "error" in r.json()
        r = client.post(path, content=body, params={"token": TOKEN},
                        headers={"cookie": f"stepscope_token={TOKEN}"})  # fmt: skip
        assert r.status_code == 401, "a token in the query or a cookie never allows a POST"
    for method in ("PUT", "DELETE", "PATCH"):
        assert client.request(method, path).status_code == 401
    assert requests_written(root) == []


def test_viewing_on_loopback_needs_no_token(client: TestClient) -> None:
    for path in ("/", "/api/jobs", "/api/jobs/done", "/openapi.json", "/static/dash-core.js",
                 "/charts/uPlot.iife.min.js", "/charts/stepscope-charts.js"):  # fmt: skip
        r = client.get(path)
        assert r.status_code == 200, path
        assert "access-control-allow-origin" not in r.headers
        assert r.headers["x-frame-options"] == "DENY"
        assert "script-src 'self'" in r.headers["content-security-policy"]
    names = [j["name"] for j in client.get("/api/jobs").json()["jobs"]]
    assert sorted(names) == ["done", "live"]


def test_cross_site_requests_cannot_trigger_controls(client: TestClient, root: Path) -> None:
    evil = {"origin": "http://evil.example", **GOOD}
    assert client.post("/api/jobs/live/stop", json={}, headers=evil).status_code == 403
    r = client.post("/api/jobs/live/stop", json={}, headers={"host": "evil.example", **GOOD})
    assert r.status_code == 403  # DNS rebinding: a foreign Host is refused
    assert client.get("/api/jobs", headers={"host": "evil.example:8765"}).status_code == 403
    form = {"content-type": "application/x-www-form-urlencoded", **GOOD}
    assert client.post("/api/jobs/live/stop", content=b"a=1", headers=form).status_code == 415
    pre = client.options(
        "/api/jobs/live/stop",
        headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in pre.headers
    assert requests_written(root) == []
    same = {"origin": LOCAL, **GOOD}
    assert client.post("/api/jobs/live/stop", json={}, headers=same).status_code == 202


def test_beyond_loopback_every_request_needs_the_token(root: Path) -> None:
    with pytest.raises(ValueError, match=r"Refusing to serve on '0\.0\.0\.0' without a token"):
        create_app(str(root), "0.0.0.0", "")
    with pytest.raises(ValueError, match="at least 16"):
        create_app(str(root), "127.0.0.1", "short")
    app = create_app(str(root), "0.0.0.0", TOKEN, extra_hosts=("dash.example",))
    before = set(threading.enumerate())
    with TestClient(app, base_url="http://dash.example:8765") as c:
        for path in ("/", "/api/jobs", "/static/dash-core.js", "/openapi.json", "/nowhere"):
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers={"X-Stepscope-Token": "x" * 20}).status_code == 403
            assert c.get(path, params={"token": "y" * 20}).status_code == 403
        r = c.get("/", params={"token": TOKEN})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/api/jobs").status_code == 200  # the cookie now carries it
        assert c.post("/api/jobs/live/stop", json={}).status_code == 401  # never for a POST
        assert c.post("/api/jobs/live/stop", json={}, headers=GOOD).status_code == 202
    for t in set(threading.enumerate()) - before:
        t.join(timeout=10)


@pytest.mark.parametrize(
    "path",
    ["/api/jobs/..", "/api/jobs/%2e%2e", "/api/jobs/..%2F..%2Fetc", "/api/jobs/%2Fetc%2Fpasswd",
     "/api/jobs/.hidden", "/api/jobs/done%00", "/api/jobs/secret.txt",
     "/api/jobs/done%2F..%2Flive"],
)  # fmt: skip
def test_no_job_name_leads_outside_the_served_folder(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404 and "outside" not in r.text


@pytest.mark.parametrize(
    "rel",
    ["../job.json", "profiling/../job.json", "profiling/rank-0/../../job.json",
     "%2e%2e/job.json", "profiling/%2e%2e/%2e%2e/secret.txt", "job.json", "/etc/passwd",
     "profiling//rank-0/python-3-3.pstats", "profiling/rank-0/link.txt",
     "profiling\\rank-0\\python-3-3.pstats", "profiling/rank-0"],
)  # fmt: skip
def test_no_artifact_path_leads_outside_profiling(client: TestClient, rel: str) -> None:
    r = client.get(f"/api/jobs/done/artifacts/{rel}")
    assert r.status_code == 404, rel
    assert b"outside the job" not in r.content


def test_artifacts_download_and_are_never_rendered(client: TestClient) -> None:
    r = client.get("/api/jobs/done/artifacts/profiling/rank-0/python-3-3.pstats")
    assert r.status_code == 200 and r.content == b"PSTATS"
    r = client.get("/api/jobs/done/artifacts/profiling/rank-0/python-3-3.html")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-security-policy"] == "sandbox"


def test_controls_write_requests_and_report_their_answers(client: TestClient, root: Path) -> None:
    r = client.post("/api/jobs/live/interval", json={"interval_ms": 700}, headers=GOOD)
    assert r.status_code == 400 and "Accepted values are 100, 200, 500" in r.json()["error"]
    r = client.post("/api/jobs/live/interval", json={"interval_ms": 1000}, headers=GOOD)
    assert r.status_code == 202
    name = r.json()["request"]
    body = json.loads((root / "live" / "control" / name).read_text())
    assert body["system_monitor_interval_millis"] == 1000 and body["by"] == "dashboard"
    status = client.get(f"/api/jobs/live/control/{name}").json()
    assert status["pending"] is True and status["ack"] is None
    control.acknowledge(open_store(str(root / "live")), name, True, "every 1000 ms")
    status = client.get(f"/api/jobs/live/control/{name}").json()
    assert status["pending"] is False and status["ack"]["accepted"] is True
    assert client.get("/api/jobs/live/control/..%2Fjob.json").status_code == 404


def test_profile_bodies(client: TestClient, root: Path) -> None:
    r = client.post("/api/jobs/live/profile", json={"python": "cprofile", "timer": "cpu_time"},
                    headers=GOOD)  # fmt: skip
    assert r.status_code == 202
    body = json.loads((root / "live" / "control" / r.json()["request"]).read_text())
    (window,) = body["windows"]
    assert window["kind"] == "python" and window["cprofile_timer"] == "cpu_time"
    assert window["start_step"] is None and window["num_steps"] is None  # the current step, one
    r = client.post(
        "/api/jobs/live/profile",
        headers=GOOD,
        json={"detailed": True, "dataloader": True, "start_time": "now", "duration": 2},
    )
    kinds = [w["kind"] for w in json.loads((root / "live/control" / r.json()["request"])
                                           .read_text())["windows"]]  # fmt: skip
    assert kinds == ["detailed", "dataloader"]
    r = client.post("/api/jobs/live/profile", json={"memory": True, "num_steps": 3,
                    "max_entries": 5000}, headers=GOOD)  # fmt: skip
    (window,) = json.loads((root / "live/control" / r.json()["request"]).read_text())["windows"]
    assert window == {"kind": "memory", "start_step": None, "num_steps": 3, "max_entries": 5000}
    for bad, says in (({}, "dataloader or memory"), ({"python": "perf"}, "cprofile, pyinstrument"),
                      ({"detailed": True, "start_step": 3, "duration": 1}, "not both"),
                      ({"detailed": True, "steps": 3}, "Valid keys"),
                      ({"detailed": True, "num_steps": -1}, ">= 0"),
                      ({"memory": True, "num_steps": 0}, "(memory: 1 to 200)"),
                      ({"memory": True, "num_steps": 201}, "(num_steps 1 to 200)"),
                      ({"memory": True, "max_entries": 0}, "max_entries. Accepted values"),
                      ({"detailed": True, "max_entries": 10}, "goes with memory")):  # fmt: skip
        r = client.post("/api/jobs/live/profile", json=bad, headers=GOOD)
        assert r.status_code == 400 and says in r.json()["error"], bad


def test_controls_of_a_finished_job_are_refused(client: TestClient, root: Path) -> None:
    r = client.post("/api/jobs/done/stop", json={}, headers=GOOD)
    assert r.status_code == 409 and "Completed" in r.json()["error"]
    assert client.post("/api/jobs/nope/stop", json={}, headers=GOOD).status_code == 404
    assert requests_written(root, "done") == []


def test_system_and_steps_keep_every_spike(client: TestClient, root: Path) -> None:
    spec = SyntheticJob(name="done", hours=0.05, cores=4, gpus=1)
    data = client.get("/api/jobs/done/system", params={"node": "node-a", "buckets": 50}).json()
    assert {"cpu", "cores", "gpu_util", "gpu_mem", "memory", "iowait", "disk", "net"} <= set(
        data["charts"]
    )
    cpu = {s["label"]: s["values"] for s in data["charts"]["cpu"]["series"]}
    assert max(v for v in cpu["CPU (all cores)"] if v is not None) == 100  # the spike
    assert len(data["charts"]["cpu"]["x"]) <= 100
    near = client.get(
        "/api/jobs/done/system",
        params={"node": "node-a", "start": spec.spike_time - 5, "end": spec.spike_time + 5},
    ).json()
    assert 0 < near["samples"] <= 21 and near["first"] >= spec.spike_time - 5
    steps = client.get("/api/jobs/done/steps", params={"rank": 0}).json()
    assert set(steps["charts"]) == {"step_duration", "step_split", "step_share"}
    assert steps["count"] > 0
    for path, params in (("system", {"node": "nope"}), ("system", {"node": "node-a", "start": "x"}),
                         ("steps", {"phase": "test"}), ("steps", {"buckets": 1})):  # fmt: skip
        assert client.get(f"/api/jobs/done/{path}", params=params).status_code in (400, 404)


def test_error_texts_quote_names_whole_and_say_what_exists(client: TestClient) -> None:
    for path in ("/api/jobs/nope", "/api/jobs/nope/rules", "/api/jobs/nope/system?node=node-a"):
        r = client.get(path)
        assert (r.status_code, r.json()["error"]) == (404, "no job named 'nope'"), path
    r = client.post("/api/jobs/nope/stop", json={}, headers=GOOD)
    assert r.json()["error"] == "no job named 'nope'"
    r = client.get("/api/jobs/live/control/stop-0000000000000-00000000.json")
    assert r.json()["error"] == "no control request named 'stop-0000000000000-00000000.json'"
    r = client.get("/api/jobs/done/system")
    assert r.status_code == 400
    assert r.json()["error"] == "node is required (?node=NAME); job 'done' has node(s): node-a."
    r = client.get("/api/jobs/done/system", params={"node": "node-z"})
    assert r.json()["error"] == "job 'done' has no node 'node-z'; its node(s): node-a"


def test_the_rules_answer_carries_the_diagnosis(client: TestClient, root: Path) -> None:
    finding = {
        "message": "rank 0 waited for data 60% of its step time (> 20%)",
        "severity": 0.5,
        "start": 1_763_850_100.0,
        "end": 1_763_850_150.0,
        "node": "node-a",
        "rank": 0,
    }
    verdicts = {
        "DataLoading": {"rule": "DataLoading", "status": "IssuesFound", "triggers": 1,
                        "datapoints": 400, "recommendation": "set num_workers",
                        "findings": [finding], "cost_seconds": 97.5},
        "StepOutlier": {"rule": "StepOutlier", "status": "IssuesFound", "triggers": 1,
                        "datapoints": 400, "findings": [finding | {"severity": 0.9}]},
        "LowGPUUtilization": {"rule": "LowGPUUtilization", "status": "NotApplicable",
                              "reason": "no GPU metrics on node-a"},
    }  # fmt: skip
    store = open_store(str(root / "done"))
    for name, body in verdicts.items():
        store.write_json(f"rules/{name}.json", body)
    answer = client.get("/api/jobs/done/rules").json()
    assert len(answer["rules"]) == 3
    top, second = answer["diagnosis"]
    assert (top["rule"], second["rule"]) == ("DataLoading", "StepOutlier")  # cost before severity
    wall = 12.0 + 0.05 * 3600 + 3.0  # the synthetic job: init, loop, finalization
    assert top["cost_share"] == pytest.approx(97.5 / wall)
    assert top["message"].startswith("waiting for data: about 98 s of this 3.2 min job (50%); ")
    assert top["recommendation"] == "set num_workers" and top["evidence"]["node"] == "node-a"
    checks = answer["diagnosis_checks"]
    assert checks["not_checked"] == [
        {"rule": "LowGPUUtilization", "datapoints": 0, "reason": "no GPU metrics on node-a"}
    ]


def test_report_downloads(client: TestClient) -> None:
    r = client.get("/api/jobs/done/report.html")
    assert r.status_code == 200 and r.text.startswith("<!doctype html>")
    assert 'filename="done-report.html"' in r.headers["content-disposition"]


def test_openapi_documents_every_route(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    starlette = client.app.app.app  # Guard -> SecureHeaders -> Starlette
    routes = {r.path.replace(":path}", "}") for r in starlette.routes if isinstance(r, Route)}
    assert routes == set(doc["paths"])
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "post":
                assert op["security"] == [{"token": []}] and "401" in op["responses"], path


def _serve(root: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [STEPSCOPE, "ui", str(root), "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving" in line, proc.stderr.read() if proc.stderr else line
    return proc, line.split(" at ", 1)[1].strip()


@pytest.mark.process
def test_real_server_on_an_ephemeral_port(root: Path) -> None:
    proc, url = _serve(root)
    try:
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        base, token = url.split("/?token=")
        with urllib.request.urlopen(base + "/api/jobs", timeout=10) as r:
            assert r.status == 200
        req = urllib.request.Request(base + "/api/jobs/live/stop", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 401
        err.value.close()
        headers = {"X-Stepscope-Token": token, "Content-Type": "application/json"}
        req = urllib.request.Request(base + "/api/jobs/live/stop", b"{}", headers, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


@pytest.mark.process
def test_cli_refuses_to_bind_beyond_loopback_without_a_token(root: Path) -> None:
    cmd = [STEPSCOPE, "ui", str(root), "--host", "0.0.0.0"]
    p = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "STEPSCOPE_UI_TOKEN"},
    )
    assert p.returncode == 2 and "without a token" in p.stderr
    missing = subprocess.run([STEPSCOPE, "ui", str(root / "nope")], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert missing.returncode == 2 and "no folder" in missing.stderr


def test_the_steps_chart_marks_the_outliers_the_report_marks(
    client: TestClient, root: Path
) -> None:
    from stepscope.analysis.outliers import judge_steps

    write_synthetic_job(str(root / "slow"), SyntheticJob(name="slow", hours=1, interval_ms=5000))
    steps = stepscope.open(root / "slow").steps(ranks=[0])
    judged = judge_steps(steps[steps["phase"] == "train"])
    want = judged[judged["outlier"]]
    assert len(want) > 0  # the synthetic job has slow steps
    first = float(want["start"].iloc[0])
    windows = [  # around the first outlier, every step drawn; the whole job in 50 buckets
        ({"start": first - 30, "end": first + 30}, want[abs(want["start"] - first) < 30]),
        ({"buckets": 50}, want),
    ]
    for params, expected in windows:
        chart = client.get("/api/jobs/slow/steps", params={"rank": 0, **params}).json()
        spec = chart["charts"]["step_duration"]
        series = {s["label"]: s for s in spec["series"]}
        assert series["outliers"]["points"] and series["outliers"]["color"] == "#d62728"
        marked = [(x, v) for x, v in zip(spec["x"], series["outliers"]["values"], strict=True)
                  if v is not None]  # fmt: skip
        limit = [v for v in next(s for k, s in series.items() if "limit" in k)["values"] if v]
        assert limit and min(limit) > float(judged["baseline"].min())
        if "start" in params:
            starts = [spec["t0"] + x for x, _ in marked]
            assert starts == pytest.approx(list(expected["start"]), abs=0.01)
        assert 0 < len(marked) <= len(expected)  # one dot per outlier at most
        top = float(expected["duration"].max())
        assert max(v for _, v in marked) == pytest.approx(top, rel=1e-3)
