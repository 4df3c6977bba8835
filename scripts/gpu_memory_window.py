"""scripts/gpu-check's memory window, asked the way a user asks it: in the dashboard.

A GPU-bound job (``scripts/gpu_train.py big``) runs under ``stepscope run`` until it is
stopped; a real ``stepscope ui`` serves its folder, and the dashboard's own HTTP API
(the page's control path: ``POST /profile``, then ``/control/{name}`` for the job's
answer) asks for a memory window of 3 steps, after a bad request (0 steps) that must be
refused with the valid range. On a GPU the window's snapshot must come back through
``/artifacts/...`` and PyTorch's reader of it (``torch.cuda._memory_viz``) must read it;
on a dry run (CPU) the job must refuse the window and say it has no CUDA device. The job
is then stopped from the dashboard too.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
STEPSCOPE = [sys.executable, "-m", "stepscope.cli"]
JOB = "memory"


class Dashboard:
    """The API of a ``stepscope ui`` at ``url`` (as printed: with its token)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.base = f"{parts.scheme}://{parts.netloc}/api/jobs/{JOB}"
        self.token = parse_qs(parts.query).get("token", [""])[0]

    def call(self, path: str, body: object = None) -> tuple[int, Any]:
        """(HTTP status, the answer: JSON, or bytes for an artifact)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST" if data else "GET")
        req.add_header("X-Stepscope-Token", self.token)
        if data:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw, status = r.read(), r.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        return status, raw if path.startswith("/artifacts/") else json.loads(raw or b"null")

    def answer(self, name: str, timeout: float = 90) -> dict[str, Any] | None:
        """The job's acknowledgement of request ``name`` (None: none in time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, state = self.call(f"/control/{quote(name)}")
            if status == 200 and not state["pending"]:
                return dict(state["ack"])
            time.sleep(0.5)
        return None

    def snapshot(self, timeout: float = 120) -> dict[str, Any] | None:
        """The memory window's snapshot, fetched as the page's link fetches it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, job = self.call("")
            paths = [a["path"] for a in job.get("artifacts") or [] if a["kind"] == "memory"]
            if paths and paths[0]:
                status, raw = self.call("/artifacts/" + quote(paths[0]))
                return dict(pickle.loads(raw)) if status == 200 else None
            time.sleep(1)
        return None


def wait(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def readable(snapshot: dict[str, Any] | None) -> bool:
    """PyTorch's own reader takes it (what pytorch.org/memory_viz does in the browser)."""
    from torch.cuda import _memory_viz

    return snapshot is not None and "total_reserved" in _memory_viz.segsum(snapshot)


def ask(ui: Dashboard, dry: bool) -> dict[str, Any]:
    """The bad request, the window, its answer and its snapshot: the checks' facts."""
    bad_status, bad = ui.call("/profile", {"memory": True, "num_steps": 0})
    status, sent = ui.call("/profile", {"memory": True, "num_steps": 3})
    ack = ui.answer(sent["request"]) if status == 202 else None
    detail = str((ack or {}).get("detail"))
    answered = ack is not None and (
        ("no CUDA device" in detail and not ack["accepted"]) if dry else ack["accepted"]
    )
    snapshot = ui.snapshot() if ack and ack["accepted"] else None
    return {
        "0 steps refused with the valid range": bad_status == 400 and "1 to 200" in bad["error"],
        "the job's answer (a GPU: accepted; the CPU: no CUDA device)": answered,
        "a snapshot PyTorch's memory viewer reads": readable(snapshot),
        "_detail": detail,
    }


def memory_window(out: Path, dry: bool, train: list[str] | None = None) -> dict[str, Any]:
    """The step ``job memory window`` of scripts/gpu-check (``train``: another script)."""
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        return {"step": "job memory window", "ok": False, "result": f"no {', '.join(missing)} "
                "here for `stepscope ui`: rebuild .whl/ with scripts/gpu-wheels"}  # fmt: skip
    runs, log = out / "runs", (out / "memory.log").open("w")
    train = train or [sys.executable, "scripts/gpu_train.py", "big", "1000000"]  # until stopped
    run = [*STEPSCOPE, "run", "-o", str(runs), "--job", JOB, "--no-rules", "--", *train]
    job = subprocess.Popen(run, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    ui: subprocess.Popen[str] | None = None
    facts: dict[str, Any] = {}
    stopped = False
    try:
        started = wait(lambda: any((runs / JOB).glob("steps/**/*.parquet")), 240)
        ui = subprocess.Popen([*STEPSCOPE, "ui", str(runs), "--port", "0"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=log, text=True)  # fmt: skip
        line = ui.stdout.readline() if ui.stdout else ""
        if started and " at " in line:
            dashboard = Dashboard(line.split(" at ", 1)[1].strip())
            facts = ask(dashboard, dry)
            dashboard.call("/stop", {"reason": "scripts/gpu-check: the memory window is done"})
        stopped = wait(lambda: job.poll() is not None, 120)
    finally:
        for p in (job, ui):
            if p is not None and p.poll() is None:
                p.kill()
            if p is not None:
                p.wait()
        log.close()
    detail = facts.pop("_detail", "the job or the dashboard did not start (memory.log)")
    got: dict[str, object] = {k: bool(v) for k, v in facts.items()} or {"started": False}
    got["the job stopped from the dashboard"] = stopped and facts != {}
    if dry:
        got["a snapshot PyTorch's memory viewer reads"] = "False (not required on a dry run)"
    required = [v for v in got.values() if isinstance(v, bool)]
    return {"step": "job memory window", "ok": all(required), "checks": got,
            "result": f"the job's answer: {detail}"}  # fmt: skip
