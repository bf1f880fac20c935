"""An LRU cache of Recommend answers for repeated identical briefs (`--response-cache N`, on by default: chat
bots and dashboards send the same brief again and again; 0 turns it off).

The key is the active rules revision, the day the answer is for (a request without `as_of` is priced for today)
and the request's deterministic serialization (so the brief, locale, view and trace flag), so an answer is only
ever reused for the same bytes under the same rules on the same day. Only successful answers are stored (an
INVALID_ARGUMENT raises before it could be), and only when the revision did not change during the call; the
first call under a new revision empties the cache, so a reload frees the old answers at once rather than as they
age out. Each hit is a copy: nobody can change a stored answer. It is bounded by count and by bytes (answers with
a trace are several times larger than those without).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import date
from typing import Any

import grpc

from ..rulebook.store import RuleStore
from ..wire.api import pb
from . import metrics

ENV = "GPU_ADVISOR_RESPONSE_CACHE"
DEFAULT_SIZE = 256  # answers; ~37 KB each without a trace (measured on the bench's briefs): ~10 MB
MAX_BYTES = 32 * 1024 * 1024
Reply = pb.RecommendResponse | bytes  # the message, or its bytes as they go on the wire
Handler = Callable[[pb.RecommendRequest, grpc.ServicerContext], Reply]
Key = tuple[str, str, bytes]


class ResponseCache:
    def __init__(self, size: int, max_bytes: int = MAX_BYTES):
        if size < 1:
            raise ValueError("a response cache needs room for at least one answer")
        self.size = size
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._bytes = 0
        self._revision = ""
        self._items: OrderedDict[Key, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(revision: str, request: pb.RecommendRequest, today: date | None = None) -> Key:
        day = request.as_of or (today or date.today()).isoformat()
        return revision, day, request.SerializeToString(deterministic=True)

    def get(self, key: Key) -> pb.RecommendResponse | None:
        raw = self.get_raw(key)
        return None if raw is None else pb.RecommendResponse.FromString(raw)

    def get_raw(self, key: Key) -> bytes | None:
        """The stored answer's bytes (immutable: nobody can change what is stored through them)."""
        with self._lock:
            if key[0] != self._revision:  # the rules changed: nothing stored can be asked for again
                self._items.clear()
                self._bytes = 0
                self._revision = key[0]
            raw = self._items.get(key)
            if raw is None:
                self.misses += 1
                metrics.response_cache("miss")
                return None
            self._items.move_to_end(key)
            self.hits += 1
        metrics.response_cache("hit")
        return raw

    def put(self, key: Key, response: Reply) -> None:
        raw = response if isinstance(response, bytes) else response.SerializeToString()
        if len(raw) > self.max_bytes or key[0] != self._revision:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._bytes += len(raw) - (len(old) if old is not None else 0)
            self._items[key] = raw
            while len(self._items) > self.size or self._bytes > self.max_bytes:
                self._bytes -= len(self._items.popitem(last=False)[1])

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._bytes

    def wrap(self, store: RuleStore, handler: Handler, encoded: bool = False) -> Handler:
        """`handler` (Servicer.Recommend) answering from the cache when it can. `encoded`: the handler returns
        the reply's bytes (the served `recommend_encoded`), and so does a hit: the stored bytes as they are, not
        decoded into a fresh message to be encoded again."""

        def recommend(request: pb.RecommendRequest, context: grpc.ServicerContext) -> Any:
            bundle = store.active()
            if bundle is None:
                return handler(request, context)  # answers UNAVAILABLE itself
            key = self.key(bundle.revision, request)
            hit = self.get_raw(key) if encoded else self.get(key)
            if hit is not None:
                return hit
            response = handler(request, context)
            after = store.active()
            if after is not None and after.revision == bundle.revision:
                self.put(key, response)
            return response

        return recommend
