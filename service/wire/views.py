"""`RecommendRequest.view`: how much of a made answer goes back to the caller.

VIEW_SUMMARY keeps the ranking, the costs and the headline and leaves out what explains them (reasons, caveats,
rationale, notes, the trace, the score's rule points), the placements beyond the first, and the benchmark plan and
procurement checklist. It is cut from the full reply in this one place, so the two views never disagree on a
figure: a summary is the full answer with fields cleared, byte for byte in what it keeps.

A summary request's answer is made lean (`AdviceRequest.summary_view`, set from the view): the texts this cut
would drop and the headline does not read are never made, and the cut below still runs on what is (cheap on
fields already empty). tests/test_lean_summary.py holds that reply equal, byte for byte, to the full one cut.
"""

from __future__ import annotations

from typing import Any

from .api import pb


def wants_summary(request: Any) -> bool:  # noqa: ANN401 - a RecommendRequest
    return request.view == pb.VIEW_SUMMARY


def summarize(response: Any) -> Any:  # noqa: ANN401 - a RecommendResponse, changed in place and returned
    """The full reply cut down to VIEW_SUMMARY."""
    for candidate in response.candidates:
        candidate.ClearField("reasons")
        candidate.ClearField("caveats")
        candidate.score_breakdown.ClearField("rules")
        del candidate.placements[1:]
    for excluded in response.excluded:
        excluded.ClearField("reasons")
    response.route.ClearField("rationale")
    for name in ("trace", "notes", "benchmark_plan", "procurement_checklist"):
        response.ClearField(name)
    return response
