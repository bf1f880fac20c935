"""A memo for values derived from objects a rules version loaded and never changes, found by identity."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """Values derived from an object the rules loaded and never change (Assumptions, a catalog Gpu, a Program's
    rule tuple), found by the object's identity: a frozen dataclass's own hash walks every field (a Gpu's every
    price row) each time, and Assumptions holds a dict, so it has none. Each entry holds its object, so an id is
    not reused while the entry lives; `limit` bounds what a process that reloads its rules many times keeps."""

    def __init__(self, build: Callable[[K], V], limit: int) -> None:
        self._build = build
        self._limit = limit
        self._items: dict[int, tuple[K, V]] = {}

    def __call__(self, obj: K) -> V:
        hit = self._items.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._build(obj)
        if len(self._items) >= self._limit:
            self._items.clear()  # a reload made them stale; the live rules' entries come back on first use
        self._items[id(obj)] = (obj, value)
        return value


def keep(store: dict[K, V], key: K, build: Callable[[], V], limit: int) -> V:
    """`store[key]`, built on first use and kept; a store already holding `limit` entries is emptied before a new
    one goes in (what is still asked for comes back on its next use), so a cache keyed by what callers send
    stays bounded."""
    got = store.get(key)
    if got is None:
        if len(store) >= limit:
            store.clear()
        got = store[key] = build()
    return got


def keep_held(store: dict[K, tuple[tuple[object, ...], V]], key: K, held: tuple[object, ...], build: Callable[[], V],
              limit: int) -> V:
    """`keep` for a key made of objects' ids: the entry holds those objects (`held`), so an id is not reused while
    it lives, and an entry whose objects are not these (ids of objects since freed) is built again."""
    got = store.get(key)
    if got is not None and all(map(operator.is_, got[0], held)):
        return got[1]
    if len(store) >= limit:
        store.clear()
    value = build()
    store[key] = (held, value)
    return value
