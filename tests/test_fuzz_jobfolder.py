"""Fuzz: every reader command on damaged copies of a finished job, never a traceback.

Each case copies the golden job ``tests/data/healthy`` and damages it with one
to three mutations drawn by a seeded RNG (docs/format.md, "Damaged job folders"):
truncated, empty or corrupt segments, non-Parquet ``part-*.parquet`` files,
stray folders and files, a bad ``job.json`` or format version, NaN/inf values,
absurd timestamps, damaged faults, rank records and rule verdicts. Then it runs
``stepscope.open`` and its accessors, ``show``, ``show --json``, ``rules``,
``report``, ``export tensorboard`` (the CLI's ``main`` in process) and the
dashboard API on it. Each must end with exit code 0, or 2 and one line
``stepscope: error: ...``; the API answers below 500; nothing may take longer
than :data:`CASE_TIMEOUT_S`. The fast tier runs every mutation kind once; the
``process``-tier sweep runs a few hundred random combinations.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import stepscope
from stepscope.cli import main
from stepscope.errors import StepscopeError

GOLDEN = Path(__file__).parent / "data" / "healthy"
CASE_TIMEOUT_S = 120.0
TOKEN = "fuzz-token-0123456789abcdef0123"
Mutation = Callable[[Path, random.Random], str]


# -- mutations: each damages the job folder and says what it did --------------------------


def _segments(job: Path) -> list[Path]:
    return sorted(p for p in job.rglob("part-*.parquet") if p.is_file())


def _pick_segment(job: Path, rng: random.Random) -> Path:
    return rng.choice(_segments(job) or [job / "steps" / "rank-0" / "part-0-0-00000.parquet"])


def seg_truncate(job: Path, rng: random.Random) -> str:
    seg = _pick_segment(job, rng)
    data = seg.read_bytes()
    seg.write_bytes(data[: rng.randrange(max(len(data), 1))])
    return f"truncated {seg.name}"


def seg_empty(job: Path, rng: random.Random) -> str:
    seg = _pick_segment(job, rng)
    seg.write_bytes(b"")
    return f"emptied {seg.name}"


def seg_corrupt(job: Path, rng: random.Random) -> str:
    seg = _pick_segment(job, rng)
    data = bytearray(seg.read_bytes())
    for _ in range(rng.randint(1, 64)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    seg.write_bytes(bytes(data))
    return f"corrupted bytes of {seg.name}"


def seg_garbage(job: Path, rng: random.Random) -> str:
    seg = _pick_segment(job, rng)
    seg.write_bytes(rng.choice([b"not parquet", b"PAR1", b"PAR1PAR1", b"PAR1" + b"\0" * 64]))
    return f"replaced {seg.name} with garbage"


def part_not_parquet(job: Path, rng: random.Random) -> str:
    folder = rng.choice(["steps/rank-0", "events/rank-0", "system/vm", "others/vm",
                         "tensors/rank-0/scalars", "steps/rank-1"])  # fmt: skip
    path = job / folder / "part-0000000000001-1-00000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rng.choice(["hello", "{}", "PAR1 but not really"]))
    return f"wrote a non-Parquet {folder}/{path.name}"


def stray_folder(job: Path, rng: random.Random) -> str:
    where = rng.choice(["steps/rank-0/part-1-1-00001.parquet", "steps/junk", "system/vm/sub",
                        "events/rank-x", "rules/Folder.json", "faults/x.json", "ranks/rank-9.json",
                        "nodes/vm2.json", "heartbeat/h.json", "tensors/rank-z"])  # fmt: skip
    (job / where).mkdir(parents=True, exist_ok=True)
    return f"made a folder {where}"


def stray_file(job: Path, rng: random.Random) -> str:
    where = rng.choice(["steps/README", "steps/rank-0/notes.txt", "system/stray.parquet",
                        "events/x.parquet", "steps/rank-0.parquet", "others",
                        "profiling/rank-0/x.window.json",
                        "tensors/rank-0/collections.json"])  # fmt: skip
    path = job / where
    if path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rng.choice(["", "[1, 2]", "not json", '{"start_time": "x"}']))
    return f"wrote a stray {where}"


def _rewrite_json(job: Path, key: str, rng: random.Random, wrong: list[object]) -> str:
    body = rng.choice(
        ["", "{", "[1, 2]", "null", "3", '"text"', "\xff\xfe", *map(json.dumps, wrong)]
    )
    (job / key).parent.mkdir(parents=True, exist_ok=True)
    (job / key).write_bytes(body.encode("utf-8", "surrogateescape") if body != "\xff\xfe"
                            else b"\xff\xfe")  # fmt: skip
    return f"{key} = {body[:60]!r}"


def _job_json(job: Path) -> dict[str, object]:
    body: dict[str, object] = json.loads((job / "job.json").read_text())
    return body


def job_json_damaged(job: Path, rng: random.Random) -> str:
    return _rewrite_json(job, "job.json", rng, [[], {}])


JOB_WRONG = {
    "start_time": ["yesterday", None, [1], float("inf"), float("nan"), 1e300, -1e18, True],
    "end_time": ["x", [], float("-inf"), 1e300],
    "status": [3, None, ["Completed"], "Exploded"],
    "name": [1, ["x"], None],
    "command": ["python train.py", [1, 2], 7],
    "hosts": ["vm", [None]],
    "exit_code": ["0", 1.5, []],
    "reason": [5, {}],
    "config": [[], "x"],
    "format_version": [2, "1", 0, -1, True, None, 1.0, 10**30],
}


def job_json_wrong_type(job: Path, rng: random.Random) -> str:
    body = _job_json(job)
    key = rng.choice(sorted(JOB_WRONG))
    body[key] = rng.choice(JOB_WRONG[key])
    (job / "job.json").write_text(json.dumps(body))
    return f"job.json {key} = {body[key]!r}"


def job_json_missing_key(job: Path, rng: random.Random) -> str:
    body = _job_json(job)
    key = rng.choice(sorted(body))
    del body[key]
    (job / "job.json").write_text(json.dumps(body))
    return f"job.json without {key}"


def format_version(job: Path, rng: random.Random) -> str:
    body = _job_json(job)
    body["format_version"] = rng.choice([2, "1", 99])
    (job / "job.json").write_text(json.dumps(body))
    return f"format_version {body['format_version']!r}"


def _rewrite_column(seg: Path, column: str, values: list[float], rng: random.Random) -> None:
    table = pq.read_table(seg)
    n = table.num_rows
    col = table.column(column).to_pylist()
    for _ in range(max(1, n // 4)):
        col[rng.randrange(n)] = rng.choice(values)
    i = table.schema.get_field_index(column)
    table = table.set_column(i, table.schema.field(i), pa.array(col, table.schema.field(i).type))
    pq.write_table(table, seg)


def bad_durations(job: Path, rng: random.Random) -> str:
    seg = _segments(job / "steps")[0]
    col = rng.choice(["duration", "data_wait", "forward", "backward", "start", "end"])
    _rewrite_column(seg, col, [float("nan"), float("inf"), float("-inf"), -5.0, 1e300], rng)
    return f"non-finite {col} in {seg.name}"


def absurd_times(job: Path, rng: random.Random) -> str:
    stream, col = rng.choice([("steps", "start"), ("steps", "end"), ("system", "time"),
                              ("events", "time"), ("tensors", "time")])  # fmt: skip
    seg = _segments(job / stream)[0]
    _rewrite_column(seg, col, [1e300, -1e18, 0.0, 1e15, 4e9, -1.0], rng)
    return f"absurd {stream} {col} in {seg.name}"


def bad_system_values(job: Path, rng: random.Random) -> str:
    seg = _segments(job / "system")[0]
    table = pq.read_table(seg)
    col = rng.choice([c for c in table.column_names if c not in ("node", "time", "interval_ms")])
    _rewrite_column(seg, col, [float("nan"), float("inf"), -1e300, 1e300], rng)
    return f"absurd system {col}"


def bad_interval(job: Path, rng: random.Random) -> str:
    seg = _segments(job / "system")[0]
    table = pq.read_table(seg)
    i = table.schema.get_field_index("interval_ms")
    values = pc.multiply(table.column(i), rng.choice([0, -1, 10**6]))
    table = table.set_column(i, table.schema.field(i), values.cast(table.schema.field(i).type))
    pq.write_table(table, seg)
    return "interval_ms out of range"


def fault_damaged(job: Path, rng: random.Random) -> str:
    wrong = [[{"component": "agent"}], {"component": [], "error": 5, "count": "many"},
             {"count": float("inf"), "time": "now"}]  # fmt: skip
    return _rewrite_json(job, "faults/agent-vm-1.json", rng, wrong)


def rank_damaged(job: Path, rng: random.Random) -> str:
    wrong = [[], {"rank": "zero", "status": 1, "time": "x"}, {"rank": 10**30}]
    return _rewrite_json(job, "ranks/rank-0.json", rng, wrong)


def rules_damaged(job: Path, rng: random.Random) -> str:
    wrong = [["StepOutlier"], {"status": 5, "findings": "x", "triggers": "a", "datapoints": []},
             {"status": "IssuesFound", "findings": [1, {"severity": "high"}], "cost_seconds": "x"},
             {"status": "IssuesFound", "findings": [{"severity": float("inf"), "start": 1e300}],
              "cost_seconds": float("inf"), "parameters": []}]  # fmt: skip
    name = rng.choice(["StepOutlier", "DataLoading", "NoSuchRule"])
    return _rewrite_json(job, f"rules/{name}.json", rng, wrong)


def node_damaged(job: Path, rng: random.Random) -> str:
    wrong = [[], {"cpu_count": "many", "gpus": "none", "mem_total": []}, {"interval_ms": -1}]
    return _rewrite_json(job, rng.choice(["nodes/vm.json", "heartbeat/vm.json"]), rng, wrong)


def window_damaged(job: Path, rng: random.Random) -> str:
    wrong = [[], {"kind": 1, "rank": "x", "start_step": "a", "path": 5, "files": "f"},
             {"start_time": float("inf"), "truncated": "yes"}]  # fmt: skip
    return _rewrite_json(job, "profiling/rank-0/python-1-2.window.json", rng, wrong)


def tensors_damaged(job: Path, rng: random.Random) -> str:
    wrong = [[], {"losses": "loss"}]
    return _rewrite_json(job, "tensors/rank-0/collections.json", rng, wrong)


_ALL = (seg_truncate, seg_empty, seg_corrupt, seg_garbage, part_not_parquet, stray_folder,
        stray_file, job_json_damaged, job_json_wrong_type, job_json_missing_key, format_version,
        bad_durations, absurd_times, bad_system_values, bad_interval, fault_damaged, rank_damaged,
        rules_damaged, node_damaged, window_damaged, tensors_damaged)  # fmt: skip
MUTATIONS: dict[str, Mutation] = {f.__name__: f for f in _ALL}


# -- the readers --------------------------------------------------------------------------


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_api(root: Path) -> list[str]:
    """Every read endpoint of the dashboard for job ``job``: what went wrong (none: [])."""
    from starlette.testclient import TestClient

    from stepscope.dashboard import create_app

    bad: list[str] = []
    app = create_app(str(root), "127.0.0.1", TOKEN)
    before = set(threading.enumerate())
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        for path in (
            "/api/jobs",
            "/api/jobs/job",
            "/api/jobs/job/rules",
            "/api/jobs/job/system?node=vm",
            "/api/jobs/job/steps",
            "/api/jobs/job/steps?phase=eval",
        ):  # fmt: skip (the report: by the CLI)
            r = client.get(path)
            if r.status_code >= 500 or (r.status_code != 200 and "error" not in r.json()):
                bad.append(f"{path}: {r.status_code} {r.text[:200]}")
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)
    return bad


def use_api(job: Path) -> list[str]:
    """``stepscope.open`` and every accessor: a result, or a StepscopeError."""
    try:
        j = stepscope.open(job)
    except StepscopeError:
        return []
    for read in (lambda: j.meta, lambda: j.status, j.nodes, j.ranks, j.faults,
                 j.profiling_artifacts, j.steps, j.events, j.system, j.others, j.system_long,
                 lambda: j.tensors.names(), lambda: j.tensors.collections(),
                 lambda: j.tensors.scalars(), lambda: j.warnings):  # fmt: skip
        try:
            read()
        except StepscopeError:
            continue
    return []


def check_commands(job: Path, tmp: Path) -> list[str]:
    """Every reader on ``job``: the problems found (none: [])."""
    problems: list[str] = []
    commands = [["show", str(job)], ["show", "--json", str(job)], ["rules", str(job)],
                ["rules", "--json", str(job)], ["report", str(job), "-o", str(tmp / "r.html")],
                ["export", "tensorboard", str(job), str(tmp / "tb")]]  # fmt: skip
    for argv in commands:
        try:
            code, out, err = run_cli(argv)
        except BaseException as exc:
            problems.append(f"{argv[0]} {argv[1]}: raised {type(exc).__name__}: {exc}")
            continue
        lines = err.strip().splitlines()
        if code == 2 and not (len(lines) == 1 and lines[0].startswith("stepscope: error: ")):
            problems.append(f"{argv[:2]}: exit 2 without one error line: {err[:300]!r}")
        elif code not in (0, 2):
            problems.append(f"{argv[:2]}: exit {code}: {err[:300]!r}")
        if argv[:2] == ["show", "--json"] and code == 0:
            bad: list[str] = []
            json.loads(out, parse_constant=bad.append)  # valid JSON, and NaN-free:
            if bad:
                problems.append(f"show --json printed non-JSON numbers: {bad}")
    for name, read in (
        ("stepscope.open", lambda: use_api(job)),
        ("ui", lambda: run_api(job.parent)),
    ):
        try:
            problems += read() or []
        except BaseException as exc:
            problems.append(f"{name}: raised {type(exc).__name__}: {exc}")
    return problems


def bounded(fn: Callable[[], list[str]], timeout: float = CASE_TIMEOUT_S) -> list[str]:
    """``fn()`` in a thread that must end within ``timeout`` seconds (a hang is a problem)."""
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return [f"hung for more than {timeout:.0f} s"]
    return result[0] if result else ["the case's thread died"]


def make_case(tmp: Path, kinds: list[str], seed: int) -> tuple[Path, list[str]]:
    job = tmp / "root" / "job"
    shutil.copytree(GOLDEN, job)
    rng = random.Random(seed)
    return job, [_mutate(k, job, rng) for k in kinds]


def _mutate(kind: str, job: Path, rng: random.Random) -> str:
    """One mutation; one that an earlier mutation left nothing to work on is a no-op."""
    try:
        return MUTATIONS[kind](job, rng)
    except (OSError, ValueError, TypeError, IndexError, pa.ArrowException) as exc:
        return f"{kind}: not applicable ({type(exc).__name__})"


def fuzz_case(tmp: Path, kinds: list[str], seed: int) -> None:
    job, done = make_case(tmp, kinds, seed)
    problems = bounded(lambda: check_commands(job, tmp))
    assert not problems, f"seed {seed}, mutations {done}:\n" + "\n".join(problems)


# The kinds with the most variants get a second draw in the fast tier (~30 cases).
VARIED = ("seg_truncate", "seg_corrupt", "seg_garbage", "stray_folder", "job_json_damaged",
          "job_json_wrong_type", "bad_durations", "absurd_times", "rules_damaged")  # fmt: skip
FAST = [(k, 0) for k in sorted(MUTATIONS)] + [(k, 1) for k in VARIED]


@pytest.mark.parametrize(("kind", "draw"), FAST)
def test_every_reader_survives_each_kind_of_damage(tmp_path: Path, kind: str, draw: int) -> None:
    fuzz_case(tmp_path, [kind], seed=sorted(MUTATIONS).index(kind) + 1000 * draw)


SWEEP = 300


@pytest.mark.process
@pytest.mark.parametrize("seed", range(SWEEP))
def test_every_reader_survives_random_damage(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kinds = rng.choices(sorted(MUTATIONS), k=rng.randint(1, 3))
    fuzz_case(tmp_path, kinds, seed)
