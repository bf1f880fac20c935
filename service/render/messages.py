"""Every sentence a user reads comes from rules/messages/<locale>.yaml, filled from the fact that fired the rule.

Templates use `{name}` and `{name:format}` placeholders (Python format mini-language, no attribute or index
access), e.g. "{gpu} needs {count} GPUs; headroom {headroom:.0%}". Numbers without a format print compactly.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from typing import Any

_FORMATTER = string.Formatter()

# The format mini-language, with small bounds: a template is data from the rules folder, and `{gpu:>100000000}`
# would make every answer 100 MB. Nested fields (`{x:{y}}`) do not match.
_SPEC = re.compile(
    r"(?:(?P<fill>[^{}])?(?P<align>[<>=^]))?[-+ ]?z?#?0?(?P<width>\d+)?[,_]?(?:\.(?P<precision>\d+))?"
    r"[bcdeEfFgGnosxX%]?"
)
MAX_WIDTH = 40
MAX_PRECISION = 12


def spec_problem(spec: str) -> str | None:
    """Why a placeholder's format spec is refused, or None when it is fine."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        return f"format spec ':{spec[:20]}' is not a plain format (fill, align, width, precision, type)"
    # Compare lengths first: int() of a 5,000-digit string raises rather than compares.
    if m["width"] and (len(m["width"]) > 3 or int(m["width"]) > MAX_WIDTH):
        return f"format width {m['width'][:12]} is above {MAX_WIDTH}"
    if m["precision"] and (len(m["precision"]) > 3 or int(m["precision"]) > MAX_PRECISION):
        return f"format precision {m['precision'][:12]} is above {MAX_PRECISION}"
    return None


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
        return f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


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


def fill(template: str, params: Mapping[str, Any]) -> str:
    out = []
    for literal, name, spec, conv in _FORMATTER.parse(template):
        out.append(literal)
        if name is None:
            continue
        if name not in params:
            out.append("{" + name + "}")
            continue
        value = params[name]
        if conv:
            value = _FORMATTER.convert_field(value, conv)
        if spec and spec_problem(spec):
            spec = ""  # rules-check refuses it; an answer never grows by it
        try:
            out.append(format(value, spec) if spec else compact(value))
        except (ValueError, TypeError):
            out.append(compact(value))
    return "".join(out)
