"""An optional LRU cache of Recommend answers for repeated identical briefs (`--response-cache N`, off by default).

The key is the active rules revision, the day the answer is for (a request without `as_of` is priced for today)
and the request's deterministic serialization, so an answer is only ever reused for the same bytes under the same
rules on the same day. Only successful answers are stored (an INVALID_ARGUMENT raises before it could be), and
only when the revision did not change during the call. Each hit is a copy: nobody can change a stored answer.
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

ENV = "GPU_ADVISOR_RESPONSE_CACHE"
Handler = Callable[[pb.RecommendRequest, grpc.ServicerContext], pb.RecommendResponse]
Key = tuple[str, str, bytes]


class ResponseCache:
    def __init__(self, size: int):
        if size < 1:
            raise ValueError("a response cache needs room for at least one answer")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Key, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(revision: str, request: pb.RecommendRequest, today: date | None = None) -> Key:
        day = request.as_of or (today or date.today()).isoformat()
        return revision, day, request.SerializeToString(deterministic=True)

    def get(self, key: Key) -> pb.RecommendResponse | None:
        with self._lock:
            raw = self._items.get(key)
            if raw is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
        return pb.RecommendResponse.FromString(raw)

    def put(self, key: Key, response: pb.RecommendResponse) -> None:
        raw = response.SerializeToString()
        with self._lock:
            self._items[key] = raw
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def wrap(self, store: RuleStore, handler: Handler) -> Handler:
        """`handler` (Servicer.Recommend) answering from the cache when it can."""

        def recommend(request: pb.RecommendRequest, context: grpc.ServicerContext) -> Any:
            bundle = store.active()
            if bundle is None:
                return handler(request, context)  # answers UNAVAILABLE itself
            key = self.key(bundle.revision, request)
            hit = self.get(key)
            if hit is not None:
                return hit
            response = handler(request, context)
            after = store.active()
            if after is not None and after.revision == bundle.revision:
                self.put(key, response)
            return response

        return recommend
