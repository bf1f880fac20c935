"""shape_of builds its Shape from the fields' dict rather than through the frozen dataclass's __init__: the same
Shape (equal, same hash, repr and fields), and still frozen. The KV cache's bytes come from the rules' table by
precision, the flat figure when the table has none for it, as before."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.decide.sizing.shape import Shape, shape_of
from service.domain.brief import PRECISIONS, Brief, Model
from tests.test_width_pruning import SETTINGS, book, briefs  # noqa: F401  (book: the module's rules fixture)


def _by_init(s: Shape) -> Shape:
    return Shape(**{f.name: getattr(s, f.name) for f in dataclasses.fields(Shape)})


@SETTINGS
@given(brief=briefs, kv=st.sampled_from(("UNSPECIFIED", *PRECISIONS)))
def test_a_shape_is_the_dataclass_built_by_its_init(book, brief: Brief, kv: str) -> None:  # noqa: ANN001, F811
    brief = dataclasses.replace(brief, model=dataclasses.replace(brief.model, kv_cache_precision=kv))
    got = shape_of(brief, book.assumptions)
    assert got is not None
    want = _by_init(got)
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert list(vars(got)) == list(vars(want))  # every field, in the class's order
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.output_tokens = 1  # type: ignore[misc]


def test_the_kv_bytes_are_the_table_s_else_the_flat_figure(book) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    table = a.values.get("kv_cache_bytes_by_precision", {})
    for precision in PRECISIONS:
        shape = shape_of(Brief(model=Model(params_billion=8, kv_cache_precision=precision)), a)
        assert shape is not None
        want = float(table.get(precision, a.num("kv_cache_bytes")))
        assert shape.kv_bytes == want and not math.isnan(shape.kv_bytes)
