"""``stepscope compare`` of a real Keras ``fit`` job (tests/scripts/keras_fit.py) with a
real PyTorch job (tests/scripts/cpu_train.py), both under ``stepscope run``: a verdict
on the step time, the parts both split compared, ``backward`` and ``optimizer`` (fused
in the compiled train function, 0 on every step) named as not split out in A, never
compared as 0; the setup names each framework's version. Its twin: two Keras jobs,
where nothing is missing. tests/test_compare_lacks.py covers the same on built jobs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, SCRIPTS, env_for_tests, needs_tensorflow, stepscope_run

pytestmark = [pytest.mark.process, needs_tensorflow]

KERAS = [str(SCRIPTS / "keras_fit.py"), "--epochs", "2", "--batches", "30"]
TORCH = [str(SCRIPTS / "cpu_train.py"), "--steps", "60", "--threads", "1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    for job, args in (("keras", KERAS), ("keras2", KERAS), ("torch", TORCH)):
        done = stepscope_run(out, args, "--no-rules", job=job)
        assert done.code == 0, done.stderr
    return out


def train(out: Path, base: str, new: str) -> tuple[dict[str, object], dict[str, tuple[str, str]]]:
    cmd = [str(BIN / "stepscope"), "compare", "-o", str(out), base, new, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env_for_tests())
    assert done.returncode == 0, done.stderr
    (doc,) = json.loads(done.stdout)
    assert doc["phases"][0]["phase"] == "train"
    return doc["phases"][0], {k: (a, b) for k, a, b in doc["setup"]["facts"]}


def test_keras_against_pytorch_names_the_parts_keras_does_not_split(runs: Path) -> None:
    phase, facts = train(runs, "keras", "torch")
    assert phase["direction"] in ("slower", "faster", "same")  # judged, on the step time
    lacking = {m["part"]: (m["lacking"], m["why"]) for m in phase["missing_parts"]}
    assert lacking["backward"] == lacking["optimizer"] == ("A", "not split out")
    compared = {p["part"] for p in phase["parts"]}
    assert "forward" in compared and not compared & {"backward", "optimizer"}
    assert facts["version.tensorflow"][1] is None and facts["version.torch"][0] is None


def test_its_twin_two_keras_jobs_lack_nothing(runs: Path) -> None:
    phase, facts = train(runs, "keras", "keras2")
    assert phase["direction"] != "unknown" and phase["missing_parts"] == []
    assert "forward" in {p["part"] for p in phase["parts"]} and "version.tensorflow" not in facts
