"""Starting, watching, restarting and stopping the launcher's helper processes.

``stepscope run`` runs the node's system sampler and the live rule runner
beside the training, each in its own process, at a lower CPU priority (see
``_background``). This module builds their command lines, starts them, and
supervises them while the training runs: a helper that dies is recorded as a
fault (``faults/helper-<name>-<node>-<launcher pid>.json``: exit code or signal,
the last lines of its stderr) and started again after a backoff (0.5 s, doubling
to 30 s, back to 0.5 s once it has lived a minute), at most ``MAX_RESTARTS`` times
per helper and job. A restarted sampler records the sampling gap it leaves.
A helper that is alive but makes no progress for ``HUNG_S`` (its progress file,
``process._progress``) is recorded and restarted the same way (``_hung``). At the
end of the job it tells them (the sampler a SIGTERM, the rule runner a word down a
pipe: ``stepscope.process._word``), gives them ``STOP_S`` in all to flush what they
hold and kills the rest (``_supervise.Helpers.stop``).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from stepscope.process import HELPER_NICE, ProgressFile, give_word, helper_env, word_pipe

if TYPE_CHECKING:  # the launcher imports this module: no import cycle at run time
    from stepscope.launch._launcher import RunSpec
    from stepscope.store import Store

# At the end, the helpers together get this long to finish (the sampler its last flush,
# the rule runner its final evaluation) before they are killed: `stepscope run` returns
# within about 5 s of the training's exit. The final evaluation of a 13 s job takes
# 0.7 s from the training's exit here (BENCHMARKS.md, "Hung helpers").
STOP_S = 3.5
# With experiment trackers, the rule runner also logs the verdicts and closes their runs
# (a W&B run's finish syncs its files): at least this long.
TRACKERS_STOP_S = 15.0
# A live helper whose progress file has not moved for this long is hung: recorded,
# killed and restarted. Each beats at least once a second (the rule runner between
# the stages of a scan); a niced helper on a busy node can wait seconds for a core.
HUNG_S = 15.0
# Both can be set per launcher (a slow store's final flush; a test that hangs a helper).
STOP_ENV, HUNG_ENV = "STEPSCOPE_HELPER_STOP_S", "STEPSCOPE_HELPER_HUNG_S"
MAX_RESTARTS = 10  # per helper and job: a helper that keeps dying is left dead, recorded
FIRST_BACKOFF_S, MAX_BACKOFF_S, STABLE_S = 0.5, 30.0, 60.0
STDERR_LINES = 20  # of a dead helper's stderr, kept in its fault record
STDERR_TAIL_BYTES = 8192


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _sampler_cmd(spec: RunSpec, store: Store, child_pid: int, me: str) -> list[str]:
    return _python_module(
        "stepscope.sampler.main",
        *("--job-url", store.url, "--node", spec.node, "--interval-ms", str(spec.interval_ms)),
        *("--watch-pid", str(child_pid), "--parent-pid", me),
        *(spec.dist.sampler_args() if spec.dist is not None else []),
        *([f"--timeline-offset-s={spec.timeline_s!r}"] if spec.timeline_s is not None else []),
        *("--nice", str(HELPER_NICE)),
    )


def _rules_cmd(
    store: Store, me: str, metrics: tuple[str, int] | None = None, trackers: tuple[str, ...] = ()
) -> list[str]:
    served = ["--metrics-host", metrics[0], "--metrics-port", str(metrics[1])] if metrics else []
    # with trackers, the runner wrapped by their live logger (by module name: the
    # launcher imports neither)
    module = "stepscope.export.live" if trackers else "stepscope.rules.runner"
    return _python_module(
        module,
        *[a for t in trackers for a in ("--tracker", t)],
        *("--job-url", store.url, "--parent-pid", me, "--nice", str(HELPER_NICE)),
        *served,
    )


def seconds_from_env(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from ``env[name]``; ``default`` if unset or bad (said)."""
    given = env.get(name)
    if given is None:
        return default
    try:
        value = float(given)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        print(
            f"stepscope: {name}={given[:40]!r} is not a positive number of seconds; "
            f"using {default:g}",
            file=sys.stderr,
            flush=True,
        )
        return default
    return value


