"""Batches built from buffers (store/_columns.py) equal pyarrow's own, and import no pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import stepscope
from stepscope.jobfolder import EVENTS_SCHEMA
from stepscope.jobfolder._schemas import AGENT_STEPS_SCHEMA
from stepscope.jobfolder._tensors import INDEX_SCHEMA, SCALARS_SCHEMA
from stepscope.store._columns import record_batch


def _same(columns: dict[str, object], schema: pa.Schema) -> None:
    ours = record_batch(columns, schema)
    ours.validate(full=True)
    lists = {k: list(v) if not isinstance(v, pa.Array) else v for k, v in columns.items()}
    assert ours.equals(pa.RecordBatch.from_pydict(lists, schema=schema))


def test_steps_with_and_without_device_times() -> None:
    n = 37
    rng = np.random.default_rng(0)
    cols: dict[str, object] = {f.name: rng.random(n) for f in AGENT_STEPS_SCHEMA}
    cols.update(rank=np.full(n, 3, np.int32), local_rank=[1] * n, pid=tuple([77] * n))
    cols.update(node=["node-é"] * n, phase=tuple("train" if i % 4 else "eval" for i in range(n)))
    cols.update(step=tuple(range(n)), profiled=[i % 9 == 0 for i in range(n)])
    cols["gpu_forward"] = [None if i % 5 == 0 else i * 1e-3 for i in range(n)]
    cols["gpu_backward"] = pa.nulls(n, pa.float32())
    cols["gpu_optimizer"] = [None] * n
    _same(cols, AGENT_STEPS_SCHEMA)


def test_events_scalars_and_index_rows() -> None:
    _same(
        {
            "time": (1.5, 2.5),
            "rank": (0, 0),
            "local_rank": (0, 0),
            "node": ("n", "n"),
            "pid": (9, 9),
            "kind": ("start", "fault"),
            "detail": ('{"why": "disque plein ✗"}', ""),
        },
        EVENTS_SCHEMA,
    )
    _same(
        {
            "time": (1.0,),
            "rank": (2,),
            "phase": ("eval",),
            "step": (2**40,),
            "name": ("loss",),
            "key": ("value",),
            "value": (float("inf"),),
        },
        SCALARS_SCHEMA,
    )
    index = {f.name: (1,) for f in INDEX_SCHEMA}
    index.update(phase=("train",), name=("w",), dtype=("float32",), blob=("b",), time=(0.5,))
    _same({**index, "shape": ([3, 4],)}, INDEX_SCHEMA)  # a list column: pyarrow's own path


@pytest.mark.process
def test_building_a_steps_batch_imports_no_pandas() -> None:
    """pa.array() would import pandas into the training process (~0.5 s of GIL, ~50 MB)."""
    code = textwrap.dedent(
        """
        import sys
        from stepscope.store._columns import record_batch
        from stepscope.jobfolder._schemas import AGENT_STEPS_SCHEMA
        cols = {f.name: [0.5, 1.5] for f in AGENT_STEPS_SCHEMA}
        cols.update(node=["n", "n"], phase=("train", "eval"), profiled=[True, False])
        cols.update(gpu_forward=[None, 1.0])
        record_batch(cols, AGENT_STEPS_SCHEMA).validate(full=True)
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


TRAIN_THEN_LOOK = textwrap.dedent(
    """
    import sys, time, torch
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    started = time.monotonic()
    while time.monotonic() - started < 4.5:  # past the writer's first flushes (2 s)
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()
        time.sleep(0.01)
    print("pandas" in sys.modules)
    """
)


@pytest.mark.process
def test_a_watched_training_process_never_imports_pandas(run_job, tmp_path) -> None:
    """End to end: steps flushed from a real training run, and no pandas in its process."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN_THEN_LOOK)
    r = run_job([str(script)])
    assert r.code == 0, r.stderr
    assert r.stdout.strip() == "False"
    steps = stepscope.open(r.job_path).steps(phase="train")
    assert len(steps) > 50
    assert steps["step"].tolist() == list(range(len(steps)))
