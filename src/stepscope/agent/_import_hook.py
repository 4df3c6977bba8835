"""Run a callback right after ``import torch`` (or another framework) finishes, wherever
the script imports it.

The agent starts before the training script runs (``sitecustomize``), long before
torch is imported; importing torch ourselves would cost every job ~1.5 s and
torch's own import order. A meta-path finder wraps torch's loader once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, done: Callable[[ModuleType], None]) -> None:
        self.inner, self.done = inner, done

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self.inner.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        # Put the real loader back first, so torch never sees ours afterwards.
        module.__loader__ = self.inner
        if module.__spec__ is not None:
            module.__spec__.loader = self.inner
        self.inner.exec_module(module)
        self.done(module)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class ImportHook(importlib.abc.MetaPathFinder):
    """Calls ``callback(module)`` once, after the module ``name`` (a framework) has run its
    ``__init__``."""

    def __init__(self, callback: Callable[[ModuleType], None], name: str) -> None:
        self.callback, self.name = callback, name

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        # Stays installed until the module runs: ``importlib.util.find_spec`` alone (as
        # TensorFlow's ``__init__`` asks about ``keras``) finds a spec and loads nothing.
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, self._loaded)
                return spec
        return None

    def _loaded(self, module: ModuleType) -> None:
        self.uninstall()
        self.callback(module)

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
