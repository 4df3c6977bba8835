"""The import hook that attaches an adapter once its framework is imported."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from stepscope.agent._import_hook import ImportHook


@pytest.fixture
def fake_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = "stepscope_fake_framework"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_find_spec_alone_leaves_the_hook_in_place(fake_module: str) -> None:
    """TensorFlow asks ``importlib.util.find_spec("keras")`` while importing: no import."""
    seen: list[ModuleType] = []
    hook = ImportHook(seen.append, fake_module)
    hook.install()
    try:
        assert importlib.util.find_spec(fake_module) is not None
        assert not seen and hook in sys.meta_path
        module = importlib.import_module(fake_module)
        assert seen == [module] and module.VALUE == 42
        assert hook not in sys.meta_path  # once run, it is gone
        assert module.__spec__ is not None and module.__spec__.loader is module.__loader__
    finally:
        hook.uninstall()


def test_other_modules_pass_untouched(fake_module: str) -> None:
    seen: list[ModuleType] = []
    hook = ImportHook(seen.append, "not_" + fake_module)
    hook.install()
    try:
        importlib.import_module(fake_module)
        assert not seen and hook in sys.meta_path
    finally:
        hook.uninstall()
