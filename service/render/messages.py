"""Every sentence a user reads comes from rules/messages/<locale>.yaml, filled from the fact that fired the rule.

Templates use `{name}` and `{name:format}` placeholders (Python format mini-language, no attribute or index
access), e.g. "{gpu} needs {count} GPUs; headroom {headroom:.0%}". Numbers without a format print compactly.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

_FORMATTER = string.Formatter()


def placeholders(template: str) -> list[str]:
    """Names a template uses; raises ValueError on a malformed template."""
    names = []
    for _, name, _, _ in _FORMATTER.parse(template):
        if name is None:
            continue
        if not name or not name.replace("_", "").isalnum():
            raise ValueError(f"placeholder '{{{name}}}' must be a plain name")
        names.append(name)
    return names


def compact(v: Any) -> str:
    # An answer formats a few hundred numbers: test the exact type first (bool is an int, so it comes first).
    kind = type(v)
    if kind is float:
        return _compact_float(v)
    if kind is int:
        return f"{v:,}"
    if kind is str:
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return _compact_float(v)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _compact_float(v: float) -> str:
    if not math.isfinite(v):
        return "never" if v > 0 else "-"
    size = abs(v)
    if size < 1e15 and v.is_integer():
        return f"{int(v):,}"
    if size >= 100:
        return f"{v:,.0f}"
    if size >= 1:
        return f"{v:,.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


class Messages:
    def __init__(self, tables: Mapping[str, Mapping[str, str]], fallback: str = "en"):
        self.tables = tables
        self.fallback = fallback

    def has(self, key: str, locale: str) -> bool:
        return key in self.tables.get(locale, {})

    def text(self, key: str, locale: str, params: Mapping[str, Any] | None = None) -> str:
        template = self.tables.get(locale, {}).get(key) or self.tables.get(self.fallback, {}).get(key)
        if template is None:
            return key  # rules-check rejects this; never crash an answer over it
        return fill(template, params or {})


@lru_cache(maxsize=4096)
def _parsed(template: str) -> tuple[tuple[str, str | None, str | None, str | None], ...]:
    # Parsing a template costs more than filling it, and an answer fills ~150 of the same few hundred.
    return tuple(_FORMATTER.parse(template))


def fill(template: str, params: Mapping[str, Any]) -> str:
    parts = _parsed(template)
    if len(parts) == 1 and parts[0][1] is None:
        return parts[0][0]  # no placeholder (checklist and benchmark lines)
    out = []
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
        try:
            out.append(format(value, spec) if spec else compact(value))
        except (ValueError, TypeError):
            out.append(compact(value))
    return "".join(out)
