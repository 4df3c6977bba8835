"""The dashboard's kernel panel (issue 33, item 1): each window with a PyTorch trace,
its host operators beside its kernel breakdown, from ``GET /api/jobs/<job>/kernels``
and drawn on the job page in Chromium, on a copy of the H200 ``stall`` job (132
kernels over steps 100-102); a job without such a window says so."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from h200_jobs import h200_job
from stepscope.dashboard import create_app
from stepscope.testing import SyntheticJob, write_synthetic_job
from ui_pages import new_page, serving

TOKEN = "t0ken-for-the-tests-0123456789"
BUSY = "GPU 0 was busy 93% of its active 28.61 ms; idle 1.92 ms in 158 gaps"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    h200_job(tmp_path, "stall")
    write_synthetic_job(str(tmp_path / "cpu"), SyntheticJob(name="cpu", hours=0.01, gpus=1))
    return tmp_path


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    before = set(threading.enumerate())
    with TestClient(
        create_app(str(root), "127.0.0.1", TOKEN), base_url="http://127.0.0.1:8765"
    ) as c:
        yield c
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


def test_the_kernels_answer_puts_the_breakdown_beside_the_operators(client: TestClient) -> None:
    (window,) = client.get("/api/jobs/stall/kernels").json()["windows"]
    assert (window["kind"], window["rank"], window["start_step"], window["end_step"]) == (
        "detailed", 0, 100, 102)  # fmt: skip
    kernels = window["kernels"]
    assert kernels["kernels"] == 132 and kernels["kinds"][0]["kind"] == "matmul"  # the largest
    assert len(kernels["top"]) == 10 and kernels["top"][0]["operator"]
    (device,) = kernels["devices"]
    assert device["busy_share"] == pytest.approx(0.93, abs=0.005) and device["gaps"] == 158
    assert window["operators"][0]["name"] == "cudaDeviceSynchronize"
    assert client.get("/api/jobs/cpu/kernels").json() == {"windows": []}
    assert "/api/jobs/{job}/kernels" in client.get("/openapi.json").json()["paths"]
    missing = client.get("/api/jobs/nope/kernels")
    assert missing.status_code == 404


@pytest.fixture
def served(root: Path) -> Iterator[str]:
    """The base URL (with the token) of a real `stepscope ui` over ``root``."""
    with serving(root, "--token", TOKEN) as url:
        yield url


@pytest.mark.process
def test_the_job_page_draws_the_kernel_panel(browser: Any, served: str) -> None:
    page, errors = new_page(browser)
    page.goto(f"{served}#/job/stall")
    page.wait_for_selector("#kernels .kernel-window", timeout=30_000)
    assert page.is_hidden("#kernels-empty")
    block = page.text_content("#kernels .kernel-window") or ""
    assert "detailed · rank 0 · steps 100-102" in block
    assert BUSY in block and "the longest 1.11 ms while the host ran aten::div." in block
    assert "Host operators" in block and "cudaDeviceSynchronize" in block  # beside...
    kinds = page.locator("#kernels .kernel-table").nth(1)  # ...device time by kind
    assert kinds.locator("tbody tr").first.locator("td").first.text_content() == "matmul"
    assert "aten::addmm" in (page.locator("#kernels .kernel-table").nth(2).text_content() or "")
    page.goto(f"{served}#/job/cpu")  # no trace: the panel says so, nothing of stall's left
    page.wait_for_selector("#kernels-empty:not([hidden])", timeout=30_000)
    assert page.locator("#kernels .kernel-window").count() == 0
    assert not errors
