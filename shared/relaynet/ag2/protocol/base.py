"""The base of every protocol model: pydantic v2, strict JSON types, no unknown keys.

AG2's records are dataclasses built with ``cls(**data)``: an unknown or a missing key raises
``TypeError``, which the wire answers as ``error`` (relaynet.ag2.wire). Ours raise pydantic's
``ValidationError`` (a ``ValueError``) in the same cases, answered the same. Unlike AG2's
dataclasses, a value of the wrong JSON type (a number for a string, say) is refused too, rather
than stored; AG2's own client never sends one. ``int | float`` fields keep an integer an integer,
as ``asdict`` does.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

E = TypeVar("E", bound=Enum)
M = TypeVar("M", bound="WireModel")


def enum_field(enum: type[E]) -> Any:
    """An enum field read from its value (strict mode would want the member) and written as its
    value, as AG2's ``to_dict`` writes ``state.value`` and ``role.value``."""
    return Annotated[enum, Field(strict=False), PlainSerializer(lambda v: v.value, return_type=str)]


class WireModel(BaseModel):
    """A protocol record: ``from_dict`` is AG2's ``from_dict`` (raises ``ValidationError``),
    ``to_dict`` its ``to_dict`` (every field, in declaration order, ``None`` included).

    ``defer_build``: a model's validator and serialiser are built on its first use (about 1 ms
    each) rather than at import, so a function pays only for the records it handles (the
    keepalive: a ping frame; the notifier: notify frames and envelopes). Built at import, the
    protocol's models added about 10 ms to each AG2 wire function's init (issue 30)."""

    model_config = ConfigDict(strict=True, extra="forbid", validate_assignment=True, defer_build=True)

    @classmethod
    def from_dict(cls: type[M], data: dict[str, Any]) -> M:
        return cls.model_validate(data)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()
