"""The framework seam: an adapter beside torch's drives the same recorder and writer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

import stepscope
from stepscope.agent import _agent, bootstrap
from stepscope.agent.frameworks import Framework, StepEvents, frameworks


class ToyFramework:
    """A second framework: its 'train step' reports a data wait, a forward, a backward
    and an optimizer step through :class:`StepEvents`, as a Keras adapter would."""

    name = "toyfw"
    module = "toyfw"

    def __init__(self, events: StepEvents) -> None:
        self.events = events
        self._attached = False
        self.detached = 0

    @property
    def attached(self) -> bool:
        return self._attached

    def version(self) -> str | None:
        return str(getattr(sys.modules.get(self.module), "__version__", "")) or None

    def attach(self) -> None:
        sys.modules[self.module].train_step = self.train_step  # type: ignore[attr-defined]
        self._attached = True

    def detach(self) -> None:
        del sys.modules[self.module].train_step  # type: ignore[attr-defined]
        self._attached, self.detached = False, self.detached + 1

    def train_step(self, seconds: float) -> None:
        ev, t = self.events, time.perf_counter
        t0 = t()
        time.sleep(seconds)
        ev.on_data(t0, t())
        ev.on_forward_start(t())
        time.sleep(seconds)
        ev.on_forward_end(t(), True)
        ev.on_backward_start()
        t0 = t()
        time.sleep(seconds)
        ev.on_backward(t0, t())
        ev.on_optimizer_start(t())
        time.sleep(seconds)
        ev.on_optimizer_end(t())


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ToyFramework]:
    made: dict[str, ToyFramework] = {}

    def both(agent: _agent.Agent) -> list[Framework]:
        made["toy"] = ToyFramework(agent.recorder)
        return [*frameworks(agent), made["toy"]]

    monkeypatch.setattr(_agent, "frameworks", both)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "toyfw.py").write_text("__version__ = '0.7'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    monkeypatch.delitem(sys.modules, "toyfw", raising=False)
    return made


def test_a_second_framework_is_attached_on_import_and_drives_the_steps(
    tmp_path: Path, toy: dict[str, ToyFramework]
) -> None:
    with stepscope.init(output=str(tmp_path), job="toy"):
        agent = bootstrap.current()
        assert agent is not None and agent.framework("torch") is not None
        fw = toy["toy"]
        assert not fw.attached  # not imported yet: nothing hooked
        import toyfw  # the script's own import attaches the adapter

        assert fw.attached and agent.framework("toyfw") is fw
        for _ in range(3):
            toyfw.train_step(0.002)
    assert fw.detached == 1 and not hasattr(toyfw, "train_step")
    job = stepscope.open(str(tmp_path / "toy"))
    steps = job.steps(phase="train")
    assert list(steps["step"]) == [0, 1, 2]
    later = steps.iloc[1:]  # the first step starts at its first event
    for part in ("data_wait", "forward", "backward", "optimizer"):
        assert (later[part] >= 0.002).all(), part
    assert (
        later[["data_wait", "forward", "backward", "optimizer"]].sum(axis=1)
        <= later["duration"] + 1e-6
    ).all()
    events = job.events(kinds=["framework"])
    named = {e["name"]: e["version"] for e in map(_json, events["detail"])}
    assert named == {"torch": torch.__version__, "toyfw": "0.7"}  # torch was imported first


def test_a_framework_never_imported_is_never_attached(
    tmp_path: Path, toy: dict[str, ToyFramework]
) -> None:
    with stepscope.init(output=str(tmp_path), job="none"):
        pass
    assert not toy["toy"].attached and toy["toy"].detached == 0
    assert "toyfw" not in sys.modules  # the agent never imports a framework itself
    events = stepscope.open(str(tmp_path / "none")).events(kinds=["framework"])
    assert [_json(d)["name"] for d in events["detail"]] == ["torch"]


def _json(text: str) -> dict[str, str]:
    import json

    body: dict[str, str] = json.loads(text)
    return body
