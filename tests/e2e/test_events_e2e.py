"""``GET /v1/events`` (docs/protocol.md 10.6, issue 26 part 3) on `relaynet serve` over real HTTP,
on DynamoDB Local: an instance hears of its mail as it is written, never its body; a reconnect
after a drop loses nothing; a revoked token ends the stream; bad tokens are refused. The SDK's
iterator (RelaynetClient.events) is what a user would call; one test reads the raw stream."""

from __future__ import annotations

import json
import queue
import threading

import httpx
import pytest

from relaynet.client import ApiError, RelaynetClient
from tests.e2e.conftest import tool

WAIT = 20.0


class Listener:
    """The SDK's iterator run in a thread: what it yields lands in ``got``, what it raises in
    ``error``; ``opened`` is set once the hub has sent the stream's first bytes."""

    def __init__(self, hub, token: str, **kwargs):
        self.got: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.done = threading.Event()
        self.client = RelaynetClient(hub.url, token)
        self.thread = threading.Thread(target=self._run, kwargs=kwargs, daemon=True)
        self.thread.start()

    def _run(self, **kwargs) -> None:
        try:
            for event in self.client.events(stop=self.stop, **kwargs):
                self.got.put(event)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
        finally:
            self.done.set()

    def take(self, n: int = 1) -> list[dict]:
        out = []
        for _ in range(n):
            try:
                out.append(self.got.get(timeout=WAIT))
            except queue.Empty:
                raise AssertionError(f"{len(out)} of {n} events within {WAIT} s (error: {self.error!r})") from None
        return out

    def close(self) -> None:
        self.stop.set()
        self.client.close()


def _open_raw(hub, token: str, **headers):
    """The raw stream, read up to its opening comment: subscribed from here on."""
    return _open_raw_url(hub, token, "", **headers)


def _open_raw_url(hub, token: str, query: str, **headers):
    client = httpx.Client(timeout=httpx.Timeout(10, read=WAIT))
    response = client.send(client.build_request("GET", f"{hub.url}/v1/events{query}", headers={
        "Authorization": f"Bearer {token}", **headers}), stream=True)
    lines = response.iter_lines()
    if response.status_code == 200:
        assert next(lines) == ": relaynet events"
    return client, response, lines


