"""Races between real threads against DynamoDB Local: conditional writes make exactly one winner.

Each race is 20 threads x 20 rounds, released together by a barrier, one instance per thread, on
the store `relaynet serve` ships and with no lock of ours (claims: test_claim_races.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from relaynet import channels, clock, messaging, tasks
from relaynet.adapters import Send
from relaynet.errors import Conflict, InvalidTransition
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

THREADS = 20
ROUNDS = 20
SPEC = f"network: race\nagents:\n  - {{name: worker, instances: {THREADS}}}\n  - {{name: boss, instances: 1}}\n"


def _at_once(fn, args):
    """``fn(arg)`` for every arg in its own thread, released together; exceptions are results."""
    barrier = threading.Barrier(len(args))

    def run(arg):
        barrier.wait()
        try:
            return fn(arg)
        except Exception as exc:  # noqa: BLE001 - the losers' errors are the result
            return exc

    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(run, args))


def _workers(net):
    return [net.principals[f"worker{i}"] for i in range(THREADS)]


def _set_seen(net, principals, ms):
    for p in principals:
        t.update(*k.instance(net.network_id, p.instance_id), "SET lastSeenAt = :v", v=ms)


def test_twenty_instances_pulling_one_pending_task_have_one_winner_every_round(server_table):
    net = apply(SPEC)
    workers = _workers(net)
    for rnd in range(ROUNDS):
        _set_seen(net, workers, 0)  # all offline: the task stays pending
        task_id = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective=f"job {rnd}",
                                                                            toAgent="worker"))["taskId"]
        assert tasks.load_task(net.network_id, task_id)["state"] == "pending"
        _set_seen(net, workers, clock.now_ms())  # all live: each may pull it
        results = _at_once(lambda p: tasks.update(p, w.TaskUpdateRequest(taskId=task_id, status="accepted")),
                           workers)
        wins = [(p, r) for p, r in zip(workers, results) if isinstance(r, dict)]
        assert len(wins) == 1, f"round {rnd}: {len(wins)} winners"
        losers = [r for r in results if not isinstance(r, dict)]
        assert all(isinstance(r, InvalidTransition) and r.status == 409 for r in losers), [repr(r) for r in losers]
        task = tasks.load_task(net.network_id, task_id)
        assert task["state"] == "accepted" and task["assignee"] == wins[0][0].instance_id
        assert [h["state"] for h in task["history"]] == ["pending", "accepted"]


def test_twenty_instances_fetching_one_mailbox_get_each_message_exactly_once_every_round(server_table):
    net = apply(SPEC)
    workers, boss = _workers(net), net.principals["boss0"]
    for rnd in range(ROUNDS):
        sent = [messaging.ask(boss, w.AskRequest(body=f"r{rnd} m{i}", toAgent="worker"))["messageId"]
                for i in range(THREADS)]
        results = _at_once(lambda p: [m["id"] for m in messaging.inbox(p)["messages"]], workers)
        assert not [r for r in results if isinstance(r, Exception)], results
        got = Counter(m for r in results for m in r)
        assert set(got) == set(sent) and set(got.values()) == {1}, f"round {rnd}: {got}"


def test_twenty_threads_taking_one_discussion_turn_store_exactly_one_envelope_every_round(server_table):
    net = apply("network: race\nagents:\n  - {name: alice, instances: 1}\n  - {name: bob, instances: 1}\n")
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    ch = channels.open_channel(alice, "discussion", ["bob"], None, None, None, None)["channel_id"]
    for rnd in range(ROUNDS):
        speaker = alice if rnd % 2 == 0 else bob
        results = _at_once(lambda i: channels.send(speaker, ch, Send(sender=speaker.agent, tool="say"),
                                                   f"round {rnd} from thread {i}", None), list(range(THREADS)))
        wins = [r for r in results if isinstance(r, dict)]
        assert len(wins) == 1, f"round {rnd}: {len(wins)} winners"
        assert [r.reason for r in results if isinstance(r, Conflict)] == ["not_your_turn"] * (THREADS - 1)
    texts = [e for e in channels.info(alice, ch)["envelopes"] if e["event_type"] == "text"]
    assert len(texts) == ROUNDS and [e["sender"] for e in texts] == ["alice", "bob"] * (ROUNDS // 2)


def test_twenty_threads_looking_at_a_channel_past_its_ttl_write_one_expired_envelope_every_round(server_table):
    # PROTOCOL.md 7(3), issue 24: whichever looks first (info, list, say, close) expires it, with its
    # envelope and mailbox copies in the same transaction; every look shows it expired with the envelope
    net = apply("network: race\nagents:\n  - {name: alice, instances: 1}\n  - {name: bob, instances: 1}\n")
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    opened = [channels.open_channel(alice, "conversation", ["bob"], None, None, 1, None)["channel_id"]
              for _ in range(ROUNDS)]
    last = channels.info(alice, opened[-1])["channel"]["expires_at"]
    while clock.now_ms() <= clock.parse_iso(last):
        time.sleep(0.01)

    def look(job):
        kind, who, ch = job
        if kind == "info":
            return kind, channels.info(who, ch)
        if kind == "list":
            return kind, channels.list_channels(who, "all", 100)
        if kind == "close":
            return kind, channels.close(who, ch)
        return kind, channels.send(who, ch, Send(sender=who.agent, tool="say"), "too late")

    for ch in opened:
        jobs = [(("info", "list", "close", "say")[i % 4], (alice, bob)[i % 2], ch) for i in range(THREADS)]
        for result in _at_once(look, jobs):
            if isinstance(result, Conflict):
                assert result.reason == "channel_closed"
                continue
            kind, out = result
            if kind == "info":
                assert out["channel"]["state"] == "expired" and out["envelopes"][-1]["event_type"] == "expired"
            elif kind == "list":
                assert {c["channel_id"]: c["state"] for c in out["channels"]}[ch] == "expired"
            else:
                assert (out["state"], out["close_reason"]) == ("expired", "ttl")
        stored = [e["event_type"] for e in channels.info(alice, ch)["envelopes"]]
        assert stored == ["opened", "expired"], stored
    for who in (alice, bob):
        copies = Counter(m["channelId"] for m in messaging.inbox(who)["messages"]
                         if m["envelope"]["event_type"] == "expired")
        assert copies == Counter({ch: 1 for ch in opened})
