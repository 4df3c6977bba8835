"""Shared fixtures: real jobs in subprocesses, a guard against leaks, and the test tiers' guard."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import multiprocessing.process
import multiprocessing.util
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

# python-dateutil<3 (botocore's pin, the [s3] extra) imports six, whose first import adds
# an import hook: load it here, before any test's snapshot of sys.meta_path.
with contextlib.suppress(ImportError):
    import six  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "scripts"
FAKES = Path(__file__).parent / "fakes"
BIN = Path(sys.executable).parent


# -- test tiers: a test that starts a process says so (DEVELOPERS.md, "Test tiers") ----------

PROCESS = "process"
_running: list[pytest.Item] = []  # the test being set up, run or torn down
_unmarked: pytest.StashKey[list[str]] = pytest.StashKey()
_reported: pytest.StashKey[bool] = pytest.StashKey()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Knows the current test through its setup too: module fixtures start runs there."""
    _running.append(item)
    try:
        with _share_the_machine(item):
            return (yield)
    finally:
        _running.pop()


# Under pytest-xdist (scripts/test runs 2 workers), a test that loads every core runs
# alone: beside it, another worker's healthy run would be slowed by its loops, and its own
# measure of the load would count the other worker's training. The others share the machine.
LOADS_EVERY_CORE = {"busy_loops", "many_busy_loops", "cpu_load", "alone"}


