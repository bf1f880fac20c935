"""Answers say when the rules folder holds a newer version the server refused (a check or a rule test failed):
the answer then comes from the last good version, and a rule author who edited the folder must not mistake it
for their edit. `newer_rules_rejected`, the first line of why in `newer_rules_error`, and a sentence in the
summary in the request's locale (so the CLI and MCP, which print the summary, say it too).

Applied outside the response cache: a cached answer is marked by the store's state now, not when it was made.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from ..decide.run import compiled
from ..rulebook.store import RuleStore
from ..wire.api import pb

Reply = pb.RecommendResponse | bytes  # the message, or its bytes as they go on the wire
Handler = Callable[[pb.RecommendRequest, grpc.ServicerContext], Reply]
KEY = "summary.newer_rules_rejected"


def mark(response: pb.RecommendResponse, last_error: str, sentence: str) -> pb.RecommendResponse:
    """The flag, the first line of the error and, after the summary's headline lines, the sentence."""
    response.newer_rules_rejected = True
    response.newer_rules_error = last_error.strip().splitlines()[0] if last_error.strip() else ""
    if sentence and response.summary:
        lines = response.summary.split("\n")
        # After the title and any missed-target headline: those stay first.
        at = 1 + len(response.unmet_targets)
        response.summary = "\n".join([*lines[:at], sentence, *lines[at:]])
    return response


def flag_newer_rules(store: RuleStore, handler: Handler) -> Handler:
    def recommend(request: pb.RecommendRequest, context: grpc.ServicerContext) -> Reply:
        reply = handler(request, context)
        status = store.status()
        if status.last_error:
            # Rare (a refused edit in the folder): bytes are decoded, marked and encoded again.
            response = pb.RecommendResponse.FromString(reply) if isinstance(reply, bytes) else reply
            bundle = store.active()
            sentence = ""
            if bundle is not None:
                msgs = compiled(bundle.book).msgs
                locale = request.locale or "en"
                if msgs.has(KEY, locale) or msgs.has(KEY, "en"):
                    sentence = msgs.text(KEY, locale, {"revision": bundle.revision})
            mark(response, status.last_error, sentence)
            return response.SerializeToString() if isinstance(reply, bytes) else response
        return reply

    return recommend
