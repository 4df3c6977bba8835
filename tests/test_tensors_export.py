"""TensorBoard export of a job's tensors, read back with TensorBoard's EventAccumulator."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import BIN, SCRIPTS

TRAIN = str(SCRIPTS / "tensors_train.py")

pytestmark = pytest.mark.process

CONFIG = """
[[debugger.collections]]
name = "losses"
save_interval = 1
[[debugger.collections]]
name = "weights"
save_interval = 5
[[debugger.collections]]
name = "gradients"
save_interval = 5
reductions = "l2"
"""

# TensorBoard's reader runs in its own process: importing it installs an import
# hook (absl) that the leak guard would rightly report.
READ = """
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "histograms": 0}).Reload()
print(json.dumps({
    "scalars": {t: [[e.step, e.value] for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]},
    "histograms": {t: [[h.step, h.histogram_value.num, h.histogram_value.max]
                       for h in ea.Histograms(t)] for t in ea.Tags()["histograms"]},
}))
"""


def _read(logdir: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", READ, logdir], capture_output=True, text=True, check=True
    )
    return json.loads(p.stdout)


def test_tensorboard_reads_the_export(run_job, tmp_path):
    (tmp_path / "c.toml").write_text(CONFIG)
    rec = tmp_path / "rec.pt"
    r = run_job(
        [TRAIN, "--steps", "10", "--eval-every", "5", "--record", str(rec), "--record-steps", "5"],
        "--no-rules",
        "--config",
        str(tmp_path / "c.toml"),
    )
    assert r.code == 0, r.stderr
    out = tmp_path / "tb"
    p = subprocess.run(
        [str(BIN / "stepscope"), "export", "tensorboard", str(r.job_path), str(out)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    train, evals = _read(str(out / "rank-0" / "train")), _read(str(out / "rank-0" / "eval"))
    want = torch.load(rec)
    loss = train["scalars"]["loss"]
    assert [s for s, _ in loss] == list(range(10))
    assert [v for _, v in loss] == pytest.approx(want["loss"], rel=1e-6)
    assert [s for s, _ in train["scalars"]["gradient/0.weight/l2"]] == [0, 5]
    hist = train["histograms"]["0.weight"]
    assert [h[0] for h in hist] == [0, 5]
    w = want["weights"][("0.weight", 5)]
    assert hist[1][1] == w.numel() and hist[1][2] == pytest.approx(float(w.max()))
    assert len(evals["scalars"]["CrossEntropyLoss_output_0"]) == r.result()["evals"]
