"""A local training job started by an estimator's ``fit()``: its launcher process,
its job folder, and the requests the estimator's profiler methods send it.

The profiler methods write control requests (``stepscope.jobfolder.control``), as
``stepscope profile`` and ``stepscope config`` do, and wait (bounded) for the
job's answer: a rejected request raises, an unanswered one stays pending.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stepscope.config import FrameworkProfile
from stepscope.errors import StepscopeError

if TYPE_CHECKING:  # the job folder's code needs pyarrow: imported when a job runs
    from stepscope.jobfolder import JobJson, JsonObject
    from stepscope.store import Store

BY = "sagemaker"
START_WAIT_S = 60.0  # for job.json: the launcher writes it before the command starts
ACK_WAIT_S = 10.0
# The seeds' statuses for ours (a running job is "InProgress").
STATUS = {"Running": "InProgress"}
FRAMEWORK_KINDS = ["detailed", "python", "dataloader", "deep"]


class TrainingJobError(StepscopeError, RuntimeError):
    """A job did not complete, or a request to it could not be applied."""


@dataclass
class LocalTrainingJob:
    """``estimator.latest_training_job``: one run of ``fit()`` on this machine."""

    name: str
    output: str
    process: subprocess.Popen[bytes]
    work_dir: str
    tensorboard_dir: str | None = None
    watched: bool = True  # False: disable_profiler=True ran the script with no job folder
    _store: Store | None = field(default=None, repr=False)

    @property
    def job_name(self) -> str:
        """The job's name (the SDK's spelling)."""
        return self.name

    @property
    def store(self) -> Store:
        """The job folder's store (a job run with ``disable_profiler=True`` has none)."""
        if not self.watched:
            raise TrainingJobError(
                f"Training job {self.name} ran unwatched (disable_profiler=True): it has no "
                "job folder. Fix: leave disable_profiler out to record the job."
            )
        if self._store is None:
            from stepscope.store import open_store

            self._store = open_store(self.output).sub(self.name)
        return self._store

    @property
    def path(self) -> str:
        """The job folder (a local path, or the store's URL)."""
        return self.store.local_path("") or self.store.url

    def meta(self) -> JobJson:
        """``job.json``, once the launcher has written it (bounded wait)."""
        from stepscope.jobfolder import is_job, read_meta

        deadline = time.monotonic() + START_WAIT_S
        while not is_job(self.store):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise TrainingJobError(
                    f"job {self.name!r} did not start (launcher exit code "
                    f"{self.process.poll()}); its messages are above."
                )
            time.sleep(0.1)
        return read_meta(self.store)

    def status(self) -> str:
        """``InProgress``, ``Completed``, ``Failed`` or ``Stopped``."""
        status = str(self.meta().get("status"))
        return STATUS.get(status, status)

    def wait(self, logs: object = "All") -> None:
        """Wait for the job to end; a job that did not complete raises TrainingJobError."""
        code = self.process.wait()
        if not self.watched:
            if code != 0:
                raise TrainingJobError(f"Training job {self.name} failed (exit code {code}).")
            return
        meta = self.meta()
        if self.tensorboard_dir is not None:  # TensorBoardOutputConfig: the tensors as events
            cmd = ["-m", "stepscope.cli", "export", "tensorboard", self.path, self.tensorboard_dir]
            subprocess.run([sys.executable, *cmd], check=False)
        if meta.get("status") != "Completed":
            raise TrainingJobError(
                f"Training job {self.name} ended {meta.get('status')} (exit code {code}): "
                f"{meta.get('reason') or 'see its output above'}. Job folder: {self.path}"
            )

    def stop(self) -> None:
        """Ask the job to stop gracefully (it ends ``Stopped``)."""
        from stepscope.jobfolder import control

        self._send(lambda s: control.request_stop(s, "stopped from the SageMaker API", BY))

    def describe(self) -> JsonObject:
        """The job's name, status, configuration and rule statuses, named as the seeds do."""
        meta = self.meta()
        config = meta.get("config") or {}
        return {
            "TrainingJobName": self.name,
            "TrainingJobStatus": STATUS.get(str(meta.get("status")), str(meta.get("status"))),
            "FailureReason": meta.get("reason"),
            "JobFolder": self.path,
            "Config": config,
            "RuleEvaluationStatuses": self.rule_job_summary(),
        }

    def rule_job_summary(self) -> list[JsonObject]:
        """One entry per rule of ``rules/``: name, status, details, last update."""
        from stepscope.jobfolder import paths, read_all

        return [
            {
                "RuleConfigurationName": verdict.get("rule"),
                "RuleEvaluationStatus": verdict.get("status"),
                "StatusDetails": verdict.get("message"),
                "LastModifiedTime": verdict.get("updated"),
            }
            for verdict in read_all(self.store, paths.RULES)
        ]

    # --- the profiler methods' requests ---------------------------------------------

    def request_interval(self, interval_ms: int) -> None:
        """Sample the system every ``interval_ms`` from now on."""
        from stepscope.jobfolder import control

        self._send(lambda s: control.request_interval(s, interval_ms, BY))

    def request_windows(self, profile: FrameworkProfile | None) -> None:
        """Open ``profile``'s windows; None: every kind for one step from the next step."""
        from stepscope.jobfolder import control

        if profile is None:
            windows: list[JsonObject] = [{"kind": k} for k in ("detailed", "python", "dataloader")]
        else:
            windows = [dict(w.to_dict()) for w in profile.windows()]
        control.check_windows(windows)
        self._send(lambda s: control.request_profile(s, windows, BY))

    def request_off(self) -> None:
        """Switch every open and planned framework profiling window off."""
        from stepscope.jobfolder import control

        self._send(lambda s: control.request_profile(s, [], BY, off=FRAMEWORK_KINDS))

    def _send(self, write: Callable[[Store], str]) -> None:
        from stepscope.jobfolder import control

        if self.status() != "InProgress":
            raise TrainingJobError(
                f"Training job {self.name} is {self.status()}: only a running job takes "
                "profiler updates. Fix: call fit(wait=False), then update it while it runs."
            )
        name = write(self.store)
        deadline = time.monotonic() + ACK_WAIT_S
        while (ack := control.acknowledgement(self.store, name)) is None:
            if time.monotonic() > deadline or self.process.poll() is not None:
                warnings.warn(
                    f"Training job {self.name} has not answered request {name} yet: it applies "
                    "at the job's next step boundary (answer in control/ack/).",
                    stacklevel=3,
                )
                return
            time.sleep(0.1)
        if not ack["accepted"]:
            raise TrainingJobError(f"Training job {self.name} rejected {name}: {ack['detail']}")
