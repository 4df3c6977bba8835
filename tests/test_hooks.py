"""The forward timing of the roots, in process: fast path kept, classes restored."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from torch import nn

import stepscope
from stepscope.agent import _recorder, bootstrap


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.fail = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            raise RuntimeError("boom")
        return self.body(x)


def _step(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()


def test_roots_are_timed_by_their_class_and_restored(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, other = Net(), Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stepscope.init(output=str(tmp_path), job="hooks"):
        rec = bootstrap.current().recorder  # type: ignore[union-attr]
        _step(model, opt)  # the first step finds the root (global hooks)
        assert "__call__" in Net.__dict__  # from now on: the class's __call__
        for _ in range(3):
            _step(model, opt)
        # no module hook anywhere: torch's fast path for every call
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
        before = rec.forward
        other(torch.randn(3, 4))  # same class, not a root: not timed
        assert rec.forward == before and not rec._in_forward
        model.fail = True
        with pytest.raises(RuntimeError, match="boom"):
            model(torch.randn(3, 4))
        assert not rec._in_forward and rec.forward > before  # closed all the same
        model.fail = False
        with torch.no_grad():
            model.eval()
            model(torch.randn(3, 4))  # an evaluation step ends with the root's forward
            model.train()
    assert "__call__" not in Net.__dict__ and Net.__call__ is nn.Module.__call__
    steps = stepscope.open(str(tmp_path / "hooks")).steps()
    train = steps[steps["phase"] == "train"]
    assert list(train["step"]) == [0, 1, 2, 3]
    assert (train["forward"] > 0).all() and (train["backward"] > 0).all()
    assert list(steps[steps["phase"] == "eval"]["step"]) == [0]


def test_a_class_that_defines_call_gets_its_own_back(tmp_path: Path) -> None:
    class Custom(Net):
        def __call__(self, *args: object, **kwargs: object) -> torch.Tensor:
            return super().__call__(*args, **kwargs) * 1.0

    own = Custom.__dict__["__call__"]
    model = Custom()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stepscope.init(output=str(tmp_path), job="own"):
        for _ in range(3):
            _step(model, opt)
        assert Custom.__dict__["__call__"] is not own
    assert Custom.__dict__["__call__"] is own


def test_per_step_path_holds_only_what_timing_needs(tmp_path: Path) -> None:
    """Off the step path until needed: loss wrapper, listeners, collectives' backward."""
    import torch.distributed as dist
    from torch.nn.modules.loss import _Loss
    from torch.testing._internal.distributed.fake_pg import FakeStore

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls: list[int] = []
    with stepscope.init(output=str(tmp_path), job="path"):
        agent = bootstrap.current()
        assert agent is not None
        rec = agent.recorder
        hooks_backward = torch.autograd.backward
        # a listener that asks for step 5, then for nothing: not called in between
        never = (1 << 62, 1 << 62)

        def listener(phase: str, step: int, t: float) -> tuple[int, int]:
            calls.append(step)
            return (5, never[1]) if step < 4 else never

        rec.listen(listener)
        for _ in range(8):
            _step(model, opt)
        # losses are saved every 500 steps by default: step 0 only, then no loss wrapper
        assert agent.tensors is not None and not agent.tensors.armed
        assert "__call__" not in _Loss.__dict__
        assert calls == [0, 4]  # the first boundary (listen() pokes), then step 5 is due
        rec.poke = True  # e.g. a live profiling request, from another thread
        _step(model, opt)
        assert calls == [0, 4, 8]
        # no process group: backward() is the step hooks' wrapper alone
        assert torch.autograd.backward is hooks_backward
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        try:
            assert torch.autograd.backward is not hooks_backward  # collectives wrap it
            _step(model, opt)
        finally:
            dist.destroy_process_group()
        assert torch.autograd.backward is hooks_backward
    assert "__call__" not in _Loss.__dict__
    assert torch.autograd.backward is not hooks_backward  # torch's own, restored
    train = stepscope.open(str(tmp_path / "path")).steps(phase="train")
    assert list(train["step"]) == list(range(10))


