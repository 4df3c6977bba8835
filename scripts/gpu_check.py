"""Everything GPU in one call: the *_gpu.py tests, the GPU overhead benchmark, and
the planted GPU jobs with their expected verdicts (scripts/gpu_jobs.py: a stall, a
starved loader, a leak, a healthy twin, the kernel breakdown of a detailed window of
a GPU-bound job, and issue 33's rules each with its twin), and a memory window asked
in the dashboard of a running one (scripts/gpu_memory_window.py).

    scripts/gpu-check OUT            # on a machine with an NVIDIA GPU (docs/gpu.md)
    scripts/gpu-check --dry-run OUT  # anywhere: the same steps on the CPU, no benchmark

Writes ``OUT/summary.json`` and ``OUT/summary.md`` (and each step's log) and exits
non-zero if a step failed or a verdict was not the expected one. A dry run checks
the script itself (CI does, tests/test_gpu_check.py): the jobs run on the CPU at a
tenth of their steps, so only the verdicts that hold on a CPU are required.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpu_jobs import GPU_JOBS, JOBS  # scripts/, beside this file
from gpu_memory_window import memory_window

ROOT = Path(__file__).resolve().parents[1]
STEPSCOPE = [sys.executable, "-m", "stepscope.cli"]


def sh(cmd: list[str], log: Path, timeout: float) -> tuple[int, str]:
    """Run ``cmd``, its output to ``log``; (exit code, stdout)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        code, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = 124, str(exc.stdout or ""), f"timed out after {timeout} s"
    log.write_text(f"$ {' '.join(cmd)}\n# {time.monotonic() - t0:.1f} s, exit {code}\n{out}\n{err}")
    return code, out


def gpu_tests(out: Path, dry: bool) -> dict[str, Any]:
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("*_gpu.py"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests]
    # a dry run only collects them: on a CPU they skip, or run in the suite anyway
    cmd += ["--collect-only"] if dry else []
    code, stdout = sh(cmd, out / "gpu_tests.log", 300)
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    return {"step": "gpu tests", "ok": code in (0, 5), "result": last}


def benchmark(out: Path, dry: bool) -> dict[str, Any]:
    if dry:
        return {"step": "gpu overhead benchmark", "ok": True, "result": "skipped: dry run"}
    result = out / "gpu_overhead.json"
    cmd = [sys.executable, str(ROOT / "benchmarks/gpu_overhead.py"), "--split", "--events"]
    code, stdout = sh([*cmd, "--json", str(result)], out / "gpu_overhead.log", 420)
    return {"step": "gpu overhead benchmark", "ok": code == 0, "result": stdout.strip()}


def bare(out: Path, name: str, args: list[str]) -> dict[str, Any]:
    """A dry run of a job whose checks need a GPU: its script alone, on the CPU."""
    code, _ = sh([sys.executable, "scripts/gpu_train.py", *args], out / f"{name}.log", 240)
    why = "dry run: the script ran bare (its checks need a GPU)"
    return {"step": f"job {name}", "ok": code == 0, "result": f"exit {code}; {why}"}


def planted(out: Path, dry: bool) -> list[dict[str, Any]]:
    runs, results = out / "runs", []
    jobs = [(job, False) for job in JOBS] + [(job, True) for job in GPU_JOBS]
    for (name, args, config, checks), gpu_only in jobs:
        if dry and gpu_only:
            results.append(bare(out, name, args))
            continue
        cfg = out / f"{name}.toml"
        cfg.write_text(config)
        run = [*STEPSCOPE, "run", "-o", str(runs), "--job", name, "--config", str(cfg), "--"]
        code, _ = sh(
            [*run, sys.executable, "scripts/gpu_train.py", *args], out / f"{name}.log", 240
        )
        job = str(runs / name)
        _, rules = sh([*STEPSCOPE, "rules", job, "--json"], out / f"{name}.rules.json", 120)
        _, show = sh([*STEPSCOPE, "show", job, "--json"], out / f"{name}.show.json", 120)
        try:
            verdicts = {v["rule"]: v for v in json.loads(rules)}
            summary = json.loads(show)
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            results.append({"step": f"job {name}", "ok": False, "result": f"unreadable: {exc}"})
            continue
        got = {}
        for what, (check, on_cpu) in checks.items():
            try:
                ok = bool(check(verdicts, summary))
            except (KeyError, TypeError) as exc:
                ok = False
                what = f"{what} ({type(exc).__name__}: {exc})"
            got[what] = ok if (on_cpu or not dry) else f"{ok} (not required on a dry run)"
        required = [v for v in got.values() if isinstance(v, bool)]
        fired_now = sorted(r for r, v in verdicts.items() if v.get("status") == "IssuesFound")
        results.append(
            {"step": f"job {name}", "ok": code == 0 and all(required), "checks": got,
             "result": f"exit {code}; fired: {', '.join(fired_now) or 'nothing'}"}
        )  # fmt: skip
    return results


def stale(installed: Path) -> list[str]:
    """The source files of src/stepscope that the installed stepscope does not match
    (a wheel in .whl/ older than the checkout: rebuild it with scripts/gpu-wheels)."""
    src = ROOT / "src" / "stepscope"
    return [
        str(f.relative_to(src))
        for f in sorted(src.rglob("*.py"))
        if installed != src and f.read_bytes() != _read(installed / f.relative_to(src))
    ]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="folder for the summary and logs")
    p.add_argument("--dry-run", action="store_true", help="on the CPU: check the script itself")
    p.add_argument("--skip", nargs="*", default=[], choices=("tests", "bench", "jobs"))
    a = p.parse_args()
    import torch

    dry = a.dry_run or not torch.cuda.is_available()
    if not a.dry_run and dry:
        raise SystemExit("scripts/gpu-check: no CUDA device here; use --dry-run on a CPU machine")
    a.out.mkdir(parents=True, exist_ok=True)
    import stepscope
    from stepscope.agent._recorder import _native_class

    steps: list[dict[str, Any]] = [
        {
            "step": "environment",
            "ok": True,
            "result": {
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name() if not dry else "cpu (dry run)",
                "native_hooks": _native_class() is not None,
                "stepscope": str(Path(stepscope.__file__).parent),
                "differs_from_src": stale(Path(stepscope.__file__).parent),
            },
        }
    ]
    if "tests" not in a.skip:
        steps.append(gpu_tests(a.out, dry))
    if "jobs" not in a.skip:
        steps += planted(a.out, dry)
        steps.append(memory_window(a.out, dry))
    if "bench" not in a.skip:
        steps.append(benchmark(a.out, dry))
    (a.out / "summary.json").write_text(json.dumps(steps, indent=1))
    lines = [f"- {'ok  ' if s['ok'] else 'FAIL'} {s['step']}: {s.get('result', '')}" for s in steps]
    for s in steps:
        for what, ok in s.get("checks", {}).items():
            lines.append(f"    - {what}: {ok}")
    (a.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(0 if all(s["ok"] for s in steps) else 1)


if __name__ == "__main__":
    main()
