"""Message number formatting: the type-dispatched `compact` writes exactly what its plain definition writes."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from service.render.messages import compact, fill, readable


def _compact_reference(v):  # noqa: ANN001, ANN202 - the original, obviously-correct version
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "never" if v > 0 else "-"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:,.2f}".rstrip("0").rstrip(".")
        return readable(v, 3)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


class _Str(str):
    pass


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.floats(), st.integers(), st.booleans(), st.text(max_size=5), st.none(),
                 st.text(max_size=3).map(_Str)))
def test_compact_agrees_with_the_reference(v):
    assert compact(v) == _compact_reference(v)


def test_fill_with_and_without_placeholders():
    assert fill("plain line", {"x": 1}) == "plain line"
    assert fill("", {}) == ""
    assert fill("{a} and {b:.1f} of {missing}", {"a": 1500.0, "b": 0.25}) == "1,500 and 0.2 of {missing}"
    assert fill("{a:>3}", {"a": 7}) == "  7"
