"""The planted jobs of scripts/gpu-check (scripts/gpu_train.py KIND) and the verdicts
each must get: (job, gpu_train.py arguments, config, {check: (check, required on a
dry run)}). ``JOBS`` run under ``stepscope run`` on a dry run too (on the CPU at a
tenth of their steps); ``GPU_JOBS`` plant what only a GPU shows (kernels, copies,
fp32 matrix multiplies on CUDA cores), so a dry run runs their script bare, to check
that it runs, and judges nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Verdicts = dict[str, dict[str, Any]]  # rule name -> its verdict (`stepscope rules --json`)
DETAILED = """[profiler]
system_monitor_interval_millis = 100
[profiler.framework_profile_params.detailed_profiling_config]
start_step = 100
num_steps = 3
"""
PLAIN = "[profiler]\nsystem_monitor_interval_millis = 100\n"
KERNELS = DETAILED.replace("start_step = 100", "start_step = 40")  # inside a dry run too


def fired(v: Verdicts, rule: str) -> bool:
    return v.get(rule, {}).get("status") == "IssuesFound"


def stall_steps(v: Verdicts) -> set[int]:
    """The steps StepOutlier flagged (its findings' step ranges)."""
    out: set[int] = set()
    for f in v.get("StepOutlier", {}).get("findings", []):
        lo, hi = f.get("steps") or (None, None)
        if lo is not None:
            out.update(range(lo, hi + 1))
    return out


def detailed_kernels(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel breakdowns (``show --json``'s ``profiling[].kernels``) of the detailed
    windows (on the CPU: ``{"not_applicable": why}``)."""
    return [p["kernels"] for p in s["profiling"] if p["kind"] == "detailed"]


def quiet(v: Verdicts, rule: str) -> bool:
    """``rule`` judged something (datapoints > 0) and found nothing: a silent twin."""
    got = v.get(rule, {})
    return got.get("status") == "NoIssuesFound" and (got.get("datapoints") or 0) > 0


def said(v: Verdicts, rule: str, *words: str) -> bool:
    """``rule`` fired, and a finding's message holds each of ``words``."""
    found = v.get(rule, {}).get("findings", []) if fired(v, rule) else []
    return any(all(w in f["message"] for w in words) for f in found)


def kernel_facts(s: dict[str, Any]) -> tuple[str | None, float]:
    """The largest kind of the first detailed window and its first GPU's busy share."""
    k = (detailed_kernels(s) or [{}])[0] or {}
    devices = k.get("devices") or [{}]
    return (k["kinds"][0]["kind"] if k.get("kinds") else None), devices[0].get("busy_share") or 0


# (job, train.py arguments, config, {check name: (check, required on a dry run)})
Check = tuple[Callable[[Verdicts, dict[str, Any]], bool], bool]
JOBS: list[tuple[str, list[str], str, dict[str, Check]]] = [
    (
        "stall",
        ["stall", "600"],
        DETAILED,
        {
            "StepOutlier fired": (lambda v, s: fired(v, "StepOutlier"), False),
            "at least 10 of the 12 stalls flagged": (
                lambda v, s: len(stall_steps(v) & set(range(45, 620, 50))) >= 10,
                False,
            ),
            "steps after the window judged": (
                lambda v, s: v["StepOutlier"]["datapoints"] >= 400,
                False,
            ),
        },
    ),
    (
        "loader",
        ["loader", "300"],
        PLAIN,
        {
            "DataLoading fired": (lambda v, s: fired(v, "DataLoading"), True),
            "DataLoaderWorkers fired": (lambda v, s: fired(v, "DataLoaderWorkers"), True),
        },
    ),
    (
        "leak",
        ["leak", "450"],
        PLAIN,
        {
            "GPUMemoryIncrease fired": (lambda v, s: fired(v, "GPUMemoryIncrease"), False),
            "CUDAMemory found the leak": (
                lambda v, s: any("a leak" in f["message"] for f in v["CUDAMemory"]["findings"]),
                False,
            ),
        },
    ),
    (
        "kernels",
        ["big", "200"],
        KERNELS,
        {
            # on the CPU the trace has no device activity: said, never zeros
            "one detailed window with a kernels entry": (
                lambda v, s: [k is not None for k in detailed_kernels(s)] == [True],
                True,
            ),
            "matmul the largest kind": (lambda v, s: kernel_facts(s)[0] == "matmul", False),
            "the GPU busy over 80% of the window": (lambda v, s: kernel_facts(s)[1] > 0.8, False),
            # torch's default keeps TF32 off: fp32 GEMMs on CUDA cores of a card with tensor cores
            "FP32MatMul fired": (lambda v, s: said(v, "FP32MatMul", "on CUDA cores"), False),
            "GPUIdleInSteps silent (kernels judged)": (
                lambda v, s: quiet(v, "GPUIdleInSteps"),
                False,
            ),
        },
    ),
    (
        "healthy",
        ["big", "600"],
        PLAIN,
        {
            "nothing fired": (
                lambda v, s: not [r for r, x in v.items() if x.get("status") == "IssuesFound"],
                False,
            ),
            "show leads with the device split": (
                lambda v, s: "device" in s["steps"]["phases"]["train"],
                False,
            ),
        },
    ),
]


# Issue 33's rules, each with its planted case and its silent twin.
GPU_JOBS: list[tuple[str, list[str], str, dict[str, Check]]] = [
    (
        "tf32",  # the kernels job with TF32 allowed: FP32MatMul's twin
        ["tf32", "200"],
        KERNELS,
        {"FP32MatMul silent (matmuls judged)": (lambda v, s: quiet(v, "FP32MatMul"), False)},
    ),
    (
        "launch",  # two Linear(256), batch 32: short kernels, host gaps
        ["tiny", "600"],
        KERNELS,
        {
            "GPUIdleInSteps fired, launch-bound": (
                lambda v, s: said(v, "GPUIdleInSteps", "launch-bound"),
                False,
            ),
        },
    ),
    (
        "pageable",  # 256 MB a step from pageable memory, blocking
        ["pageable", "200"],
        KERNELS,
        {
            "CopiesNotOverlapped fired, pageable copies named": (
                lambda v, s: (
                    said(v, "CopiesNotOverlapped", "from pageable memory")
                    and not said(v, "CopiesNotOverlapped", " 0 of them from pageable")
                ),
                False,
            ),
        },
    ),
    (
        "pinned",  # the same from pinned memory on a side stream, a step ahead: its twin
        ["pinned", "200"],
        KERNELS,
        {
            "CopiesNotOverlapped silent (copies judged)": (
                lambda v, s: quiet(v, "CopiesNotOverlapped"),
                False,
            ),
        },
    ),
]
