"""Caches that make many viewers cheap: answers by key, summaries by bytes.

:class:`Answers` keeps computed answers (chart JSON) by a key that includes the
stream's signature (:mod:`._streams`), so a stale answer is never served;
concurrent requests for the same key wait for one computation instead of
repeating it. :class:`Sized` keeps the per-segment summaries of :mod:`._reduce`,
bounded by their total size in bytes, least recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar, cast

T = TypeVar("T")
V = TypeVar("V")
MAX_ANSWERS = 512
MAX_SUMMARY_BYTES = 256 * 2**20  # a 24-h node: ~40 MB (its segments and their combination)


class HasBytes(Protocol):
    @property
    def nbytes(self) -> int: ...


S = TypeVar("S", bound=HasBytes)


_MISSING = object()


class _Lru(Generic[V]):
    """The part both caches share: a lock, values in use order, hit counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self.hits = self.misses = 0

    def _hit(self, key: Hashable) -> V | object:
        """The value of ``key`` made most recent, or ``_MISSING`` (hold the lock)."""
        if key not in self._values:
            return _MISSING
        self.hits += 1
        self._values.move_to_end(key)
        return self._values[key]


class Answers(_Lru[object]):
    """A bounded LRU of computed answers with one computation per key at a time.

    A key's answer is made by one ``compute`` only (the key names what is computed),
    so the value found under it is of that ``compute``'s type.
    """

    def __init__(self, max_entries: int = MAX_ANSWERS) -> None:
        super().__init__()
        self._busy: dict[Hashable, threading.Lock] = {}
        self.max_entries = max_entries

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached answer for ``key``, computing it (once) when missing."""
        with self._lock:
            found = self._hit(key)
            if found is not _MISSING:
                return cast(T, found)
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            with self._lock:
                found = self._hit(key)
                if found is not _MISSING:
                    return cast(T, found)
            self.misses += 1
            value = compute()
            with self._lock:
                self._values[key] = value
                self._busy.pop(key, None)
                while len(self._values) > self.max_entries:
                    self._values.popitem(last=False)
        return value


class Sized(_Lru[HasBytes]):
    """A LRU of values with an ``nbytes``, holding at most ``max_bytes`` of them.

    As in :class:`Answers`, a key's value is made by one ``compute`` only.
    """

    def __init__(self, max_bytes: int = MAX_SUMMARY_BYTES) -> None:
        super().__init__()
        self.max_bytes, self.nbytes = max_bytes, 0

    def get(self, key: Hashable, compute: Callable[[], S]) -> S:
        """The cached value of ``key``, else ``compute()`` (kept if it fits)."""
        with self._lock:
            found = self._hit(key)
            if found is not _MISSING:
                return cast(S, found)
            self.misses += 1
        value = compute()  # outside the lock: parts are summarized in parallel
        with self._lock:
            if key not in self._values and value.nbytes <= self.max_bytes:
                self._values[key] = value
                self.nbytes += value.nbytes
            while self.nbytes > self.max_bytes:
                _, gone = self._values.popitem(last=False)
                self.nbytes -= gone.nbytes
        return value
