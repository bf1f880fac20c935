"""The fast paths compute what the plain code computed: each is compared with its reference on random inputs."""

from __future__ import annotations

import string
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.decide.sizing import shape_of, size, size_all
from service.render import messages as m
from service.rulebook import load_rulebook
from tests.test_advisor import brief_strategy

RULES = Path(__file__).parents[1] / "rules"

_FORMATTER = string.Formatter()


def reference_fill(template: str, params: Mapping[str, Any]) -> tuple[str, bool]:
    """The filler before templates were precompiled: every spec checked at every fill."""
    parts = tuple(_FORMATTER.parse(template))
    if len(parts) == 1 and parts[0][1] is None:
        return parts[0][0], False
    out = []
    wide = False
    for literal, name, spec, conv in parts:
        out.append(literal)
        if name is None:
            continue
        if name not in params:
            out.append("{" + name + "}")
            continue
        value = params[name]
        if conv:
            value = _FORMATTER.convert_field(value, conv)
        if spec and m.spec_problem(spec):
            spec = ""
        if isinstance(value, str) and m._WIDE_CHAR.search(value):
            wide = True
        try:
            if not spec:
                out.append(m.compact(value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(m.format_number(value, spec))
            else:
                out.append(format(value, spec))
        except (ValueError, TypeError):
            out.append(m.compact(value))
    return "".join(out), wide


_NAMES = ("a", "b", "gpu", "missing")
_SPECS = ("", ".0%", ".2f", ",.0f", ".4g", "d", ">8", "<5.1f", "x", "s", "n", "0>41", ".13f", "+.3e", "=^10,.2f")
_VALUES = st.one_of(
    st.integers(-(10**12), 10**12), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(alphabet="ab 中文，x", max_size=6), st.none(),
)


@st.composite
def templates(draw: st.DrawFn) -> str:
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        pieces.append(draw(st.sampled_from(("", "text ", "中文 ", "{{lit}} "))))
        name = draw(st.sampled_from(_NAMES))
        spec = draw(st.sampled_from(_SPECS))
        conv = draw(st.sampled_from(("", "", "!r", "!s")))
        pieces.append("{" + name + conv + (":" + spec if spec else "") + "}")
    return "".join(pieces) + draw(st.sampled_from(("", " end")))


@settings(max_examples=600, deadline=None)
@given(templates(), st.dictionaries(st.sampled_from(_NAMES[:3]), _VALUES))
def test_precompiled_fill_matches_reference(template: str, params: dict[str, Any]) -> None:
    assert m._fill(template, params) == reference_fill(template, params)


@pytest.fixture(scope="module")
def book():  # noqa: ANN201
    book, problems = load_rulebook(RULES, today=date(2026, 11, 15))
    assert book is not None, problems
    return book


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy(), day=st.sampled_from((date(2025, 6, 1), date(2026, 11, 15))))
def test_sizing_all_gpus_with_shared_memory_breakdowns_matches_sizing_each_alone(book, brief, day):  # noqa: ANN001
    a = book.assumptions
    shape = shape_of(brief, a)
    if shape is None:
        return
    alone = [size(g, brief, shape, a, (), day) for g in book.catalog]
    shared = size_all(book.catalog, brief, shape, a, (), day)
    assert [repr(s) for s in shared] == [repr(s) for s in alone]  # repr: a NaN equals itself
