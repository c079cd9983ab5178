"""What ``GET /v1/events`` tells whom (relaynet.event_stream) and how one stream is bounded
(relaynet_local.event_stream.EventHub): events made by the real writers' items on moto, a
queue that overflows, a stream that another of its instance replaces, a revoked token."""

from __future__ import annotations

import json
import queue
import threading

from relaynet import event_stream
from relaynet.identity import Principal
from relaynet.store import mailboxes as mail_store
from relaynet.store import table as store_table
from relaynet_local.event_stream import MAX_PER_INSTANCE, QUEUE_BOUND, EventHub, format_event


def _msg(kind: str, **extra) -> dict:
    return {"id": "msg_01", "threadId": "thr_01", "kind": kind, "body": "the body", "createdAt": "2026-12-03T00:00:00Z",
            "from": {"agent": "planner", "instanceId": "inst_p"}, **extra}


def _inst(agent: str, instance_id: str, net: str = "net_1") -> Principal:
    return Principal(kind="instance", network_id=net, instance_id=instance_id, agent=agent)


def test_an_instance_mailbox_entry_is_an_event_for_that_instance_only_and_never_its_body():
    item = mail_store.mailbox_item("net_1", {"instanceId": "inst_c1", "agent": "coder"}, _msg("ask"))
    found = event_stream.addressed(item)
    assert found.reaches(_inst("coder", "inst_c1"))
    assert not found.reaches(_inst("coder", "inst_c0"))
    assert not found.reaches(_inst("coder", "inst_c1", net="net_2"))
    assert not found.reaches(Principal(kind="representative", rep="ops"))
    event = event_stream.for_principal(found, _inst("coder", "inst_c1"))
    assert event == {"event": "message", "id": "msg_01", "messageId": "msg_01", "networkId": "net_1",
                     "instanceId": "inst_c1", "kind": "ask", "threadId": "thr_01",
                     "createdAt": "2026-12-03T00:00:00Z"}
    assert "the body" not in json.dumps(event)


def test_an_instance_is_never_told_of_its_own_send_as_network_inbox_never_hands_it_out():
    item = mail_store.mailbox_item("net_1", {"instanceId": "inst_p", "agent": "planner"}, _msg("ask"))
    assert not event_stream.addressed(item).reaches(_inst("planner", "inst_p"))


def test_an_agent_mailbox_entry_reaches_every_instance_of_the_agent_but_its_sender():
    item = mail_store.mailbox_item("net_1", {"agent": "coder"}, _msg("notice", **{"from": {"agent": "coder",
                                                                                            "instanceId": "inst_c0"}}))
    found = event_stream.addressed(item)
    assert found.reaches(_inst("coder", "inst_c1"))
    assert not found.reaches(_inst("coder", "inst_c0"))  # its own send
    assert not found.reaches(_inst("planner", "inst_p"))


def test_event_names_follow_the_mail_kind():
    kinds = ("ask", "reply", "notice", "task_offer", "task_update", "channel")  # docs/protocol.md 3, Message
    assert {kind: event_stream.event_name({"kind": kind}) for kind in kinds} == {
        "ask": "message", "reply": "message", "notice": "message", "task_offer": "task_offer",
        "task_update": "task_update", "channel": "message"}
    assert event_stream.event_name({"kind": "notice", "wakeReason": "control_wake_agent"}) == "wake"
    assert set(event_stream.EVENT_NAMES) == {"message", "task_offer", "task_update", "wake", "claim_released", "activity"}


def test_items_that_are_not_mailbox_entries_make_no_event():
    assert event_stream.addressed({"PK": "NET#net_1#THREAD#thr_01", "SK": "MSG#msg_01", "kind": "ask"}) is None
    assert event_stream.addressed({"PK": "NET#net_1#MBOX#A#coder", "SK": "STATS"}) is None


class _Sink:
    """A stream's response body: every chunk written, and a way to wait for the n-th."""

    def __init__(self):
        self.chunks: queue.Queue = queue.Queue()

    def write(self, chunk: bytes) -> None:
        self.chunks.put(chunk)

    def events(self, n: int) -> list[str]:
        out = []
        while len(out) < n:
            chunk = self.chunks.get(timeout=10).decode()
            out += [line.removeprefix("event: ") for line in chunk.splitlines() if line.startswith("event: ")]
        return out


