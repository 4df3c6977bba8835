"""``GET /api/compare?base=A&new=B`` of the dashboard, in process (Starlette's
TestClient), on the synthetic jobs of tests/test_compare.py: the planted slowdown and
its silent twin, the same JSON as ``stepscope compare --json``, and the refusals."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from stepscope.cli import main
from stepscope.dashboard import create_app
from test_compare import job

TOKEN = "t0ken-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cmpapi")
    job(tmp / "a", 1)
    job(tmp / "same", 2)
    job(tmp / "slow", 3, forward_extra=0.03, workers=2)
    return tmp


def serving(root: Path) -> Iterator[TestClient]:
    """The dashboard's app over ``root`` in Starlette's TestClient (for a fixture)."""
    before = set(threading.enumerate())
    with TestClient(create_app(str(root), "127.0.0.1", TOKEN), base_url="http://127.0.0.1") as c:
        yield c
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    yield from serving(root)


def get(client: TestClient, query: str) -> Any:
    return client.get(f"/api/compare?{query}")


def test_a_planted_slowdown_is_called_with_both_runs_charted(client: TestClient) -> None:
    r = get(client, "base=a&new=slow")
    assert r.status_code == 200
    doc = r.json()
    (train,) = doc["comparison"]["phases"]
    assert train["direction"] == "slower" and train["mostly"] == "forward"
    assert train["verdict"].startswith("slow is slower by")
    assert ["dataloader0.num_workers", "0", "2"] in doc["comparison"]["setup"]["facts"]
    spec = doc["charts"]["train"]
    assert spec["xAxis"] == "step" and spec["kind"] == "timeseries"
    assert [s["label"] for s in spec["series"]] == ["A: a", "B: slow"]
    assert all(len(s["values"]) == len(spec["x"]) for s in spec["series"])


def test_the_same_distribution_twice_is_no_difference(client: TestClient) -> None:
    (train,) = get(client, "base=a&new=same").json()["comparison"]["phases"]
    assert train["direction"] == "same" and train["mostly"] is None
    assert train["verdict"].startswith("no difference beyond the noise")


def test_it_is_what_compare_json_prints(client: TestClient, root: Path, capsys: Any) -> None:
    assert main(["compare", str(root / "a"), str(root / "slow"), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    served = get(client, "base=a&new=slow").json()["comparison"]
    assert served == printed


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ("new=slow", 400, "base is required: /api/compare?base=BASELINE&new=JOB"),
        ("base=a", 400, "new is required"),
        ("base=a&new=nope", 404, "nope"),
        ("base=..%2F..%2Fetc&new=a", 404, ""),
    ],
)
def test_refusals_say_why(client: TestClient, query: str, status: int, said: str) -> None:
    r = get(client, query)
    assert r.status_code == status and said in r.json()["error"]


def test_the_route_is_documented(client: TestClient) -> None:
    params = client.get("/openapi.json").json()["paths"]["/api/compare"]["get"]["parameters"]
    assert [p["name"] for p in params] == ["base", "new"]
