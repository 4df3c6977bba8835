"""The dashboard's memory window control, in Chromium (Debian's, via Playwright), on real
``stepscope run`` jobs: one whose process looks to the agent like it uses CUDA (the
allocator stand-in of tests/cuda_allocator.py, as tests/test_memory_window.py uses it),
and one that is CPU-only. The window is asked, refused on bad input with the valid
range, kept, listed with its snapshot (which PyTorch's own reader reads) and the way to
open it; on the CPU-only job the control says why it cannot. Screenshot:
test-artifacts/dashboard-memory-window.png.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from torch.cuda import _memory_viz

import stepscope
from conftest import BIN, SCRIPTS
from stepscope.jobfolder import control
from stepscope.store import open_store
from test_dashboard_ui import ARTIFACTS, WAIT_MS, Procs, wait_for
from ui_pages import new_page, serving

pytestmark = pytest.mark.process
TESTS = Path(__file__).resolve().parent
# Steps of 50 ms until the test stops the job: each allocates, frees, and keeps a little.
GPU_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
from cuda_allocator import MB, StandInAllocator, install

alloc = StandInAllocator(capacity=100_000 * MB)
install(alloc)
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
weights = alloc.malloc(40 * MB)
for step in range(3000):
    activations = alloc.malloc(30 * MB)
    model(torch.randn(4, 16)).sum().backward()
    alloc.free(activations)
    opt.step()
    opt.zero_grad()
    alloc.malloc(1 * MB)
    time.sleep(0.05)
"""


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    yield ps
    ps.close()


def start_job(procs: Procs, root: Path, name: str, script: list[str]) -> Any:
    run = procs.start([str(BIN / "stepscope"), "run", "-o", str(root), "--job", name,
                       "--no-rules", "--", sys.executable, *script])  # fmt: skip
    wait_for(lambda: any((root / name).glob("steps/**/*.parquet")), f"{name}'s first steps")
    return run


def ask(page: Any, steps: str) -> str:
    """Ask for a memory window of ``steps`` on the open job page; the control's answer."""
    page.fill("#p-num-steps", steps)
    page.click("#profile-apply")  # its handler marks the status "sending" before it returns
    page.wait_for_selector(
        '#profile-status:is([data-state="error"], [data-state="accepted"], '
        '[data-state="rejected"])',
        timeout=WAIT_MS,
    )
    return (
        str(page.get_attribute("#profile-status", "data-state"))
        + " "
        + page.inner_text("#profile-status")
    )


def end(run: Any, job: Path) -> None:
    control.request_stop(open_store(str(job)), "the test is done", "test")
    _, err = run.communicate(timeout=120)
    assert stepscope.open(job).status == "Stopped", err[-2000:]


def test_a_memory_window_asked_in_the_dashboard(tmp_path: Path, browser: Any, procs: Procs) -> None:
    script = tmp_path / "gpu.py"
    script.write_text(GPU_SCRIPT.format(tests=str(TESTS)))
    gpu = start_job(procs, tmp_path / "runs", "gpu-job", [str(script)])
    cpu_args = [str(SCRIPTS / "mlp.py"), "--steps", "100000", "--step-sleep", "0.05"]
    cpu = start_job(procs, tmp_path / "runs", "cpu-job", cpu_args)
    with serving(tmp_path / "runs") as url:
        page, errors = new_page(browser, 1366)
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(url + "#/job/gpu-job")
        page.wait_for_selector("#job-status.Running", timeout=WAIT_MS)
        page.check("#p-memory")
        refused = ask(page, "0")  # bad input: a one-line refusal with the valid range
        assert refused.startswith("error ") and "memory: 1 to 200" in refused, refused
        refused = ask(page, "201")
        assert refused.startswith("error ") and "limit of 200 steps" in refused, refused
        assert not list((tmp_path / "runs/gpu-job").glob("control/profile-*.json"))
        done = ask(page, "3")
        assert done.startswith("accepted done: planned memory steps"), done
        page.wait_for_selector('li[data-kind="memory"] a.artifact', timeout=WAIT_MS)
        item = page.inner_text('li[data-kind="memory"]')
        assert "memory · rank 0 · steps" in item and "pytorch.org/memory_viz" in item
        viewer = page.get_attribute('li[data-kind="memory"] .viewer a', "href")
        assert viewer == "https://pytorch.org/memory_viz"
        href = page.eval_on_selector('li[data-kind="memory"] a.artifact', "a => a.href")
        snapshot = pickle.loads(page.request.get(href).body())
        assert "total_reserved" in _memory_viz.segsum(snapshot)  # PyTorch's reader takes it
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-memory-window.png"), full_page=True)

        page.goto(url + "#/job/cpu-job")
        page.wait_for_selector('#job-name:text-is("cpu-job")', timeout=WAIT_MS)
        page.wait_for_selector("#job-status.Running", timeout=WAIT_MS)
        page.check("#p-memory")
        said = ask(page, "2")
        assert said.startswith("rejected ") and "no CUDA device" in said, said
        assert errors == []
        # nothing but this server was asked for: no CDN, no network
        assert {urlsplit(u).netloc for u in requested} == {urlsplit(url).netloc}
    end(gpu, tmp_path / "runs/gpu-job")
    end(cpu, tmp_path / "runs/cpu-job")
    (record,) = [r for r in stepscope.open(tmp_path / "runs/gpu-job").profiling_artifacts()
                 if r["kind"] == "memory"]  # fmt: skip
    assert record["end_step"] - record["start_step"] == 2 and record["trace_events"] > 0
    assert record["path"].endswith(".memory.pickle") and href.endswith(record["path"])
    assert f"{record['segments']} segments" in item
    assert f"{record['trace_events']} allocator events" in item
    assert not stepscope.open(tmp_path / "runs/cpu-job").profiling_artifacts()
