"""What each debugging rule reads, and the configurations that cannot provide it.

A debugging rule reads the tensors of its collections: the raw tensor, or one
stored reduction (VanishingGradient: the ``abs_mean`` of each gradient). A
collection configured with ``reductions`` and no ``save_raw_tensor`` saves only
those reductions, so a rule reading another one would judge nothing and say only
"no gradient values saved yet". :func:`missing_rule_inputs` names every such pair
when the job starts (``stepscope run``, ``stepscope.init()``): the job runs, the
warning goes to stderr and into ``job.json`` (``config_warnings``). docs/tensors.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from stepscope.config._debugger import CollectionConfig, DebuggerHookConfig

#: Any stored value will do (a scalar such as the loss is saved as its value).
ANY = None
#: The raw tensor only: no reduction will do.
RAW: tuple[str, ...] = ()
_FINITE = ("min", "max", "mean", "abs_min", "abs_max", "abs_mean")

#: Per debugging rule, per collection it reads: the reductions it can use instead of
#: the raw tensor (``RAW``: none), or ``ANY``. Kept beside the rules' own
#: ``collections`` by tests/test_rule_inputs.py.
RULE_INPUTS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "VanishingGradient": {"gradients": ("abs_mean",)},
    "ExplodingTensor": {"losses": ANY, "gradients": _FINITE},
    "LossNotDecreasing": {"losses": ANY},
    "Overfit": {"losses": ANY},
    "Overtraining": {"losses": ANY},
    "DeadRelu": {"relu_output": RAW},
    "SaturatedActivation": {"tanh_input": RAW, "sigmoid_input": RAW},
    "PoorWeightInitialization": {"relu_input": ("variance",), "gradients": RAW, "losses": ANY},
    "WeightUpdateRatio": {"weights": RAW},
    "AllZero": {"weights": RAW, "gradients": RAW},
    "UnchangedTensor": {"weights": RAW, "gradients": RAW},
    "TensorVariance": {"weights": ("variance",), "gradients": ("variance",)},
    "ClassImbalance": {"labels": RAW, "predictions": RAW},
    "StalledTrainingRule": {},
}


def _saved(config: Mapping[str, object], name: str) -> tuple[bool, tuple[str, ...]]:
    """``(raw saved, reductions saved)`` of collection ``name`` as the agent will save
    it: the configured collection (else the rule's own), the hook's defaults applied."""
    raw = config.get("debugger")
    hook = DebuggerHookConfig.from_dict(raw) if isinstance(raw, Mapping) and raw else None
    hook = hook or DebuggerHookConfig()
    mine = next((c for c in hook.collection_configs if c.name == name), CollectionConfig(name))
    collection = mine.with_defaults(dict(hook.hook_parameters))
    reductions = collection.reductions
    save_raw = collection.parameters.get("save_raw_tensor")
    return (bool(save_raw) if save_raw is not None else not reductions), reductions


def _warning(rule: str, name: str, usable: tuple[str, ...], have: tuple[str, ...]) -> str:
    saved = f"reductions {', '.join(have)} only" if have else "nothing"
    if usable:
        what = f"the {' or '.join(usable)} of {name}"
        fix = f'add "{usable[0]}": reductions = "{", ".join((*have, usable[0]))}"'
    else:
        what = f"the raw tensors of {name}"
        fix = "add save_raw_tensor = true"
    return (
        f"{rule} reads {what}, which this configuration does not save ({name}: {saved}), "
        f'so it can judge nothing: in [[debugger.collections]] name = "{name}", {fix}.'
    )


def missing_rule_inputs(config: Mapping[str, object]) -> list[str]:
    """One line per (debugging rule, collection) whose input the configuration
    (``StepscopeConfig.to_dict()``) does not save; [] when every rule can judge."""
    out = []
    entries = config.get("rules")
    for entry in entries if isinstance(entries, list | tuple) else ():
        rule = str(entry.get("name")) if isinstance(entry, Mapping) else ""
        for name, usable in RULE_INPUTS.get(rule, {}).items():
            if usable is ANY:
                continue
            raw, have = _saved(config, name)
            if not raw and not set(usable) & set(have):
                out.append(_warning(rule, name, usable, have))
    return list(dict.fromkeys(out))
