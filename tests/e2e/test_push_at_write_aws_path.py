"""The push at the write as AWS runs it (issue 26; relaynet.push_at_write): the writing function
invokes the stream functions asynchronously with a boto3 Lambda client, over real HTTP, here to
the local stack's Invoke API (relaynet_local.lambda_api, ``RELAYNET_LOCAL_PUSH_AT_WRITE=invoke``),
on DynamoDB Local; the table's stream hands every record over as well, as in AWS. With the Invoke
API working, the pushes leave by it; with it gone (connection refused: a missing permission or a
throttle fail the same way), every webhook and AG2 envelope still arrives by the stream; either
way each arrives once (one POST per delivery id, one ``notify`` frame per connection, recipient
and envelope)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

pytest.importorskip("ag2.network")
pytest.importorskip("websockets", reason="WsLink needs the websockets package (pip install 'relaynet[ag2]')")

from ag2.network import AuthBlock, HubClient, Passport, WsLink  # noqa: E402
from ag2.network.envelope import EV_TEXT  # noqa: E402

from relaynet import push_at_write, webhooks  # noqa: E402
from relaynet_local.server import LocalStack  # noqa: E402
from tests.conftest import DEMO_SPEC, ROOT  # noqa: E402
from tests.e2e.test_push_at_write_e2e import (  # noqa: E402
    SECRET, WAIT, Receiver, _key, _token, _tool, count_notify_frames)


@pytest.fixture(scope="module", params=["invoke", "refused"])
def stack(request, tmp_path_factory):
    """The demo network on an in-process stack pushing at the write through Lambda's Invoke API;
    ``refused``: that API is shut down once the stack is up. ``stack.streamed`` holds (function,
    record key) of every record the stream handed over; while ``stack.released`` is clear the
    stream hands nothing over (so in ``invoke`` mode what arrives came by the Invoke);
    ``stack.frames`` counts notify frames per (connection, recipient, envelope id)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RELAYNET_LOCAL_PUSH_AT_WRITE", "invoke")
    running = LocalStack(port=0, template=ROOT / "template.yaml", sweep_interval=0.2,
                         state_dir=tmp_path_factory.mktemp(f"aws-path-{request.param}")).start()
    try:
        assert running.push_at_write is None and running.lambda_api is not None  # not the in-process path
        pusher = push_at_write.installed()
        assert pusher is not None and {lid for lid, _, _ in pusher.targets} == {
            "NotifierFunction", "Ag2NotifierFunction"}
        if request.param == "refused":
            running.lambda_api.stop()  # its port now refuses connections
        running.streamed = set()
        running.released = threading.Event()  # the stream hands nothing over while it is clear
        running.released.set()
        stream_invoke = running._streams.invoke

        def streaming(function, event):
            assert running.released.wait(WAIT), "the stream was held too long"
            try:
                return stream_invoke(function, event)
            finally:
                running.streamed.update((function.logical_id, _key(r)) for r in event["Records"])

        running._streams.invoke = streaming
        running.tokens = running.apply_spec(DEMO_SPEC)
        running.network_id = running.tokens["networks"]["demo"]["networkId"]
        count_notify_frames(running)
        running.mode, running.pusher = request.param, pusher
        yield running
    finally:
        running.stop()
        mp.undo()


def _until_streamed(stack, function_id: str, keys) -> None:
    """Wait (polling, at most WAIT s) until the stream has handed ``function_id`` every record of ``keys``."""
    deadline = time.monotonic() + WAIT
    while set(keys) - {key for fid, key in stack.streamed if fid == function_id}:
        assert time.monotonic() < deadline, "the stream never handed every record over"
        time.sleep(0.02)


def _until_invoked(stack, function_id: str) -> None:
    """Wait (polling, at most WAIT s) until every asynchronous invocation of ``function_id`` the
    Invoke API accepted has run."""
    api, deadline = stack.lambda_api, time.monotonic() + WAIT
    while api.finished.get(function_id, 0) < api.accepted.get(function_id, 0):
        assert time.monotonic() < deadline, "an accepted invocation never ran"
        time.sleep(0.02)


