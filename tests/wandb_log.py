"""Reads a W&B offline run's ``.wandb`` file (a LevelDB-style log of protobuf
``Record``s): the Python reader wandb once shipped (``sdk.internal.datastore``) is
gone, the format is small and stable."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

BLOCK = 32768
HEADER = 7  # crc32c (4), length (2), type (1)
FILE_HEADER = 7  # b":W&B", magic (2), version (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    pos, chunks = FILE_HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        body = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            yield body
        elif kind == FIRST:
            chunks = body
        elif kind == MIDDLE:
            chunks += body
        elif kind == LAST:
            yield chunks + body
        elif kind == 0 and length == 0:
            break


def run_records(path: Path) -> list[object]:
    """The ``.wandb`` file's records, parsed (``wandb_internal_pb2.Record``)."""
    from wandb.proto import wandb_internal_pb2 as pb

    parsed = []
    for data in records(path):
        rec = pb.Record()
        rec.ParseFromString(data)
        parsed.append(rec)
    return parsed


def logged(path: Path) -> list[tuple[str, dict[str, object]]]:
    """The run's history rows and summary updates, in order: (kind, key -> value)."""
    out = []
    for rec in run_records(path):
        kind = rec.WhichOneof("record_type")  # type: ignore[attr-defined]
        if kind in ("history", "summary"):
            items = rec.history.item if kind == "history" else rec.summary.update  # type: ignore[attr-defined]
            out.append((kind, {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                               for i in items}))  # fmt: skip
    return out
