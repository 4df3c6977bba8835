"""What `stepscope run` costs a ~10 s CPU training job, start to exit, and where it goes.

    python benchmarks/run_cost.py [--reps 7] [--seconds 8] [--base COMMIT] [--new COMMIT]
        [--threads 1]

Each rep runs the training (``_cost_train.py``: the CPU MLP of ``_mlp_loop.py``,
a loop of ``--seconds`` bare, one torch thread unless ``--threads``: two threads on a
shared two-core machine measure its other load more than stepscope) once bare
and once under ``stepscope run`` with default settings, in an order that alternates
from rep to rep; with ``--base`` also under a base commit's ``stepscope run`` (its
``src`` extracted with ``git archive``), so before and after meet the same load.
Printed: medians and quartiles of each side and of the added seconds (watched minus
the bare run of the same rep), the load average over the reps, then the start-up
imports of each process stepscope adds (``python -X importtime``). Bytecode caching is
on in every run (a ``.pyc`` per module, as an installed stepscope has).

What is counted, per run (wall stamps: ``time.time()`` of one machine):

* start to exit: the benchmark spawns the command and ``wait4``\\ s it;
* start to the script's first line and to its first step (imports and agent start-up);
* end of the script's ``main`` to its process reaped (the agent's end, the exit);
* training reaped to `stepscope run` exited (final flush, verdicts, helpers' stop):
  the training runs under ``_cost_wait.py``, which stamps it and ``wait4``\\ s it;
* CPU per step, first step to the loop's end, of the training thread (the agent's
  hooks run on it) and of the training process (with the agent's writer thread), and
  the training thread's wait for a core (run-queue delay: the other processes' share);
* CPU (user + system) of stepscope's processes: the whole tree (``wait4`` of the
  launcher: itself and every child it reaped) less the training process's own
  (from its wrapper; the agent's threads are in it) less the wrapper's own (the bare
  run's tree less its training). It is the launcher, the sampler and the rule runner;
  each of them apart as it exits (``_cost_probe/sitecustomize.py`` on ``PYTHONPATH``
  reads ``/proc/self/stat``);
* the training process's CPU before the script's first line (interpreter start and,
  watched, the agent's start-up) and after its ``main`` (its exit, the agent's end):
  "added" is the agent's share of each;
* stepscope's CPU per job: its processes plus the agent's start-up and exit (the
  two rows above, less the bare run's of the same rep; the agent's share of the loop
  is in the per-step rows: its hooks cost about 2 us a step, valgrind);
* stepscope's processes' CPU while the training runs, in % of a core: ``psutil``
  reads of the launcher and its helpers every 0.5 s, from 1 s after the first step
  to 0.5 s before the end;
* the first system sample (its ``time``) after the start, and the last
  ``rules/*.json`` written after the training's end (job.json's ``end_time``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from _cost_imports import import_table
from _cost_runs import Run, one_run
from cli import base_src  # benchmarks/cli.py: a base commit's src

HERE = Path(__file__).resolve().parent

ROWS: list[tuple[str, str]] = [
    ("wall", "start to exit"),
    ("to_script", "start to the script's first line"),
    ("to_first", "start to the first step"),
    ("loop", "first step to the end of main"),
    ("exit", "end of main to the training reaped"),
    ("tail", "training reaped to the command's exit"),
    ("cpu_tree", "CPU, all processes"),
    ("cpu_train", "CPU, the training process (agent in it)"),
    ("cpu_own", "CPU, stepscope's processes"),
    ("cpu_launcher", "  the launcher (at its exit)"),
    ("cpu_sampler", "  the sampler (at its exit)"),
    ("cpu_rules", "  the rule runner (at its exit)"),
    ("cpu_all", "CPU, stepscope's processes and the agent's start-up and exit"),
    ("cpu_start", "CPU of the training process before the script's first line"),
    ("cpu_exit", "CPU of the training process after main (its exit)"),
    ("step_thread_ms", "CPU of the training thread per step, ms"),
    ("step_process_ms", "CPU of the training process per step (agent's threads too), ms"),
    ("step_wait_ms", "the training thread's wait for a core per step, ms"),
    ("steady_pct", "stepscope's processes while training, % of a core"),
    ("steady_launcher", "  of which the launcher"),
    ("steady_sampler", "  of which the sampler"),
    ("steady_rules", "  of which the rule runner"),
    ("first_sample", "first system sample after start"),
    ("verdicts", "last verdict written after the training's end"),
]


def spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    med = statistics.median(xs)
    if len(xs) < 2:
        return f"{med:.2f}"
    q = statistics.quantiles(xs, n=4)
    return f"{med:.2f} ({q[0]:.2f} to {q[2]:.2f})"


def steps_for(seconds: float, threads: int, tmp: Path) -> tuple[int, float]:
    """Steps that make the bare training loop last ``seconds``, from one bare run."""
    probe = one_run("bare", 400, None, threads, tmp / "calibrate")
    per_step = probe.values["loop"] / 399
    return max(int(seconds / per_step), 100), per_step


def own(runs: dict[str, list[Run]], sides: list[str]) -> None:
    """The newest rep's CPU of stepscope's processes: each watched tree less its training
    and less the wrapper's own (the bare tree of the same rep less its training); with
    the agent's start-up and exit (the training's, less the bare run's)."""
    bare = runs["bare"][-1].values
    wrapper = bare["cpu_tree"] - bare["cpu_train"]
    for side in sides[1:]:
        v = runs[side][-1].values
        v["cpu_own"] = v["cpu_tree"] - v["cpu_train"] - wrapper
        if "cpu_start" in v and "cpu_start" in bare:
            agent = v["cpu_start"] - bare["cpu_start"] + v["cpu_exit"] - bare["cpu_exit"]
            v["cpu_all"] = v["cpu_own"] + agent


