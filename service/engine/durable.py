"""The one module that knows durable_rules. It drives the C extension directly, not the `Host` layer.

Hazards designed around (each has a test in tests/test_durable_hazards.py):
- joins across facts can segfault → every rule tests ONE flat fact (the caller derives what a rule needs);
- asserting facts that no rule matches raises, and `delete_state` after a session where no action ran frees an
  uninitialised pointer → every ruleset carries an always-firing sentinel rule and every session a sentinel fact;
- numbers written with an exponent are rejected (in a batch, silently dropped) → we write JSON ourselves, never
  with an exponent, and refuse NaN/infinity;
- `$or` fires once per true branch → OR only over equality tests on one field (mutually exclusive); ORs of
  arbitrary branches are separate engine rules, deduplicated here;
- rules made only of negative tests match the engine's own state fact → every rule tests the fact type first;
- per-ruleset limits (64 matching conditions per fact, segfault at 256 rules sharing a test) → shards of at most
  SHARD_SIZE engine rules;
- sessions are found by a 32-bit hash of the sid and at most 1024 may live → one batch at a time per engine
  (a lock: the extension holds the GIL anyway, so threads lose nothing) and one session per shard, reused: each
  batch's facts are retracted once its matches are read, and a session a batch failed in is deleted;
- a ruleset cannot be replaced → each rules version gets its own ruleset names and `close()` deletes them.

Speed: a shard is sent only the fields its own rules test (a field no rule reads cannot change a match, and the
engine echoes every field back in each match), written and read by orjson; the hand-written `encode` is the
fallback for the rare batch holding a float written with an exponent, a NaN/infinity or an unsupported value.
The engine parses every fact and echoes it whole in each match, so it sees short field names (`_aliases`, one
map per shard) and each fact's place in the batch as its id. Every rule has a `cap`, so one action brings all
of a rule's matches (about 10 actions per answer, not 50), read by search. Together about a tenth less engine
time per answer (0.53-0.69 -> 0.50-0.55 ms, interleaved in one process); the C matching itself is the rest.
A new session costs the engine per rule of its ruleset (more than matching a request's 14 candidates in a
40-rule shard), so each shard keeps one and empties it: asserting, reading and retracting a bench answer's six
batches took ~0.23 ms against ~0.60 ms with a session created and deleted per batch (same batches, one process).
The engine finds a fact to retract by type, session and id, so it is sent those alone (the candidate shard's
retraction 0.041 -> 0.007 ms), and a session is kept only when the engine then lists no fact in it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import threading
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import durable_rules_engine as _dre
import orjson

from .ir import Condition, Rule

SHARD_SIZE = 40
# A rule's matches reach us in one action, up to this many (more come in further actions): an action costs a
# round trip through the extension and our loop, and a rule often matches most of a request's candidates.
_CAP = 10_000
_SENTINEL = "__sentinel__"
_names = itertools.count(1)


class EngineError(RuntimeError):
    pass


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:$ ")


def _string(s: str) -> str:
    # Ids, enum names and keys are plain; only the rare string with quotes or non-ASCII needs json.dumps.
    return f'"{s}"' if _PLAIN.issuperset(s) else json.dumps(s, ensure_ascii=False)


def encode(value: Any) -> str:
    """JSON the engine's parser accepts: no exponents, no NaN/infinity, booleans and strings as usual."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EngineError(f"cannot give the engine a non-finite number: {value}")
        text = repr(value)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")  # shortest round-trip digits, written out without an exponent
        return text if "." in text else text + ".0"  # keep a decimal point: floats stay floats
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(str(k))}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise EngineError(f"cannot give the engine a {type(value).__name__}")



def _suspect(raw: bytes) -> bool:
    # orjson writes 1e+16 / 1e-7 with a signed exponent and NaN/infinity as null; a false hit (a string holding
    # "null" or "e-") only sends that batch the slow way. Substring tests: a regex here cost as much as orjson.
    # "e-" is found from the rarer "-": searching that two-byte pattern, led by the commonest letter, took five
    # times as long as orjson took to write a candidate batch.
    if b"null" in raw or (b"+" in raw and b"e+" in raw):
        return True
    i = raw.find(b"-", 1)
    while i > 0:
        if raw[i - 1] == 0x65:  # e
            return True
        i = raw.find(b"-", i + 1)
    return False


