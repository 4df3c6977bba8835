"""What `stepscope run`'s processes import: each heavy library only where it is needed
(issue 32: their imports were most of the CPU a short job paid; BENCHMARKS.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

DATA = Path(__file__).resolve().parent / "data"
HEAVY = ("duckdb", "pandas", "pyarrow", "numpy", "fsspec", "psutil", "torch")

_AFTER = """
import json, sys
{code}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def _imported(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after ``code``."""
    proc = subprocess.run(
        [sys.executable, "-c", _AFTER.format(code=code, heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_the_launcher_imports_none_of_them(tmp_path: Path) -> None:
    run = ["run", "-o", str(tmp_path), "--job", "j", "--no-rules", "--", "true"]
    code = f"from stepscope.cli import main; assert main({run!r}) == 0"
    assert _imported(code) == []
    assert json.loads((tmp_path / "j" / "job.json").read_text())["status"] == "Completed"


def test_the_sampler_imports_what_it_writes_and_reads_with() -> None:
    """Its module imports none (main() imports its loop after the arguments, with the
    garbage collector off); the loop imports pyarrow (numpy) and psutil, not the
    configuration's parser (stepscope.config: the live requests' parser is lazy)."""
    assert _imported("import stepscope.sampler.main") == []
    loop = "import stepscope.sampler._sampler; assert 'stepscope.config' not in sys.modules"
    assert _imported(loop) == ["numpy", "psutil", "pyarrow"]


def test_the_rule_runner_waits_for_data_with_none_of_them() -> None:
    assert _imported("import stepscope.rules.runner") == []


def test_the_final_evaluation_reads_without_duckdb(tmp_path: Path) -> None:
    """A job that ends before the first live scan is judged by pyarrow and pandas."""
    job = shutil.copytree(DATA / "healthy", tmp_path / "job")
    shutil.rmtree(job / "rules", ignore_errors=True)
    code = (
        "from stepscope.rules.runner import main; "
        f"assert main(['--job-url', {str(job)!r}, '--once']) == 0"
    )
    assert _imported(code) == ["numpy", "pandas", "pyarrow"]
    # nor the configuration's parser, nor pyarrow.dataset (a job without tensors)
    leaner = f"{code}; assert not {{'stepscope.config', 'pyarrow.dataset'}} & set(sys.modules)"
    assert _imported(leaner) == ["numpy", "pandas", "pyarrow"]
    verdict = json.loads((job / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] != "InProgress" and verdict["datapoints"] > 0  # judged


def test_imports_without_gc_freezes_what_they_made_and_collects_again() -> None:
    """The helpers' imports run with the collector off; after them it is on again, and
    what they made is frozen (never walked again), new cycles are still collected."""
    code = (
        "import gc\n"
        "from stepscope.process import imports_without_gc\n"
        "with imports_without_gc():\n"
        "    assert not gc.isenabled()\n"
        "    import pyarrow\n"
        "assert gc.isenabled() and gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n"
        "a = []; a.append(a); del a\n"
        "assert gc.collect() >= 1\n"
    )
    assert _imported(code) == ["numpy", "pyarrow"]
