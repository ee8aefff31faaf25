"""Keys and values as the node takes them: bytes. A `str` is taken as its UTF-8 bytes; anything
else is refused with a TypeError, rather than converted by `bytes()` (which makes `5` five zero
bytes)."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Union

#: What a key or a value may be given as: bytes (or another bytes-like object) or a str.
Data = Union[bytes, bytearray, memoryview, str]

_BYTES_LIKE = (bytes, bytearray, memoryview)


def _shown(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


def key_bytes(key: object) -> bytes:
    """`key` as the bytes the node stores, or a TypeError that says what was wrong."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, _BYTES_LIKE):
        return bytes(key)
    raise TypeError(
        f"a key must be bytes or str, not {type(key).__name__} ({_shown(key)})"
    )


def value_bytes(value: object, key: object) -> bytes:
    """The value written to `key` as bytes, or a TypeError that says what was wrong."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, _BYTES_LIKE):
        return bytes(value)
    where = f"the value for key {_shown(key)}"
    if value is None:
        raise TypeError(f"{where} is None: to delete a key, use delete(key)")
    raise TypeError(
        f"{where} must be bytes or str, not {type(value).__name__} ({_shown(value)}): "
        f"convert it first, e.g. str(value) or value.to_bytes(...)"
    )


def read_keys(reads: Iterable[Data]) -> list[bytes]:
    """The keys a one-shot transaction reads."""
    if isinstance(reads, (str, *_BYTES_LIKE)):
        raise TypeError(
            f"reads must be a list of keys, not one key ({_shown(reads)}): "
            f"write reads=[{_shown(reads)}]"
        )
    return [key_bytes(k) for k in reads]


def write_pairs(
    writes: Optional[Mapping[Data, Optional[Data]]],
) -> list[tuple[bytes, Optional[bytes]]]:
    """The writes of a one-shot transaction: (key, value) pairs, None to delete the key."""
    if writes is None:
        return []
    if not isinstance(writes, Mapping):
        raise TypeError(
            f"writes must be a mapping of key to value (a dict), not {type(writes).__name__}"
        )
    return [
        (key_bytes(k), None if v is None else value_bytes(v, k)) for k, v in writes.items()
    ]
