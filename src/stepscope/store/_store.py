"""One storage interface for job folders: local folders, memory, S3-compatible stores.

The backend is chosen by URL scheme through fsspec (``url_to_fs``), so every
reader and writer in stepscope speaks to a :class:`Store` and never to a
particular filesystem. Keys are ``/``-separated paths relative to the store's root.
"""

from __future__ import annotations

import builtins
import json
import os
import posixpath
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

TMP_MARKER = ".tmp-"


class StoreError(OSError):
    """A store could not be opened or a key could not be read or written."""


def _missing_extra(url: str, exc: Exception) -> StoreError:
    scheme = url.split("://", 1)[0]
    if scheme in ("s3", "s3a"):
        hint = "pip install 'stepscope[s3]'"
        return StoreError(f"Cannot open {url!r}: S3 support is an extra. Install it with: {hint}")
    return StoreError(f"Cannot open {url!r}: {exc}")


class Store:
    """A folder of a filesystem, addressed by relative keys."""

    def __init__(self, url: str) -> None:
        try:
            fs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise _missing_extra(url, exc) from exc
        self.url = url
        self.fs: fsspec.AbstractFileSystem = fs
        self.root: str = root.rstrip("/")
        self.is_local = isinstance(fs, LocalFileSystem)

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def path(self, key: str = "") -> str:
        """Full path of ``key`` inside the backend's namespace."""
        return posixpath.join(self.root, key) if key else self.root

    def local_path(self, key: str = "") -> str | None:
        """A path on the local disk for ``key``, or None on remote stores."""
        return self.path(key) if self.is_local else None

    def sub(self, key: str) -> Store:
        """The store rooted at ``key`` (for example one job of an output folder)."""
        child = Store.__new__(Store)
        child.url = self.url.rstrip("/") + "/" + key
        child.fs, child.root, child.is_local = self.fs, self.path(key), self.is_local
        return child

    def write_bytes(self, key: str, data: bytes) -> None:
        """Write a whole file atomically: readers see the old or the new content."""
        full = self.path(key)
        if self.is_local:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            tmp = f"{full}{TMP_MARKER}{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, full)
        else:
            self.fs.pipe_file(full, data)

    def read_bytes(self, key: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            raise
        return data

    def write_json(self, key: str, obj: Any) -> None:
        self.write_bytes(key, json.dumps(obj, indent=1, sort_keys=True).encode())

    def read_json(self, key: str) -> Any:
        return json.loads(self.read_bytes(key))

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self.path(key)))

    def isdir(self, key: str = "") -> bool:
        return bool(self.fs.isdir(self.path(key)))

    def list(self, prefix: str = "", suffix: str = "") -> builtins.list[str]:
        """Keys of all files under ``prefix`` (recursively), sorted, temporaries skipped."""
        base = self.path(prefix)
        if not self.fs.isdir(base):
            return []
        self.fs.invalidate_cache(base)
        found = self.fs.find(base)
        keys = [posixpath.relpath(p, self.root) for p in found]
        return sorted(k for k in keys if TMP_MARKER not in k and k.endswith(suffix))

    def listdir(self, prefix: str = "") -> builtins.list[str]:
        """Names of the direct children of ``prefix`` (files and folders)."""
        base = self.path(prefix)
        if not self.fs.isdir(base):
            return []
        self.fs.invalidate_cache(base)
        names = [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(base, detail=False)]
        return sorted(n for n in names if TMP_MARKER not in n)

    def delete(self, key: str) -> None:
        if self.fs.exists(self.path(key)):
            self.fs.rm(self.path(key), recursive=True)


def open_store(url: str | os.PathLike[str]) -> Store:
    """The store for a local path or URL (``memory://x``, ``s3://bucket/prefix``)."""
    return Store(os.fspath(url))