def describe_exit(code: int) -> tuple[str, int | None, str | None]:
    """How a process ended (``Popen.returncode``): text, exit code, signal name."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}", None, name
    return f"exited with code {code}", code, None


@dataclass
class Helper:
    """One supervised helper process; its stderr goes to an unlinked file we forward."""

    name: str
    command: Callable[[list[str]], list[str]]  # extra arguments -> command line
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started: float = 0.0
    restart_at: float | None = None
    last_alive: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    log: IO[bytes] | None = None
    forwarded: int = 0
    extra: list[str] = field(default_factory=list)
    progress: ProgressFile | None = None
    started_mono: float = 0.0
    clock: Callable[[], float] = time.time  # the launcher's: the job's timeline
    listens: bool = False  # takes --stop-fd: the launcher's word that the job ended
    word_fd: int | None = None  # our end of that pipe

    def start(self) -> None:
        # kept open across calls (closed by close()): no context manager
        self.log = tempfile.TemporaryFile(prefix=f"stepscope-{self.name}-")  # noqa: SIM115
        self.forwarded = 0
        self.progress = ProgressFile()
        extra = [*self.extra, "--progress-fd", str(self.progress.fd)]
        # a new session: a Ctrl-C at the terminal must not kill a helper before its
        # flush (the sampler) or its final scan (the rule runner)
        read_fd, self.word_fd = word_pipe() if self.listens else (None, None)
        word = ["--stop-fd", str(read_fd)] if read_fd is not None else []
        fds = (self.progress.fd,) if read_fd is None else (self.progress.fd, read_fd)
        try:
            self.proc = subprocess.Popen(
                self.command([*extra, *word]),
                env=helper_env(os.environ),
                start_new_session=True,
                stderr=self.log,
                pass_fds=fds,
            )
        finally:
            if read_fd is not None:
                os.close(read_fd)
        self.started, self.started_mono = self.clock(), time.monotonic()
        self.last_alive = self.started
        self.restart_at, self.extra = None, []

    def forward(self) -> bytes:
        """Copy what the helper wrote to stderr since the last call to ours."""
        if self.log is None:
            return b""
        size = os.fstat(self.log.fileno()).st_size
        new = os.pread(self.log.fileno(), size - self.forwarded, self.forwarded)
        self.forwarded += len(new)
        if new:
            sys.stderr.buffer.write(new)
            sys.stderr.flush()
        return new

    def tail(self) -> list[str]:
        """The last lines of the helper's stderr."""
        if self.log is None:
            return []
        size = os.fstat(self.log.fileno()).st_size
        start = max(0, size - STDERR_TAIL_BYTES)
        text = os.pread(self.log.fileno(), size - start, start).decode(errors="replace")
        return text.splitlines()[-STDERR_LINES:]

    def last_progress(self) -> tuple[float | None, float | None]:
        """``(progress, mark)`` of the running helper (``ProgressFile.read``)."""
        return self.progress.read() if self.progress is not None else (None, None)

    def skip_output(self) -> None:
        """Leave what the helper wrote so far unforwarded (a stack dump we recorded)."""
        if self.log is not None:
            self.forwarded = os.fstat(self.log.fileno()).st_size

    def tell_end(self) -> None:
        """Give the helper the word that the job has ended (helpers that listen)."""
        if self.word_fd is not None:
            give_word(self.word_fd)
            self.word_fd = None

    def close(self) -> None:
        if self.word_fd is not None:  # a dead helper's pipe: closed without the word
            os.close(self.word_fd)
            self.word_fd = None
        if self.log is not None:
            self.forward()
            self.log.close()
            self.log = None
        if self.progress is not None:
            self.progress.close()
            self.progress = None
