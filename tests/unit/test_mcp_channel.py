"""The channel's coalescing and wording (relaynet.mcp_channel): hypothesis against the rule
itself (every event told once, in order; notices at least a window apart; an event after a
quiet window told at once) and the text a model reads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from relaynet.mcp_channel import Coalescer, Notice


def _drive(gaps: list[float], window: float) -> list[tuple[float, list[int]]]:
    """Feed events at the cumulative ``gaps`` as the bridge's loop does (flush when due):
    ``[(time sent, [event numbers])]``."""
    c, sent, now = Coalescer(window), [], 0.0
    for i, gap in enumerate(gaps):
        due = c.due()
        if due is not None and due <= now + gap:
            notice = c.flush(due)
            sent.append((due, [e["n"] for e in notice.events]))
        now += gap
        notice = c.add({"event": "message", "id": f"msg_{i}", "n": i}, now)
        if notice is not None:
            sent.append((now, [e["n"] for e in notice.events]))
    due = c.due()
    if due is not None:
        notice = c.flush(max(due, now))
        sent.append((max(due, now), [e["n"] for e in notice.events]))
    assert c.flush(now + 1000) is None
    return sent


@given(st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), max_size=60),
       st.floats(min_value=0.5, max_value=10))
def test_every_event_is_told_once_in_order_and_notices_keep_a_window_apart(gaps, window):
    sent = _drive(gaps, window)
    assert [n for _, batch in sent for n in batch] == list(range(len(gaps)))
    assert all(batch for _, batch in sent)
    times = [t for t, _ in sent]
    assert all(b - a >= window - 1e-9 for a, b in zip(times, times[1:]))
    # an event that comes a window or more after the last notice is told at once
    at, last = 0.0, None
    told = {n: t for t, batch in sent for n in batch}
    for i, gap in enumerate(gaps):
        at += gap
        if last is None or at - last >= window:
            assert told[i] == at
        last = max(t for t in times if t <= told[i])


def test_a_burst_is_one_notice_then_one_more_at_the_end_of_the_window():
    sent = _drive([0.0] + [0.01] * 19, 5.0)
    assert [len(batch) for _, batch in sent] == [1, 19] and sent[1][0] == 5.0


def test_the_notice_says_what_waits_by_kind_and_names_offered_tasks_never_a_body():
    notice = Notice([{"event": "message", "id": "msg_1", "kind": "ask"},
                     {"event": "task_offer", "id": "msg_2", "kind": "task_offer", "taskId": "task_9"},
                     {"event": "message", "id": "msg_3", "kind": "reply", "taskId": "task_9"}])
    assert notice.params == {
        "content": "3 new on Relaynet: a task_offer (task task_9), 2 messages. Call network_inbox.",
        "meta": {"kind": "message", "messageId": "msg_3", "count": "3", "taskId": "task_9"}}
    wake = Notice([{"event": "wake", "id": "msg_4", "kind": "notice"}]).params
    assert wake["content"] == "1 new on Relaynet: a wake-up. Call network_inbox." and "taskId" not in wake["meta"]