def _serve(hub: EventHub, principal: Principal, sink: _Sink) -> threading.Thread:
    thread = threading.Thread(target=hub.serve, args=(sink.write, principal, "hash", None), daemon=True)
    thread.start()
    assert sink.chunks.get(timeout=10) == b": relaynet events\n\n"  # subscribed
    return thread


def test_a_subscriber_that_falls_behind_is_told_overflow_and_closed_after_what_was_queued():
    hub = EventHub(lambda _hash, _principal: True)
    sub = hub.subscribe(_inst("coder", "inst_c1"), "hash")
    for i in range(QUEUE_BOUND + 5):
        sub.offer(format_event("message", {"id": str(i)}, str(i)))
    assert sub.closed == "overflow"
    queued = [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]
    assert len(queued) == QUEUE_BOUND and all(isinstance(c, bytes) for c in queued)  # no more than the bound


def test_committed_mail_reaches_the_stream_and_a_revoked_token_closes_it(table):
    live = {"ok": True}
    hub = EventHub(lambda _hash, _principal: live["ok"]).start()
    try:
        sink = _Sink()
        thread = _serve(hub, _inst("coder", "inst_c1"), sink)
        table_item = mail_store.mailbox_item("net_1", {"instanceId": "inst_c1", "agent": "coder"}, _msg("task_offer",
                                                                                                          taskId="task_1"))
        store_table.put(table_item)
        assert sink.events(1) == ["task_offer"]
        live["ok"] = False
        hub.recheck()
        assert sink.events(1) == ["revoked"]
        thread.join(timeout=10)
        assert not thread.is_alive() and hub.count() == 0
    finally:
        hub.stop()


def test_a_new_stream_past_the_per_instance_bound_replaces_the_oldest():
    hub = EventHub(lambda _hash, _principal: True)
    me = _inst("coder", "inst_c1")
    sinks = [_Sink() for _ in range(MAX_PER_INSTANCE + 1)]
    threads = [_serve(hub, me, sink) for sink in sinks]
    assert sinks[0].events(1) == ["replaced"]
    threads[0].join(timeout=10)
    assert not threads[0].is_alive() and hub.count() == MAX_PER_INSTANCE
    hub.stop()
    assert all(sink.events(1) == ["stopping"] for sink in sinks[1:])


def test_a_released_claim_is_an_event_for_every_instance_of_the_network_but_the_releaser(table):
    from relaynet.events import event_action

    action = event_action("net_1", "claim", {"agent": "coder", "instanceId": "inst_c0"}, "claim src/** released",
                          claimId="clm_1", state="released", scope="src/**")
    found = event_stream.addressed(store_table.decode(action["Put"]["Item"]))  # the item as committed
    assert found.reaches(_inst("planner", "inst_p")) and found.reaches(_inst("coder", "inst_c1"))
    assert not found.reaches(_inst("coder", "inst_c0"))  # its own release
    assert not found.reaches(_inst("planner", "inst_p", net="net_2"))
    assert {k: v for k, v in found.event.items() if k != "createdAt"} == {
        "event": "claim_released", "id": found.event["id"], "networkId": "net_1", "instanceId": None,
        "claimId": "clm_1", "scope": "src/**"}
    claimed = event_action("net_1", "claim", {"agent": "coder"}, "claimed", claimId="clm_1", state="active")
    assert event_stream.addressed(store_table.decode(claimed["Put"]["Item"])) is None


def test_the_sdk_and_the_channel_know_the_same_event_names_as_the_hub():
    """The SDK and the MCP bridge may not import relaynet.event_stream (it pulls in the store and
    boto3), so they keep copies of its names; this keeps the copies true."""
    from relaynet import client_events, mcp_channel

    assert client_events.EVENT_NAMES == event_stream.EVENT_NAMES
    assert mcp_channel.MAIL_EVENTS == event_stream.MAIL_EVENTS
