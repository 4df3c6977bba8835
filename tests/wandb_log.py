"""Reads a W&B offline run's ``.wandb`` file (a LevelDB-style log of protobuf
``Record``s): the Python reader wandb once shipped (``sdk.internal.datastore``) is
gone, the format is small and stable."""

from __future__ import annotations

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
