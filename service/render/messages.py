"""Every sentence a user reads comes from rules/messages/<locale>.yaml, filled from the fact that fired the rule.

Templates use `{name}` and `{name:format}` placeholders (Python format mini-language, no attribute or index
access), e.g. "{gpu} needs {count} GPUs; headroom {headroom:.0%}". Numbers without a format print compactly.

Numbers read as people write them, in every locale: thousands separators from 1,000 up, and never exponent
notation (a spec such as `.4g` that would print `1.421e+06` prints `1,421,000`, a tiny cost `0.00000044`).
Chinese text keeps a space between CJK and Latin letters or digits (the messages' convention) but none between
two CJK characters or next to full-width punctuation, which a filled-in Chinese value would otherwise leave.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from functools import lru_cache
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


def readable(v: float, digits: int = 4) -> str:
    """`v` to `digits` significant figures in positional notation with thousands separators: 93,960,000 and
    0.00000044, never 9.396e+07 or 4.4e-07."""
    if v == 0 or not math.isfinite(v):
        return compact(float(v)) if not math.isfinite(v) else "0"
    magnitude = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{round(v, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


# [[fill]align][sign][z][#][0][width][grouping][.precision][type]; only number specs without grouping match.
_NUMBER_SPEC = re.compile(r"^(?P<head>(?:.?[<>=^])?[+\- ]?z?#?0?\d*)(?P<prec>\.\d+)?(?P<type>[dfFgGn]?)$")


def format_number(value: float | int, spec: str) -> str:
    """Python's format(), grouped from 1,000 up and never in exponent notation."""
    if -1000 < value < 1000:  # the common case: nothing to group, and only a tiny value can get an exponent
        out = format(value, spec)
        if "e" not in out and "E" not in out:
            return out
    grouped, digits = _number_spec(spec)
    if grouped and abs(value) >= 1000:
        spec = grouped
    out = format(value, spec)
    if isinstance(value, float) and math.isfinite(value) and ("e" in out or "E" in out) and not spec.endswith("%"):
        return readable(value, digits)
    return out


@lru_cache(maxsize=1024)
def _number_spec(spec: str) -> tuple[str, int]:
    """The spec with thousands grouping added ("" when it cannot take one), and the significant digits a
    number that would print in exponent notation gets instead. Cached: an answer formats ~100 numbers with a
    few dozen specs."""
    m = _NUMBER_SPEC.match(spec)
    grouped = f"{m.group('head')},{m.group('prec') or ''}{m.group('type')}" if m and m.group("type") != "n" else ""
    prec = m.group("prec") if m else None
    return grouped, int(prec[1:]) if prec and int(prec[1:]) > 0 else 6


_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_FULLWIDTH = r"\u3000-\u303f\uff00-\uffef"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}{_FULLWIDTH}]) +(?=[{_CJK}{_FULLWIDTH}])")
_PUNCT_GAP = re.compile(rf" +(?=[{_FULLWIDTH}])|(?<=[{_FULLWIDTH}]) +")


def tidy(text: str, locale: str) -> str:
    """Chinese: drop spaces between two CJK characters and around full-width punctuation."""
    if not locale.startswith("zh"):
        return text
    return _PUNCT_GAP.sub("", _CJK_GAP.sub("", text))


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
    return readable(v, 3)  # positional, never an exponent


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
        text, wide_value = _fill(template, params or {})
        # Authored text is checked by rules-check; only a filled-in Chinese value can leave a stray space.
        return tidy(text, locale) if wide_value else text


_WIDE_CHAR = re.compile(rf"[{_CJK}{_FULLWIDTH}]")


@lru_cache(maxsize=4096)
def _parsed(template: str) -> tuple[tuple[str, str | None, str, str | None], ...]:
    """The template's parts with each format spec checked once: parsing and checking cost more than filling,
    and an answer fills ~150 of the same few hundred templates. A refused spec becomes "" (rules-check
    refuses it; an answer never grows by it)."""
    return tuple(
        (literal, name, "" if not spec or _spec_refused(spec) else spec, conv)
        for literal, name, spec, conv in _FORMATTER.parse(template)
    )


@lru_cache(maxsize=1024)
def _spec_refused(spec: str) -> bool:
    return spec_problem(spec) is not None


def fill(template: str, params: Mapping[str, Any]) -> str:
    return _fill(template, params)[0]


def _fill(template: str, params: Mapping[str, Any]) -> tuple[str, bool]:
    """The filled template, and whether a string value with CJK or full-width characters went in."""
    parts = _parsed(template)
    if len(parts) == 1 and parts[0][1] is None:
        return parts[0][0], False  # no placeholder (checklist and benchmark lines)
    out = []
    wide = False
    for literal, name, spec, conv in parts:
        if literal:
            out.append(literal)
        if name is None:
            continue
        value = params.get(name, _MISSING)
        if value is _MISSING:
            out.append("{" + name + "}")
            continue
        if conv:
            value = _FORMATTER.convert_field(value, conv)
        kind = type(value)
        if kind is str or isinstance(value, str):
            if _WIDE_CHAR.search(value):
                wide = True
            if not spec and kind is str:
                out.append(value)
                continue
        elif not spec:  # the common cases of compact(), without its dispatch
            if kind is float:
                out.append(_compact_float(value))
                continue
            if kind is int:
                out.append(f"{value:,}")
                continue
        try:
            if not spec:
                out.append(compact(value))
            elif kind is float or kind is int or isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(format_number(value, spec))
            else:
                out.append(format(value, spec))
        except (ValueError, TypeError):
            out.append(compact(value))
    return "".join(out), wide


_MISSING = object()
