"""Injected by ``stepscope run``: starts the stepscope agent, then hands over.

Any ``sitecustomize`` of the environment that this one shadows is still run.
Nothing here may break the training process: every failure is reported once.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _start_stepscope() -> None:
    try:
        from stepscope.agent.bootstrap import start_from_env

        start_from_env()
    except Exception as exc:  # the agent must never stop training from starting
        print(f"stepscope: agent not started: {type(exc).__name__}: {exc}", file=sys.stderr)


def _chain_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.modules.pop("sitecustomize", None)
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as exc:
        print(f"stepscope: the environment's sitecustomize failed: {exc}", file=sys.stderr)
    finally:
        if saved is not None:
            sys.modules["sitecustomize"] = saved


_start_stepscope()
_chain_next_sitecustomize()
