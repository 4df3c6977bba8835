"""Where each of the predecessor's system metrics goes in stepscope's wide rows.

A line is ``{"Type", "Name", "Dimension", "Value", "Timestamp"}`` (docs/sagemaker.md).
Its (Type, Name, Dimension) key is placed in one column with an aggregation over the
keys that share it: ``mean`` (per-core I/O wait -> ``cpu_iowait``) or ``sum`` (the
network's ``Algorithm`` and ``Platform`` traffic -> ``net_rx_bps``). Keys with no
place (``IOPS``, anything unknown) are counted, never dropped silently.

I/O wait is placed whatever its metric's name: any key whose name or dimension
says I/O wait (``I/OWaitPercentage``, ``IOWait``, ``iowait``; per core ``cpu<i>`` or
the node's ``cpu``) goes to ``cpu_iowait``. The mean of the cores' values and of
the node's (their mean) is the node's, so a source with both gives the same column.
A node-wide ``cpu``/``CPUUtilization`` fills ``cpu`` where no core is reported.
"""

from __future__ import annotations

import re
from typing import Literal

Agg = Literal["mean", "sum"]
Placement = tuple[str, Agg]

_CORE = re.compile(r"cpu(\d+)$")
_CPU = re.compile(r"cpu(\d*)$", re.IGNORECASE)  # a core's name, or the node's ("cpu")
_GPU = re.compile(r"gpu(\d+)$")
_BY_NAME: dict[str, Placement] = {
    "MemoryUsedPercent": ("mem_percent", "mean"),
    "ReadThroughputInBytesPerSecond": ("disk_read_bps", "sum"),
    "WriteThroughputInBytesPerSecond": ("disk_write_bps", "sum"),
    "ReceiveBytesPerSecond": ("net_rx_bps", "sum"),
    "TransmitBytesPerSecond": ("net_tx_bps", "sum"),
}
_GPU_DIMENSIONS = {"GPUUtilization": "util", "GPUMemoryUtilization": "mem_util"}
# Float64 columns (bytes and bytes/s); every other placed column is a float32 percentage.
WIDE_64 = {"disk_read_bps", "disk_write_bps", "net_rx_bps", "net_tx_bps"}
SEP = "\x1f"  # joins Type, Name and Dimension into one key: never inside a metric name


def place(key: str) -> Placement | None:
    """The column and aggregation of a ``Type<SEP>Name<SEP>Dimension`` key, or None."""
    _, name, dim = [*key.split(SEP), "", ""][:3]
    if "iowait" in _plain(name) or "iowait" in _plain(dim):
        return ("cpu_iowait", "mean")
    if core := _CPU.match(name):
        if _plain(dim) in ("cpuutilization", "utilization"):
            return (f"cpu{core.group(1)}", "mean")
        return None
    if (gpu := _GPU.match(name)) and dim in _GPU_DIMENSIONS:
        return (f"gpu{gpu.group(1)}_{_GPU_DIMENSIONS[dim]}", "mean")
    return _BY_NAME.get(name) or _BY_NAME.get(dim)


def _plain(text: str) -> str:
    """Lower-case letters only: ``I/OWaitPercentage`` -> ``iowaitpercentage``."""
    return re.sub(r"[^a-z]", "", text.lower())


def describe(key: str) -> str:
    """A key as the import summary lists it: ``type/name/dimension``."""
    return "/".join(key.split(SEP))


def column_order(columns: set[str]) -> list[str]:
    """The placed columns in docs/format.md's order: cpu, cores, memory, disk, net, GPUs."""

    def rank(col: str) -> tuple[int, int, str]:
        if col == "cpu_iowait":
            return (0, 0, col)
        if m := _CORE.match(col):
            return (1, int(m.group(1)), col)
        if m := re.match(r"gpu(\d+)_", col):
            return (4, int(m.group(1)), col)
        return (2 if not col.startswith("net") else 3, 0, col)

    return sorted(columns, key=rank)
