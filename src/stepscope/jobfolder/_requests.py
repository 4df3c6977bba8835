"""Live profiling requests: the one parser the CLI, the dashboard and the agent share.

A ``profile`` request (``control.request_profile``) is JSON data, never code.
:func:`parse_request` checks it completely before anything runs: unknown keys,
wrong types, bad windows, too many windows and a missing pyinstrument are
rejected with the reason. A blank ``start_step`` means the next step to begin
(``step_offset`` steps after it when given), a blank ``num_steps`` one step; a
time window without ``start_unix_time`` starts at the first step boundary after
the job read the request (judged on arrival, never "already over"). Each window
is held to its kind's limits (``config.LIVE_WINDOW_LIMITS``).
"""

from __future__ import annotations

import importlib.util
import re
import time
from dataclasses import dataclass

from stepscope.config import (
    WINDOW_KINDS,
    ConfigError,
    ProfilingWindow,
    PythonProfiler,
    check_live_limits,
)
from stepscope.errors import RequestError

ENVELOPE = ("kind", "by", "time", "pid")
MAX_WINDOWS = 16
MAX_REGEX = 500
MAX_OFFSET = 1_000_000
OFF_KINDS = (*WINDOW_KINDS, "deep")


@dataclass
class Planned:
    """A window waiting to open: from the configuration, or from a live request."""

    window: ProfilingWindow
    request: str | None = None
    from_now: bool = False  # a live window with a blank start: the next boundary's
    offset: int = 0  # a live step window from now: starts this many steps later
    label: str = ""  # the artifacts' kind: the window's kind, or "deep"
    rotate_s: float | None = None  # deep profiling: a new chunk this often

    def __post_init__(self) -> None:
        self.label = self.label or self.window.kind


def describe(p: Planned) -> str:
    """``python (cprofile, cpu_time) steps 120-122``, for acknowledgements and logs."""
    w, what = p.window, p.label
    if w.kind == "python":
        what += f" ({w.python_profiler.value if w.python_profiler else 'cprofile'}"
        what += f", {w.cprofile_timer.value})" if w.cprofile_timer else ")"
    if w.is_time_window:
        length = f"{w.duration:g} s" if w.duration is not None else "one step"
        now = w.start_unix_time is None or p.from_now
        start = "now" if now else f"unix time {w.start_unix_time:.1f}"
        return f"{what} for {length} from {start}"
    return f"{what} steps {w.start_step}-{(w.end_step or 1) - 1}"


@dataclass(frozen=True)
class LiveRequest:
    """A validated ``profile`` request."""

    name: str
    windows: tuple[Planned, ...]
    off: tuple[str, ...]


def _window(raw: object, name: str, now: float) -> Planned:
    if not isinstance(raw, dict):
        raise RequestError(f"a window must be a JSON object, not {type(raw).__name__}")
    data = dict(raw)
    regex = data.get("metrics_regex")
    if regex is not None:
        _check_regex(regex)
    offset = _offset(data.pop("step_offset", None), data)
    timed = data.get("start_unix_time") is not None or data.get("duration") is not None
    from_now = data.get("start_step") is None if not timed else data.get("start_unix_time") is None
    if from_now and not timed:
        data["start_step"] = 0  # resolved to the next step when the window is applied
    if from_now and timed:
        data["start_unix_time"] = now  # resolved to the boundary that opens it
    try:
        window = ProfilingWindow.from_dict(data, section="control profile request")
        check_live_limits(window)
    except (ConfigError, TypeError, ValueError) as exc:
        raise RequestError(str(exc)) from None
    if window.python_profiler is PythonProfiler.PYINSTRUMENT and not _has_pyinstrument():
        raise RequestError("pyinstrument is not installed: pip install 'stepscope[profiling]'")
    return Planned(window, request=name, from_now=from_now, offset=offset)


def _offset(value: object, data: dict[str, object]) -> int:
    """``step_offset``: a step window starting that many steps after the next one."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise RequestError(f"step_offset must be a whole number from 0 to {MAX_OFFSET:,}")
    if any(data.get(k) is not None for k in ("start_step", "start_unix_time", "duration")):
        raise RequestError("step_offset goes with a blank start_step, in a step window")
    return value


def _check_regex(regex: object) -> None:
    if not isinstance(regex, str) or len(regex) > MAX_REGEX:
        raise RequestError(
            f"metrics_regex must be a regular expression of at most {MAX_REGEX} "
            "characters, e.g. '.*'"
        )
    try:
        re.compile(regex)
    except re.error as exc:
        raise RequestError(
            f"metrics_regex {regex!r} does not compile ({exc}); escape special "
            "characters with a backslash"
        ) from None


def _has_pyinstrument() -> bool:
    return importlib.util.find_spec("pyinstrument") is not None


def parse_request(name: str, body: object, now: float | None = None) -> LiveRequest:
    """The request ``body`` checked completely; RequestError says what is wrong."""
    if not isinstance(body, dict):
        raise RequestError("the request is not a JSON object")
    unknown = sorted(set(body) - {*ENVELOPE, "windows", "off"})
    if unknown:
        raise RequestError(
            f"unknown key(s) {', '.join(map(repr, unknown))}; valid keys: 'windows', 'off'"
        )
    windows, off = body.get("windows") or [], body.get("off") or []
    if not isinstance(windows, list) or not isinstance(off, list):
        raise RequestError("'windows' and 'off' must be lists")
    if not windows and not off:
        raise RequestError("nothing asked: give 'windows' to open or kinds to switch 'off'")
    if len(windows) > MAX_WINDOWS:
        raise RequestError(f"{len(windows)} windows in one request; at most {MAX_WINDOWS}")
    bad = [k for k in off if k not in OFF_KINDS]
    if bad:
        raise RequestError(f"unknown kind(s) to switch off {bad!r}; valid: {', '.join(OFF_KINDS)}")
    t = time.time() if now is None else now
    planned = tuple(_checked(w, name, t) for w in windows)
    return LiveRequest(name, planned, tuple(dict.fromkeys(off)))


def _checked(raw: object, name: str, now: float) -> Planned:
    """One window; nothing but RequestError escapes (the request is data from anyone)."""
    try:
        return _window(raw, name, now)
    except RequestError:
        raise
    except Exception as exc:
        raise RequestError(f"a window cannot be read: {type(exc).__name__}: {exc}") from None