def table(runs: dict[str, list[Run]], sides: list[str]) -> None:
    head = ["", "bare"]
    for side in sides[1:]:
        head += [f"`stepscope run` ({side})", "added"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, label in ROWS:
        cells = [label, spread([r.values[key] for r in runs["bare"] if key in r.values])]
        for side in sides[1:]:
            cells.append(spread([r.values[key] for r in runs[side] if key in r.values]))
            added = [
                w.values[key] - b.values[key]
                for w, b in zip(runs[side], runs["bare"], strict=True)
                if key in w.values and key in b.values
            ]
            cells.append(spread(added))
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="interleaved reps (default 7)")
    ap.add_argument(
        "--seconds",
        type=float,
        default=8.0,
        help="of the bare training loop (default 8: with torch's import and exit, a 10 s "
        "job on a quiet machine)",
    )
    ap.add_argument("--base", help="also a base commit's `stepscope run`, interleaved")
    ap.add_argument("--new", help="a commit's code as the new side (default: this checkout's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepscope-run-cost-") as name:
        tmp = Path(name)
        new = base_src(args.new, tmp / "new") if args.new else HERE.parent / "src"
        srcs: dict[str, Path | None] = {"bare": None, "new": new}
        if args.base:
            srcs[f"base {args.base}"] = base_src(args.base, tmp / "base")
        steps, per_step = steps_for(args.seconds, args.threads, tmp)
        print(f"training: {steps} steps of {per_step * 1e3:.2f} ms (calibrated bare run)")
        sides, runs = list(srcs), {s: [] for s in srcs}  # type: dict[str, list[Run]]
        load = [os.getloadavg()[0]]
        for rep in range(args.reps):
            order = sides if rep % 2 == 0 else sides[::-1]
            for side in order:
                run = one_run(side, steps, srcs[side], args.threads, tmp / f"{rep}-{side}")
                runs[side].append(run)
            own(runs, sides)
            load.append(os.getloadavg()[0])
            walls = ", ".join(f"{s} {runs[s][-1].values['wall']:.2f}" for s in sides)
            print(f"rep {rep + 1}: {walls} s; load {load[-1]:.1f}", flush=True)
        print(
            f"\n{args.reps} reps, median (quartiles), seconds unless said; load average "
            f"{min(load):.1f} to {max(load):.1f} on {os.cpu_count()} cores\n"
        )
        table(runs, sides)
        print()
        import_table({s: p for s, p in srcs.items() if p is not None})


if __name__ == "__main__":
    main()