def encode_batch(facts: list[dict[str, Any]]) -> str:
    """`encode(facts)`, over ten times faster for the common batch (orjson; floats dominate the cost)."""
    try:
        raw = orjson.dumps(facts)
    except TypeError:  # orjson.JSONEncodeError: an unsupported type or an int beyond 64 bits
        return encode(facts)  # raises the precise EngineError, or writes what orjson could not
    return encode(facts) if _suspect(raw) else raw.decode()


def _fields(rules: Sequence[tuple[str, Rule]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for _, rule in rules:
        for branch in rule.branches:
            for cond in branch:
                seen[cond.field] = None
    return tuple(f for f in seen if f not in ("t", "sid", "id"))


_RESERVED = frozenset(("t", "sid", "id", "m"))  # ours, the engine's, and the match name in every action


def _aliases(fields: Sequence[str]) -> dict[str, str]:
    """A short engine-side name per fact field: the engine parses each fact's text and echoes it whole in every
    match, so long keys cost twice. Names are letters only (never `$`, which the engine reads as an operator) and
    never the keys the engine or we use ourselves."""
    out: dict[str, str] = {}
    letters = "abcdefghijklmnopqrstuvwxyz"
    for name in itertools.chain(letters, (a + b for a in letters for b in letters)):
        if len(out) == len(fields):
            break
        if name not in _RESERVED:
            out[fields[len(out)]] = name
    if len(out) < len(fields):  # more than ~670 fields in one shard: cannot happen with SHARD_SIZE rules
        raise EngineError(f"too many fields in one ruleset: {len(fields)}")
    return out


def _test(cond: Condition, alias: dict[str, str]) -> dict[str, Any]:
    f, v = alias.get(cond.field, cond.field), cond.value
    match cond.op:
        case "eq":
            return {f: v}
        case "ne":
            return {"$neq": {f: v}}
        case "lt":
            return {"$lt": {f: v}}
        case "le":
            return {"$lte": {f: v}}
        case "gt":
            return {"$gt": {f: v}}
        case "ge":
            return {"$gte": {f: v}}
        case "in":
            alts = [{f: x} for x in v]  # type: ignore[union-attr]
            return alts[0] if len(alts) == 1 else {"$or": alts}
        case "not_in":
            return {"$and": [{"$neq": {f: x}} for x in v]}  # type: ignore[union-attr]
    raise EngineError(f"unknown operator {cond.op}")


def _pattern(fact_type: str, branch: Sequence[Condition], alias: dict[str, str]) -> dict[str, Any]:
    # The fact-type test comes first so no rule can ever match the engine's own state fact.
    return {"$and": [{"t": fact_type}, *(_test(c, alias) for c in branch)]}


_ID = re.compile(r'"id":"([0-9]+)"')


def _read(text: str, keys: dict[str, str], out: list[set[str]]) -> None:
    """Record the matches of one action's text, parsed: {rule: [{"m": fact}, ...]} (a capped rule's matches
    come as a list)."""
    for name, found in orjson.loads(text).items():
        rule_id = keys.get(name)
        if rule_id is not None:
            for match in found if isinstance(found, list) else (found,):
                out[int(match["m"]["id"])].add(rule_id)


def _retraction(fact_type: str, sid: str, n: int) -> str:
    """A batch's facts as the engine finds them to retract (by type, session and id), without the fields it
    would parse again for nothing."""
    head = '{"t":' + _string(fact_type) + ',"sid":"' + sid + '","id":"'
    rows = [head + str(i) + '"}' for i in range(n)]
    rows.append('{"t":"' + _SENTINEL + '","sid":"' + sid + '","id":"' + _SENTINEL + '"}')
    return "[" + ",".join(rows) + "]"


class _Shard:
    def __init__(self, name: str, definition: dict[str, Any], keys: dict[str, str], alias: dict[str, str]):
        self.name = name
        self.keys = keys  # engine rule name → rule id
        self.fields = tuple(alias)  # the fact fields this shard's rules test: all the engine needs to see
        self.pairs = tuple(alias.items())  # (fact field, its name in the engine)
        self.handle = _dre.create_ruleset(name, encode(definition))
        self.sid = ""  # the session this shard's batches reuse, empty between batches; "" = start a new one


class DurableEngine:
    """Evaluates one compiled rules version. Thread-safe; `close()` frees the engine's rulesets."""

    def __init__(self, rules: Sequence[Rule], shard_size: int = SHARD_SIZE):
        if shard_size < 1:
            raise ValueError("shard_size must be positive")
        self._lock = threading.Lock()
        self._sids = itertools.count(1)
        self._shards: dict[str, list[_Shard]] = {}
        self._closed = False
        tag = next(_names)
        by_fact: dict[str, list[tuple[str, tuple[Condition, ...], Rule]]] = {}
        for rule in rules:
            for branch in rule.branches:
                by_fact.setdefault(rule.fact, []).append((rule.id, branch, rule))
        try:
            for fact, entries in by_fact.items():
                shards = []
                for s in range(0, len(entries), shard_size):
                    chunk = entries[s : s + shard_size]
                    alias = _aliases(_fields([(rid, r) for rid, _, r in chunk]))
                    definition: dict[str, Any] = {}
                    keys: dict[str, str] = {}
                    for i, (rule_id, branch, _) in enumerate(chunk):
                        name = f"r{s + i}"
                        definition[name] = {"all": [{"m": _pattern(fact, branch, alias)}], "cap": _CAP}
                        keys[name] = rule_id
                    definition[_SENTINEL] = {"all": [{"m": {"t": _SENTINEL}}], "cap": _CAP}
                    shards.append(_Shard(f"ga{tag}_{fact}_{s // shard_size}", definition, keys, alias))
                self._shards[fact] = shards
        except BaseException:
            self.close()
            raise

    @property
    def ruleset_count(self) -> int:
        return sum(len(s) for s in self._shards.values())

    def evaluate(self, fact_type: str, facts: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
        """Which rule ids matched each fact (keyed by the fact's `id`)."""
        ids = [str(f["id"]) for f in facts]
        matched: dict[str, set[str]] = {fid: set() for fid in ids}
        # The engine knows each fact by its place in the batch (plain digits, short to echo and never escaped).
        found: list[set[str]] = [matched[fid] for fid in ids]
        with self._lock:
            if self._closed:
                raise EngineError("engine is closed")
            for shard in self._shards.get(fact_type, []) if facts else []:
                self._run(shard, fact_type, facts, found)
        return matched

    def _run(self, shard: _Shard, fact_type: str, facts: Sequence[dict[str, Any]], out: list[set[str]]) -> None:
        # A shard keeps one session: creating one costs the engine per rule of the ruleset (a 40-rule shard's
        # session cost more than matching 14 facts in it), so each batch's facts are retracted when its matches
        # are read and the empty session serves the next batch. Anything that fails leaves it deleted instead.
        sid = shard.sid or str(next(self._sids))
        pairs = shard.pairs
        batch = []
        for i, f in enumerate(facts):
            # A field missing from the fact stays missing (it never matches, as in the reference evaluator).
            row = {a: f[k] for k, a in pairs if k in f}
            row["t"], row["sid"], row["id"] = fact_type, sid, str(i)
            batch.append(row)
        batch.append({"t": _SENTINEL, "sid": sid, "id": _SENTINEL})
        keys = shard.keys
        text = encode_batch(batch)
        # Rows of scalars only (no brace but each row's own, no bracket but the batch's; one inside a string sends
        # the batch the slow way) make every `{"m":` and `"id":"` in an action text structure: read by search.
        flat = text.count("{") == len(batch) and text.count("[") == 1
        emptied, shard.sid = False, ""  # the session is the batch's until its facts are retracted
        try:
            state_handle = _dre.assert_facts(shard.handle, text)[1]
            step = _dre.start_action_for_state(shard.handle, state_handle)
            text = step[1] if step else None
            while text:
                if flat and text.count(':[{"m":') == 1 and text.startswith('{"'):
                    rule_id = keys.get(text[2 : text.index('"', 2)])  # the one rule this action is for
                    if rule_id is not None:
                        for place in _ID.findall(text):
                            out[int(place)].add(rule_id)
                else:
                    _read(text, keys, out)
                text = _dre.complete_and_start_action(shard.handle, state_handle)
            _dre.retract_facts(shard.handle, _retraction(fact_type, sid, len(facts)))
            # Emptied: no fact left and no action waiting; a session with either is deleted, not reused.
            emptied = (_dre.get_facts(shard.handle, sid) == "[]"
                       and not _dre.start_action_for_state(shard.handle, state_handle))
        except _dre.error as exc:
            raise EngineError(f"durable_rules failed in {shard.name}: {exc}") from exc
        finally:
            if emptied:
                shard.sid = sid
            else:
                with contextlib.suppress(_dre.error):  # a session that never started has nothing to delete
                    _dre.delete_state(shard.handle, sid)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for shards in self._shards.values():
                for shard in shards:
                    if shard.sid:  # deleting the ruleset does not free a session still in it
                        with contextlib.suppress(_dre.error):
                            _dre.delete_state(shard.handle, shard.sid)
                    _dre.delete_ruleset(shard.handle)
            self._shards.clear()
