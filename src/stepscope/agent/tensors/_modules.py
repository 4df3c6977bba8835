"""Names of parameters, and forward hooks on the modules whose inputs/outputs are saved.

Parameter names come from the root modules (the outermost modules that own
parameters, found by the step hooks), as ``named_parameters()`` gives them; with
several roots, each root's class name prefixes its names. Module tensors are
named ``<module path>_output_<i>`` / ``<module path>_input_<i>``, with the alias
``<ClassName>_output_<i>`` so that a regex can select modules by type
(``.*relu_output`` selects every ``nn.ReLU``).

Module hooks exist only around steps that save module tensors: they are added
at the step boundary before such a step and removed after it, so other steps
run the model exactly as without stepscope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from stepscope.agent.tensors._collections import Collection

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.utils.hooks import RemovableHandle

MODULE_KINDS = frozenset({"input", "output"})


def param_names(roots: list[nn.Module]) -> dict[int, str]:
    """``id(parameter) -> name`` over the root modules (first name of a shared one)."""
    names: dict[int, str] = {}
    classes = [type(r).__name__ for r in roots]
    for i, root in enumerate(roots):
        prefix = ""
        if len(roots) > 1:
            cls = classes[i]
            prefix = f"{cls}." if classes.count(cls) == 1 else f"{cls}{i}."
        for name, p in root.named_parameters():
            names.setdefault(id(p), prefix + name)
    return names


def tensors_of(value: object) -> Iterator[tuple[int, torch.Tensor]]:
    """``(i, tensor)`` for a tensor or a tuple/list of them (other items skipped)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield 0, value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            if isinstance(item, torch.Tensor):
                yield i, item


# The capture's callback: (kind, module, path, alias prefix, the inputs or the output).
Take = Callable[[str, "nn.Module", str, str, object], None]
# A module's forward hook: (module, inputs, output).
ForwardHook = Callable[["nn.Module", tuple[object, ...], object], None]


class ModuleTaps:
    """Adds and removes the forward hooks of the modules selected by a collection."""

    def __init__(self, collections: list[Collection], take: Take) -> None:
        self.collections = [c for c in collections if c.kinds & MODULE_KINDS]
        self.take = take
        self._handles: list[RemovableHandle] = []

    @property
    def installed(self) -> bool:
        return bool(self._handles)

    def wanted(self, plan: tuple[Collection, ...]) -> bool:
        """Whether a saving plan includes module tensors."""
        return any(c.kinds & MODULE_KINDS for c in plan)

    def update(self, want: bool, roots: list[nn.Module]) -> None:
        """Install the hooks if ``want`` (and roots are known), else remove them."""
        if want and not self._handles and roots:
            self._install(roots)
        elif not want and self._handles:
            self.remove()

    def _selected(self, path: str, alias: str) -> tuple[bool, bool]:
        found = {
            k: any(c.selects(k, f"{path}_{k}_0", f"{alias}_{k}_0") for c in self.collections)
            for k in MODULE_KINDS
        }
        return found["input"], found["output"]

    def _install(self, roots: list[nn.Module]) -> None:
        for root in roots:
            for sub, module in root.named_modules():
                path = sub or type(module).__name__
                alias = type(module).__name__
                inputs, outputs = self._selected(path, alias)
                if inputs or outputs:
                    self._handles.append(
                        module.register_forward_hook(self._hook(path, alias, inputs, outputs))
                    )

    def _hook(self, path: str, alias: str, inputs: bool, outputs: bool) -> ForwardHook:
        def hook(module: nn.Module, args: tuple[object, ...], out: object) -> None:
            if inputs:
                self.take("input", module, path, alias, args)
            if outputs:
                self.take("output", module, path, alias, out)

        return hook

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
