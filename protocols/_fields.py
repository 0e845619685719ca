"""Field kinds derived from the message dataclasses' annotations, and the readers that turn a
decoded msgpack value into a typed field value (or an `invalid_field` ProtocolError)."""

from __future__ import annotations

import enum
import math
import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any

from .errors import ErrorCode, ProtocolError
from .messages import MESSAGE_TYPES, Limits

__all__ = ["SPECS", "FieldSpec", "Kind", "build", "invalid", "specs_of"]


class Kind(enum.Enum):
    INT = "an integer"
    FLOAT = "a finite number"
    STR = "a string"
    BOOL = "a boolean"
    BYTES = "binary (msgpack bin)"
    STR_LIST = "an array of strings"
    FLOAT_PAIR = "an array of 2 finite numbers"
    FLOAT_LIST = "an array of finite numbers"
    MAP = "a map with string keys"
    INT_LIST = "an array of integers"
    MAP_LIST = "an array of maps with string keys"
    LIMITS = "a limits map"


_KIND_OF: dict[Any, Kind] = {
    int: Kind.INT,
    float: Kind.FLOAT,
    str: Kind.STR,
    bool: Kind.BOOL,
    bytes: Kind.BYTES,
    tuple[str, ...]: Kind.STR_LIST,
    tuple[float, float]: Kind.FLOAT_PAIR,
    tuple[float, ...]: Kind.FLOAT_LIST,
    dict[str, Any]: Kind.MAP,
    tuple[int, ...]: Kind.INT_LIST,
    tuple[dict[str, Any], ...]: Kind.MAP_LIST,
    Limits: Kind.LIMITS,
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: Kind
    required: bool
    omit_when_false: bool  # an optional flag (cut, disc): absent means False


def specs_of(cls: type) -> tuple[FieldSpec, ...]:
    """The wire fields of a dataclass whose annotations are all kinds the protocol knows."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        annotation = hints[f.name]
        if isinstance(annotation, types.UnionType):  # X | None
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        kind = _KIND_OF[annotation]
        out.append(FieldSpec(f.name, kind, f.default is MISSING, f.default is False))
    return tuple(out)


SPECS: dict[type, tuple[FieldSpec, ...]] = {cls: specs_of(cls) for cls in (*MESSAGE_TYPES.values(), Limits)}


def invalid(field: str, message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message, field)


def _finite(value: Any, field: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise invalid(field, f"`{field}` must be a finite number, got {_describe(value)}")
    return float(value)


def _describe(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return type(value).__name__


def _read(kind: Kind, value: Any, field: str) -> Any:
    """The typed value of one field; bool is never accepted as a number."""
    if kind is Kind.FLOAT:
        return _finite(value, field)
    if kind is Kind.FLOAT_PAIR or kind is Kind.FLOAT_LIST:
        if type(value) is not list or (kind is Kind.FLOAT_PAIR and len(value) != 2):
            raise invalid(field, f"`{field}` must be {kind.value}, got {_describe(value)}")
        return tuple(_finite(item, f"{field}[{i}]") for i, item in enumerate(value))
    if kind is Kind.STR_LIST:
        if type(value) is not list or any(type(item) is not str for item in value):
            raise invalid(field, f"`{field}` must be {kind.value}")
        return tuple(value)
    if kind is Kind.MAP:
        if type(value) is not dict or any(type(key) is not str for key in value):
            raise invalid(field, f"`{field}` must be {kind.value}")
        return value
    if kind is Kind.INT_LIST:
        if type(value) is not list or any(type(item) is not int for item in value):
            raise invalid(field, f"`{field}` must be {kind.value}")
        return tuple(value)
    if kind is Kind.MAP_LIST:
        if type(value) is not list or any(
            type(item) is not dict or any(type(key) is not str for key in item) for item in value
        ):
            raise invalid(field, f"`{field}` must be {kind.value}")
        return tuple(value)
    if kind is Kind.LIMITS:
        if type(value) is not dict:
            raise invalid(field, f"`{field}` must be {kind.value}, got {_describe(value)}")
        return build(Limits, value, prefix=f"{field}.")
    expected = {Kind.INT: int, Kind.STR: str, Kind.BOOL: bool, Kind.BYTES: bytes}[kind]
    if type(value) is not expected:
        raise invalid(field, f"`{field}` must be {kind.value}, got {_describe(value)}")
    return value


def build(
    cls: type, raw: dict[Any, Any], *, prefix: str = "", specs: tuple[FieldSpec, ...] | None = None
) -> Any:
    """An instance of `cls` from a decoded map (msgpack or JSON): unknown keys are ignored,
    nil/null counts as absent. `specs` defaults to the message's entry in SPECS."""
    kwargs: dict[str, Any] = {}
    where = f" in `{cls.T}`" if hasattr(cls, "T") else ""
    for spec in SPECS[cls] if specs is None else specs:
        value = raw.get(spec.name)
        name = prefix + spec.name
        if value is None:
            if spec.required:
                raise invalid(name, f"`{name}` is required{where}")
            continue
        kwargs[spec.name] = _read(spec.kind, value, name)
    return cls(**kwargs)
