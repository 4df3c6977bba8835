"""How ``fit()`` runs an entry point: the platform's hyperparameters, environment and
channels, and the ``stepscope run`` command that watches it.

On the platform each hyperparameter reaches the script twice: as ``--key value``
arguments and as ``SM_HP_<KEY>`` variables (``SM_HPS`` holds them all as JSON);
strings pass as they are, other values as JSON. Input channels become
``SM_CHANNEL_<NAME>``; ``SM_MODEL_DIR`` and ``SM_OUTPUT_DATA_DIR`` are folders
beside the job folder (docs/sagemaker.md).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping

from stepscope.errors import ConfigError
from stepscope.sagemaker._platform import is_remote, local_path


def hp_text(value: object) -> str:
    """A hyperparameter as the script receives it."""
    return value if isinstance(value, str) else json.dumps(value)


def hp_args(hyperparameters: Mapping[str, object]) -> list[str]:
    """``--key value`` for each hyperparameter."""
    return [x for k, v in hyperparameters.items() for x in (f"--{k}", hp_text(v))]


def channels(inputs: object) -> dict[str, str]:
    """``fit(inputs)`` as ``{channel: local folder}`` (a lone path is ``training``)."""
    if inputs is None:
        return {}
    given = inputs if isinstance(inputs, Mapping) else {"training": inputs}
    out: dict[str, str] = {}
    for name, where in given.items():
        where = getattr(where, "config", where)  # the SDK's TrainingInput, if one is passed
        if not isinstance(where, str) or is_remote(where):
            raise ConfigError(
                f"fit(inputs) channel {name!r}: {where!r} is not a local folder. stepscope "
                "runs the job on this machine. Fix: download the data and give its folder, "
                "e.g. fit({'training': 'file:///data/train'})."
            )
        out[str(name)] = local_path(where)
    return out


def platform_env(
    hyperparameters: Mapping[str, object], chans: Mapping[str, str], side_dir: str, hosts: int
) -> dict[str, str]:
    """The ``SM_*`` variables a training script reads on the platform."""
    env = {f"SM_HP_{k.upper()}": hp_text(v) for k, v in hyperparameters.items()}
    env["SM_HPS"] = json.dumps(dict(hyperparameters))
    env.update({f"SM_CHANNEL_{c.upper()}": p for c, p in chans.items()})
    env["SM_CHANNELS"] = json.dumps(sorted(chans))
    env["SM_MODEL_DIR"] = os.path.join(side_dir, "model")
    env["SM_OUTPUT_DATA_DIR"] = os.path.join(side_dir, "output")
    env["SM_CURRENT_HOST"] = "algo-1"
    env["SM_HOSTS"] = json.dumps([f"algo-{i + 1}" for i in range(hosts)])
    env["SM_NUM_CPUS"] = str(os.cpu_count() or 1)
    env["SM_NUM_GPUS"] = str(_gpus())
    for key in ("SM_MODEL_DIR", "SM_OUTPUT_DATA_DIR"):
        os.makedirs(env[key], exist_ok=True)
    return env


def _gpus() -> int:
    try:  # the NVIDIA device files: no CUDA library loaded for a count
        return sum(1 for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        return 0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for torchrun's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def script_command(entry_point: str) -> list[str]:
    """The command that runs the entry point (a Python file or a shell script)."""
    if entry_point.endswith(".sh"):
        return ["/bin/sh", entry_point]
    return [sys.executable, entry_point]


def run_command(config_file: str, processes: int, script: list[str]) -> list[str]:
    """``stepscope run --config FILE [torchrun options] -- SCRIPT...``."""
    cmd = [sys.executable, "-m", "stepscope.cli", "run", "--config", config_file]
    if processes > 1:
        cmd += ["--nproc-per-node", str(processes), "--master-addr", "127.0.0.1"]
        cmd += ["--master-port", str(free_port())]
    return [*cmd, "--", *script]
