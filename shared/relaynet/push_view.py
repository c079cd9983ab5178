"""What readers see of webhooks (docs/protocol.md 10.3): the public view of a push config and
the push block of an instance. Pure functions over directory items, shared by relaynet.directory
(agent and instance views, discover) and relaynet.push (which re-exports them): neither of those
needs the other for them, so relaynet.push can import relaynet.directory at module level."""

from __future__ import annotations

from typing import Any

from relaynet import clock


def public_config(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """What may be shown of a config: ``{url, authentication: {schemes}}``, never the token or
    the credentials."""
    if not config:
        return None
    out: dict[str, Any] = {"url": config["url"]}
    if config.get("authentication"):
        out["authentication"] = {"schemes": list(config["authentication"].get("schemes") or [])}
    return out


def effective(inst: dict[str, Any], agent: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """(config, ``"instance"`` | ``"definition"``) that applies to ``inst``, or (None, None)."""
    if inst.get("push"):
        return inst["push"], "instance"
    if agent and agent.get("push"):
        return agent["push"], "definition"
    return None, None


def status_view(inst: dict[str, Any], agent: dict[str, Any] | None) -> dict[str, Any] | None:
    """The push block of an instance entry (control_list_agents, network_whoami):
    ``{url, source, lastStatus, lastAttemptAt, lastDeliveredAt, lastError, failures}``, None
    when neither a config nor a delivery exists."""
    config, source = effective(inst, agent)
    if config is None and "pushLastAttemptAt" not in inst:
        return None
    iso = lambda ms: clock.iso(int(ms)) if ms is not None else None  # noqa: E731
    return {"url": config["url"] if config else None, "source": source,
            "lastStatus": inst.get("pushLastStatus"), "lastAttemptAt": iso(inst.get("pushLastAttemptAt")),
            "lastDeliveredAt": iso(inst.get("pushLastDeliveredAt")), "lastError": inst.get("pushLastError"),
            "failures": int(inst.get("pushFailures", 0))}
