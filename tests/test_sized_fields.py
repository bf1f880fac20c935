"""A generation brief's GPU sizing kept per rules version is read back by name (inference.GENERATION_SIZED): those
must be every field size_inference sets on a blank Sizing, so a sizing set from what was kept equals one sized in
full, field by field."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from hypothesis import given

from service.decide import tables
from service.decide.sizing import inference
from service.decide.sizing.common import Sizing, compute_tflops
from service.decide.sizing.per_request import NO_ECONOMICS, RequestSizer
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Economics
from tests.test_width_pruning import SETTINGS, book, briefs  # noqa: F401  (book: the module's rules fixture)

DAY = date(2026, 11, 15)
_ERRORS = (ValueError, ZeroDivisionError, OverflowError)


def _blank(gpu, shape) -> Sizing:  # noqa: ANN001
    s = Sizing.blank(gpu, "ON_DEMAND")
    s.tflops = compute_tflops(gpu, shape.precision)
    return s


@SETTINGS
@given(brief=briefs)
def test_a_generation_sizing_sets_only_the_fields_kept(book, brief: Brief) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    compared = 0
    for gpu in book.catalog:
        s = _blank(gpu, shape)
        before = dict(s.__dict__)
        try:
            inference.size_inference(s, brief, shape, a, {})
        except _ERRORS:
            continue
        compared += 1
        changed = {k for k, v in s.__dict__.items() if k not in before or (before[k] is not v and before[k] != v)}
        assert changed <= set(inference.GENERATION_SIZED), (gpu.id, changed - set(inference.GENERATION_SIZED))
    assert compared, "every GPU's sizing raised: nothing was compared"


@SETTINGS
@given(brief=briefs)
def test_a_sizing_from_the_kept_fields_is_the_full_sizing(book, brief: Brief) -> None:  # noqa: ANN001, F811
    """Sized once with a speeds table (kept), then again from it: the same fields as a sizing with no table; the
    economics, which the key leaves out, change nothing."""
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    t = tables.tables(a)
    speeds: dict = {}
    first = RequestSizer(brief, shape, a, t.constants, (), DAY, speeds=speeds)
    other = replace(brief, economics=Economics(budget_usd_per_hour=7.0))
    again = RequestSizer(other, shape, a, t.constants, (), DAY, speeds=speeds)
    plain = RequestSizer(brief, shape, a, t.constants, (), DAY)
    compared = 0
    for gpu in book.catalog:
        gt = t.gpu(gpu)
        full = _blank(gpu, shape)
        try:
            plain.size_inference(full, gt)
        except _ERRORS:
            continue
        compared += 1
        sized, kept = _blank(gpu, shape), _blank(gpu, shape)
        first.size_inference(sized, gt)
        again.size_inference(kept, gt)
        assert repr(sized) == repr(full) == repr(kept), gpu.id
    assert compared, "every GPU's sizing raised: nothing was compared"
    assert list(speeds) == [(replace(brief, economics=NO_ECONOMICS), shape)]
