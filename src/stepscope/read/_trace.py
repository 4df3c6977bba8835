"""The device side of a PyTorch profiler trace (Chrome trace JSON, gzipped or not).

Keeps only what the kernel breakdown needs, as small tuples, while the document is
walked once: device activity (kernels, copies, memsets), the host's launches (their
correlation id) and the host operators (to name who launched a kernel and what the
host ran while the GPU was idle). Everything else is dropped as it is met.
Times are microseconds, as in the trace.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

# Chrome-trace categories of device activity (Kineto's names)
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# host events that name what the host was doing: operators and user annotations...
_OP_CATS = ("cpu_op", "user_annotation")
# ...and the CUDA API calls (a sync, a launch) that run inside them
_API_CATS = ("cuda_runtime", "cuda_driver")
_SPACE, _BETWEEN = " \t\r\n", " \t\r\n,"
_DEVICE = re.compile(r'"id"\s*:\s*(\d+)\s*,\s*"name"\s*:\s*"([^"]*)"')
_SKIPS = {chars: re.compile(f"[{re.escape(chars)}]*") for chars in (_SPACE, _BETWEEN)}


class DeviceEvent(NamedTuple):
    """One kernel, copy or memset on the device."""

    cat: str
    name: str
    start: float
    dur: float
    device: int
    stream: int
    correlation: int | None
    bytes: int | None
    memory: str | None  # "pageable" or "pinned" for a copy that says so, else None


class ShapedOp(NamedTuple):
    """A host operator recorded with its inputs' shapes (``record_shapes``) or its
    FLOP count (``with_flops``, where the export keeps it): what efficiency reads."""

    name: str
    tid: str
    start: float
    end: float
    dims: list[object]  # "Input Dims": one list per input ([] for a scalar)
    types: list[object]  # "Input type": "float", "c10::BFloat16", "Scalar", ...
    concrete: list[object]  # "Concrete Inputs": scalar arguments as text ("[1, 1]")
    flops: float | None


class HostEvent(NamedTuple):
    """One host operator or CUDA API call, on its thread."""

    name: str
    tid: str
    start: float
    end: float
    is_api: bool


@dataclass
class Trace:
    """What the breakdown reads of one trace."""

    device: list[DeviceEvent] = field(default_factory=list)
    host: list[HostEvent] = field(default_factory=list)
    launches: dict[int, tuple[str, float]] = field(default_factory=dict)  # corr -> tid, ts
    shaped: list[ShapedOp] = field(default_factory=list)
    # "deviceProperties" of the document's head: device index -> name ("NVIDIA H200")
    device_names: dict[int, str] = field(default_factory=dict)


def load_trace(data: bytes) -> Trace:
    """Parse a trace's bytes (gzip is detected by its magic number).

    The events are decoded one at a time and dropped unless kept, so the memory is the
    document's text and what is kept, not the whole document's objects.
    Raises ``ValueError`` for a document that is not a Chrome trace.
    """
    if data[:2] == b"\x1f\x8b":  # decompressed straight into text: no second copy
        with io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(data)), "utf-8") as f:
            text = f.read()
    else:
        text = data.decode()
    trace = Trace(device_names=_device_names(text))
    _collect(trace, _events(text))
    return trace


def _events(text: str) -> Iterator[object]:
    """The items of the document's ``traceEvents`` list, decoded one by one."""
    decoder = json.JSONDecoder()
    at = _list_start(text)
    if at is None:  # an unusual layout (the key inside a string...): decode it whole
        doc = json.loads(text)
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(events, list):
            raise ValueError("not a Chrome trace: no traceEvents list")
        yield from events
        return
    while True:
        at = _skip(text, at, _BETWEEN)
        if at >= len(text):
            raise ValueError("not a Chrome trace: its traceEvents list is cut short")
        if text[at] == "]":
            return
        item, at = decoder.raw_decode(text, at)
        yield item


def _device_names(text: str) -> dict[int, str]:
    """The devices Kineto lists before the events (its head is a few kB)."""
    key = text.find('"traceEvents"')
    head = text[: key if key >= 0 else 0]
    found = _DEVICE.findall(head[head.find('"deviceProperties"') :])
    return {int(i): name for i, name in found}


def _list_start(text: str) -> int | None:
    """Where the first item of ``"traceEvents": [`` starts (None: not found)."""
    key = text.find('"traceEvents"')
    if key < 0:
        return None
    at = _skip(text, key + len('"traceEvents"'), _SPACE)
    if not text.startswith(":", at):
        return None
    at = _skip(text, at + 1, _SPACE)
    return at + 1 if text.startswith("[", at) else None


def _skip(text: str, at: int, chars: str) -> int:
    found = _SKIPS[chars].match(text, at)  # `*`: always matches, maybe empty
    return found.end() if found else at


def _collect(trace: Trace, events: Iterable[object]) -> None:
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        start, dur = _num(e.get("ts")), _num(e.get("dur"))
        if start is None or dur is None:
            continue
        raw = e.get("args")
        args: dict[str, object] = raw if isinstance(raw, dict) else {}
        name = str(e.get("name", ""))
        if cat in DEVICE_CATS:
            trace.device.append(_device_event(str(cat), name, start, dur, args))
        elif cat in _OP_CATS or cat in _API_CATS:
            tid = f"{e.get('pid')}/{e.get('tid')}"
            if cat == "cpu_op" and ("Input Dims" in args or "flops" in args):
                trace.shaped.append(_shaped(name, tid, start, dur, args))
            trace.host.append(HostEvent(name, tid, start, start + dur, cat in _API_CATS))
            corr = _int(args.get("correlation"))
            if cat in _API_CATS and corr is not None:
                trace.launches[corr] = (tid, start)


def _device_event(
    cat: str, name: str, start: float, dur: float, args: dict[str, object]
) -> DeviceEvent:
    return DeviceEvent(
        cat,
        name,
        start,
        dur,
        _int(args.get("device")) or 0,
        _int(args.get("stream")) or 0,
        _int(args.get("correlation")),
        _int(args.get("bytes")) if cat == "gpu_memcpy" else None,
        _memory_kind(name, args) if cat == "gpu_memcpy" else None,
    )


def _shaped(name: str, tid: str, start: float, dur: float, args: dict[str, object]) -> ShapedOp:
    def listed(key: str) -> list[object]:
        value = args.get(key)
        return value if isinstance(value, list) else []

    flops = _num(args.get("flops"))
    return ShapedOp(
        name,
        tid,
        start,
        start + dur,
        listed("Input Dims"),
        listed("Input type"),
        listed("Concrete Inputs"),
        flops,
    )


def _memory_kind(name: str, args: dict[str, object]) -> str | None:
    """Kineto names a copy's host side ("Memcpy HtoD (Pageable -> Device)"); some
    versions put it in the args too. Neither said: unknown."""
    texts = [name, *(str(v) for v in args.values() if isinstance(v, str))]
    for text in texts:
        if "Pageable" in text:
            return "pageable"
        if "Pinned" in text:
            return "pinned"
    return None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
