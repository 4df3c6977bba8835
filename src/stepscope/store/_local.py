"""Local job folders without fsspec: the few calls a :class:`~stepscope.store.Store`
makes, on ``os`` directly.

Importing fsspec (with asyncio) costs about 0.1 s of CPU in every process that opens
a store: the launcher, the sampler, the live rule runner and the agent each did, for
a local folder, where the calls below are all a store needs (issue 32). Paths are
named as fsspec's ``LocalFileSystem`` names them (absolute, unnormalised), so keys
and paths are the same whichever backend serves them; ``Store.fs`` still gives that
filesystem, made on first use (pyarrow datasets take one).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import Protocol

LOCAL_PROTOCOLS = ("file", "local")


class Files(Protocol):
    """What a Store calls on its backend (fsspec's names and meanings)."""

    @property
    def protocol(self) -> str | tuple[str, ...]: ...

    def cat_file(self, path: str) -> bytes: ...
    def exists(self, path: str) -> bool: ...
    def isdir(self, path: str) -> bool: ...
    def find(self, path: str) -> list[str]: ...
    def ls(self, path: str, detail: bool = ...) -> list[str]: ...
    def rm(self, path: str, recursive: bool = ...) -> None: ...
    def invalidate_cache(self, path: str | None = ...) -> None: ...


def local_root(url: str) -> str | None:
    """The folder of ``url`` if it is local (a path, ``file://``, ``local://``), as
    fsspec's ``url_to_fs`` gives it; None for any other URL (fsspec opens those)."""
    if "::" in url or url.startswith("data:"):  # fsspec's chained URLs, data URLs
        return None
    protocol, sep, rest = url.partition("://")
    if sep and len(protocol) > 1:  # "c://" would be a Windows drive, not a protocol
        if protocol not in LOCAL_PROTOCOLS:
            return None
        url = rest
    else:
        url = next((url[len(p) + 1 :] for p in LOCAL_PROTOCOLS if url.startswith(p + ":")), url)
    return _absolute(url).rstrip("/") or "/"


def _absolute(path: str) -> str:
    """fsspec's ``make_path_posix`` on POSIX: absolute, ``~`` expanded, not normalised."""
    if path.startswith("/"):
        return path
    if path.startswith("~"):
        return os.path.expanduser(path)
    if path.startswith("./"):
        path = path[2:]
    elif path == ".":
        path = ""
    return f"{os.getcwd()}/{path}"


class LocalFiles:
    """The calls of :class:`Files` on the local disk, as fsspec's local filesystem answers them."""

    protocol: tuple[str, ...] = LOCAL_PROTOCOLS

    def cat_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def find(self, path: str) -> list[str]:
        """Every file under ``path`` (a missing or unreadable folder: none)."""
        return [
            posixpath.join(folder, name)
            for folder, _, names in os.walk(path, followlinks=True)
            for name in names
        ]

    def ls(self, path: str, detail: bool = False) -> list[str]:
        """The children of a folder; a file lists itself; a missing path raises."""
        if not os.path.isdir(path):
            if not os.path.lexists(path):
                raise FileNotFoundError(path)
            return [path]
        return [posixpath.join(path, name) for name in os.listdir(path)]

    def rm(self, path: str, recursive: bool = False) -> None:
        if recursive and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        """Nothing is cached."""
