"""Line-aware YAML loading: every problem a rule author sees points at file:line:col.

ruamel.yaml's round-trip loader keeps the position of every mapping key and sequence item; we keep its nodes
(CommentedMap/CommentedSeq) and ask them for positions instead of building a parallel position table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedSeq
from ruamel.yaml.composer import Composer, ComposerError, MaxDepthExceededError
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.events import AliasEvent


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the rules, in the format `path:line:col [rule-id] message`."""

    path: str
    line: int
    col: int
    rule_id: str
    message: str
    severity: str = "error"  # error | warning

    def __str__(self) -> str:
        rid = f" [{self.rule_id}]" if self.rule_id else ""
        sev = "" if self.severity == "error" else f" {self.severity}:"
        return f"{self.path}:{self.line}:{self.col}{rid}{sev} {self.message}"


@dataclass(frozen=True)
class Doc:
    path: str  # as shown to authors: relative to the rules folder's parent when possible
    data: Any


class RulesError(Exception):
    """The rules cannot be activated; `problems` lists every reason at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems) or "rules error")


_CACHE: dict[str, tuple[str, Doc]] = {}  # shown path → (content digest, parsed document): latest only


def load_yaml(raw: bytes, shown_as: str) -> tuple[Doc | None, list[Problem]]:
    """Parse one file's bytes (read by the caller: service/rulebook/files.py reads a rules folder safely). The
    latest parse of each path is kept by content digest (callers never mutate it), so a reload after a one-file
    edit re-parses one file: the round-trip parser is pure Python and dominates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(shown_as, 1, 1, "", f"is not UTF-8 text (byte {exc.start})")]
    digest = hashlib.sha256(raw).hexdigest()
    cached = _CACHE.get(shown_as)
    if cached is not None and cached[0] == digest:
        return cached[1], []
    doc, problems = _parse(text, shown_as)
    if doc is not None:
        _CACHE[shown_as] = (digest, doc)
    return doc, problems


MAX_DEPTH = 40  # rule files nest a few levels; a deeper document is hostile (or broken) and recursion is not free
_NO_ANCHORS = "anchors and aliases (&name, *name, <<) are not allowed in rules files"