def _next_event(lines) -> dict[str, str]:
    """The next event's fields (``id``, ``event``, ``data``), comments skipped."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                return fields
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
    raise AssertionError(f"the stream ended: {fields}")


def test_an_ask_is_an_event_at_the_write_with_ids_and_kind_never_the_body(hub):
    client, response, lines = _open_raw(hub, hub.token("reviewer"))
    try:
        assert response.headers["content-type"].startswith("text/event-stream")
        sent = tool(hub, "network_ask", {"body": "the secret plan", "toAgent": "reviewer"}, hub.token("planner"))
        fields = _next_event(lines)
    finally:
        response.close()
        client.close()
    event = json.loads(fields["data"])
    assert fields["event"] == "message" and fields["id"] == sent["messageId"]
    assert event == {"event": "message", "id": sent["messageId"], "messageId": sent["messageId"],
                     "networkId": event["networkId"], "instanceId": hub.instance("reviewer"), "kind": "ask",
                     "threadId": sent["threadId"], "createdAt": event["createdAt"]}
    assert "the secret plan" not in fields["data"]


def test_a_delegated_task_is_a_task_offer_to_the_chosen_instance_only(hub):
    for n in (0, 1):
        tool(hub, "network_inbox", {}, hub.token("coder", n))  # empty mailboxes: a resume replays nothing older
    # resuming from nothing (``Last-Event-ID: ""``): what is written before a stream is subscribed
    # is replayed, so the test need not know when the hub has subscribed it
    coder0, coder1 = (Listener(hub, hub.token("coder", n), last_event_id="") for n in (0, 1))
    try:
        task = tool(hub, "network_delegate", {"objective": "add /v1/ping", "toInstance": hub.instance("coder", 1)},
                    hub.token("planner"))
        (offer,) = coder1.take()
        assert (offer["event"], offer["kind"], offer["taskId"]) == ("task_offer", "task_offer", task["taskId"])
        assert offer["instanceId"] == hub.instance("coder", 1)
        # an ask to the agent reaches both instances; coder0's first event is it, not the offer
        sent = tool(hub, "network_ask", {"body": "who has time?", "toAgent": "coder"}, hub.token("planner"))
        assert [e["id"] for e in coder0.take()] == [sent["messageId"]]
        assert [e["id"] for e in coder1.take()] == [sent["messageId"]]
    finally:
        coder0.close()
        coder1.close()


def test_a_reconnect_with_last_event_id_replays_the_mail_still_waiting(hub):
    token = hub.token("planner")
    tool(hub, "network_inbox", {}, token)  # start from an empty mailbox
    first = tool(hub, "network_ask", {"body": "one", "toAgent": "planner"}, hub.token("reviewer"))
    # not connected when these were written: a resume after a drop still hears of them, oldest first
    second = tool(hub, "network_ask", {"body": "two", "toAgent": "planner"}, hub.token("reviewer"))
    resumed = Listener(hub, token, last_event_id=first["messageId"])
    try:
        assert [e["id"] for e in resumed.take(2)] == [first["messageId"], second["messageId"]]
        third = tool(hub, "network_ask", {"body": "three", "toAgent": "planner"}, hub.token("reviewer"))
        assert [e["id"] for e in resumed.take()] == [third["messageId"]]  # then live, each once
    finally:
        resumed.close()
    # an empty ?lastEventId= (EventSource's first connect) asks for the replay too
    client, response, lines = _open_raw_url(hub, token, "?lastEventId=")
    try:
        assert _next_event(lines)["id"] == first["messageId"]
    finally:
        response.close()
        client.close()
    # mail read with network_inbox is not replayed
    tool(hub, "network_inbox", {}, token)
    client, response, lines = _open_raw(hub, token, **{"Last-Event-ID": third["messageId"]})
    try:
        sent = tool(hub, "network_ask", {"body": "four", "toAgent": "planner"}, hub.token("reviewer"))
        assert _next_event(lines)["id"] == sent["messageId"]
    finally:
        response.close()
        client.close()


def test_a_released_claim_is_told_to_the_other_instances_not_to_the_releaser(hub):
    other, other_r, other_lines = _open_raw(hub, hub.token("planner"))
    mine, mine_r, mine_lines = _open_raw(hub, hub.token("coder", 1))
    try:
        claim = tool(hub, "network_claim", {"scope": "src/events/**"}, hub.token("coder", 1))
        tool(hub, "network_release", {"claimId": claim["claimId"]}, hub.token("coder", 1))
        fields = _next_event(other_lines)
        event = json.loads(fields["data"])
        assert fields["event"] == "claim_released" and (event["claimId"], event["scope"]) == (claim["claimId"],
                                                                                              "src/events/**")
        assert event["instanceId"] == hub.instance("planner")
        # the releaser's own stream heard nothing of it: its next event is the ask sent after
        sent = tool(hub, "network_ask", {"body": "next", "toInstance": hub.instance("coder", 1)}, hub.token("planner"))
        assert json.loads(_next_event(mine_lines)["data"])["id"] == sent["messageId"]
    finally:
        for client, response in ((other, other_r), (mine, mine_r)):
            response.close()
            client.close()


@pytest.mark.parametrize("token, status, code", [
    ("rn_inst_" + "x" * 43, 401, "unauthenticated"),  # well-formed, unknown
    ("not-a-token", 401, "unauthenticated"),
    (None, 401, "unauthenticated"),
])
def test_a_bad_token_is_refused_with_the_protocol_error(hub, token, status, code):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(f"{hub.url}/v1/events", headers=headers, timeout=10)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    if token:
        with pytest.raises(ApiError) as raised, RelaynetClient(hub.url, token) as c:
            next(iter(c.events()))
        assert (raised.value.status, raised.value.code) == (status, code)


def test_a_representative_hears_the_networks_activity_with_ids_never_a_body_and_resumes(hub):
    """docs/protocol.md 10.6: a representative's stream is what the operator page shows, for the
    networks its grants cover: an ``activity`` event per history entry, ids and states only."""
    ops = hub.tokens["representatives"]["ops"]
    client, response, lines = _open_raw(hub, ops)
    try:
        sent = tool(hub, "network_ask", {"body": "the secret plan", "toAgent": "reviewer"}, hub.token("planner"))
        fields = _next_event(lines)
        while json.loads(fields["data"]).get("messageId") != sent["messageId"]:  # earlier tests' tail
            fields = _next_event(lines)
        claim = tool(hub, "network_claim", {"scope": "docs/activity/**"}, hub.token("coder"))
        second = json.loads(_next_event(lines)["data"])
    finally:
        response.close()
        client.close()
    first = json.loads(fields["data"])
    assert fields["event"] == "activity" and fields["id"] == first["id"] and first["id"].startswith("evt_")
    assert {k: first[k] for k in ("event", "kind", "messageId", "threadId", "networkId")} == {
        "event": "activity", "kind": "message", "messageId": sent["messageId"], "threadId": sent["threadId"],
        "networkId": hub.tokens["networks"]["demo"]["networkId"]}
    assert first["actor"] == {"agent": "planner", "instanceId": hub.instance("planner")}
    assert "secret plan" not in fields["data"] and "summary" not in first
    assert (second["kind"], second["claimId"], second["state"]) == ("claim", claim["claimId"], "claimed")
    # a reconnect with Last-Event-ID replays the history after it: the claim, nothing before
    resumed = Listener(hub, ops, last_event_id=first["id"])
    try:
        assert resumed.take()[0]["id"] == second["id"]
    finally:
        resumed.close()


def test_stopping_the_instance_closes_its_stream_at_once(hub):
    listener = Listener(hub, hub.token("reviewer"))
    try:
        client, response, lines = _open_raw(hub, hub.token("reviewer"))
        rep = hub.tokens["representatives"]["ops"]
        first = tool(hub, "control_stop_agent", {"instanceId": hub.instance("reviewer")}, rep)
        tool(hub, "control_stop_agent", {"instanceId": hub.instance("reviewer"), "confirmationId": first["confirmationId"]},
             rep)
        assert _next_event(lines)["event"] == "revoked"
        response.close()
        client.close()
        assert listener.done.wait(WAIT), "the SDK iterator did not end"
        assert isinstance(listener.error, ApiError) and listener.error.status == 401
    finally:
        listener.close()


def test_the_long_poll_answers_when_an_ask_arrives_and_delivers_nothing(hub):
    """GET /v1/inbox/wait (docs/protocol.md 10.7) through the SDK, for clients with neither a
    stream nor a webhook: held while nothing waits, answered by the ask, the ask still in the inbox."""
    token = hub.token("coder", 1)  # not reviewer: an earlier test stops it
    tool(hub, "network_inbox", {}, token)  # start from an empty mailbox
    answers: list = []
    with RelaynetClient(hub.url, token) as waiting_client:
        waiting = threading.Thread(target=lambda: answers.append(waiting_client.inbox_wait(timeout=20)), daemon=True)
        waiting.start()
        sent = tool(hub, "network_ask", {"body": "please look at #7", "toInstance": hub.instance("coder", 1)}, hub.token("planner"))
        waiting.join(WAIT)
    assert not waiting.is_alive() and answers[0]["undelivered"] == 1 and answers[0]["byKind"] == {"ask": 1}
    inbox = tool(hub, "network_inbox", {}, token)
    assert [m["id"] for m in inbox["messages"]] == [sent["messageId"]]
    with RelaynetClient(hub.url, token) as client:
        assert client.inbox_wait(timeout=0)["undelivered"] == 0  # nothing left: answered at the timeout
        with pytest.raises(ApiError) as bad:
            client.inbox_wait(timeout=-1)
    assert bad.value.status == 400 and bad.value.code == "invalid_argument"
    r = httpx.get(f"{hub.url}/v1/inbox/wait?timeout=1&since=x", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 400 and r.json()["error"]["details"]["fields"] == [
        {"field": "since", "message": "unknown argument"}]
