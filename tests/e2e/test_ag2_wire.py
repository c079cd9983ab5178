"""AG2 agents connect unmodified (docs/protocol.md 12): AG2's own client, ``HubClient(WsLink(url))``,
against ``relaynet serve`` at ws://127.0.0.1:PORT/v1/ag2, using only AG2's public client API.
The demo network's agents are the identities; their instance tokens are the passports' claims.
The hub runs with ``ag2`` and ``mcp`` unimportable (tests/e2e/without_ag2), as in the AG2 wire's
Lambdas: Relaynet serves the wire with its own models of the protocol (issue 30 part 2); only the
clients here are AG2's."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

ag2_network = pytest.importorskip("ag2.network")
pytest.importorskip("websockets", reason="WsLink needs the websockets package (pip install 'relaynet[ag2]')")

from ag2 import Agent  # noqa: E402
from ag2.network import AuthBlock, HubClient, Passport, Resume, WsLink  # noqa: E402
from ag2.network.envelope import EV_CHANNEL_CLOSED, EV_TEXT  # noqa: E402
from ag2.network.errors import AccessDeniedError, AuthError, NetworkError  # noqa: E402
from ag2.testing import TestConfig  # noqa: E402

from tests.conftest import ROOT  # noqa: E402
from tests.e2e.conftest import Hub, start_hub, stop_hub, until  # noqa: E402

pytestmark = pytest.mark.e2e
WAIT = 15.0
INVITE_TIMEOUT_S = 8  # the hub's RELAYNET_AG2_INVITE_TIMEOUT_SECONDS (AG2's and the default: 30)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The demo network on a local stack whose Python cannot import ``ag2`` (nor ``mcp``)."""
    h = start_hub(tmp_path_factory.mktemp("hub"), env={"PYTHONPATH": str(ROOT / "tests" / "e2e" / "without_ag2"),
                                                      "RELAYNET_AG2_INVITE_TIMEOUT_SECONDS": str(INVITE_TIMEOUT_S)})
    yield h
    stop_hub(h)


def ws_url(hub: Hub) -> str:
    return hub.url.replace("http://", "ws://") + "/v1/ag2"


def passport(hub: Hub, name: str, *, token_of: str | None = None, kind: str | None = None) -> Passport:
    """AG2's Passport whose api_key claim is an rn_inst_ token (of ``token_of``'s first instance)."""
    return Passport(name=name, kind=kind, auth=AuthBlock(scheme="api_key", claim={"token": hub.token(token_of or name)}))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def texts(envelopes) -> list[tuple[str, str]]:
    return [(e.sender_id, e.event_data["text"]) for e in envelopes if e.event_type == EV_TEXT]


async def next_text(client, channel_id: str):
    return await client.wait_for_channel_event(channel_id=channel_id, predicate=lambda e: e.event_type == EV_TEXT,
                                               timeout=WAIT)


