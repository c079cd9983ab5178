"""Field types and limits shared by every surface (PROTOCOL.md 2)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
KIB = 1024


def _max_bytes(limit: int):
    def check(value: str) -> str:
        if len(value.encode("utf-8")) > limit:
            raise ValueError(f"must be at most {limit} bytes (got {len(value.encode('utf-8'))})")
        return value

    return AfterValidator(check)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


class Request(BaseModel):
    """Base of every tool's arguments: unknown names are 400, types are strict (``"60"`` or
    ``true`` is not a number: PROTOCOL.md 2), whitespace is kept as sent. Validators are built on
    first use (``defer_build``): a Lambda builds only its own tool's model (ToolApp does at import),
    not the other 41."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False, strict=True, defer_build=True)


Name = Annotated[str, Field(pattern=NAME_PATTERN, description="An agent name or group slug: ^[a-z][a-z0-9_-]{0,63}$")]
Body = Annotated[str, Field(min_length=1, description="Message text, at most 32 KiB"), _max_bytes(32 * KIB), AfterValidator(_non_blank)]
Short = Annotated[str, Field(min_length=1, max_length=200)]
Objective = Annotated[str, Field(min_length=1, description="What to do, at most 8 KiB"), _max_bytes(8 * KIB), AfterValidator(_non_blank)]
Criterion = Annotated[str, Field(min_length=1), _max_bytes(KIB)]
Scope = Annotated[str, Field(max_length=1024, description="A glob (PROTOCOL.md 8), a task key or a resource glob")]
ResourceKey = Annotated[str, Field(min_length=1, max_length=512, description="A resource key such as github.com/acme/api or a git remote")]


def _id(prefix: str, what: str):
    return Annotated[str, Field(min_length=1, max_length=64, description=f"{what} ({prefix}_...)")]


TaskId = _id("task", "A task id")
ThreadId = _id("thr", "A thread id")
InstanceId = _id("inst", "An instance id")
ClaimId = _id("clm", "A claim id")
