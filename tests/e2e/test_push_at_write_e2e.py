"""Push at the write and its backstop (issue 26; docs/architecture.md "Push at the write"): the
local stack on DynamoDB Local with the write's own notifier on (as shipped: it hands over every
record at once, the table's stream what it did not, on their own threads), turned off
(``RELAYNET_PUSH_AT_WRITE=false``, the product's setting) or raising on every batch (a fault put
into the running stack's notifier). Every webhook and every AG2 envelope arrives, once: a
receiver sees one POST per delivery id, a connection one ``notify`` frame per envelope and
recipient, and a stream record handed over again sends nothing more. The stream skips the records
the write path handled (relaynet_local.streams.PushedAtWrite), and only those.

The stack runs in this process (it is the product's ``relaynet serve`` without the CLI) so the
fault can be put into its notifier and the frames posted to each connection counted at its
management API."""

from __future__ import annotations

import asyncio
import json
import logging
import itertools
import queue
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

pytest.importorskip("ag2.network")
pytest.importorskip("websockets", reason="WsLink needs the websockets package (pip install 'relaynet[ag2]')")

from ag2.network import AuthBlock, HubClient, Passport, WsLink  # noqa: E402
from ag2.network.envelope import EV_TEXT  # noqa: E402

from relaynet import webhooks  # noqa: E402
from relaynet_local.server import LocalStack  # noqa: E402
from relaynet_local.streams import digest  # noqa: E402
from tests.conftest import DEMO_SPEC, ROOT  # noqa: E402

SECRET = "push-at-write-signing-secret-123"
WAIT = 20.0


class Receiver:
    """A webhook receiver on 127.0.0.1: every POST lands in ``got`` as (path, headers, body)."""

    def __init__(self):
        self.got: queue.Queue = queue.Queue()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.got.put((self.path, dict(self.headers), body))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, n: int, timeout: float) -> list[tuple[str, dict, bytes]]:
        """The next ``n`` POSTs, waiting at most ``timeout`` seconds for them."""
        out, deadline = [], time.monotonic() + timeout
        while len(out) < n:
            try:
                out.append(self.got.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"{len(out)} of {n} webhooks within {timeout} s") from None
        return out


def _raising(function, event):
    raise RuntimeError(f"the direct path is down ({function.logical_id}, {len(event['Records'])} records)")


@pytest.fixture(scope="module", params=["on", "off", "raising"])
def stack(request, tmp_path_factory):
    """The demo network on an in-process stack whose push at the write is on (as shipped), off,
    or always raises; ``stack.frames`` counts the notify frames posted, per (connection,
    recipient, envelope id). Per (function logical id, record key (PK, SK)): ``stack.streamed``
    the records the stream handed to that function (once in it, that record's posts are made),
    ``stack.skipped`` those it did not hand over because the write path had; ``written`` and
    ``read`` the digest each path saw; ``added_at`` and ``looked_at`` the order in which the
    write path reported a record handled and the stream first looked at it (_until_streamed)."""
    mp = pytest.MonkeyPatch()
    if request.param == "off":
        mp.setenv("RELAYNET_PUSH_AT_WRITE", "false")
    state = tmp_path_factory.mktemp(f"push-{request.param}")
    running = LocalStack(port=0, template=ROOT / "template.yaml", sweep_interval=0.2, state_dir=state).start()
    try:
        if request.param == "off":
            assert running.push_at_write._remove is None  # the setting turned it off: no listener
        else:
            assert running.push_at_write._remove is not None
        if request.param == "raising":
            running.push_at_write.invoke = _raising
        running.streamed = set()  # (function, key) of the records the stream handed over
        stream_invoke = running._streams.invoke

        def streaming(function, event):
            try:
                return stream_invoke(function, event)
            finally:
                running.streamed.update((function.logical_id, _key(r)) for r in event["Records"])

        running._streams.invoke = streaming
        running.skipped = set()  # (function, key) the stream did not hand over: the write path had
        running.written, running.read, running.added_at, running.looked_at = {}, {}, {}, {}
        clock = itertools.count()
        write_invoke, take, add = running.push_at_write.invoke, running.pushed.take, running.push_at_write.on_pushed

        def writing(function, event):
            for r in event["Records"]:
                running.written[(function.logical_id, _key(r))] = digest(r)
            return write_invoke(function, event)

        def adding(function_id, digests):
            at, handled = next(clock), set(digests)
            for (fid, key), d in list(running.written.items()):
                if fid == function_id and d in handled:
                    running.added_at.setdefault((fid, key), at)
            return add(function_id, digests)

        def taking(function_id, record):
            pair = (function_id, _key(record))
            running.looked_at.setdefault(pair, next(clock))
            running.read[pair] = digest(record)
            taken = take(function_id, record)
            if taken:
                running.skipped.add(pair)
            return taken

        running.push_at_write.invoke = writing
        running.push_at_write.on_pushed = adding  # it holds running.pushed.add
        running.pushed.take = taking
        running.tokens = running.apply_spec(DEMO_SPEC)
        running.network_id = running.tokens["networks"]["demo"]["networkId"]
        count_notify_frames(running)
        running.mode = request.param
        yield running
    finally:
        running.stop()
        mp.undo()