def test_backward_wrapper_passes_arguments_through_on_either_path() -> None:
    from collections import deque

    from stepscope.agent._faults import FaultBoundary
    from stepscope.agent._recorder import StepRecorder
    from stepscope.agent.frameworks._torch_timers import BACKWARD_SIGNATURE, StepTimers, signature
    from stepscope.store import open_store

    # this torch has the signature the fast path is written for (no **kwargs per step)
    assert signature(torch.autograd.backward) == BACKWARD_SIGNATURE
    rec = StepRecorder(deque())
    timers = StepTimers(rec, FaultBoundary(open_store("memory://timers"), {}))
    seen: list[tuple[object, ...]] = []

    def torch_like(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                   grad_variables=None, inputs=None):  # fmt: skip
        seen.append((tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs))

    def other(tensors, *, scale=1.0):  # type: ignore[no-untyped-def]
        seen.append((tensors, scale))
        return "done"

    timers.wrap_backward(torch_like)("loss", inputs=["w"], retain_graph=True)
    assert seen[-1] == ("loss", None, True, False, None, ["w"])
    assert timers.wrap_backward(other)("loss", scale=2.0) == "done"  # the generic path
    assert seen[-1] == ("loss", 2.0)
    assert rec.backward > 0.0  # both timed


class _Slow(nn.Module):
    """Each part of a step sleeps a known time: data 2 ms, forward 4, backward 6."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.004)
        return _SleepInBackward.apply(self.lin(x))


class _SleepInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(0.006)
        return grad


class _SlowSGD(torch.optim.SGD):
    def step(self, closure: object = None) -> None:  # type: ignore[override]
        time.sleep(0.008)
        super().step()


class _SlowData(torch.utils.data.Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.002)
        return torch.ones(4)


class _NoDevice:
    """A device timer that records nothing: sends every C hook down the recorder's methods."""

    def start(self, part: str) -> None: ...
    def end(self, part: str) -> None: ...
    def take(self) -> None:
        return None


@pytest.mark.parametrize("path", ["native", "native-slow", "python"])
def test_c_hooks_and_recorder_methods_split_a_step_alike(
    tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C hooks' common case and StepRecorder's methods time each part of a step
    alike: the methods run the Python hooks (``python``, the fallback) and the C
    hooks' other case (``native-slow``: a device timer and a data-loader window)."""
    if path == "python":
        monkeypatch.setattr(_recorder, "_native_class", lambda: None)
    model, loader = _Slow(), torch.utils.data.DataLoader(_SlowData(), batch_size=None)
    opt = _SlowSGD(model.parameters(), lr=0.01)
    with stepscope.init(output=str(tmp_path), job=path):
        rec = bootstrap.current().recorder  # type: ignore[union-attr]
        assert (_recorder.native_module(rec) is not None) == (path != "python")
        for i, x in enumerate(loader):
            if i == 2 and path == "native-slow":  # after the roots are found
                rec.device, rec.on_batch = _NoDevice(), lambda t0, t1: None  # type: ignore[assignment]
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            if i == 14:
                break
        rec.device = rec.on_batch = None
    steps = stepscope.open(str(tmp_path / path)).steps(phase="train").iloc[3:]
    # No wall-clock window (a loaded machine or `python -X dev` stretches every part):
    # what holds whatever the speed is that a sleep never ends early, so each part holds
    # at least its own sleep in every step, and that the parts never hold more than the
    # step (a part counted twice, or one part's time also in another, breaks that).
    # A part's sleep that lands in another part, or in "other", fails its own bound.
    slept = {"data_wait": 0.002, "forward": 0.004, "backward": 0.006, "optimizer": 0.008}
    eps = 1e-6  # the columns are float32
    assert len(steps) == 12
    for part, seconds in slept.items():
        assert (steps[part] >= seconds - eps).all(), (part, steps[part].min())
    parts = steps[list(slept)].sum(axis=1)
    assert (parts <= steps["duration"] + eps).all(), (parts - steps["duration"]).max()
    assert ((parts + steps["other"] - steps["duration"]).abs() < eps).all()  # other: the rest
    assert (steps["duration"] >= sum(slept.values()) - eps).all()
