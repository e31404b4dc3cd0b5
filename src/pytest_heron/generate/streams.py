"""Counter-based random streams: every draw is a pure function of its key and a row number.

A stream key is derived from ``(seed, table, column, purpose)`` with BLAKE2b; a draw for row ``r``
is the SplitMix64 finaliser applied to ``key + r * golden``. Nothing here keeps state, so rows
can be generated in any order, in chunks, in parallel, and still give the same values. Only exact
arithmetic is used (integer mixing, and float multiplications, additions, divisions and square
roots, which IEEE 754 rounds the same way on every machine); no library RNG whose stream could
change between versions, and no transcendental functions whose last bit may differ by platform.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV_2_53 = 1.0 / 9007199254740992.0


def stream_key(seed: int, *parts: str) -> int:
    """A 64-bit key for one stream, e.g. ``stream_key(42, "orders.orders", "placed_at")``.

    >>> stream_key(42, "a", "b") == stream_key(42, "a", "b") != stream_key(43, "a", "b")
    True
    """
    text = "\x1f".join([str(seed), *parts]).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def mix(key: int, rows: I64) -> U64:
    """64 random bits for each row of ``rows`` (0-based row numbers) in the stream ``key``."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) * _GOLDEN + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def uniform(key: int, rows: I64) -> F64:
    """Floats in [0, 1), 53 random bits each."""
    return (mix(key, rows) >> np.uint64(11)).astype(np.float64) * _INV_2_53


def integers(key: int, rows: I64, low: int, high: int) -> I64:
    """Integers in [low, high], uniform."""
    span = high - low + 1
    return (np.floor(uniform(key, rows) * span).astype(np.int64) + low).astype(np.int64)


def skewed(key: int, rows: I64, n: npt.NDArray[np.int64] | int, s: float = 1.0) -> I64:
    """Indexes in [0, n) where low indexes are much more likely (a power-law-like skew).

    Computed as ``floor(n * u**p)`` with ``p = 1 + 2s`` made of exact multiplications (and one
    square root for half-integer ``s``), so it is identical on every machine. ``n`` may be an
    array (one range per row).
    """
    u = uniform(key, rows)
    p = 1.0 + 2.0 * s
    whole = int(p)
    out = np.ones_like(u)
    for _ in range(whole):
        out = out * u
    if p - whole >= 0.5:
        out = out * np.sqrt(u)
    idx = np.floor(out * n).astype(np.int64)
    return np.minimum(idx, np.asarray(n, dtype=np.int64) - 1)


def permuted(key: int, rows: I64, n: int) -> I64:
    """Indexes in [0, n) that are all different for rows 0..n-1 (a keyed affine permutation:
    ``(row * step + offset) mod n`` with ``step`` coprime to ``n``); they repeat after n rows."""
    import math

    step = key % n or 1
    while math.gcd(step, n) != 1:
        step = step % n + 1
    offset = (key >> 32) % n
    return ((rows % n) * step + offset) % n


def weighted(key: int, rows: I64, weights: list[float]) -> I64:
    """Indexes into ``weights`` drawn in proportion to the weights."""
    total = 0.0
    cumulative = []
    for w in weights:
        total += float(w)
        cumulative.append(total)
    cdf = np.asarray(cumulative, dtype=np.float64) / total
    idx = np.searchsorted(cdf, uniform(key, rows), side="right")
    return np.minimum(idx, len(weights) - 1).astype(np.int64)


def chance(key: int, rows: I64, p: float) -> npt.NDArray[np.bool_]:
    """True for a share ``p`` of rows."""
    if p <= 0:
        return np.zeros(rows.shape, dtype=bool)
    return uniform(key, rows) < p


def apportion(total: int, weights: list[float], minimum: int = 0) -> list[int]:
    """Split ``total`` into integer parts proportional to ``weights`` (largest remainder).

    Every part gets at least ``minimum`` when ``total`` allows it. Ties in the remainders go to
    the earlier part, so the result depends only on the inputs.

    >>> apportion(10, [1.0, 1.0, 1.0])
    [4, 3, 3]
    """
    n = len(weights)
    base = minimum if total >= minimum * n else 0
    rest = total - base * n
    wsum = 0.0
    for w in weights:
        wsum += w
    shares = [rest * w / wsum for w in weights]
    parts = [int(s) for s in shares]
    left = rest - sum(parts)
    order = sorted(range(n), key=lambda i: (-(shares[i] - parts[i]), i))
    for i in order[:left]:
        parts[i] += 1
    return [base + p for p in parts]
