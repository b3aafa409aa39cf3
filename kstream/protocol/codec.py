"""A safe encoding of Python values of built-in types: msgpack with extension types.

What it carries, exactly as given back (a tuple stays a tuple, a set a set):
None, bool, int of any size, float (nan and infinities too), str, bytes,
list, tuple, dict (keys of any of these hashable types), set and frozenset,
nested, and the record types a job declares (`RecordType`). Anything else is
refused with `UnsupportedTypeError` (a `TypeError`) naming the type. Decoding runs no code but the
declared types' own `decode` functions, and never crashes the interpreter:
malformed, truncated or hostile bytes raise `DecodeError` with one clear line.

msgpack has no tuple, set, big-int or record type, so they are extension
types whose data is itself msgpack. Each extension level is a nested
``unpackb`` call, and each costs tens of kilobytes of C stack: a few hundred
crafted levels overflow it and kill the process (a segmentation fault, no
exception). So nesting of extension types is bounded (`MAX_DEPTH`) on both
sides, with one hook per level rather than a counter shared between threads.
Lists and dicts nest natively; msgpack bounds their depth itself.

`Codec.dumps` with ``canonical=True`` is deterministic for equal values (sets
are sorted), which state keys and map entries need; channels skip the sort.

Batches of stream records have their own fast paths (`Codec.dumps_batch`):
a batch of pairs — every hash edge's ``(key, value)`` items, and any batch
whose items are all 2-tuples — is packed as one flat list ``[k0, v0, k1, v1,
...]``, so pairs of str or int cost no extension type at all, and is rebuilt
with `zip`; pairs whose value is their key (``key_by(lambda w: w)``, the
word count) send the key once, as pickle's memo would. These make the codec
faster than pickle on the word count's batches (`benchmarks/codec_bench.py`).
Nested tuples and sets cost a Python call each (the extension hook): a batch
of them encodes several times slower than pickle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

import msgpack

from kstream.errors import DecodeError, UnsupportedTypeError

__all__ = [
    "EXT_BIGINT",
    "EXT_FROZENSET",
    "EXT_RECORD",
    "EXT_SET",
    "EXT_TUPLE",
    "ITEMS",
    "MAX_DEPTH",
    "PAIRS",
    "SAME_PAIRS",
    "Codec",
    "RecordType",
]

#: msgpack extension type codes; stored in snapshots and channels, so never renumbered.
EXT_TUPLE, EXT_SET, EXT_FROZENSET, EXT_BIGINT, EXT_RECORD = 1, 2, 3, 4, 5
#: Shapes of a batch (`Codec.dumps_batch`): the list of items; the flat list
#: k0, v0, k1, v1, ... of (key, value) pairs; the keys of pairs (k, k).
ITEMS, PAIRS, SAME_PAIRS = 1, 2, 4
#: Extension types nested deeper than this are refused: each level is a nested
#: msgpack call with a large C stack frame (about 200 levels overflow 8 MiB).
MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class RecordType:
    """A record type the job declares for its channels, and how it travels.

    `encode` turns an instance (of exactly `type`) into a value the codec
    carries (built-in types, or other declared types); `decode` builds the
    instance back from it. `tag` names the type on the wire, so it must be the
    same in every worker and must not change while a job's channels hold
    records (the default is the type's module and qualified name).
    """

    type: type
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    tag: str = ""

    @property
    def name(self) -> str:
        return self.tag or f"{self.type.__module__}.{self.type.__qualname__}"


class Codec:
    """Encodes and decodes values (see the module docstring); reusable and thread-safe.

    `dumps` raises `UnsupportedTypeError` (a `TypeError`) for a value of a
    type it does not carry (or nested too deeply), naming the type; `loads` raises `DecodeError` for
    bytes that are not a value it wrote; ``loads(dumps(v)) == v`` with the
    same types throughout.
    """

    def __init__(self, types: Iterable[RecordType] = (), *, canonical: bool = False) -> None:
        self._types = {t.type: t for t in types}
        self._by_tag = {t.name: t for t in self._types.values()}
        if len(self._by_tag) != len(self._types):
            raise ValueError("two declared record types have the same tag")
        self._canonical = canonical
        # One packer pool and one ext hook per nesting level (see the module docstring).
        self._pools: list[list[msgpack.Packer]] = [[] for _ in range(MAX_DEPTH + 1)]
        self._defaults = [self._default_at(d) for d in range(MAX_DEPTH + 1)]
        self._hooks = [self._hook_at(d) for d in range(MAX_DEPTH + 1)]

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as what it was made of: its pooled packers (C objects, filled on
        # first use) cannot be pickled, and a Codec travels with the functions
        # Spark ships to executors (a job's state serde is bound to one).
        return (_rebuild_codec, (tuple(self._types.values()), self._canonical))

    # -- encoding -------------------------------------------------------------

    def _pack(self, value: Any, depth: int) -> bytes:
        """msgpack of `value` at extension depth `depth`, with a pooled `Packer`.

        Building a `Packer` per call is most of ``packb``'s cost. A packer is
        not reentrant (an extension's data is packed while the outer value is),
        so each level has its own pool; pop and append are atomic, so threads
        may share it.
        """
        pool = self._pools[depth]
        # strict_types: tuples and subclasses of int/str/... reach `default`
        # instead of silently becoming lists and plain values.
        packer = (
            pool.pop()
            if pool
            else msgpack.Packer(default=self._defaults[depth], use_bin_type=True, strict_types=True)
        )
        try:
            out: bytes = packer.pack(value)  # resets its buffer on errors too
        finally:
            pool.append(packer)
        return out

    def _default_at(self, depth: int) -> Callable[[Any], msgpack.ExtType]:
        def default(obj: Any) -> msgpack.ExtType:
            t = type(obj)
            if depth >= MAX_DEPTH:
                raise UnsupportedTypeError(
                    t, f"values nested more than {MAX_DEPTH} tuples/sets deep"
                )
            if t is tuple:
                return _ext(EXT_TUPLE, self._pack(list(obj), depth + 1))
            if t is set or t is frozenset:
                items = list(obj)
                if self._canonical:
                    try:
                        # Sets iterate in hash order, salted per process for str.
                        items.sort()
                    except TypeError:
                        items.sort(key=lambda x: self._pack(x, depth + 1))
                code = EXT_SET if t is set else EXT_FROZENSET
                return msgpack.ExtType(code, self._pack(items, depth + 1))
            if t is int:
                # Beyond 64 bits msgpack has no integer type.
                return msgpack.ExtType(EXT_BIGINT, str(obj).encode())
            declared = self._types.get(t)
            if declared is not None:
                body = [declared.name, declared.encode(obj)]
                return msgpack.ExtType(EXT_RECORD, self._pack(body, depth + 1))
            raise UnsupportedTypeError(t)

        return default

    def dumps(self, value: Any) -> bytes:
        """The encoding of `value`; `UnsupportedTypeError` naming a type it cannot carry."""
        return self._pack(value, 0)

    def dumps_batch(self, items: list[Any], pairs: bool) -> tuple[int, bytes]:
        """(shape, encoding) of a batch; `pairs`: every item is a 2-tuple (not checked).

        The shape (`ITEMS`, `PAIRS` or `SAME_PAIRS`) is what `loads_batch` needs
        back. A batch not declared as pairs is still sent as pairs when all its
        items are 2-tuples (the check costs little next to what it saves).
        """
        if not pairs and items and type(items[0]) is tuple:
            pairs = all(type(x) is tuple and len(x) == 2 for x in items)
        if not pairs:
            return ITEMS, self._pack(items, 0)
        if all(k is v for k, v in items):
            # Each record its own key (``key_by(lambda w: w)``): send it once.
            return SAME_PAIRS, self._pack([k for k, _ in items], 0)
        return PAIRS, self._pack(list(chain.from_iterable(items)), 0)

    # -- decoding -------------------------------------------------------------

    def _hook_at(self, depth: int) -> Callable[[int, bytes], Any]:
        def hook(code: int, data: bytes) -> Any:
            if depth >= MAX_DEPTH:
                raise ValueError(f"values nested more than {MAX_DEPTH} tuples/sets deep")
            if code == EXT_BIGINT:
                if len(data) > 5000:
                    # int() of a long digit string is quadratic; Python refuses > 4300 digits.
                    raise ValueError("integer of more than 5000 digits")
                return int(data)
            inner = self._unpack(data, depth + 1)
            if code == EXT_TUPLE:
                return tuple(_a_list(inner))
            if code == EXT_SET:
                return set(_a_list(inner))
            if code == EXT_FROZENSET:
                return frozenset(_a_list(inner))
            if code == EXT_RECORD:
                if not (type(inner) is list and len(inner) == 2 and type(inner[0]) is str):
                    raise ValueError("malformed declared record")
                declared = self._by_tag.get(inner[0])
                if declared is None:
                    raise ValueError(f"record type {inner[0]!r} is not declared by this job")
                return declared.decode(inner[1])
            raise ValueError(f"unknown extension type {code}")

        return hook

    def _unpack(self, data: Any, depth: int) -> Any:
        return msgpack.unpackb(
            data, ext_hook=self._hooks[depth], raw=False, strict_map_key=False, use_list=True
        )

    def loads(self, data: bytes | memoryview) -> Any:
        """The value `data` encodes; `DecodeError` if it is not a value this codec wrote."""
        try:
            return self._unpack(data, 0)
        except Exception as exc:
            raise DecodeError(f"not a kstream-encoded value: {_why(exc)}") from None

    def loads_batch(self, data: bytes | memoryview, shape: int) -> list[Any]:
        """The items of a batch `dumps_batch` encoded as `shape`."""
        try:
            flat = self._unpack(data, 0)
        except Exception as exc:
            raise DecodeError(f"not a kstream-encoded batch: {_why(exc)}") from None
        if type(flat) is not list:
            raise DecodeError(f"not a kstream-encoded batch: a {type(flat).__name__}, not a list")
        if shape == ITEMS:
            return flat
        if shape == SAME_PAIRS:
            return list(zip(flat, flat, strict=True))
        if len(flat) % 2:
            raise DecodeError("not a kstream-encoded batch: pairs of an odd number of values")
        it = iter(flat)
        return list(zip(it, it, strict=True))


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    """`msgpack.ExtType` without its argument checks: tuples are the common extension
    (window entries, keyed pairs' values), and the checks cost a third of its encoding;
    `code` is one of ours and `data` comes from a packer."""
    ext: msgpack.ExtType = tuple.__new__(msgpack.ExtType, (code, data))
    return ext


def _a_list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise ValueError(f"extension holds a {type(value).__name__}, not a list")
    return value


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _rebuild_codec(types: tuple[RecordType, ...], canonical: bool) -> Codec:
    """A `Codec` unpickled (`Codec.__reduce__`)."""
    return Codec(types, canonical=canonical)
