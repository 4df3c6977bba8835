"""One storage interface for job folders: local folders, memory, S3-compatible stores.

The backend is chosen by URL scheme through fsspec (``url_to_fs``), so every
reader and writer in stepscope speaks to a :class:`Store` and never to a
particular filesystem; a local folder is served by ``os`` (:mod:`._local`: no
fsspec import). Keys are ``/``-separated paths relative to the store's root.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import os
import posixpath
from collections.abc import Iterator
from typing import TYPE_CHECKING

from stepscope.errors import StoreError
from stepscope.store._files import overwrite_in_place, write_atomic
from stepscope.store._local import Files, LocalFiles, local_root
from stepscope.store._remote import REMOTE_HINT, missing_extra, storage_options

TMP_MARKER = ".tmp-"
# Object stores are written and polled at most this often by each periodic loop
# (segment flushes, heartbeats, control polls): see docs/storage.md.
REMOTE_MIN_INTERVAL_S = 10.0
_LOCALISH = ("file", "local", "memory")

if TYPE_CHECKING:
    import fsspec
    import pyarrow as pa


class Store:
    """A folder of a filesystem, addressed by relative keys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._fs: fsspec.AbstractFileSystem | None = None
        root = local_root(url)
        if root is None:
            self._fs, root = _fsspec(url)
            self._files: Files = self._fs
        else:
            self._files = LocalFiles()
        self.root: str = root.rstrip("/")
        self.is_local = isinstance(self._files, LocalFiles)
        proto = self._files.protocol
        self.is_remote = not any(
            p in _LOCALISH for p in ((proto,) if isinstance(proto, str) else proto)
        )
        self._root_made = self.is_local and os.path.isdir(self.root)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The store's fsspec filesystem (for libraries that take one: pyarrow); a local
        folder's is made on first use."""
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs = LocalFileSystem()
        return self._fs

    @property
    def min_interval_s(self) -> float:
        """The shortest period of a loop that writes or polls this store (0: none)."""
        return REMOTE_MIN_INTERVAL_S if self.is_remote else 0.0

    @contextlib.contextmanager
    def _errors(self, what: str, key: str) -> Iterator[None]:
        """Errors of remote clients (botocore's are not OSErrors) as StoreError."""
        try:
            yield
        except (FileNotFoundError, StoreError):
            raise
        except Exception as exc:
            if not self.is_remote:
                raise
            where = f"{self.url.rstrip('/')}/{key}" if key else self.url
            raise StoreError(
                f"Cannot {what} {where}: {type(exc).__name__}: {exc}. {REMOTE_HINT}"
            ) from exc

    def ready_for_exit(self) -> None:
        """Let a remote client keep working in ``atexit`` handlers (the agent's last flush).

        Once the interpreter's exit has begun, thread pools refuse work, and the
        async S3 client hands DNS lookups and its connection setup to one: its
        event loop runs them inline instead from now on.
        """
        loop = getattr(self._fs, "loop", None)  # fsspec's async filesystems have one
        if self.is_remote and loop is not None:
            from stepscope.store._inline import InlineExecutor

            loop.set_default_executor(InlineExecutor(max_workers=1))

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
        child._fs, child._files = self._fs, self._files
        child.root, child.is_local = self.path(key), self.is_local
        child.is_remote, child._root_made = (
            self.is_remote,
            self.is_local and os.path.isdir(child.root),
        )
        return child

    def keep_root(self) -> Store:
        """Never make this store's local folder (an existing job folder: a writer
        must not bring it back without its job.json once it is deleted)."""
        self._root_made = self.is_local
        return self

    def write_bytes(self, key: str, data: bytes) -> None:
        """Write a whole file atomically: readers see the old or the new content.
        A local folder that existed when this store was opened (or was made by its
        first write) is not made again if it is deleted: :class:`FolderGoneError`."""
        full = self.path(key)
        if self.is_local:
            # a job folder that existed is never made again (deleted mid-run: a
            # FolderGoneError); one that never did is made by its first write
            root = self.root if self._root_made else None
            write_atomic(full, f"{full}{TMP_MARKER}{os.getpid()}", data, root)
            self._root_made = True
        else:
            with self._errors("write", key):
                self.fs.pipe_file(full, data)

    def read_bytes(self, key: str) -> bytes:
        with self._errors("read", key):
            return bytes(self._files.cat_file(self.path(key)))

    def read_many(self, keys: builtins.list[str]) -> builtins.list[bytes]:
        """Whole files, in the order of ``keys``; object stores fetch them concurrently."""
        if not keys:
            return []
        paths = [self.path(k) for k in keys]
        if not self.is_remote:
            return [self._files.cat_file(p) for p in paths]
        more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
        with self._errors("read", f"{keys[0]}{more}"):
            found: dict[str, bytes] = self.fs.cat(paths, on_error="raise")
        return [found[p] for p in paths]

    def arrow_sources(self, keys: builtins.list[str]) -> builtins.list[str | pa.BufferReader]:
        """What Arrow reads for each key: its path on a local disk, else its bytes
        fetched and copied into Arrow's memory (never a Python file or ``bytes``:
        :func:`~stepscope.store.arrow_reader` says why)."""
        if self.is_local:
            return [self.path(k) for k in keys]
        from stepscope.store._segments import arrow_reader

        return [arrow_reader(data) for data in self.read_many(keys)]

    def write_json(self, key: str, obj: object, reserve: int = 0) -> None:
        """Write ``obj`` (JSON-serialisable) as ``key``, atomically. ``reserve``: pad the
        file with spaces to this many bytes, so that a local disk that is full later can
        still take a rewrite of it in place (the job's end on a full disk; local only)."""
        text = json.dumps(obj, indent=1, sort_keys=True).encode()
        try:
            self.write_bytes(key, text.ljust(reserve) if self.is_local else text)
        except OSError as exc:
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            if not (full and self.is_local and overwrite_in_place(self.path(key), text)):
                raise

    def read_json(self, key: str) -> object:
        """The JSON document ``key``, not yet validated: narrow it before use."""
        return json.loads(self.read_bytes(key))

    def exists(self, key: str) -> bool:
        with self._errors("look up", key):
            return bool(self._files.exists(self.path(key)))

    def isdir(self, key: str = "") -> bool:
        with self._errors("look up", key):
            return bool(self._files.isdir(self.path(key)))

    def list(self, prefix: str = "", suffix: str = "") -> builtins.list[str]:
        """Keys of all files under ``prefix`` (recursively), sorted, temporaries skipped."""
        base = self.path(prefix)
        self._files.invalidate_cache(base)
        with self._errors("list", prefix):
            found = [p for p in self._find(base) if p.rstrip("/") != base]
        keys = [posixpath.relpath(p, self.root) for p in found]
        return sorted(k for k in keys if TMP_MARKER not in k and k.endswith(suffix))

    def _find(self, base: str) -> builtins.list[str]:
        """Files under ``base`` in one listing request (no isdir() first).

        s3fs's ``find`` of an empty folder also asks whether it is a file (two more
        requests), unless given a key prefix: the control/ polls are mostly empty.
        """
        bucket, _, key = base.partition("/")
        if self.is_remote and key and "s3" in self._files.protocol:
            found: builtins.list[str] = self.fs.find(bucket, prefix=key + "/")
            return found
        return list(self._files.find(base))

    def listdir(self, prefix: str = "") -> builtins.list[str]:
        """Names of the direct children of ``prefix`` (files and folders)."""
        base = self.path(prefix)
        self._files.invalidate_cache(base)
        try:
            with self._errors("list", prefix):
                listed = self._files.ls(base, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = [posixpath.basename(p.rstrip("/")) for p in listed if p.rstrip("/") != base]
        return sorted(n for n in names if TMP_MARKER not in n)

    def delete(self, key: str) -> None:
        if self._files.exists(self.path(key)):
            self._files.rm(self.path(key), recursive=True)


def _fsspec(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """fsspec's filesystem for ``url`` (memory://, s3://, ...) and the path in it."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url, **storage_options(url))
    except (ImportError, ValueError) as exc:
        raise missing_extra(url, exc) from exc
    if hasattr(fs, "retries"):
        fs.retries = 1  # s3fs's own retry loop on top of botocore's: one attempt
    return fs, str(root)


def open_store(url: str | os.PathLike[str]) -> Store:
    """The store for a local path or URL (``memory://x``, ``s3://bucket/prefix``)."""
    return Store(os.fspath(url))
