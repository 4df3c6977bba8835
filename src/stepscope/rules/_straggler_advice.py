"""What Straggler advises to look at, by the step column a rank is slow in.

A CPU-only job has no GPU to look at: its compute is the node's CPU, so its
advice names the node's CPU, never a GPU.
"""

from __future__ import annotations

from stepscope.rules._input import RuleInput

ADVICE_COMPUTE = (
    "its compute is slower: look at its GPU (clocks, temperature, another process on it), "
    "CPU contention on its node, or work done only on that rank (logging, evaluation)"
)
# A CPU-only job has no GPU to look at: its compute is the node's CPU.
ADVICE_COMPUTE_CPU = (
    "its compute is slower: look at CPU contention on its node (other processes, its "
    "thread count and affinity), or work done only on that rank (logging, evaluation)"
)
ADVICE = {
    "data_wait": "its data loading is slower: look at its data shard (size, storage it "
    "is read from) and its DataLoader workers",
    "duration": "its steps are slower: look at its device and node",
    "busy": f"its peers wait for it at every collective; {ADVICE_COMPUTE}",
}
ADVICE_CPU = {
    **ADVICE,
    "duration": "its steps are slower: look at its node",
    "busy": f"its peers wait for it at every collective; {ADVICE_COMPUTE_CPU}",
}


def advice(metric: str, gpu: bool) -> str:
    """What to look at for a straggler in ``metric``; no GPU advice without a GPU."""
    if gpu:
        return ADVICE.get(metric, ADVICE_COMPUTE)
    return ADVICE_CPU.get(metric, ADVICE_COMPUTE_CPU)


def has_gpu(data: RuleInput) -> bool:
    """Whether any node of the job lists a GPU, or any step has GPU timings."""
    if any(info.get("gpus") for info in data.nodes.values()):
        return True
    steps = data.steps
    gpu = [c for c in ("gpu_forward", "gpu_backward") if c in steps]
    return bool(len(steps) and gpu and steps[gpu].notna().to_numpy().any())
