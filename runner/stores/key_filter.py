"""The keys a cache was given, as a Bloom filter: "never given" for certain, in 2 MB whatever
their number.

A key found here may have been given (about 0.4% of never-given keys are found at a million
keys given, 7% at three million: each only costs the lookup it would have cost anyway).
The LLM cache's keys are sha256 hex digests, whose first 18 digits are the three 24-bit
positions; any other key is hashed first."""

from __future__ import annotations

import hashlib

POSITION_BITS = 24
BITS = 1 << POSITION_BITS        # 2 MB of bits
_MASK = BITS - 1
_HEX_DIGITS = 3 * POSITION_BITS // 4


def _positions(key: str) -> tuple[int, int, int]:
    value = _leading_hex(key)
    if value is None:
        value = int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=9).digest())
    return value & _MASK, (value >> POSITION_BITS) & _MASK, (value >> (2 * POSITION_BITS)) & _MASK


def _leading_hex(key: str) -> int | None:
    if len(key) < _HEX_DIGITS:
        return None
    try:
        return int(key[:_HEX_DIGITS], 16)
    except ValueError:
        return None


class KeyFilter:
    def __init__(self) -> None:
        self._bits = bytearray(BITS // 8)

    def add(self, key: str) -> None:
        bits = self._bits
        for position in _positions(key):
            bits[position >> 3] |= 1 << (position & 7)

    def __contains__(self, key: str) -> bool:
        bits = self._bits
        a, b, c = _positions(key)
        return bool(bits[a >> 3] & (1 << (a & 7)) and bits[b >> 3] & (1 << (b & 7)) and bits[c >> 3] & (1 << (c & 7)))
