"""Cost of each kind of profiling window on a ~2.5 ms/step CPU training loop.

One process, one job: the agent runs with windows of every kind planned one
step long, interleaved in rounds (window step, the step after it, two bare
steps), so every kind is measured side by side with bare steps under the same
machine load. Prints, per kind, the median step inside the window and of the
step after it (which pays for stopping the profiler), against the median bare
step, in ms.

    python benchmarks/profiling.py --rounds 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from typing import Any

KINDS: list[tuple[str, dict[str, Any]]] = [
    ("detailed", {"kind": "detailed"}),
    ("cprofile total_time", {"kind": "python", "cprofile_timer": "total_time"}),
    ("cprofile cpu_time", {"kind": "python", "cprofile_timer": "cpu_time"}),
    ("cprofile off_cpu_time", {"kind": "python", "cprofile_timer": "off_cpu_time"}),
    ("pyinstrument", {"kind": "python", "python_profiler": "pyinstrument"}),
    ("dataloader", {"kind": "dataloader"}),
]
WARMUP = 30
ROUND = 5  # window step, the step after it, the next one, two bare steps


def _plan(rounds: int) -> dict[int, str]:
    """Step -> kind of the window that starts there."""
    plan, step = {}, WARMUP
    for _ in range(rounds):
        for name, _spec in KINDS:
            plan[step] = name
            step += ROUND
    return plan


def _train(steps: int) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True)
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    while done < steps:
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            done += 1
            if done == steps:
                return


def measure(rounds: int, out: str) -> dict[str, Any]:
    import torch  # noqa: F401  (imported first: the agent attaches at once)

    import stepscope
    from stepscope.agent import bootstrap
    from stepscope.config import ProfilingWindow
    from stepscope.jobfolder import Planned

    plan = _plan(rounds)
    specs = dict(KINDS)
    session = stepscope.init(output=out, job="bench")
    agent = bootstrap.current()
    assert agent is not None and agent.profiling is not None
    for step, name in plan.items():
        window = ProfilingWindow.from_dict({**specs[name], "start_step": step, "num_steps": 1})
        agent.profiling.scheduler.plan.append(Planned(window))
    with session:
        _train(max(plan) + ROUND)
    return _summarise(stepscope.open(session.path), plan)


def _r(x: float) -> float:
    return round(float(x), 2)


def _summarise(job: Any, plan: dict[int, str]) -> dict[str, Any]:
    steps = job.steps(phase="train").set_index("step")["duration"] * 1e3
    window_steps = set(plan) | {s + 1 for s in plan} | {s + 2 for s in plan}
    bare = statistics.median(v for s, v in steps.items() if s >= WARMUP and s not in window_steps)
    rows = {}
    for name, _spec in KINDS:
        starts = [s for s, k in plan.items() if k == name]
        inside = statistics.median(steps[s] for s in starts)
        after = statistics.median(steps[s + 1] for s in starts)
        later = statistics.median(steps[s + 2] for s in starts)
        rows[name] = {
            "window_ms": _r(inside),
            "after_ms": _r(after),
            "next_ms": _r(later),
            "window_x": _r(inside / bare),
            "after_x": _r(after / bare),
            "next_x": _r(later / bare),
        }
    return {
        "bare_ms": _r(bare),
        "kinds": rows,
        "windows_per_kind": len(plan) // len(KINDS),
        "artifacts": len(job.profiling_artifacts()),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as out:
        result = measure(a.rounds, out)
    print(
        f"bare step: {result['bare_ms']} ms (median), {result['windows_per_kind']} "
        f"windows of each kind, {result['artifacts']} artifacts written"
    )
    print(
        f"{'kind':<24}{'in window':>12}{'x bare':>8}{'step after':>12}{'x bare':>8}"
        f"{'next step':>12}{'x bare':>8}"
    )
    for name, r in result["kinds"].items():
        print(
            f"{name:<24}{r['window_ms']:>10.2f}ms{r['window_x']:>8.2f}"
            f"{r['after_ms']:>10.2f}ms{r['after_x']:>8.2f}"
            f"{r['next_ms']:>10.2f}ms{r['next_x']:>8.2f}"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