def tool(hub: Hub, name: str, body: dict, agent: str | None = None, token: str | None = None) -> dict:
    """A tool called over HTTP with ``agent``'s first instance token (or ``token``); asserts a 200."""
    resp = httpx.post(f"{hub.url}/v1/tools/{name}", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {token or hub.token(agent)}"})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_two_humans_consult_the_question_and_answer_cross_and_the_channel_closes_consulting_complete(hub):
    async def story():
        a, b = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            bob = await b.register_human(passport(hub, "reviewer"))
            assert (alice.agent_id, bob.agent_id) == ("planner", "reviewer")  # the agent name is the identity
            channel = await alice.open(type="consulting", target="reviewer", intent="a quick check")
            assert channel.metadata.state.value == "active"  # the invite was acked before open returned
            assert [p.agent_id for p in channel.metadata.participants] == ["planner", "reviewer"]
            await alice.send(channel.channel_id, "Is /health cached?")
            question = await next_text(bob, channel.channel_id)
            assert (question.sender_id, question.event_data) == ("planner", {"text": "Is /health cached?"})
            await bob.send(channel.channel_id, "No, computed per request.", causation_id=question.envelope_id)
            answer = await next_text(alice, channel.channel_id)
            assert answer.event_data["text"] == "No, computed per request."
            assert answer.causation_id == question.envelope_id
            closed = await alice.wait_for_channel_event(
                channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=WAIT)
            assert closed.event_data["reason"] == "consulting_complete"
            meta = await b.get_channel(channel.channel_id)
            assert (meta.state.value, meta.close_reason) == ("closed", "consulting_complete")
            with pytest.raises(NetworkError, match="closed"):  # nothing more is accepted
                await alice.send(channel.channel_id, "one more thing")
            return channel.channel_id
        finally:
            await a.close()
            await b.close()

    channel_id = run(story())
    # the same channel, seen through the HTTP plugin surface: a Relaynet consulting channel
    info = tool(hub, "channels", {"action": "info", "channel_id": channel_id}, "planner")
    assert info["channel"]["type"] == "consulting" and info["channel"]["close_reason"] == "consulting_complete"
    assert [(e["sender"], e["content"]) for e in info["envelopes"] if e["event_type"] == "text"] == [
        ("planner", "Is /health cached?"), ("reviewer", "No, computed per request.")]


def test_a_conversation_wal_reads_back_in_order_and_pages_with_since_and_until(hub):
    async def story():
        a, b = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            bob = await b.register_human(passport(hub, "coder"))
            channel = await alice.open(type="conversation", target="coder")
            sent = []
            for i in range(3):
                await alice.send(channel.channel_id, f"a{i}")
                got = await next_text(bob, channel.channel_id)
                await bob.send(channel.channel_id, f"b{i}", causation_id=got.envelope_id)
                await next_text(alice, channel.channel_id)
                sent += [("planner", f"a{i}"), ("coder", f"b{i}")]
            wal = await a.read_wal(channel.channel_id)
            assert texts(wal) == sent
            assert wal[0].event_type == "ag2.channel.opened"
            ids = [e.envelope_id for e in wal]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            assert [e.envelope_id for e in await b.read_wal(channel.channel_id, since=2, until=4)] == ids[2:4]
            assert await b.read_wal(channel.channel_id, since=len(wal)) == []
        finally:
            await a.close()
            await b.close()

    run(story())


def test_a_third_agent_is_refused_and_a_wrong_token_is_an_auth_error(hub):
    async def story():
        a, b, c = (HubClient(WsLink(ws_url(hub))) for _ in range(3))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            await b.register_human(passport(hub, "reviewer"))
            eve = await c.register_human(passport(hub, "coder"))
            channel = await alice.open(type="consulting", target="reviewer")
            with pytest.raises(AccessDeniedError):  # not a participant: no sending
                await eve.send(channel.channel_id, "let me in")
            with pytest.raises(AccessDeniedError):  # ... and no reading
                await c.read_wal(channel.channel_id)
            with pytest.raises(AccessDeniedError):  # nor posting as someone else
                await c.post_envelope(ag2_network.Envelope(channel_id=channel.channel_id, sender_id="planner",
                                                           audience=None, event_type=EV_TEXT,
                                                           event_data={"text": "spoofed"}))
            assert texts(await a.read_wal(channel.channel_id)) == []  # nothing was stored
            with pytest.raises(NetworkError):  # a consulting channel holds exactly two participants
                await alice.open(type="consulting", target=["reviewer", "coder"])
        finally:
            for client in (a, b, c):
                await client.close()

    run(story())

    async def bad_tokens():
        d = HubClient(WsLink(ws_url(hub)))
        try:
            with pytest.raises(AuthError):  # another agent's token
                await d.register_human(passport(hub, "planner", token_of="coder"))
            with pytest.raises(AuthError):  # no such token
                await d.register_human(Passport(name="planner", auth=AuthBlock(
                    scheme="api_key", claim={"token": "rn_inst_" + "x" * 43})))
            with pytest.raises(AuthError):  # AG2's default scheme carries no credential
                await d.register_human(Passport(name="planner"))
            with pytest.raises(NetworkError):  # nothing is bound to this connection
                await d.list_agents()
        finally:
            await d.close()

    run(bad_tokens())


def test_register_takes_over_a_name_registered_before(hub):
    async def story():
        first, second = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            await first.register_human(passport(hub, "reviewer"))
            taken = await second.register_human(passport(hub, "reviewer"))  # AG2's own hub refuses this
            assert taken.agent_id == "reviewer"
            await first.close()
            assert (await second.get_agent("reviewer")).kind == "human"
        finally:
            await first.close()
            await second.close()

    run(story())


def copies(hub: Hub, agent: str) -> int:
    """How many ``channel`` messages the agent's first instance's Relaynet mailbox holds now
    (GET /v1/inbox/summary)."""
    resp = httpx.get(f"{hub.url}/v1/inbox/summary", timeout=30, headers={"Authorization": f"Bearer {hub.token(agent)}"})
    assert resp.status_code == 200, resp.text
    return resp.json()["byKind"].get("channel", 0)


async def eventually(check, what: str, wait: float = WAIT):
    """``check`` (a blocking call, run in a thread) polled every 0.1 s until it is truthy:
    tests/e2e/conftest.until from a coroutine."""
    return await asyncio.to_thread(until, check, what, wait)


async def nothing_more(client, channel_id: str, seconds: float = 1.0) -> None:
    """No envelope of the channel reaches ``client`` within ``seconds`` (a bounded negative
    window: what it rules out would arrive within milliseconds of its cause)."""
    with pytest.raises(asyncio.TimeoutError):
        extra = await client.wait_for_channel_event(channel_id=channel_id, predicate=lambda e: True, timeout=seconds)
        pytest.fail(f"unexpected envelope: {extra.event_type} {extra.event_data}")


@pytest.fixture
def hub_store(hub, monkeypatch):
    """This process's ``relaynet.store`` pointed at the hub's own DynamoDB Local and table
    (.relaynet/local.json) and its management API, for what a test reads or runs as a function would."""
    from relaynet.config import settings
    from relaynet.store import table as t

    local = json.loads((hub.cwd / ".relaynet" / "local.json").read_text())
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", local["dynamodbEndpoint"])
    monkeypatch.setenv("RELAYNET_TABLE", local["table"])
    monkeypatch.setenv("RELAYNET_AG2_MANAGEMENT_URL", f"{hub.url}/ag2")
    settings.cache_clear()
    t.reset()
    yield
    settings.cache_clear()
    t.reset()


def unbound(hub: Hub, agent: str):
    """A check: ``agent`` has no live AG2 connection (its $disconnect was handled). Needs ``hub_store``."""
    from relaynet.store import ag2 as ag2_store

    net = tool(hub, "network_whoami", {}, agent)["network"]["id"]
    return lambda: ag2_store.binding(net, agent) is None


def deliver_late(texts_: set[str]) -> int:
    """The stream notifier (functions/ag2_notifier.py, run here against the hub's store and its
    management API, through ``hub_store``) handed the INSERT records of the envelopes carrying
    ``texts_`` now: a stream that lags the writes it reports, as DynamoDB Streams may by a second
    or more. Returns how many records it was given."""
    from relaynet.config import settings
    from relaynet.store import ag2 as ag2_store
    from relaynet.store import table as t
    from relaynet_local.lambdas import LambdaContext, load_handler
    from tests.conftest import ROOT

    table = settings().table_name
    items = [i for page in t.client().get_paginator("scan").paginate(TableName=table)
             for i in map(t.decode, page["Items"]) if ag2_store.parse_channel_pk(i["PK"])
             and i.get("kind") == "envelope" and isinstance(i.get("content"), str) and i["content"] in texts_]
    records = [{"eventID": str(n), "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1", "dynamodb": {"Keys": {"PK": {"S": i["PK"]}, "SK": {"S": i["SK"]}},
                                                       "NewImage": t.encode(i), "SequenceNumber": str(n),
                                                       "SizeBytes": 1, "StreamViewType": "NEW_IMAGE"}}
               for n, i in enumerate(items)]
    handler = load_handler(str(ROOT / "functions"), "ag2_notifier.handler")
    assert handler({"Records": records}, LambdaContext("ag2_notifier", 30.0, 512)) == {"batchItemFailures": []}
    return len(records)


def test_a_reconnecting_agent_attaches_and_gets_exactly_what_it_missed(hub, hub_store):
    def coder() -> Agent:  # answers every text it is handed with a scripted "noted"
        return Agent("coder", "You take notes.", config=TestConfig(*["noted"] * 10))

    async def story():
        a = HubClient(WsLink(ws_url(hub)))
        b1 = HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            bob = await b1.register(coder(), passport(hub, "coder"), Resume())
            channel = await alice.open(type="conversation", target="coder")
            await alice.send(channel.channel_id, "before the drop")
            assert (await next_text(bob, channel.channel_id)).event_data["text"] == "before the drop"
            await next_text(alice, channel.channel_id)  # its "noted": it handled (and acked) the text
            await eventually(lambda: copies(hub, "coder") == 0, "the coder's ack took its copy out")
            gone = unbound(hub, "coder")
            await b1.close()
            await eventually(gone, "the hub handled the coder's $disconnect")
            for text in ("missed one", "missed two"):
                await alice.send(channel.channel_id, text)
            # kept in its Relaynet mailbox while away
            await eventually(lambda: copies(hub, "coder") == 2, "both copies in the coder's mailbox")
            b2 = HubClient(WsLink(ws_url(hub)))
            try:
                back = await b2.attach(coder(), "coder", passport=passport(hub, "coder"))
                # Both were written while it was away, so the hello's replay and the stream notifier can
                # each find them; each still arrives once. AG2's HubClient dispatches every notify as its own
                # task, so the two may land in its inbox in either order.
                replayed = [await next_text(back, channel.channel_id) for _ in range(2)]
                assert sorted(e.event_data["text"] for e in replayed) == ["missed one", "missed two"]
                # The stream reports both writes only now, to the agent's new connection: still nothing twice.
                assert await asyncio.to_thread(deliver_late, {"missed one", "missed two"}) == 2
                await alice.send(channel.channel_id, "live again")
                assert (await next_text(back, channel.channel_id)).event_data["text"] == "live again"
                await nothing_more(back, channel.channel_id)  # nothing twice, nothing acked before
                # every notify it acked was delivered: no copy waits in its mailbox, so network_inbox hands
                # out nothing twice and an AG2-only agent's mailbox never fills to RELAYNET_MAILBOX_CAP
                await eventually(lambda: copies(hub, "coder") == 0, "no copy left in the coder's mailbox")
            finally:
                await b2.close()
        finally:
            await a.close()
            await b1.close()

    run(story())


def test_an_envelope_nacked_before_a_later_one_was_acked_is_replayed_on_attach(hub, hub_store):
    async def story():
        a, b1 = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        handled: list[str] = []

        async def fussy(envelope) -> None:  # the coder's handler: fails on one text (AG2 nacks it)
            if envelope.event_type == EV_TEXT:
                handled.append(envelope.event_data["text"])
                if envelope.event_data["text"] == "this one fails":
                    raise RuntimeError("handler failed")

        try:
            alice = await a.register_human(passport(hub, "planner"))
            bob = await b1.register(Agent("coder", "You take notes.", config=TestConfig("noted")),
                                    passport(hub, "coder"), Resume())
            bob.on_envelope(fussy)
            channel = await bob.open(type="conversation", target="planner")  # no invite for the coder to ack
            before = await asyncio.to_thread(copies, hub, "coder")
            for text in ("this one fails", "this one is fine"):
                await alice.send(channel.channel_id, text)
            await eventually(lambda: len(handled) == 2, "both texts handled")
            assert handled == ["this one fails", "this one is fine"]  # the first nacked, the second acked after it
            # the receipts reached the hub: the ack took its copy out, the nack left its own
            await eventually(lambda: copies(hub, "coder") == before + 1, "the ack's copy taken out, the nack's kept")
            gone = unbound(hub, "coder")
            await b1.close()
            await eventually(gone, "the hub handled the coder's $disconnect")
            b2 = HubClient(WsLink(ws_url(hub)))
            try:
                back = await b2.attach(Agent("coder", "You take notes.", config=TestConfig("noted")), "coder",
                                       passport=passport(hub, "coder"))
                assert (await next_text(back, channel.channel_id)).event_data["text"] == "this one fails"
                await nothing_more(back, channel.channel_id)  # the acked one is not sent again
            finally:
                await b2.close()
        finally:
            await a.close()
            await b1.close()

    run(story())


def test_a_stopped_instances_live_connection_stops_acting_and_is_notified_nothing(hub):
    def control(name: str, body: dict) -> dict:  # as the demo's representative
        return tool(hub, name, body, token=hub.tokens["representatives"]["ops"])

    async def story():
        a, b = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            # the coder's second instance (the other tests use its first)
            bob = await b.register_human(Passport(name="coder", auth=AuthBlock(
                scheme="api_key", claim={"token": hub.token("coder", 1)})))
            channel = await alice.open(type="conversation", target="coder")
            await alice.send(channel.channel_id, "before the stop")
            assert (await next_text(bob, channel.channel_id)).event_data["text"] == "before the stop"
            first = await asyncio.to_thread(control, "control_stop_agent", {"instanceId": hub.instance("coder", 1)})
            await asyncio.to_thread(control, "control_stop_agent", {"instanceId": hub.instance("coder", 1),
                                                                    "confirmationId": first["confirmationId"]})
            refused = None
            for _ in range(40):  # within RELAYNET_CACHE_SECONDS (5 s) of the revoke, as an HTTP call is
                try:
                    await bob.send(channel.channel_id, "still here?")
                except AuthError as exc:
                    refused = exc
                    break
                await asyncio.sleep(0.25)
            assert refused is not None and "revoked" in str(refused)
            with pytest.raises(AccessDeniedError):  # and unbound: the connection no longer acts for it
                await bob.send(channel.channel_id, "and now?")
            await alice.send(channel.channel_id, "after the stop")
            with pytest.raises(asyncio.TimeoutError):  # nothing is notified to a revoked token's connection
                await bob.wait_for_channel_event(channel_id=channel.channel_id, timeout=2.0, predicate=lambda e: (
                    e.event_type == EV_TEXT and e.event_data.get("text") == "after the stop"))
        finally:
            await a.close()
            await b.close()

    run(story())


def test_an_unmodified_agent_with_ag2s_scripted_test_config_answers_a_consult(hub):
    async def story():
        a, b = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            await b.register(Agent("reviewer", "You review code.", config=TestConfig("Looks good to me.")),
                             passport(hub, "reviewer"), Resume(summary="Careful reviews"))
            channel = await alice.open(type="consulting", target="reviewer")
            await alice.send(channel.channel_id, "Please review PR 42.")
            reply = await next_text(alice, channel.channel_id)
            assert (reply.sender_id, reply.event_data["text"]) == ("reviewer", "Looks good to me.")
            closed = await alice.wait_for_channel_event(
                channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=WAIT)
            assert closed.event_data["reason"] == "consulting_complete"
        finally:
            await a.close()
            await b.close()

    run(story())


def test_an_mcp_plugin_agent_and_an_ag2_agent_talk_in_one_channel_and_see_each_other_in_peers(hub):
    async def story():
        b = HubClient(WsLink(ws_url(hub)))
        try:
            bob = await b.register_human(passport(hub, "reviewer"))
            # the plugin surface over HTTP (what the MCP bridge relays): planner opens and speaks
            opened = await asyncio.to_thread(tool, hub, "channels", {
                "action": "open", "type": "conversation", "target": "reviewer", "message": "Hello from MCP"},
                "planner")
            channel_id = opened["channel_id"]
            heard = await next_text(bob, channel_id)
            assert (heard.sender_id, heard.event_data["text"]) == ("planner", "Hello from MCP")
            await bob.send(channel_id, "Hello from AG2", causation_id=heard.envelope_id)
            for _ in range(50):
                info = await asyncio.to_thread(tool, hub, "channels", {"action": "info", "channel_id": channel_id},
                                               "planner")
                said = [(e["sender"], e["content"]) for e in info["envelopes"] if e["event_type"] == "text"]
                if len(said) == 2:
                    break
                await asyncio.sleep(0.1)
            assert said == [("planner", "Hello from MCP"), ("reviewer", "Hello from AG2")]
            await asyncio.to_thread(tool, hub, "say", {"channel_id": channel_id, "content": "Thanks!"}, "planner")
            assert (await next_text(bob, channel_id)).event_data["text"] == "Thanks!"
            # each sees the other: AG2's discovery lists the MCP agent, the plugin's peers the AG2 one
            names = [p.name for p in await b.list_agents()]
            assert "planner" in names
            assert (await b.get_agent("planner")).provider == "anthropic"  # its definition's passport
            peers = await asyncio.to_thread(tool, hub, "peers", {"action": "find"}, "planner")
            assert "reviewer" in [p["name"] for p in peers["peers"]]
            inbox = await asyncio.to_thread(tool, hub, "network_inbox", {}, "planner")
            assert any(m.get("channelId") == channel_id and m.get("body") == "Hello from AG2"
                       for m in inbox["messages"])
        finally:
            await b.close()

    run(story())


def test_frames_aws_would_drop_or_refuse(hub):
    """Strict decoding as AG2's hub: a frame with an extra key or without ``kind`` gets no
    answer; a field of the wrong type an ErrorFrame; a frame over 32 KB closes the connection."""
    from websockets.sync.client import connect

    with connect(ws_url(hub), open_timeout=10) as ws:
        ws.send(json.dumps({"kind": "ping", "extra": 1}))
        ws.send(json.dumps({"op": "register"}))
        ws.send(json.dumps({"kind": "request", "request_id": 7, "op": "list_agents", "params": {}}))
        assert json.loads(ws.recv(timeout=WAIT)) == {"kind": "error", "code": "protocol_error",
                                                     "message": "malformed request frame: request_id",
                                                     "envelope_id": None}
        ws.send(json.dumps({"kind": "ping"}))
        assert json.loads(ws.recv(timeout=WAIT)) == {"kind": "pong"}  # the dropped frames got nothing
        ws.send(json.dumps({"kind": "request", "request_id": "r1", "op": "no_such_op", "params": {}}))
        answer = json.loads(ws.recv(timeout=WAIT))
        assert (answer["ok"], answer["error_code"]) == (False, "protocol_error")
    with connect(ws_url(hub), open_timeout=10, max_size=None) as ws:
        ws.send("x" * (32 * 1024 + 1))
        with pytest.raises(Exception) as closed:
            ws.recv(timeout=WAIT)
        assert "1009" in str(closed.value) or "too big" in str(closed.value).lower()


def test_observed_tasks_and_checkpoints_belong_to_their_owner(hub):
    from ag2.task import TaskMetadata, TaskSpec, TaskState

    async def story():
        a, b = HubClient(WsLink(ws_url(hub))), HubClient(WsLink(ws_url(hub)))
        try:
            await a.register_human(passport(hub, "planner"))
            await b.register_human(passport(hub, "coder"))
            task = TaskMetadata(task_id="plan-1", owner_id="planner", spec=TaskSpec(title="Plan the release"),
                                state=TaskState.CREATED)
            await a.observe_task(task)
            await a.update_task("plan-1", state=TaskState.RUNNING, progress={"step": 1})
            got = await a.get_task("plan-1")
            assert (got.state, got.progress, got.spec.title) == (TaskState.RUNNING, {"step": 1}, "Plan the release")
            await a.checkpoint_task("plan-1", {"cursor": 7})
            assert await a.read_task_checkpoint("plan-1") == {"cursor": 7}
            with pytest.raises(NetworkError):  # another agent's task: as if it did not exist
                await b.get_task("plan-1")
            with pytest.raises(AccessDeniedError):
                await b.update_task("plan-1", state=TaskState.FAILED)
            with pytest.raises(AccessDeniedError):
                await b.read_task_checkpoint("plan-1")
            assert "plan-1" not in [t.task_id for t in await b.list_tasks()]
            await a.update_task("plan-1", state=TaskState.COMPLETED, result={"ok": True})
            await a.update_task("plan-1", state=TaskState.FAILED)  # a terminal task never changes again
            done = await a.get_task("plan-1")
            assert (done.state, done.result) == (TaskState.COMPLETED, {"ok": True}) and done.completed_at
            assert [t.task_id for t in await a.list_tasks(agent_id="planner")] == ["plan-1"]
            with pytest.raises(NetworkError, match="invalid task_id"):
                await a.get_task("../etc")
        finally:
            await a.close()
            await b.close()

    run(story())


def test_an_invite_nobody_acks_closes_the_channel_with_invite_timeout(hub):
    """AG2's handshake times out (after RELAYNET_AG2_INVITE_TIMEOUT_SECONDS, here 8 s; 30 by
    default, as AG2's hub): the keepalive (on the local sweep timer) closes the channel; the
    creator's own request (a 5 s rpc timeout here) has timed out client-side by then, and the
    channel is still pending until the timeout has passed."""
    async def story():
        a, b = HubClient(WsLink(ws_url(hub)), rpc_timeout=5), HubClient(WsLink(ws_url(hub)))
        try:
            alice = await a.register_human(passport(hub, "planner"))
            bob = await b.register_human(passport(hub, "coder"), auto_ack_invites=False)
            with pytest.raises(asyncio.TimeoutError):
                await alice.open(type="conversation", target="coder")
            invite = await bob.next_envelope(timeout=WAIT)
            assert invite.event_type == "ag2.channel.invite"
            assert (await b.get_channel(invite.channel_id)).state.value == "pending"
            invited = asyncio.get_running_loop().time()
            deadline = invited + 60
            while asyncio.get_running_loop().time() < deadline:
                meta = await b.get_channel(invite.channel_id)
                if meta.state.value == "closed":  # (between the handshake's end and the close it reads active)
                    break
                await asyncio.sleep(0.25)
            assert (meta.state.value, meta.close_reason) == ("closed", "invite_timeout")
            # not before its time: the invite went out before the open's 5 s rpc timeout ended
            assert asyncio.get_running_loop().time() - invited >= INVITE_TIMEOUT_S - 5 - 1
        finally:
            await a.close()
            await b.close()

    run(story())
