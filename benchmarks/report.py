"""Report benchmark: generation time, file size and load time in Chromium.

Synthetic single-node jobs (32 cores, 8 GPUs, 500 ms samples, a 0.4 s step)
of 1 hour and 24 hours are written once through the store's writer; the
report of each is then generated ``--runs`` times (median printed) and opened
in headless Chromium, timing from navigation to every chart drawn.

    .venv/bin/python benchmarks/report.py [--runs 3] [--hours 1 24]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

import stepscope
from stepscope.report import write_report
from stepscope.testing import SyntheticJob, write_synthetic_job

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip


def load_ms(browser: Browser, path: str) -> tuple[float, float]:
    """(navigation start to all charts drawn, of which drawing) in ms, fresh page."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(Path(path).as_uri())
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=60_000)
    total = page.evaluate("stepscopeReport.readyAt")
    draw = page.evaluate("stepscopeReport.drawMs")
    page.close()
    return float(total), float(draw)


def bench(hours: float, runs: int, browser: Browser, tmp: Path) -> None:
    spec = SyntheticJob(name=f"bench-{hours:g}h", hours=hours, cores=32, gpus=8, interval_ms=500)
    t = time.perf_counter()
    write_synthetic_job(str(tmp / spec.name), spec)
    made = time.perf_counter() - t
    job = stepscope.open(tmp / spec.name)
    gen, loads, draws = [], [], []
    path = ""
    for _ in range(runs):
        t = time.perf_counter()
        path = write_report(job)
        gen.append(time.perf_counter() - t)
        total, draw = load_ms(browser, path)
        loads.append(total)
        draws.append(draw)
    rows = len(job.system())
    steps = len(job.steps())
    size = Path(path).stat().st_size
    print(
        f"{hours:>5g} h  {rows:>7,d} samples x {len(job.system().columns)} cols, {steps:>7,d} steps"
        f" (job written in {made:.1f} s) | generate {statistics.median(gen):5.2f} s"
        f" | {size / 1e6:5.2f} MB | load to all charts drawn {statistics.median(loads):6.0f} ms"
        f" (drawing {statistics.median(draws):4.0f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hours", type=float, nargs="+", default=[1.0, 24.0])
    args = parser.parse_args()
    print(f"median of {args.runs} runs; headless Chromium, 1366x900 viewport")
    tmp_dir = tempfile.TemporaryDirectory(prefix="stepscope-report-bench-")
    with tmp_dir as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for hours in args.hours:
            bench(hours, args.runs, browser, Path(tmp))
        browser.close()


if __name__ == "__main__":
    main()