class _NoAliasComposer(Composer):
    """Refuses anchors and aliases: no rule file uses them, and aliases are how a few hundred bytes of YAML
    expand into billions of nodes (the "billion laughs")."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ComposerError(None, None, _NO_ANCHORS, event.start_mark)
        return super().compose_node(parent, index)


def _parse(text: str, shown_as: str) -> tuple[Doc | None, list[Problem]]:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.Composer = _NoAliasComposer
    yaml.max_depth = MAX_DEPTH
    try:
        data = yaml.load(text)
    except MaxDepthExceededError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return None, [Problem(shown_as, line, col, "", f"broken YAML: nested deeper than {MAX_DEPTH} levels")]
    except MarkedYAMLError as exc:
        return None, [yaml_problem(exc, shown_as, text)]
    except RecursionError:
        return None, [Problem(shown_as, 1, 1, "", "broken YAML: nested too deeply")]
    except Exception as exc:  # ruamel raises a few unmarked errors; their text is theirs, not a repr or a path
        return None, [Problem(shown_as, 1, 1, "", f"broken YAML: {_clip(type(exc).__name__ + ': ' + str(exc))}")]
    return Doc(shown_as, data), []


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ruamel's context for a structure that was opened and never properly closed: a flow `{`/`[`, a quoted or
# block scalar, a block mapping or sequence. The parser notices the trouble where it gives up, often lines later
# or at the end of the file; the author needs the line where the structure opened.
_UNCLOSED = ("while parsing a flow", "while scanning a quoted", "while scanning a block", "while parsing a block")


def yaml_problem(exc: MarkedYAMLError, shown_as: str, text: str = "") -> Problem:
    """One broken-YAML problem. For an unclosed flow or quote it sits at the context mark (where the structure
    opened) and names where the parser gave up; for indentation and tabs (the parser's words, "mapping values are
    not allowed here", "expected <block end>", help nobody) it names the likely cause, sits on the line to fix and
    names the line where the block began; otherwise (duplicate keys) at the problem mark."""
    problem, context = exc.problem_mark, exc.context_mark
    lines = text.splitlines()
    explained = _layout_problem(exc, lines)
    if explained is not None:
        (line, col), why = explained
        return Problem(shown_as, line, col, "", f"broken YAML: {why}")
    unclosed = bool(context) and str(exc.context or "").startswith(_UNCLOSED)
    mark = context if unclosed else (problem or context)
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if not unclosed:
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return Problem(shown_as, line, col, "", f"broken YAML: {_clip(what)}")
    structure = str(exc.context).split(" ", 2)[-1]  # "while parsing a flow mapping" → "a flow mapping"
    noticed = f" at {problem.line + 1}:{problem.column + 1}" if problem else ""
    hint = " (check the indentation there)" if "block" in structure else ""
    return Problem(
        shown_as, line, col, "",
        f"broken YAML: {structure} opened here is not closed properly: {_clip(str(exc.problem))}{noticed}{hint}",
    )


def _content(lines: list[str], n: int) -> str:
    """Line n (1-based) as the author wrote it, without its indentation, for quoting."""
    return _clip(lines[n - 1].strip(), 60) if 0 < n <= len(lines) else ""


def _opener_above(lines: list[str], n: int) -> int:
    """The nearest line above n that opens a block (a key ending in ':' or '- key:'), 0 if none."""
    for i in range(n - 1, 0, -1):
        stripped = lines[i - 1].split(" #", 1)[0].rstrip()
        if stripped and not stripped.lstrip().startswith("#") and stripped.endswith(":"):
            return i
    return 0


def _content_above(lines: list[str], n: int) -> int:
    """The nearest non-blank, non-comment line above n, 0 if none."""
    for i in range(n - 1, 0, -1):
        if lines[i - 1].strip() and not lines[i - 1].lstrip().startswith("#"):
            return i
    return 0


def _layout_problem(exc: MarkedYAMLError, lines: list[str]) -> tuple[tuple[int, int], str] | None:
    """((line, col), why) for a tab or an indentation mistake, in the author's terms; None for anything else."""
    problem, context = exc.problem_mark, exc.context_mark
    said = f"{exc.context or ''} {exc.problem or ''}"
    if problem is None or not lines:
        return None
    pl, pc = problem.line + 1, problem.column + 1
    here = lines[pl - 1] if pl <= len(lines) else ""
    if "'\\t'" in said or "\t" in said or ("\t" in here[: max(0, pc)] and "block" in said):
        col = here.index("\t") + 1 if "\t" in here else pc
        began = _opener_above(lines, pl)
        where = f" (inside the block that began at line {began}: `{_content(lines, began)}`)" if began else ""
        return (pl, col), (f"a tab at line {pl}, column {col}: YAML indents with spaces only; replace the tab "
                           f"with spaces, lined up with the other keys{where}")
    if "mapping values are not allowed here" in said:
        before = here[: problem.column]
        if ": " in before or before.rstrip().endswith(":"):
            return (pl, pc), (f"a second ': ' on line {pl} (`{_content(lines, pl)}`): a value that holds ': ' "
                              "must be quoted, e.g. key: \"a: b\"")
        above = _content_above(lines, pl)
        return (pl, pc), (f"line {pl} (`{_content(lines, pl)}`) is indented deeper than line {above} "
                          f"(`{_content(lines, above)}`), so YAML reads it as part of that value: line it up "
                          f"with its siblings, or end line {above} with ':' if it should hold this line")
    if context is not None and "expected <block end>" in said and "block" in str(exc.context or ""):
        cl, cc = context.line + 1, context.column + 1
        if "block collection" in str(exc.context) or "block sequence" in str(exc.context):
            return (pl, pc), (f"line {pl} (`{_content(lines, pl)}`) stands at the column of the list that began "
                              f"at line {cl} (`{_content(lines, cl)}`) but is not a '- ' item: indent it under the "
                              "item above it, or start it with '- '")
        return (pl, pc), (f"line {pl} (`{_content(lines, pl)}`) is indented to column {pc}, but the block that "
                          f"began at line {cl} (`{_content(lines, cl)}`) has its keys at column {cc}: line it up "
                          "with its siblings (spaces only)")
    return None


def pos(node: Any, key: Any = None) -> tuple[int, int]:
    """1-based (line, col) of `key` inside `node` (a mapping key or a sequence index), or of `node` itself."""
    try:
        if key is None:
            return node.lc.line + 1, node.lc.col + 1
        if isinstance(node, dict):  # CommentedMap, or a view that borrowed one's positions
            line, col = node.lc.key(key)
            return line + 1, col + 1
        if isinstance(node, CommentedSeq):
            line, col = node.lc.item(key)
            return line + 1, col + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        pass
    return 1, 1


def value_pos(node: Any, key: Any) -> tuple[int, int]:
    """Position of the value stored under `key` (falls back to the key's position)."""
    try:
        if isinstance(node, dict):
            line, col = node.lc.value(key)
            return line + 1, col + 1
    except (AttributeError, KeyError, TypeError):
        pass
    return pos(node, key)


def plain(node: Any) -> Any:
    """ruamel nodes → plain dict/list/scalars (dates stay datetime.date)."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return node