@contextlib.contextmanager
def _share_the_machine(item: pytest.Item) -> Iterator[None]:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # set in xdist's workers only
    if run is None:
        yield
        return
    alone = LOADS_EVERY_CORE & set(getattr(item, "fixturenames", ()))
    with open(Path(tempfile.gettempdir()) / f"stepscope-tests-{run}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield  # closing the file unlocks it


# -- the order of the files: the slowest first (scripts/test's 2 workers) ------------------
#
# xdist hands out whole files (--dist loadfile) in collection order (scripts/test passes
# --no-loadscope-reorder: xdist's own order, most tests first, put the few-test training
# files last, and one worker then ran a 50 s file while the other sat idle). The slowest
# files go first so the in-process tier's short files fill the end: as measured by the
# last run (pytest's cache), else as CI measured them (file_seconds.json: CI starts from a
# clean checkout), else by their count of process tests.
_SECONDS_KEY = "stepscope/file-seconds"
_CI_SECONDS = Path(__file__).parent / "file_seconds.json"
UNMEASURED_PROCESS_S = 3.0  # the process tier: about 570 tests in 29 min serial
_file_seconds: dict[str, float] = {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    ci = {k: v for k, v in json.loads(_CI_SECONDS.read_text()).items() if k != "_"}
    measured: dict[str, float] = {**ci, **(cache.get(_SECONDS_KEY, {}) if cache else {})}
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(_file_of(item.nodeid), []).append(item)

    def seconds(file: str) -> float:
        if file in measured:
            return float(measured[file])
        # not measured yet (a new file, no cache): a process test takes seconds
        marked = [i for i in files[file] if i.get_closest_marker(PROCESS) is not None]
        return UNMEASURED_PROCESS_S * len(marked)

    items[:] = [item for file in sorted(files, key=lambda f: -seconds(f)) for item in files[file]]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sums each file's seconds (setup, call, teardown); in xdist's controller too."""
    file = _file_of(report.nodeid)
    _file_seconds[file] = _file_seconds.get(file, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _file_seconds:
        return  # an xdist worker: the controller saw every report and writes them
    cache.set(_SECONDS_KEY, {**cache.get(_SECONDS_KEY, {}), **_file_seconds})


class UnmarkedProcessError(RuntimeError):
    """A test outside the ``process`` tier started a process."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    if call.excinfo is not None and call.excinfo.errisinstance(UnmarkedProcessError):
        item.stash[_reported] = True  # the test failed with the guard's message already
    return (yield)


def _check_may_start(what: str) -> None:
    __tracebackhide__ = True
    if not _running or _running[-1].get_closest_marker(PROCESS) is not None:
        return  # collection (no test), or a test marked ``process``
    item = _running[-1]
    message = (
        f"{item.nodeid} is not marked `{PROCESS}` but starts a process ({what}). "
        f"Mark it: `@pytest.mark.{PROCESS}` on the test, or `pytestmark = pytest.mark.{PROCESS}` "
        "in its module if all its tests do; `scripts/test --fast` leaves such tests out."
    )
    item.stash.setdefault(_unmarked, []).append(message)
    raise UnmarkedProcessError(message)


def _guarded(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def start(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        _check_may_start(what)
        return original(*args, **kwargs)

    return start


def _describe_popen(original: Callable[..., Any]) -> Callable[..., Any]:
    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> Any:
        __tracebackhide__ = True
        _check_may_start(f"subprocess.Popen {args!r:.120}")
        return original(self, args, *rest, **kw)

    return execute_child


# Every way a Python test starts a process goes through one of these: subprocess.run/call/
# check_output, psutil.Popen and asyncio's subprocesses (Playwright's driver) through
# Popen._execute_child; multiprocessing (DataLoader workers) through Process.start or
# spawnv_passfds (its forkserver and resource tracker); os.spawn* and pty through fork.
_STARTS: list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
    (subprocess.Popen, "_execute_child", _describe_popen),
    (multiprocessing.process.BaseProcess, "start", lambda f: _guarded("multiprocessing", f)),
    (multiprocessing.util, "spawnv_passfds", lambda f: _guarded("multiprocessing", f)),
    *[
        (os, name, lambda f, n=name: _guarded(f"os.{n}", f))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")
        if hasattr(os, name)
    ],
]
_originals: list[tuple[Any, str, Any]] = []


def pytest_configure(config: pytest.Config) -> None:
    for owner, name, wrap in _STARTS:
        original = getattr(owner, name)
        _originals.append((owner, name, original))
        setattr(owner, name, wrap(original))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)


@pytest.fixture(autouse=True)
def process_tier(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test outside the ``process`` tier that started a process, even where the
    code under test caught the guard's error (a background thread, the fault boundary)."""
    yield
    unmarked = request.node.stash.get(_unmarked, [])
    if unmarked and not request.node.stash.get(_reported, False):
        pytest.fail(unmarked[0], pytrace=False)


def _torch_global_hooks() -> int:
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    return (
        len(m._global_forward_pre_hooks)
        + len(m._global_forward_hooks)
        + len(o._global_optimizer_pre_hooks)
        + len(o._global_optimizer_post_hooks)
    )


@pytest.fixture(autouse=True)
def healthy() -> Any:
    """Fail any test that leaks a thread, hook, profiler, import hook or child process."""
    threads = set(threading.enumerate())
    hooks, meta_path = _torch_global_hooks(), list(sys.meta_path)
    profile = sys.getprofile()
    yield
    leaked = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
    assert not leaked, f"leaked threads: {leaked}"
    assert _torch_global_hooks() == hooks, "leaked torch global hooks"
    assert sys.meta_path == meta_path, "leaked import hooks"
    assert sys.getprofile() is profile, "leaked profiler"
    children = [
        c
        for c in psutil.Process().children(recursive=True)
        if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
    ]
    assert not children, f"leaked processes: {children}"


@dataclass
class Run:
    """A finished ``stepscope run``: its exit code, output and job folder."""

    code: int
    stdout: str
    stderr: str
    job_path: Path

    def result(self) -> dict[str, Any]:
        """The JSON line the test script printed last."""
        return json.loads(self.stdout.strip().splitlines()[-1])


@pytest.fixture
def mlflow_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's file store allowed and its telemetry off, for the test's own MlflowClient
    too (``QUIET`` of tests/mlflow_store.py)."""
    from mlflow_store import QUIET

    for key, value in QUIET.items():
        monkeypatch.setenv(key, value)


def env_for_tests(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STEPSCOPE_AGENT", None)
    # One intra-op thread for the tests' tiny models: on 2 cores torch's idle threads spin
    # around the scripts' sleeps (measured: test_lifecycle 34 -> 17 s of CPU). A test that
    # needs torch's default passes OMP_NUM_THREADS in ``extra``.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def stepscope_run(
    tmp: Path,
    script_args: list[str],
    *opts: str,
    job: str = "job",
    timeout: float = 240,
    env: dict[str, str] | None = None,
) -> Run:
    """``stepscope run -o tmp --job job [opts] -- python <args>`` in a subprocess."""
    cmd = [
        str(BIN / "stepscope"),
        "run",
        "-o",
        str(tmp),
        "--job",
        job,
        *opts,
        "--",
        sys.executable,
        *script_args,
    ]
    p = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env or env_for_tests()
    )
    return Run(p.returncode, p.stdout, p.stderr, tmp / job)


@pytest.fixture
def run_job(tmp_path: Path) -> Any:
    def go(script_args: list[str], *opts: str, **kw: Any) -> Run:
        return stepscope_run(tmp_path, script_args, *opts, **kw)

    return go


# -- a headless browser for the UI tests (Debian's chromium; never `playwright install`) -----

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium for one test (the leak guard wants no browser left between tests);
    skipped, with the line that installs it, where Debian's chromium is missing."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"needs Debian's chromium at {CHROMIUM}: apt-get install chromium")

    before = set(threading.enumerate())
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
    # Playwright's event loop shuts its executor down without waiting for the thread.
    for t in set(threading.enumerate()) - before:
        t.join(timeout=10)


#: Skips a test where TensorFlow or Keras is missing, with the line that installs them.
needs_tensorflow = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None,
    reason="TensorFlow is not installed: pip install -e '.[tensorflow]'",
)


@pytest.fixture
def alone() -> None:
    """Nothing but a name: a test that asks for it runs with no other xdist worker's
    test beside it (LOADS_EVERY_CORE): its bound is a deadline that a loaded machine
    can miss (a signal's grace period), not a measure."""


@pytest.fixture
def busy_loops() -> Iterator[list[int]]:
    """One busy-loop process per core, killed at the end of the test. Each in a session
    of its own, as a program started from another terminal: with Linux's autogroup
    scheduling a session shares the CPU with the others as a whole."""
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield [p.pid for p in loops]
    finally:
        for p in loops:
            p.kill()
            p.wait()
