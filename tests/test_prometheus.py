"""A real Prometheus (Debian's ``prometheus``) scrapes a real run's ``/metrics``
(``stepscope run --metrics-port``) every second, and every PromQL query of the Grafana
dashboard (examples/grafana/stepscope.json) returns data. The training is bit for bit
the bare one, with the endpoint on and with its port taken (a recorded fault).

GPU gauges come from the sampler reading the recorded NVML fake (tests/fakes/pynvml.py).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import BIN, FAKES, SCRIPTS, env_for_tests

PROMETHEUS = "/usr/bin/prometheus"
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        not os.path.exists(PROMETHEUS),
        reason="Debian's prometheus is not installed: apt-get install -y prometheus",
    ),
]
DASHBOARD = Path(__file__).parents[1] / "examples" / "grafana" / "stepscope.json"
TRAIN = str(SCRIPTS / "metrics_train.py")
WAIT_S = 180.0  # at most, for every query to return data (a bound, not a timing check)
# Grafana's variables, as "All" sets them, and its rate interval at a 1 s scrape
VARIABLES = {"$job": ".+", "$node": ".+", "$__rate_interval": "30s"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the Grafana dashboard, its variables filled in."""
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    filled = []
    for expr in exprs:
        for name in sorted(VARIABLES, key=len, reverse=True):
            expr = expr.replace(name, VARIABLES[name])
        assert "$" not in expr, expr
        filled.append(expr)
    return filled


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def start_prometheus(tmp: Path, target: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: stepscope\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
    )
    log = (tmp / "prometheus.log").open("wb")
    cmd = [PROMETHEUS, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
           f"--storage.tsdb.path={tmp / 'tsdb'}"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2):
                return proc, port
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise AssertionError((tmp / "prometheus.log").read_text()[-2000:])


def watched(tmp: Path, *opts: str, train: list[str]) -> subprocess.Popen[str]:
    env = env_for_tests(STEPSCOPE_FAKE_NVML_GPUS="2")
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES), *filter(None, [env.get("PYTHONPATH")])])
    cmd = [str(BIN / "stepscope"), "run", "-o", str(tmp), "--job", "watched", *opts, "--",
           sys.executable, TRAIN, *train]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def bare(steps: int) -> dict[str, Any]:
    """The same steps unwatched, without the sleeps (they change no weight)."""
    cmd = [sys.executable, TRAIN, "--steps", str(steps), "--step-sleep", "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env_for_tests())
    answer: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return answer


def poll(prom: int, exprs: list[str], run: subprocess.Popen[str]) -> dict[str, list[Any]]:
    """Each query's first non-empty answer while the job runs (those still empty: [])."""
    found: dict[str, list[Any]] = {}
    deadline = time.monotonic() + WAIT_S
    while len(found) < len(exprs) and run.poll() is None and time.monotonic() < deadline:
        for expr in exprs:
            # a rate over one scrape is NaN: data, but not yet figures
            result = [r for r in query(prom, expr) if r["value"][1] != "NaN"]
            if expr not in found and result:
                found[expr] = result
        time.sleep(0.5)
    return {e: found.get(e, []) for e in exprs}


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("prometheus")
    stop, port = tmp / "stop", free_port()
    prom, prom_port = start_prometheus(tmp, port)
    run = watched(tmp, "--metrics-port", str(port), train=["--until", str(stop)])
    try:
        answers = poll(prom_port, dashboard_queries(), run)
        stop.touch()
        out, err = run.communicate(timeout=120)
    finally:
        stop.touch()
        for proc in (run, prom):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    yield {
        "answers": answers,
        "code": run.returncode,
        "out": out,
        "err": err,
        "job": tmp / "watched",
    }


def test_every_grafana_query_returns_data_from_the_scraped_run(scraped: dict[str, Any]) -> None:
    assert scraped["code"] == 0, scraped["err"]
    empty = [e for e, result in scraped["answers"].items() if not result]
    assert not empty, f"queries without data: {empty}\n{scraped['err'][-2000:]}"
    assert len(scraped["answers"]) >= 10


def _values(scraped: dict[str, Any], pattern: str) -> list[tuple[dict[str, str], float]]:
    (expr,) = [e for e in scraped["answers"] if re.search(pattern, e)]
    return [(r["metric"], float(r["value"][1])) for r in scraped["answers"][expr]]


def test_the_scraped_figures_are_the_runs_own(scraped: dict[str, Any]) -> None:
    # every step sleeps 0.05 s: the median step is longer, whatever the machine
    p50 = _values(scraped, r"^histogram_quantile\(0\.5")
    assert {m["phase"] for m, _ in p50} >= {"train"}
    assert all(v >= 0.05 for m, v in p50 if m["phase"] == "train")
    assert {m["job"] for m, _ in p50} == {"watched"}  # the job's label, not the scrape's
    gpus = _values(scraped, r"^stepscope_gpu_utilization_percent")
    assert {m["gpu"] for m, _ in gpus} == {"0", "1"} and all(0 <= v <= 100 for _, v in gpus)
    status = _values(scraped, r"^stepscope_rule_status")
    assert status and all(v in (-2, -1, 0, 1) for _, v in status)
    parts = {m["part"] for m, _ in _values(scraped, r"^sum by \(job, part\)")}
    assert parts == {"data_wait", "forward", "backward", "optimizer", "other"}


def test_training_with_the_endpoint_on_is_bit_for_bit_the_bare_one(scraped: dict[str, Any]) -> None:
    result = json.loads(scraped["out"].strip().splitlines()[-1])
    assert result["steps"] > 0
    assert bare(result["steps"]) == result


def test_a_port_in_use_is_a_recorded_fault_and_training_is_unchanged(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = watched(tmp_path, "--metrics-port", str(port), train=["--steps", "30"])
        out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err
    (fault,) = [
        json.loads(p.read_text()) for p in (tmp_path / "watched" / "faults").glob("metrics-*")
    ]
    assert fault["component"] == "metrics-server" and "Address already in use" in fault["error"]
    assert "cannot serve /metrics" in err
    verdicts = list((tmp_path / "watched" / "rules").glob("*.json"))
    assert verdicts  # the rule runner went on without its endpoint
    assert bare(30) == json.loads(out.strip().splitlines()[-1])
