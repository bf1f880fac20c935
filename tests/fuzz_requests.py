"""Generated RecommendRequest protos: real example briefs with a few fields set to hostile values.

Mutating real briefs keeps about half of the requests past validation, so sizing, the engine and rendering see
extreme numbers too (a purely random proto is rejected by validation almost every time and exercises little
else). Hypothesis draws one 64-bit seed per request and `request_from_seed` builds the request from it with
`random.Random`: one draw instead of dozens keeps 20,000 requests within seconds (a Hypothesis-native strategy
of the same shape costs ~2 ms a request to draw), and a failure is reproduced from its seed. The seed does not
shrink meaningfully; the failing request is printed whole instead.
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from service.frontends.cli import load_request
from service.wire.api import pb
from service.wire.validate import LIMITS

EXAMPLES = Path(__file__).parents[1] / "examples"
BASES: tuple[bytes, ...] = (
    *(load_request(p).SerializeToString() for p in sorted(EXAMPLES.glob("*.yaml"))),
    pb.RecommendRequest().SerializeToString(),
)

EDGE_DOUBLES = (0.0, -0.0, -1.0, 5e-324, 1e-308, 1e-9, 0.001, 0.009, 0.5, 0.999, 1.0, 7.0, 70.0, 405.0, 1e3,
                1e4, 1e5, 1e6, 1e7, 1e9, 1e12, 1e15, 1e300, 1e308, 1.7976931348623157e308, math.inf, -math.inf,
                math.nan)
EDGE_INTS = (0, 1, -1, 2, 8, 128, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 100_000, 1_000_000,
             10_000_000)
LIMIT_VALUES = tuple(sorted({v for limit in LIMITS.values() for v in (limit, limit * 0.999, limit + 1)}))
DATES = ("2025-01-01", "2026-11-15", "0001-01-01", "9999-12-31", "2024-02-29", "2023-02-29", "2025-13-01",
         "20250101", "2025-1-1", "yesterday", "", " 2025-01-01", "2025-01-01T00:00:00")
STRINGS = ("", "en", "zh-CN", "zh", "EN", "fr", "h100-sxm", "h200", "rtx-4090", "no-such-gpu", "vllm", "\x00",
           "{gpu}", "{0[0]}", "é" * 300, "x" * 256, "x" * 257, "x" * 5000, *DATES)
GPUS = ("h100-sxm", "h200", "a100-80gb", "l40s", "rtx-4090")


def _double(rng: random.Random) -> float:
    pick = rng.randrange(5)
    if pick == 0:
        return rng.choice(EDGE_DOUBLES)
    if pick == 1:
        return float(rng.choice(LIMIT_VALUES))
    if pick == 2:
        return rng.uniform(0, 1e7)
    if pick == 3:
        return 10.0 ** rng.uniform(-320, 308)
    return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]  # any bit pattern: NaNs, subnormals


def _int64(rng: random.Random) -> int:
    pick = rng.randrange(4)
    if pick == 0:
        return rng.choice(EDGE_INTS)
    if pick == 1:
        return int(rng.choice(LIMIT_VALUES))
    if pick == 2:
        return rng.randint(0, 10**7)
    return rng.randint(-(2**63), 2**63 - 1)


def _int32(rng: random.Random) -> int:
    return rng.choice((0, 1, 5, 50, 51, -1, 2**31 - 1, -(2**31))) if rng.random() < 0.5 else rng.randint(
        -(2**31), 2**31 - 1)


def _string(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(STRINGS)
    # Any code point but lone surrogates (protobuf refuses those on the client side already).
    return "".join(chr(rng.choice((rng.randint(32, 126), rng.randint(0xA0, 0xD7FF), rng.randint(0xE000, 0x10FFFF))))
                   for _ in range(rng.randint(0, 12)))


def _scalar_paths(desc: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], FieldDescriptor]]:
    out = []
    for f in desc.fields:
        if f.type == f.TYPE_MESSAGE and not f.is_repeated:
            out += _scalar_paths(f.message_type, (*prefix, f.name))
        elif not f.is_repeated:
            out.append(((*prefix, f.name), f))
    return out


PATHS = _scalar_paths(pb.RecommendRequest.DESCRIPTOR)


def _value(rng: random.Random, f: FieldDescriptor) -> Any:
    if f.type in (f.TYPE_DOUBLE, f.TYPE_FLOAT):
        return _double(rng)
    if f.type in (f.TYPE_INT64, f.TYPE_UINT64):
        return _int64(rng)
    if f.type in (f.TYPE_INT32, f.TYPE_UINT32):
        return _int32(rng)
    if f.type == f.TYPE_ENUM:  # open enums: unknown numbers arrive as they are
        return rng.choice([v.number for v in f.enum_type.values]) if rng.random() < 0.8 else rng.randint(-3, 1000)
    if f.type == f.TYPE_BOOL:
        return rng.random() < 0.5
    return _string(rng)


def _set(msg: Message, path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        msg = getattr(msg, name)
    setattr(msg, path[-1], value)


def _quote(rng: random.Random) -> pb.PriceQuote:
    return pb.PriceQuote(
        gpu=rng.choice(GPUS) if rng.random() < 0.7 else _string(rng),
        usd_per_hour=_double(rng) if rng.random() < 0.7 else rng.uniform(0.1, 20),
        provider=_string(rng),
        as_of=rng.choice(DATES) if rng.random() < 0.7 else _string(rng),
    )


def request_from_seed(seed: int) -> pb.RecommendRequest:
    """A real brief with 0-6 fields replaced; sometimes hostile toolchains and quotes."""
    rng = random.Random(seed)
    r = pb.RecommendRequest.FromString(rng.choice(BASES))
    for _ in range(rng.randint(0, 6)):
        path, f = rng.choice(PATHS)
        _set(r, path, _value(rng, f))
    if rng.random() < 0.1:
        r.brief.toolchain[:] = [_string(rng) for _ in range(rng.randint(0, 40))]
    shape = rng.randrange(20)
    if shape == 0:  # many long unknown quote ids: the violation list itself must stay bounded
        r.quotes.extend(pb.PriceQuote(gpu=f"unknown-gpu-{i:04d}-" + "q" * 200, usd_per_hour=1.0)
                        for i in range(rng.randint(20, 100)))
    elif shape <= 4:
        r.quotes.extend(_quote(rng) for _ in range(rng.randint(1, 4)))
    return r


seeds = st.integers(min_value=0, max_value=2**64 - 1)
