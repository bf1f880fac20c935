"""Limits on what rules may make the service do, beyond being correct: rules that pass every other check could
still make every answer megabytes long or every call slower (a template repeating `{workload:>40}` 40,000
times made 2.4 MB answers; a 3,000-rule file made Recommend 2.6x slower and the server 65 -> 167 MB).

Each limit is several times what the shipped rules use (100 rules, 243 messages per locale, the longest
template 288 characters with 8 placeholders, ~150 KB of YAML), and each error names the file, rule or message.
File names must not carry control, bidi or other invisible characters, as rule ids cannot (the schema allows
`[a-z0-9_.-]`): they show in logs, reviews and diffs, where such a character makes a name read as another.
"""

from __future__ import annotations

import string
import unicodedata

from ..engine.ir import Rule
from ..engine.load import Problem

MAX_RULES = 1000
MAX_MESSAGES = 2000  # per locale
MAX_TEMPLATE_CHARS = 2000
MAX_PLACEHOLDERS = 30  # per template
MAX_YAML_BYTES = 2 << 20  # every YAML file of the folder together (offer CSVs have their own limits)
_FORMATTER = string.Formatter()
# Unicode categories that print as nothing or move text around: control (Cc), format (Cf: bidi embeddings and
# isolates, zero-width joiners), line and paragraph separators, unassigned and private-use code points.
_INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Cn", "Co", "Cs"}


def unsafe_name(name: str) -> str:
    """Why `name` is refused as a file name or rule id (a control or invisible character), else ""."""
    for ch in name:
        if unicodedata.category(ch) in _INVISIBLE:
            return f"contains the invisible or control character U+{ord(ch):04X}: rename it"
    return ""


def size_problems(rules: list[Rule], messages: dict[str, dict[str, str]], locations: dict[str, dict[str, str]],
                  yaml_bytes: int, folder: str) -> list[Problem]:
    out = []
    if yaml_bytes > MAX_YAML_BYTES:
        out.append(Problem(folder, 1, 1, "", f"the rules' YAML files hold {yaml_bytes:,} bytes together; the limit "
                                             f"is {MAX_YAML_BYTES:,}"))
    if len(rules) > MAX_RULES:
        counts: dict[str, int] = {}
        for rule in rules:
            path = rule.location.rsplit(":", 1)[0]
            counts[path] = counts.get(path, 0) + 1
        biggest = max(counts, key=lambda p: counts[p])
        out.append(Problem(biggest, 1, 1, "", f"{len(rules):,} rules in all ({counts[biggest]:,} in this file); the "
                                              f"limit is {MAX_RULES:,}: every rule is matched on every answer"))
    for locale in sorted(messages):
        table = messages[locale]
        if len(table) > MAX_MESSAGES:
            path = next(iter(locations.get(locale, {}).values()), f"messages/{locale}.yaml:1").rsplit(":", 1)[0]
            out.append(Problem(path, 1, 1, "", f"{len(table):,} messages for {locale}; the limit is {MAX_MESSAGES:,}"))
        for key, template in table.items():
            why = _template_problem(template)
            if why:
                path, line = locations[locale][key].rsplit(":", 1)
                out.append(Problem(path, int(line), 1, key, f"message '{key}' ({locale}) {why}"))
    return out


def _template_problem(template: str) -> str:
    if len(template) > MAX_TEMPLATE_CHARS:
        return f"is {len(template):,} characters long; the limit is {MAX_TEMPLATE_CHARS:,}"
    try:
        fields = sum(1 for _, name, _, _ in _FORMATTER.parse(template) if name is not None)
    except ValueError:
        return ""  # malformed: message_problems reports it
    if fields > MAX_PLACEHOLDERS:
        return f"has {fields} placeholders; the limit is {MAX_PLACEHOLDERS}"
    return ""