def _hold(stack) -> tuple[int, int, int]:
    """In ``invoke`` mode, hold the stream (so only the Invoke can deliver); the counters before."""
    if stack.mode == "invoke":
        stack.released.clear()
    return stack.pusher.sent, stack.pusher.failed, sum(stack.lambda_api.accepted.values())


def _check_path(stack, before: tuple[int, int, int]) -> None:
    """The Invoke path ran (``invoke``) or failed (``refused``) for this test's writes; then the
    stream is released."""
    sent, failed, accepted = before
    if stack.mode == "invoke":
        assert stack.pusher.sent > sent and stack.pusher.failed == failed
        assert sum(stack.lambda_api.accepted.values()) > accepted
    else:
        assert stack.pusher.failed + stack.pusher.skipped > failed and stack.pusher.sent == sent
        assert sum(stack.lambda_api.accepted.values()) == accepted
    stack.released.set()


def test_every_webhook_arrives_once_whether_the_invoke_works_or_not(stack):
    receiver = Receiver()
    try:
        path = f"/coder0-{stack.mode}"
        r = httpx.put(f"{stack.url}/v1/push", json={"url": f"{receiver.url}{path}", "token": SECRET},
                      headers={"Authorization": f"Bearer {_token(stack, 'coder')}"}, timeout=10)
        assert r.status_code == 200, r.text
        coder0 = stack.tokens["networks"]["demo"]["instances"]["coder"][0]["instanceId"]
        before = _hold(stack)
        try:
            sent = [_tool(stack, "network_ask", {"toInstance": coder0, "body": f"ask {i}"},
                          _token(stack, "planner"))["messageId"] for i in range(8)]
            got = receiver.take(len(sent), WAIT)  # in invoke mode the stream is held: these came by the Invoke
        finally:
            stack.released.set()
        assert {p for p, _, _ in got} == {path}
        events = [webhooks.verify(h, b, SECRET) for _, h, b in got]
        assert sorted(e["messageId"] for e in events) == sorted(sent)
        assert len({e["deliveryId"] for e in events}) == len(sent)
        _check_path(stack, before)
        from relaynet.store import keys as k
        from relaynet.store import table as t

        entries = t.query(k.mailbox_pk(stack.network_id, {"instanceId": coder0}), sk_prefix="MSG#")
        assert len(entries) == len(sent)
        _until_streamed(stack, "NotifierFunction", [(e["PK"], e["SK"]) for e in entries])
        _until_invoked(stack, "NotifierFunction")
        assert receiver.got.empty(), f"a webhook was sent twice: {receiver.got.get_nowait()[0]}"
    finally:
        receiver.server.shutdown()


def test_every_ag2_envelope_reaches_each_connection_once_whether_the_invoke_works_or_not(stack):
    def passport(name: str) -> Passport:
        return Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": _token(stack, name)}))

    async def story() -> tuple[str, list[str]]:
        ws = stack.url.replace("http://", "ws://") + "/v1/ag2"
        a, b = HubClient(WsLink(ws)), HubClient(WsLink(ws))
        try:
            alice = await a.register_human(passport("planner"))
            bob = await b.register_human(passport("reviewer"))
            channel = await alice.open(type="conversation", target="reviewer")
            heard = []
            for i in range(3):
                await alice.send(channel.channel_id, f"ping {i}")
                e = await bob.wait_for_channel_event(channel_id=channel.channel_id, timeout=WAIT, predicate=lambda e, i=i:
                                                     e.event_type == EV_TEXT and e.event_data["text"] == f"ping {i}")
                heard.append(e.event_data["text"])
            return channel.channel_id, heard
        finally:
            await a.close()
            await b.close()

    before = _hold(stack)
    try:
        cid, heard = asyncio.run(asyncio.wait_for(story(), 120))
    finally:
        stack.released.set()
    assert heard == [f"ping {i}" for i in range(3)]
    _check_path(stack, before)
    from relaynet.store import channels as channel_store

    written = channel_store.envelopes(stack.network_id, cid)
    assert len(written) >= 3
    _until_streamed(stack, "Ag2NotifierFunction", [(e["PK"], e["SK"]) for e in written])
    _until_invoked(stack, "Ag2NotifierFunction")
    assert stack.frames and max(stack.frames.values()) == 1, [k for k, n in stack.frames.items() if n > 1]
