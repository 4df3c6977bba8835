"""The debugger hook's configuration with the SageMaker SDK's arguments.

``DebuggerHookConfig`` and ``CollectionConfig`` are stepscope's own
(:mod:`stepscope.config`, docs/tensors.md) with the SDK's ``None`` defaults;
``TensorBoardOutputConfig`` asks ``fit()`` to export the job's tensors as
TensorBoard event files when the job ends (``stepscope export tensorboard``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stepscope import config
from stepscope.errors import ConfigError
from stepscope.sagemaker._platform import CONTAINER_PREFIX, is_remote, local_path


class CollectionConfig(config.CollectionConfig):
    """``stepscope.config.CollectionConfig(name, parameters)``; ``parameters=None`` is ``{}``."""

    def __init__(self, name: str, parameters: Mapping[str, object] | None = None) -> None:
        super().__init__(name, parameters if parameters is not None else {})


class DebuggerHookConfig(config.DebuggerHookConfig):
    """``stepscope.config.DebuggerHookConfig``: the tensors are written into the job
    folder (``latest_job_debugger_artifacts_path()``); the two output paths are
    accepted and unused."""

    def __init__(
        self,
        s3_output_path: str | None = None,
        container_local_output_path: str | None = None,
        hook_parameters: Mapping[str, object] | None = None,
        collection_configs: Sequence[config.CollectionConfig] | None = None,
    ) -> None:
        super().__init__(
            s3_output_path,
            container_local_output_path,
            hook_parameters if hook_parameters is not None else {},
            tuple(collection_configs or ()),
        )


@dataclass(frozen=True)
class TensorBoardOutputConfig:
    """Where ``fit()`` writes the job's tensors as TensorBoard event files.

    ``s3_output_path`` must be a local folder (or ``file://``) here; with an
    ``s3://`` URL, give ``container_local_output_path`` a local folder instead.
    """

    s3_output_path: str
    container_local_output_path: str | None = None

    @property
    def local_dir(self) -> str:
        """The local folder the event files go to."""
        for path in (self.container_local_output_path, self.s3_output_path):
            if path and not is_remote(path) and not path.startswith(CONTAINER_PREFIX):
                return local_path(path)
        raise ConfigError(
            f"TensorBoardOutputConfig(s3_output_path={self.s3_output_path!r}): stepscope "
            "exports TensorBoard files to a local folder. Fix: give a local path, e.g. "
            "TensorBoardOutputConfig('tensorboard/'), or run `stepscope export tensorboard "
            "JOB DIR` after the job."
        )