def count_notify_frames(stack) -> None:
    """Count in ``stack.frames`` the notify frames its AG2 management API posts, per
    (connection, recipient, envelope id)."""
    stack.frames = Counter()
    manage = stack.ag2.manage

    def counting(method: str, connection_id: str, body: bytes):
        if method == "POST":
            frame = json.loads(body)
            if frame.get("kind") == "notify":
                stack.frames[(connection_id, frame.get("recipient_id"), frame["envelope"]["envelope_id"])] += 1
        return manage(method, connection_id, body)

    stack.ag2.manage = counting


def _token(stack, agent: str, n: int = 0) -> str:
    return stack.tokens["networks"]["demo"]["instances"][agent][n]["token"]


def _tool(stack, name: str, body: dict, token: str) -> dict:
    r = httpx.post(f"{stack.url}/v1/tools/{name}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _key(record: dict) -> tuple[str, str]:
    image = record["dynamodb"]["NewImage"]
    return image["PK"]["S"], image["SK"]["S"]


def _until_streamed(stack, keys) -> None:
    """Wait (polling, at most WAIT s) until the stream has read the records of ``keys``: handed
    them over, or skipped them because the write path had handled them; and, with the write path
    on, until the write path has reported each record it handled. Then: with the write path off
    or failing the stream skipped nothing. On, the stream's record of each commit has the write
    path's digest, and the stream skipped each record the write path had reported by the time
    the stream looked at it (one it read first it hands over too; the functions deduplicate)."""
    keys = set(keys)
    deadline = time.monotonic() + WAIT

    def pending() -> set:
        carried = stack.streamed | stack.skipped
        left = keys - {key for _, key in carried}
        if stack.mode == "on":  # and each function the write path gave a record to, both paths done
            left |= {key for fid, key in list(stack.written)
                     if key in keys and ((fid, key) not in stack.added_at or (fid, key) not in carried)}
        return left

    while pending():
        assert time.monotonic() < deadline, f"the stream or the write path never carried {pending()}"
        time.sleep(0.02)
    if stack.mode != "on":
        assert not keys & {key for _, key in stack.skipped}, "the stream skipped a record the write path did not handle"
        return
    handled = {(fid, key): at for (fid, key), at in stack.added_at.items() if key in keys}
    assert handled, "the write path handled none of the records"
    for (fid, key), added in handled.items():
        assert stack.read.get((fid, key)) == stack.written[(fid, key)], \
            f"{fid}: the stream's record of {key} is not the write path's (digests differ)"
        if (fid, key) not in stack.skipped:
            assert stack.looked_at[(fid, key)] < added, \
                f"{fid}: the stream handed over {key} again after the write path had reported it handled"


def _stream_records(stack, instance_id: str) -> list[dict]:
    """The INSERT records the stream carried for the instance's mailbox entries (read back)."""
    from relaynet.store import keys as k
    from relaynet.store import table as t

    entries = t.query(k.mailbox_pk(stack.network_id, {"instanceId": instance_id}), sk_prefix="MSG#")
    return [stack.push_at_write.record(t.encode(e)) for e in entries]


def test_every_webhook_arrives_once_by_the_stream(stack, caplog):
    receiver = Receiver()
    try:
        path = f"/coder0-{stack.mode}"
        r = httpx.put(f"{stack.url}/v1/push", json={"url": f"{receiver.url}{path}", "token": SECRET},
                      headers={"Authorization": f"Bearer {_token(stack, 'coder')}"}, timeout=10)
        assert r.status_code == 200, r.text
        coder0 = stack.tokens["networks"]["demo"]["instances"]["coder"][0]["instanceId"]
        with caplog.at_level(logging.ERROR, logger="relaynet_local.streams"):
            sent = [_tool(stack, "network_ask", {"toInstance": coder0, "body": f"ask {i}"},
                          _token(stack, "planner"))["messageId"] for i in range(8)]
            got = receiver.take(len(sent), WAIT)
            if stack.mode == "raising":  # the direct path ran, and failed, for every write
                deadline = time.monotonic() + WAIT
                while sum("at the write; the stream delivers them" in r.getMessage() for r in caplog.records) < 1:
                    assert time.monotonic() < deadline, "the direct path never ran"
                    time.sleep(0.05)
        assert {p for p, _, _ in got} == {path}
        events = [webhooks.verify(h, b, SECRET) for _, h, b in got]
        assert sorted(e["messageId"] for e in events) == sorted(sent)
        assert len({e["deliveryId"] for e in events}) == len(sent)
        records = _stream_records(stack, coder0)
        assert len(records) == len(sent)
        _until_streamed(stack, [(r["dynamodb"]["Keys"]["PK"]["S"], r["dynamodb"]["Keys"]["SK"]["S"]) for r in records])
        assert receiver.got.empty(), f"a webhook was sent twice: {receiver.got.get_nowait()[0]}"
        # a stream that hands the records over again (Lambda retries a batch; a shard is re-read)
        assert stack.invoke(stack.template.functions["NotifierFunction"], {"Records": records}) == \
            {"batchItemFailures": []}
        assert receiver.got.empty(), f"a webhook was sent twice: {receiver.got.get_nowait()[0]}"
    finally:
        receiver.server.shutdown()


def test_every_ag2_envelope_reaches_each_connection_once_by_the_stream(stack):
    def passport(name: str) -> Passport:
        return Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": _token(stack, name)}))

    async def story() -> tuple[str, list[str], list[str]]:
        ws = stack.url.replace("http://", "ws://") + "/v1/ag2"
        a, b = HubClient(WsLink(ws)), HubClient(WsLink(ws))
        try:
            alice = await a.register_human(passport("planner"))
            bob = await b.register_human(passport("reviewer"))
            channel = await alice.open(type="conversation", target="reviewer")
            cid, heard_by_bob, heard_by_alice = channel.channel_id, [], []
            for i in range(5):
                await alice.send(cid, f"ping {i}")
                e = await bob.wait_for_channel_event(channel_id=cid, timeout=WAIT, predicate=lambda e, i=i:
                                                     e.event_type == EV_TEXT and e.event_data["text"] == f"ping {i}")
                heard_by_bob.append(e.event_data["text"])
                await bob.send(cid, f"pong {i}")
                e = await alice.wait_for_channel_event(channel_id=cid, timeout=WAIT, predicate=lambda e, i=i:
                                                       e.event_type == EV_TEXT and e.event_data["text"] == f"pong {i}")
                heard_by_alice.append(e.event_data["text"])
            return cid, heard_by_bob, heard_by_alice
        finally:
            await a.close()
            await b.close()

    cid, by_bob, by_alice = asyncio.run(asyncio.wait_for(story(), 120))
    assert by_bob == [f"ping {i}" for i in range(5)] and by_alice == [f"pong {i}" for i in range(5)]
    from relaynet.store import channels as channel_store

    written = channel_store.envelopes(stack.network_id, cid)
    assert len(written) >= 10
    _until_streamed(stack, [(e["PK"], e["SK"]) for e in written])  # both paths have been through them all
    assert stack.frames and max(stack.frames.values()) == 1, [k for k, n in stack.frames.items() if n > 1]
