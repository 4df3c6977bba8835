"""A real notebook shows a real job: nbformat builds it, nbclient executes it on an
ipykernel kernel (its spec written into a temporary folder; no network), and the
cells' rich output holds the diagnosis, the chart data and the report's path.

The job is a real ``stepscope run`` of tests/scripts/mlp.py with a 4 s stall at step
40, which StepOutlier finds: the diagnosis has something to say."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import SCRIPTS, env_for_tests, stepscope_run

pytestmark = pytest.mark.process
nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[notebook]'")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[notebook]'")
kernelspec = pytest.importorskip("ipykernel.kernelspec", reason="pip install -e '.[notebook]'")

CONFIG = """
[[rules]]
name = "StepOutlier"
parameters = { n_outliers = 0, min_excess_s = 1.0 }  # the 4 s stall; not GC hiccups
"""
STEPS = 60
DATA = re.compile(r'<script type="application/json" class="stepscope-data">(.*?)</script>', re.S)


def _notebook(job: Path) -> object:
    cells = [
        f"import stepscope\njob = stepscope.open({str(job)!r})\njob",
        "job.show()",
        "print(job.report())",
        "stepscope.compare(job, job)",
    ]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])


def _execute(nb: object, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Execute ``nb`` on a python3 kernel of this interpreter; each cell's rich output."""
    share = tmp / "jupyter"
    kernelspec.write_kernel_spec(share / "kernels" / "python3")
    for key, value in env_for_tests(JUPYTER_PATH=str(share), JUPYTER_PLATFORM_DIRS="1").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp / "runtime"))
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={})
    client.execute(cwd=str(tmp))
    out = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        rich = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
        streams = "".join(o.text for o in cell.outputs if o.output_type == "stream")
        out.append({"data": rich[0].data if rich else {}, "stream": streams})
    return out


def test_a_notebook_shows_a_jobs_diagnosis_and_charts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "stepscope.toml"
    config.write_text(CONFIG)
    args = [str(SCRIPTS / "mlp.py"), "--steps", str(STEPS), "--stall-at", "40", "--stall-s", "4"]
    run = stepscope_run(tmp_path, args, "--config", str(config))
    assert run.code == 0, run.stderr
    verdict = json.loads((run.job_path / "rules" / "StepOutlier.json").read_text())
    assert verdict["status"] == "IssuesFound"

    job_cell, show_cell, report_cell, compare_cell = _execute(
        _notebook(run.job_path), tmp_path, monkeypatch
    )
    html = job_cell["data"]["text/html"]
    assert isinstance(html, str)
    # the diagnosis: StepOutlier's finding, in the cell
    assert "<h4>Diagnosis</h4>" in html and "StepOutlier" in html
    assert (
        "40" in verdict["findings"][0]["message"] and verdict["findings"][0]["message"][:30] in html
    )
    # the chart data: every train step's duration, the stall's among them
    match = DATA.search(html)
    assert match is not None
    charts = json.loads(match.group(1))["charts"]
    duration = next(c for c in charts.values() if c["title"] == "train step duration")
    values = next(s["values"] for s in duration["series"] if s["label"] == "duration")
    assert len(values) == STEPS and max(values) > 4.0
    assert any(c["kind"] == "share" for c in charts.values())  # the step split
    # offline: no URL to load anything from, and small enough for a cell
    assert not re.search(r'(src|href)="https?:', html) and len(html) < 150_000
    # show(): the HTML display, and `stepscope show`'s text beside it
    assert "stepscope-data" in show_cell["data"]["text/html"]
    text = show_cell["data"]["text/plain"]
    assert isinstance(text, str)
    assert text.startswith("diagnosis  1 problem found") and "slow steps" in text
    # report(): the page written into the job folder
    report = Path(str(report_cell["stream"]).strip())
    assert report == run.job_path / "report.html" and report.stat().st_size > len(html)
    # a comparison displays too: the verdict and both runs' steps
    compared = compare_cell["data"]["text/html"]
    assert "no difference beyond the noise" in compared and "A: job" in compared
