"""The estimator arguments that only the platform uses, and ``instance_count``.

The platform-only arguments are accepted and unused (they place the job on the
platform's machines); any other unknown argument is an error with a suggestion.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from stepscope.errors import ConfigError

PLATFORM_ONLY = (
    "role", "instance_type", "framework_version", "py_version", "image_uri",
    "sagemaker_session", "volume_size", "volume_kms_key", "max_run", "input_mode",
    "output_kms_key", "subnets", "security_group_ids", "model_uri", "model_channel_name",
    "metric_definitions", "encrypt_inter_container_traffic", "use_spot_instances",
    "max_wait", "checkpoint_s3_uri", "checkpoint_local_path", "enable_network_isolation",
    "tags", "container_log_level", "code_location", "dependencies", "git_config",
    "enable_sagemaker_metrics", "keep_alive_period_in_seconds", "max_retry_attempts",
    "compiler_config", "disable_output_compression", "enable_infra_check",
    "instance_groups", "training_repository_access_mode", "script_mode",
    "training_repository_credentials_provider_arn", "source_code", "region",
)  # fmt: skip
# distribution= keys that run the processes under torchrun here.
TORCHRUN_KEYS = ("torch_distributed", "pytorchddp")


def check_extra(owner: str, given: Mapping[str, object]) -> None:
    """Refuse an argument that is neither ours nor the platform's."""
    for name in given:
        if name in PLATFORM_ONLY:
            continue
        close = difflib.get_close_matches(name, PLATFORM_ONLY, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"{owner}() got an unknown argument {name!r}.{hint} See docs/sagemaker.md for "
            "the arguments stepscope uses and those it accepts and ignores."
        )


def processes(instance_count: object, distribution: Mapping[str, object] | None) -> int:
    """How many training processes of this machine stand for ``instance_count`` hosts."""
    if (
        isinstance(instance_count, bool)
        or not isinstance(instance_count, int)
        or instance_count < 1
    ):
        raise ConfigError(
            f"Invalid instance_count {instance_count!r}: give a whole number >= 1. Here the "
            "instances are processes of this machine, started by torchrun."
        )
    for key in distribution or {}:
        if key not in TORCHRUN_KEYS:
            raise ConfigError(
                f"distribution={{{key!r}: ...}} is not available locally: stepscope runs "
                "distributed jobs with torchrun. Fix: distribution={'torch_distributed': "
                "{'enabled': True}} (or leave it out), with instance_count processes."
            )
    return instance_count
