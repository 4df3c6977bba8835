"""The device's view of a GPU step in the report and the dashboard, and GPU memory in GB
beside its % with the GPU's name (issue 29, items 2 and 5), on copies of the H200 jobs;
a CPU job shows none of it."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import stepscope
from h200_jobs import h200_job
from stepscope.analysis.device import busy_text, ran_ahead_text, split_text
from stepscope.analysis.summary import summarize
from stepscope.dashboard import create_app
from stepscope.report import render_report
from stepscope.testing import SyntheticJob, write_synthetic_job
from ui_pages import new_page, serving

TOKEN = "t0ken-for-the-tests-0123456789"
AHEAD_WORDS = "the host runs ahead of the GPU"
H200_GB = "150.8 GB"  # nodes/vm.json: mem_total 150754820096 bytes


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Copies of the GPU jobs ``stall`` (host ran ahead) and ``healthy``, and a CPU job."""
    h200_job(tmp_path, "stall")
    h200_job(tmp_path, "healthy")
    write_synthetic_job(str(tmp_path / "cpu"), SyntheticJob(name="cpu", hours=0.01, gpus=1))
    return tmp_path


def train_device(job: Path) -> Any:
    """The device split ``show`` prints for the job (checked against the data itself in
    test_device_view.py)."""
    return summarize(stepscope.open(job))["steps"]["phases"]["train"].get("device")


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


# -- the report --------------------------------------------------------------------------


def test_the_report_leads_with_the_device_split_and_says_the_host_ran_ahead(root: Path) -> None:
    device = train_device(root / "stall")
    page = render_report(stepscope.open(root / "stall"))
    words = text_of(page)
    line = f"{split_text(device)}: {busy_text(device)}"
    assert "forward 2.90 ms" in line and "GPU busy" in line
    assert words.count(line) == 2  # in the job summary and leading the train steps
    assert words.count(str(ran_ahead_text(device))) == 2
    steps = page[page.index('id="steps-train"') :]
    assert steps.index("Split of a step on the GPU") < steps.index("Split of a step (host times)")
    assert "train device split (median step)" in page  # the share bar's chart


def test_the_report_of_a_gpu_job_whose_host_kept_pace_says_nothing_of_running_ahead(
    root: Path,
) -> None:
    device = train_device(root / "healthy")
    words = text_of(render_report(stepscope.open(root / "healthy")))
    assert f"{split_text(device)}: {busy_text(device)}" in words
    assert AHEAD_WORDS not in words


def test_the_report_of_a_cpu_job_has_no_device_split(root: Path) -> None:
    assert train_device(root / "cpu") is None
    page = render_report(stepscope.open(root / "cpu"))
    assert "on the GPU" not in page and "host times" not in page and AHEAD_WORDS not in page
    assert "GPU time per step" not in page and "<h4>Split of a step</h4>" in page


def test_the_report_names_the_gpu_and_puts_its_memory_in_gb_beside_the_percent(
    root: Path,
) -> None:
    page = render_report(stepscope.open(root / "stall"))
    assert f"GPUs: NVIDIA H200 ({H200_GB})" in page
    assert f"GPU 0 (of {H200_GB})" in page  # the memory chart's series
    row = re.search(r"<td>gpu0_mem_util</td>(.*?)</tr>", page)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(1))
    assert len(cells) == 4 and all(re.fullmatch(r"[\d.]+% \([\d.]+ [KMG]?B\)", c) for c in cells)


# -- the dashboard's API -------------------------------------------------------------------


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    before = set(threading.enumerate())
    app = create_app(str(root), "127.0.0.1", TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        yield c
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


def test_the_steps_answer_carries_the_device_split_show_prints(
    client: TestClient, root: Path
) -> None:
    for name in ("stall", "healthy"):
        device = client.get(f"/api/jobs/{name}/steps", params={"rank": 0}).json()["device"]
        split = train_device(root / name)
        assert device["split"] == split  # the whole job: the same steps as show's
        assert device["text"] == f"{split_text(split)}: {busy_text(split)}"
        assert device["ran_ahead"] == ran_ahead_text(split)
    assert client.get("/api/jobs/stall/steps").json()["device"]["ran_ahead"].startswith(AHEAD_WORDS)
    assert client.get("/api/jobs/healthy/steps").json()["device"]["ran_ahead"] is None
    assert client.get("/api/jobs/cpu/steps").json()["device"] is None
    assert client.get("/api/jobs/stall/steps", params={"phase": "eval"}).json()["device"] is None


def test_the_system_answer_names_each_gpu_with_its_memory(client: TestClient) -> None:
    data = client.get("/api/jobs/stall/system", params={"node": "vm"}).json()
    (gpu,) = data["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["mem_total"] == 150754820096.0
    # the latest sample's memory, in bytes and %, agree with the card's size
    assert gpu["mem_used"] / gpu["mem_total"] * 100 == pytest.approx(gpu["mem_util"], abs=0.05)
    labels = [s["label"] for s in data["charts"]["gpu_mem"]["series"]]
    assert labels == [f"GPU 0 (of {H200_GB})"]
    detail = client.get("/api/jobs/stall").json()
    assert detail["nodes"]["vm"]["gpus"][0]["name"] == "NVIDIA H200"
    cpu = client.get("/api/jobs/cpu/system", params={"node": "node-a"}).json()
    assert all(g["mem_used"] is not None for g in cpu["gpus"])  # the synthetic GPU's samples


# -- the page, in Chromium -----------------------------------------------------------------


@pytest.fixture
def served(root: Path) -> Iterator[str]:
    """The base URL (with the token) of a real `stepscope ui` over ``root``."""
    with serving(root, "--token", TOKEN) as url:
        yield url


@pytest.mark.process
def test_the_job_page_shows_the_gpu_and_leads_with_the_device_split(
    browser: Any, served: str, root: Path
) -> None:
    page, errors = new_page(browser)
    page.goto(f"{served}#/job/stall")
    page.wait_for_selector("#ran-ahead:not([hidden])", timeout=30_000)
    device = train_device(root / "stall")
    assert page.text_content("#job-gpus") == "GPUs: NVIDIA H200 (151 GB)"
    assert page.text_content("#device-text") == f"{split_text(device)}: {busy_text(device)}"
    assert page.text_content("#ran-ahead") == ran_ahead_text(device)
    memory = page.text_content("#gpu-memory") or ""
    assert re.fullmatch(r"GPU 0 memory used: [\d.]+ [KMG]?B \([\d.]+%\) of 151 GB on vm", memory)
    page.goto(f"{served}#/job/cpu")  # a CPU job: none of it, nothing left of the GPU job
    count = summarize(stepscope.open(root / "cpu"))["steps"]["count"]
    assert count != device["steps"]  # so the page has drawn the CPU job's steps, not stall's
    page.wait_for_selector(f"body[data-step-count='{count}']", timeout=30_000)
    assert page.is_hidden("#device") and page.is_hidden("#ran-ahead")
    assert page.text_content("#device-text") == ""
    assert not errors
