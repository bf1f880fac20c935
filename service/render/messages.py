"""Every sentence a user reads comes from rules/messages/<locale>.yaml, filled from the fact that fired the rule.

Templates use `{name}` and `{name:format}` placeholders (Python format mini-language, no attribute or index
access), e.g. "{gpu} needs {count} GPUs; headroom {headroom:.0%}". Numbers without a format print compactly.

Numbers read as people write them, in every locale: thousands separators from 1,000 up, and never exponent
notation (a spec such as `.4g` that would print `1.421e+06` prints `1,421,000`, a tiny cost `0.00000044`).
Chinese text keeps a space between CJK and Latin letters or digits (the messages' convention) but none between
two CJK characters or next to full-width punctuation, which a filled-in Chinese value would otherwise leave.

Plurals: `{count!p:GPU|GPUs}` prints the word for `count`, the first form for exactly one and the second for any
other number ("1 GPU", "2 GPUs", "0 GPUs"; English's CLDR rule for whole numbers). A third part is the spec the
number is printed with, so the word agrees with what is shown: `{days:.0f} {days!p:day|days|.0f}` says "1 day"
for 0.6. Articles: `{tier!i} {tier} rate` prints "a" or "an" for the value as it reads ("an on-demand rate",
"an 8B model", "a 70B model"). These are the two conversions a template may use (rules-check refuses the
others); a language without plural forms or articles writes the word alone.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
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


@lru_cache(maxsize=1024)
def unit_key(unit: str) -> str:
    """The message key naming an `ask` unit in each locale ("hours per month" → `ask_unit.hours_per_month`): a
    question's unit is read by people and assistants in the request's language, like its text."""
    return "ask_unit." + re.sub(r"[^a-z0-9]+", "_", unit.lower()).strip("_")


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
# A run of spaces goes when a full-width character follows it or precedes it, or a CJK character stands on each
# side. Every branch starts with a space and looks back only over that first space (fixed width), so the scan
# jumps from space to space instead of trying a lookbehind at every character (~1.6x faster than a branch per
# side, tests/test_reply_parts.py compares it with that form).
_GAP = re.compile(rf" +(?=[{_FULLWIDTH}])| (?<=[{_FULLWIDTH}] ) *| (?<=[{_CJK}] ) *(?=[{_CJK}])")


def tidy(text: str, locale: str) -> str:
    """Chinese: drop spaces between two CJK characters and around full-width punctuation."""
    if not locale.startswith("zh"):
        return text
    return _GAP.sub("", text)


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
    """The message tables of one rules version. Each locale's templates are compiled once, on first use, into
    fillers (`Table`): an answer fills ~120 texts, and parsing and dispatching per fill cost more than filling."""

    def __init__(self, tables: Mapping[str, Mapping[str, str]], fallback: str = "en"):
        self.tables = tables
        self.fallback = fallback
        # (table locale, tidied?) → compiled table; bounded by locales x 2 (an unknown locale reads the fallback's)
        self._compiled: dict[tuple[str, bool], Table] = {}

    def has(self, key: str, locale: str) -> bool:
        return key in self.tables.get(locale, {})

    def text(self, key: str, locale: str, params: Mapping[str, Any] | None = None) -> str:
        return self.table(locale).text(key, params or {})

    def table(self, locale: str) -> Table:
        """The compiled templates a request in `locale` reads (its own, else the fallback's, per key)."""
        source = locale if locale in self.tables else self.fallback
        wide = locale.startswith("zh")
        found = self._compiled.get((source, wide))
        if found is None:
            own, fallback = self.tables.get(source, {}), self.tables.get(self.fallback, {})
            # As text() always read them: the locale's template unless empty, else the fallback's.
            merged = {key: own.get(key) or fallback.get(key) for key in {**fallback, **own}}
            found = Table({k: t for k, t in merged.items() if t is not None}, locale if wide else "")
            self._compiled[(source, wide)] = found  # two threads may both build it: same value, no harm
        return found


class Table:
    """One locale's templates, each compiled to literal parts and a formatter per placeholder's spec."""

    def __init__(self, templates: Mapping[str, str], tidy_locale: str):
        self._tidy = tidy_locale  # "" when no filled-in value can leave a stray space (not Chinese)
        self._fills: dict[str, str | _Compiled] = {}
        for key, template in templates.items():
            parts = _parsed(template)
            if not parts:
                self._fills[key] = ""
            elif len(parts) == 1 and parts[0][1] is None:
                self._fills[key] = parts[0][0]  # no placeholder (checklist and benchmark lines)
            else:
                self._fills[key] = _Compiled(parts)

    def text(self, key: str, params: Mapping[str, Any]) -> str:
        fill = self._fills.get(key)
        if fill is None:
            return key  # rules-check rejects this; never crash an answer over it
        if type(fill) is str:
            return fill
        if not self._tidy:
            return fill.quick(params)  # type: ignore[union-attr]
        text, wide_value = fill.wide(params)  # type: ignore[union-attr]
        # Authored text is checked by rules-check; only a filled-in Chinese value can leave a stray space.
        return tidy(text, self._tidy) if wide_value else text


class _Compiled:
    """A template with placeholders, as `_fill` reads it: its leading text, then per placeholder (name, formatter,
    conversion, what a missing value prints, the literal text up to the next placeholder)."""

    __slots__ = ("head", "fields", "quick", "wide")

    def __init__(self, parts: tuple[tuple[str, str | None, str, str | None], ...]):
        self.head = ""
        fields: list[list[Any]] = []
        for literal, name, spec, conv in parts:
            if fields:
                fields[-1][4] += literal
            else:
                self.head += literal
            if name is not None:
                fields.append([name, _formatter(spec, conv), conv, "{" + name + "}", ""])
        self.fields = tuple(tuple(f) for f in fields)
        # `fill` as one straight-line function (see _straight): what a non-Chinese table calls.
        self.quick: Callable[[Mapping[str, Any]], str] = (
            _straight(self.head, self.fields, self.fill) if len(self.fields) <= _MAX_STRAIGHT else self.fill
        )
        # `fill_wide` as one straight-line function too: what a Chinese table calls. A conversion (`{x!r}`) makes
        # the shown value differ from the value, so such a template (none ships) keeps the loop.
        straight = len(self.fields) <= _MAX_STRAIGHT and not any(f[2] and f[2] not in OWN_CONVERSIONS
                                                                   for f in self.fields)
        self.wide: Callable[[Mapping[str, Any]], tuple[str, bool]] = (
            _straight(self.head, self.fields, self.fill_wide, wide=True) if straight else self.fill_wide
        )

    def fill(self, params: Mapping[str, Any]) -> str:
        out = [self.head]
        get = params.get
        for name, fmt, _, missing, tail in self.fields:
            value = get(name, _MISSING)
            out.append(missing if value is _MISSING else fmt(value))
            out.append(tail)
        return "".join(out)

    def fill_wide(self, params: Mapping[str, Any]) -> tuple[str, bool]:
        """The filled text, and whether a string value with CJK or full-width characters went in."""
        out = [self.head]
        wide = False
        for name, fmt, conv, missing, tail in self.fields:
            value = params.get(name, _MISSING)
            if value is _MISSING:
                out.append(missing)
            else:
                shown = _FORMATTER.convert_field(value, conv) if conv and conv not in OWN_CONVERSIONS else value
                if not wide and isinstance(shown, str) and _WIDE_CHAR.search(shown):
                    wide = True
                out.append(fmt(value))
            out.append(tail)
        return "".join(out), wide


_MAX_STRAIGHT = 24  # placeholders; a longer template (none ships) keeps the loop


def _straight(head: str, fields: tuple[tuple[Any, ...], ...], reference: Callable[[Mapping[str, Any]], Any],
              wide: bool = False) -> Callable[[Mapping[str, Any]], Any]:
    """`_Compiled.fill` for one template without its loop: every value read, then one f-string of the head, each
    value's text and the literal after it. A string without a spec and a small float with a `.2f`-like spec are
    written inline, as their formatter's first branch does; anything else calls the formatter. A missing
    value hands the whole fill to `reference` (the loop), which prints the placeholder. ~1.5x cheaper per text.
    Also inline, as their formatters' own branches for them: an int without a spec (grouped), a float of 1,000 or
    more with a `.2f`-like spec (its grouped spec), and an int's plural form without a spec (`one` when it is 1):
    an answer's ~150 texts make ~100 fewer formatter calls.
    `wide`: `_Compiled.fill_wide` instead (for templates without conversions), the text and whether a string
    value with CJK or full-width characters went in."""
    specs = tuple(getattr(fmt, "inline_spec", "") for _, fmt, _, _, _ in fields)
    kinds = tuple("plain" if f[1] is _plain else ("fixed" if spec else "plural" if hasattr(f[1], "inline_forms")
                                                  else "call")
                  for f, spec in zip(fields, specs, strict=True))
    extras = tuple(getattr(f[1], "inline_grouped", None) or getattr(f[1], "inline_forms", None) for f in fields)
    return _straight_maker(kinds, wide)(head, tuple(f[0] for f in fields), tuple(f[1] for f in fields),
                                        tuple(f[4] for f in fields), specs, extras, reference, _WIDE_CHAR.search)


@lru_cache(maxsize=512)
def _straight_maker(kinds: tuple[str, ...], wide: bool = False) -> Callable[..., Callable[[Mapping[str, Any]], Any]]:
    """The source of a filler for templates whose placeholders have these kinds. The generated text depends on
    the kinds alone (indices, never a template's words or names): the template's parts come in as arguments."""
    n = len(kinds)
    out = ["def make(head, names, fmts, tails, specs, extras, reference, search):"]
    for i in range(n):
        out.append(f"    n{i}, f{i}, t{i}, s{i}, e{i} = names[{i}], fmts[{i}], tails[{i}], specs[{i}], extras[{i}]")
        if kinds[i] == "plural":
            out.append(f"    o{i}, x{i} = e{i}")
    out += ["    def fill(p):", "        try:"]
    out += [f"            v{i} = p[n{i}]" for i in range(n)]
    out += ["        except KeyError:", "            return reference(p)"]
    pieces = []
    for i, kind in enumerate(kinds):
        if kind == "plain":  # _plain: a string as it is, an int grouped
            pieces.append(f"{{v{i} if type(v{i}) is str else format(v{i}, ',') if type(v{i}) is int else f{i}(v{i})}}"
                          f"{{t{i}}}")
        elif kind == "fixed":  # fixed: a float below 1,000 in its spec, from 1,000 (or an infinity) in e (grouped)
            pieces.append(
                f"{{(format(v{i}, s{i}) if -1000.0 < v{i} < 1000.0 else format(v{i}, e{i}) if v{i} >= 1000.0 or "
                f"v{i} <= -1000.0 else f{i}(v{i})) if type(v{i}) is float else f{i}(v{i})}}{{t{i}}}"
            )
        elif kind == "plural":  # choose without a spec: an int's form is `one` exactly when it is 1
            pieces.append(f"{{(o{i} if v{i} == 1 else x{i}) if type(v{i}) is int else f{i}(v{i})}}{{t{i}}}")
        else:
            pieces.append(f"{{f{i}(v{i})}}{{t{i}}}")
    text = f'f"{{head}}{"".join(pieces)}"'
    if wide:  # as fill_wide tells it: a value that is a string with a CJK or full-width character in it
        went_in = " or ".join(f"(isinstance(v{i}, str) and search(v{i}) is not None)" for i in range(n))
        out += [f"        return {text}, {went_in}", "    return fill"]
    else:
        out += [f"        return {text}", "    return fill"]
    scope: dict[str, Any] = {}
    exec("\n".join(out), scope)  # noqa: S102 - source built above from indices only
    return scope["make"]


def _plain(value: Any) -> str:  # noqa: ANN401
    """A value without a format spec, as `_fill` writes it."""
    kind = type(value)
    if kind is str:
        return value
    if kind is float:
        return _compact_float(value)
    if kind is int:
        return f"{value:,}"
    return compact(value)


@lru_cache(maxsize=1024)
def _formatter(spec: str, conv: str | None) -> Callable[[Any], str]:
    """What `_fill` does with one placeholder's value, specialised for its (checked) spec and conversion."""
    if conv == PLURAL:
        return _plural(spec)
    if conv == ARTICLE:
        return article
    if conv:
        def converted(value: Any) -> str:  # noqa: ANN401
            return _format_value(_FORMATTER.convert_field(value, conv), spec)
        return converted
    if not spec:
        return _plain
    number = _number_formatter(spec)

    def formatted(value: Any) -> str:  # noqa: ANN401
        kind = type(value)
        try:
            if kind is float or kind is int:
                return number(value)
            if kind is str:
                return format(value, spec)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return number(value)
            return format(value, spec)
        except (ValueError, TypeError):
            return compact(value)

    if not _FIXED.fullmatch(spec):
        return formatted
    grouped = _number_spec(spec)[0]

    # `.2f`, `.0%` and the like, the specs nearly every number is shown with: no fill character and a type that
    # never writes an exponent, so a float or an int needs only `number`'s grouping decision.
    def fixed(value: Any) -> str:  # noqa: ANN401
        kind = type(value)
        if kind is float or kind is int:
            if -1000 < value < 1000:
                return format(value, spec)
            return format(value, grouped if grouped and abs(value) >= 1000 else spec)
        return formatted(value)
    fixed.inline_spec = spec  # type: ignore[attr-defined]  # what _straight writes a small float with
    fixed.inline_grouped = grouped or spec  # type: ignore[attr-defined]  # ... and a float from 1,000
    return fixed


# `,.0f` too: a spec that groups already needs no grouped variant (_number_spec gives none for it).
_FIXED = re.compile(r",?\.\d{1,2}[f%]")


def _number_formatter(spec: str) -> Callable[[float | int], str]:
    """`format_number(value, spec)` with the spec's analysis done once."""
    grouped, digits = _number_spec(spec)
    percent = spec.endswith("%")  # grouping never applies to a % spec, so this is the spec format() gets

    def number(value: float | int) -> str:
        if -1000 < value < 1000:
            out = format(value, spec)
            if "e" not in out and "E" not in out:
                return out
        out = format(value, grouped if grouped and abs(value) >= 1000 else spec)
        if ("e" in out or "E" in out) and not percent and isinstance(value, float) and math.isfinite(value):
            return readable(value, digits)
        return out
    return number


_WIDE_CHAR = re.compile(rf"[{_CJK}{_FULLWIDTH}]")
PLURAL = "p"  # the plural conversion: {n!p:one|other}
ARTICLE = "i"  # the indefinite article for the value: {x!i}
OWN_CONVERSIONS = (PLURAL, ARTICLE)
# An English number read aloud starts with a vowel sound for 8, 11 and 18 (and their thousands: 8,000, 11,000).
_AN_NUMBER = re.compile(r"8|1[18](?:,?\d{3})*(?:\.|$)")


def article(value: Any) -> str:  # noqa: ANN401
    """"a" or "an" before `value` as English reads it: numbers by sound, words by their first letter."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = compact(value).lstrip("-")
        return "an" if _AN_NUMBER.match(text) else "a"
    text = str(value).lstrip()
    return "an" if text[:1].lower() in ("a", "e", "i", "o") or (text[:1].isdigit() and _AN_NUMBER.match(text)) else "a"


def plural_problem(forms: str) -> str | None:
    """Why a plural placeholder's forms are refused, or None: `one|other`, or `one|other|spec` with the number's
    format spec."""
    parts = forms.split("|")
    words = parts[:2]
    if len(parts) not in (2, 3) or not all(words) or any(len(x) > MAX_WIDTH or "{" in x or "}" in x for x in words):
        return (f"plural forms ':{forms[:40]}' must be one|other or one|other|spec (words up to {MAX_WIDTH} "
                "characters)")
    if len(parts) == 3:
        return spec_problem(parts[2]) if parts[2] else "an empty spec after one|other|"
    return None


@lru_cache(maxsize=1024)
def _plural(forms: str) -> Callable[[Any], str]:
    """The word for a number: `one` when it is exactly 1 (or, with a spec, prints as 1), else `other`."""
    parts = forms.split("|") if plural_problem(forms) is None else ["", ""]
    one, other, spec = parts[0], parts[1], (parts[2] if len(parts) == 3 else "")

    def choose(value: Any) -> str:  # noqa: ANN401
        if type(value) is bool or not isinstance(value, (int, float)):
            return other
        if spec:
            try:
                return one if float(format(value, spec).replace(",", "")) == 1 else other
            except ValueError:
                return other
        return one if value == 1 else other
    if not spec:
        choose.inline_forms = (one, other)  # type: ignore[attr-defined]  # what _straight writes an int's form with
    return choose


@lru_cache(maxsize=4096)
def _parsed(template: str) -> tuple[tuple[str, str | None, str, str | None], ...]:
    """The template's parts with each format spec checked once: parsing and checking cost more than filling,
    and an answer fills ~150 of the same few hundred templates. A refused spec becomes "" (rules-check
    refuses it; an answer never grows by it)."""
    return tuple(
        (literal, name, spec if conv == PLURAL else "" if not spec or _spec_refused(spec) or conv == ARTICLE else spec,
         conv)
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
        if conv in OWN_CONVERSIONS:
            out.append(_plural(spec)(value) if conv == PLURAL else article(value))
            continue
        if conv:
            value = _FORMATTER.convert_field(value, conv)
        if isinstance(value, str) and _WIDE_CHAR.search(value):
            wide = True
        out.append(_format_value(value, spec))
    return "".join(out), wide


def _format_value(value: Any, spec: str) -> str:  # noqa: ANN401
    """One (converted) value as a template shows it: compact without a spec, numbers grouped, and a value its
    spec does not fit shown compactly rather than failing the answer."""
    if not spec:
        return _plain(value)
    kind = type(value)
    try:
        if kind is float or kind is int or isinstance(value, (int, float)) and not isinstance(value, bool):
            return format_number(value, spec)
        return format(value, spec)
    except (ValueError, TypeError):
        return compact(value)


_MISSING = object()
