"""The plugin surface's ``delegate``: a one-shot consult (PROTOCOL.md 5.4).

It opens a ``consulting`` channel with the target, posts the prompt as the seed, and waits for
the single reply, holding the request at most ``RELAYNET_MAX_WAIT_SECONDS``; a client that wants
to wait longer (the SDK, the MCP bridge) calls ``channels info`` again until its timeout.
"""

from __future__ import annotations

import time
from typing import Any

from relaynet import channels, clock
from relaynet.config import settings
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.models.plugin import ConsultRequest

POLL_SECONDS = 0.25


def wait_for_reply(net: str, channel_id: str, seconds: float) -> tuple[str, str | None]:
    """Poll the channel head until it is no longer active or ``seconds`` pass: (state, reply).
    Each poll is one Query (the head and the envelopes), so the last one needs no second read."""
    deadline = time.monotonic() + max(0.0, seconds)
    while True:
        head, reply = channels.head_and_reply(net, channel_id)
        state = channels.effective_state(head, clock.now_ms())
        if state != "active" or time.monotonic() >= deadline:
            return state, reply
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def delegate(principal: Principal, req: ConsultRequest) -> dict[str, Any]:
    """``{channel_id, state, reply}``; ``reply`` is None while it has not come.

    Raises InvalidArgument (the caller's own agent), NotFound (unknown target, with
    ``details.available``), PermissionDenied (the target refuses inbound channels).
    """
    if req.target == principal.agent:
        raise InvalidArgument.field("target", "you cannot consult your own agent")
    intent = f"consult ({req.capability})" if req.capability else "consult"
    opened = channels.open_channel(principal, "consulting", [req.target], None, intent, None, req.prompt)
    seconds = min(req.timeout, settings().max_wait)
    if seconds <= 0:  # not waiting: the channel is as this call just wrote it, active with no reply (no read)
        return {"channel_id": opened["channel_id"], "state": "active", "reply": None}
    state, reply = wait_for_reply(principal.network_id, opened["channel_id"], seconds)
    return {"channel_id": opened["channel_id"], "state": state, "reply": reply}
