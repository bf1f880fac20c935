"""A frozen answer type built without its __init__: one helper for every hot path that builds many of them."""

from __future__ import annotations

from typing import Any, TypeVar

_T = TypeVar("_T")


def build(cls: type[_T], **fields: Any) -> _T:  # noqa: ANN401
    """`cls(**fields)` for a frozen dataclass given EVERY field, without the frozen __init__'s guarded setattr per
    field: the same object (equal, same repr and hash), ~3x cheaper. An answer builds ~60 such objects per
    candidate shown; tests/test_fast_paths.py rebuilds answers through the real constructors."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj
