"""Configuration read from the environment (PROTOCOL.md 9), once per container, validated.

Owns the runtime knobs: :class:`Settings`, a pydantic model whose fields are read from the
environment variables template.yaml's parameters set (``Globals.Function.Environment``) and the
local stack copies. A bad value fails at load with :class:`SettingsError`, naming the variable,
its value and what it must be (``RELAYNET_OFFER_TTL_SECONDS='abc': must be a whole number``);
an unset or empty variable takes its default. ToolApp (relaynet.http.api) and the local stack
load the settings at start, so a bad deployment fails at the cold start, not mid-request.

Every value is read lazily through :func:`settings` so tests can change the environment and
call :func:`settings.cache_clear`.
"""

from __future__ import annotations

import functools
import os
from typing import Annotated, Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_TRUE = ("1", "true", "yes", "on")


class SettingsError(ValueError):
    """One or more environment variables hold a value the hub cannot run with.

    The message names each variable, the value found and the rule it breaks, one per line;
    ``variables`` lists the variable names.
    """

    def __init__(self, problems: list[tuple[str, str, str]]):
        self.variables = [name for name, _, _ in problems]
        lines = [f"{name}={value!r}: {why}" for name, value, why in problems]
        super().__init__("bad relaynet settings (environment variables):\n  " + "\n  ".join(lines))


Seconds = Annotated[int, Field(ge=1)]


