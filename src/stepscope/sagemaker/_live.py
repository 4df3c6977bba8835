"""The estimator's methods on its latest job: the profiler updates of a running
``fit(wait=False)`` and the accessors of the job's artifacts.

Each update is one control request to the job (``stepscope.jobfolder.control``),
the same the ``stepscope profile`` and ``stepscope config`` commands send.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from stepscope.config import FrameworkProfile, ProfilerConfig
from stepscope.errors import ConfigError
from stepscope.sagemaker._hook import TensorBoardOutputConfig
from stepscope.sagemaker._job import LocalTrainingJob, TrainingJobError
from stepscope.sagemaker._rules import RuleBase


class LiveJobMethods:
    """What an estimator does with ``latest_training_job``."""

    latest_training_job: LocalTrainingJob | None = None
    tensorboard_output_config: TensorBoardOutputConfig | None = None

    # --- the running job -------------------------------------------------------------

    def _job(self) -> LocalTrainingJob:
        if self.latest_training_job is None:
            raise TrainingJobError("No job yet: call fit() (fit(wait=False) to update it live).")
        return self.latest_training_job

    def update_profiler(
        self,
        rules: Sequence[RuleBase] | None = None,
        system_monitor_interval_millis: int | None = None,
        s3_output_path: str | None = None,
        framework_profile_params: FrameworkProfile | None = None,
        disable_framework_metrics: bool = False,
    ) -> None:
        """Change the running job's sampling interval and framework profiling."""
        if rules:
            raise ConfigError(
                "update_profiler(rules=...): a running job keeps its rules. Fix: judge the "
                "job with more rules at any time with `stepscope rules JOB` (docs/rules.md)."
            )
        if s3_output_path is not None:
            raise ConfigError("update_profiler(s3_output_path=...): a job keeps its folder.")
        job = self._job()
        if system_monitor_interval_millis is not None:
            interval = ProfilerConfig(system_monitor_interval_millis=system_monitor_interval_millis)
            job.request_interval(interval.system_monitor_interval_millis)
        if disable_framework_metrics:
            job.request_off()
        elif framework_profile_params is not None:
            job.request_windows(framework_profile_params)

    def enable_default_profiling(self) -> None:
        """System monitoring every 500 ms (the platform's default)."""
        self._job().request_interval(500)

    def disable_profiling(self) -> None:
        """Framework profiling off, and system sampling at its slowest (one a minute):
        a running sampler is slowed, not stopped (docs/sagemaker.md)."""
        self._job().request_off()
        self._job().request_interval(60000)

    def enable_framework_profiling(
        self, framework_profile_params: FrameworkProfile | None = None
    ) -> None:
        """Open framework profiling windows; with no argument, one step of each kind
        from the job's next step."""
        self._job().request_windows(framework_profile_params)

    def disable_framework_profiling(self) -> None:
        """Switch open and planned framework profiling windows off."""
        self._job().request_off()

    # --- artifacts -------------------------------------------------------------------

    def latest_job_profiler_artifacts_path(self) -> str:
        """The job folder: system metrics, steps and profiling traces (docs/format.md)."""
        return self._job().path

    def latest_job_debugger_artifacts_path(self) -> str:
        """The job's tensors folder (read it with ``stepscope.open(path).tensors``)."""
        return f"{self._job().path}/tensors"

    def latest_job_tensorboard_artifacts_path(self) -> str | None:
        """The TensorBoard folder ``fit()`` exported to, if one was configured."""
        config = self.tensorboard_output_config
        return config.local_dir if config is not None else None

    @property
    def model_data(self) -> str:
        """``SM_MODEL_DIR`` of the latest job: the folder the script saved its model in."""
        return os.path.join(self._job().work_dir, "model")
