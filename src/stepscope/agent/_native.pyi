"""Types of the C extension agent/_native.c (with agent/_stepbuf.c), for the type checker."""

from collections.abc import Callable
from typing import Any, Final

from stepscope.agent._cuda import DeviceTimer
from stepscope.agent._recorder import Listener, RowSink, StepRow
from stepscope.agent._stepbuf import StepColumns
from stepscope.agent.profilers._workers import WorkerFetchTimer

NEXT: Final[int]
BACKWARD: Final[int]
CALL: Final[int]
OPT_PRE: Final[int]
OPT_POST: Final[int]

class RecorderState:
    """StepRecorder's per-step fields as C values (same names and types)."""

    data: float
    forward: float
    backward: float
    optimizer: float
    collective: float
    collective_outside: float
    boundary: float | None
    train_steps: int
    eval_steps: int
    profiled: bool
    poke: bool
    rows: RowSink
    on_batch: Callable[[float, float], None] | None
    deferred: Callable[[], None] | None
    device: DeviceTimer | None
    worker_fetch: WorkerFetchTimer | None
    listeners: list[Listener]
    _opt_start: float
    _fwd_start: float
    _due_train: int
    _due_eval: int
    _opt_depth: int
    _root_depth: int
    _in_forward: bool
    _hooks_pending: bool
    def _emit(self, phase: str, step: int, t: float, /) -> None: ...

class Hook:
    """A timed callable or torch hook of one kind (agent/_native_hooks.py builds them)."""

    kind: Final[int]
    __wrapped__: Final[Callable[..., object] | None]
    def __init__(
        self,
        kind: int,
        rec: RecorderState,
        original: Callable[..., object] | None = None,
        slow: Callable[..., object] | None = None,
        slow2: Callable[..., object] | None = None,
        extra: object = None,
        grad_enabled: Callable[[], bool] | None = None,
        record: Callable[[BaseException], None] | None = None,
    ) -> None: ...
    # Whatever the wrapped callable returns (a torch hook's None, a forward's output).
    def __call__(self, *args: object, **kwargs: object) -> Any: ...

class StepBuffer:
    """A rank's step rows as C arrays (agent/_stepbuf.py: StepSink)."""

    def __len__(self) -> int: ...
    def append(self, row: StepRow, /) -> None: ...
    def take(self, wall0: float, perf0: float, /) -> StepColumns | None: ...