class Settings(BaseModel):
    """Runtime knobs. Durations are seconds; each field's alias is its environment variable.

    Attributes:
        table_name: the DynamoDB table (``RELAYNET_TABLE``, "relaynet").
        offer_ttl: how long a task offer stays open (``RELAYNET_OFFER_TTL_SECONDS``, 300; >= 1).
        presence_timeout: after this long without a call an instance is ``offline``
            (``RELAYNET_PRESENCE_TIMEOUT_SECONDS``, 300; >= 1).
        channel_ttl: default channel lifetime (``RELAYNET_CHANNEL_TTL_SECONDS``, 7200; >= 1).
        reply_within: consulting reply window (``RELAYNET_REPLY_WITHIN_SECONDS``, 600; >= 1).
        max_wait: longest server-side wait of one request (``RELAYNET_MAX_WAIT_SECONDS``, 20;
            0..25, under the HTTP API's 30 s integration timeout, as template.yaml's MaxWaitSeconds).
        sweep_batch: tasks one sweep run handles at most (``RELAYNET_SWEEP_BATCH``, 500; >= 1).
        push_retry_base: the first retry delay of a failed webhook delivery; each further retry
            waits twice as long (``RELAYNET_PUSH_RETRY_BASE_SECONDS``, 30; >= 0, fractions allowed).
        push_retry_window: how long a delivery is retried before it is marked failed
            (``RELAYNET_PUSH_RETRY_WINDOW_SECONDS``, 900; >= 0).
        push_timeout: seconds one webhook POST may take (``RELAYNET_PUSH_TIMEOUT_SECONDS``, 3; > 0).
        push_allow_loopback: whether push URLs may be ``http`` to a loopback host and resolve to
            private addresses (``RELAYNET_PUSH_ALLOW_LOOPBACK``; the local stack sets it, AWS
            never does: there only ``https`` to public addresses is allowed).
        push_at_write: whether a write notifies its recipients' live connections and webhooks as
            it commits (``RELAYNET_PUSH_AT_WRITE``, true; docs/architecture.md "Push at the
            write"); false leaves every push to the table's stream, which delivers them all anyway.
        push_targets: in AWS, the stream functions a write invokes asynchronously as it commits,
            ``<logical id>=<alias ARN>,...`` (``RELAYNET_PUSH_AT_WRITE_TARGETS``, template.yaml's
            Globals; empty: none; relaynet.push_at_write). Each logical id must be a stream
            function of template.yaml.
        a2a_streaming: whether this hub serves A2A's streaming methods (``RELAYNET_A2A_STREAMING``,
            false; the local stack sets it: it streams Server-Sent Events, relaynet_local.a2a_stream;
            API Gateway's HTTP API cannot, so in AWS the Agent Card says ``streaming: false``).
        public_url: the hub's HTTP API base URL as a remote A2A agent reaches it
            (``RELAYNET_PUBLIC_URL``, unset; ``http(s)://host[:port][/path]``, no query). When set,
            the A2A bridge gives a remote whose card says ``pushNotifications`` a push config
            pointing at ``<public_url>/a2a/<network>/push/<instance>/<task>`` (docs/protocol.md
            13.4); unset, it only polls. template.yaml sets it to the HTTP API's URL; the local
            stack sets it to its own address unless set (a tunnel's URL, for a remote elsewhere).
        mailbox_cap: undelivered messages a mailbox holds before sends to it are 429
            (``RELAYNET_MAILBOX_CAP``, 1000; >= 1; relaynet.limits).
        max_fanout: mailboxes one message may reach (``RELAYNET_MAX_FANOUT``, 200; >= 1).
        ag2_invite_timeout: seconds an AG2 channel's invitees have to ack before the keepalive
            closes it with ``invite_timeout`` (``RELAYNET_AG2_INVITE_TIMEOUT_SECONDS``, 30, as
            AG2's ``Hub(invite_ack_timeout=30.0)``; > 0, at most 3600; docs/protocol.md 12).
        cache_seconds: how long a container keeps representative grants and agent and group
            definitions it read (``RELAYNET_CACHE_SECONDS``, 5; 0 turns the caches off;
            relaynet.cache): the bound on how stale they can be.
        metrics: whether EMF metrics are written (not ``POWERTOOLS_METRICS_DISABLED``; the
            local stack disables them unless set: relaynet.observability).
        tracing: whether store calls are traced with X-Ray subsegments: powertools' own rule,
            on in Lambda (``AWS_LAMBDA_FUNCTION_NAME`` set, not ``AWS_SAM_LOCAL``) unless
            ``POWERTOOLS_TRACE_DISABLED`` is true (relaynet.observability).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    table_name: str = Field("relaynet", alias="RELAYNET_TABLE", min_length=3, max_length=255)
    offer_ttl: Seconds = Field(300, alias="RELAYNET_OFFER_TTL_SECONDS")
    presence_timeout: Seconds = Field(300, alias="RELAYNET_PRESENCE_TIMEOUT_SECONDS")
    channel_ttl: Seconds = Field(7200, alias="RELAYNET_CHANNEL_TTL_SECONDS")
    reply_within: Seconds = Field(600, alias="RELAYNET_REPLY_WITHIN_SECONDS")
    max_wait: int = Field(20, alias="RELAYNET_MAX_WAIT_SECONDS", ge=0, le=25)
    sweep_batch: int = Field(500, alias="RELAYNET_SWEEP_BATCH", ge=1)
    push_retry_base: float = Field(30.0, alias="RELAYNET_PUSH_RETRY_BASE_SECONDS", ge=0, allow_inf_nan=False)
    push_retry_window: float = Field(900.0, alias="RELAYNET_PUSH_RETRY_WINDOW_SECONDS", ge=0, allow_inf_nan=False)
    push_timeout: float = Field(3.0, alias="RELAYNET_PUSH_TIMEOUT_SECONDS", gt=0, allow_inf_nan=False)
    push_allow_loopback: bool = Field(False, alias="RELAYNET_PUSH_ALLOW_LOOPBACK")
    push_at_write: bool = Field(True, alias="RELAYNET_PUSH_AT_WRITE")
    push_targets: str = Field("", alias="RELAYNET_PUSH_AT_WRITE_TARGETS", max_length=4096)
    a2a_streaming: bool = Field(False, alias="RELAYNET_A2A_STREAMING")
    public_url: Optional[str] = Field(None, alias="RELAYNET_PUBLIC_URL",
                                      pattern=r"^https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~\-/]*)?$", max_length=512)
    mailbox_cap: int = Field(1000, alias="RELAYNET_MAILBOX_CAP", ge=1)
    max_fanout: int = Field(200, alias="RELAYNET_MAX_FANOUT", ge=1)
    ag2_invite_timeout: float = Field(30.0, alias="RELAYNET_AG2_INVITE_TIMEOUT_SECONDS", gt=0, le=3600,
                                      allow_inf_nan=False)
    cache_seconds: float = Field(5.0, alias="RELAYNET_CACHE_SECONDS", ge=0, allow_inf_nan=False)
    metrics: bool = True
    tracing: bool = False

    @field_validator("push_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        from relaynet.push_at_write import parse_targets

        parse_targets(value)  # ValueError: reported as the rule the value breaks
        return value

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """The settings in ``environ`` (default ``os.environ``); SettingsError on a bad value."""
        env = os.environ if environ is None else environ
        aliases = {f.alias: name for name, f in cls.model_fields.items() if f.alias}
        raw: dict[str, Any] = {alias: env[alias] for alias in aliases if env.get(alias, "").strip() != ""}
        problems: list[tuple[str, str, str]] = []
        for flag in ("POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_TRACE_DISABLED"):
            value = env.get(flag, "").strip().lower()
            if value and value not in _TRUE and value not in ("0", "false", "no", "off"):
                problems.append((flag, env[flag], "must be true or false"))
        raw["metrics"] = env.get("POWERTOOLS_METRICS_DISABLED", "").strip().lower() not in _TRUE
        raw["tracing"] = (env.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in _TRUE
                          and bool(env.get("AWS_LAMBDA_FUNCTION_NAME")) and not env.get("AWS_SAM_LOCAL"))
        try:
            settings = cls.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                alias = str(err["loc"][0]) if err["loc"] else "?"
                problems.append((alias, str(raw.get(alias, "")), _why(err)))
        if problems:
            raise SettingsError(problems)
        return settings


def _why(err: dict[str, Any]) -> str:
    """A pydantic error as the rule the value breaks."""
    kind = err.get("type", "")
    if kind.startswith("int_"):
        return "must be a whole number"
    if kind.startswith("float_") or kind == "finite_number":
        return "must be a number"
    if kind.startswith("bool_"):
        return "must be true or false"
    if kind == "value_error":
        return str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":  # RELAYNET_PUBLIC_URL, the one field with a pattern
        return "must be an http(s) URL: scheme://host[:port][/path], no query or fragment"
    return str(err.get("msg", "invalid")).lower()


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    """The settings of this process, read from the environment on first use.

    Raises :class:`SettingsError` naming every bad variable.
    """
    return Settings.from_environ()
