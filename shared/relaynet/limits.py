"""Abuse limits (PROTOCOL.md 2 ``rate_limited``): an agent stuck in a loop must not flood a
mailbox or a network. Checked before anything is written, so a refused call writes nothing:

- **Undelivered messages per mailbox** (``RELAYNET_MAILBOX_CAP``, 1000): an ask, a reply or a
  channel send to a mailbox already holding that many undelivered messages is 429
  ``rate_limited`` with ``Retry-After``, naming the mailbox in ``details.mailbox``. System
  messages (task offers and notices, channel opened/closed/expired envelopes) are never refused;
  they count toward the total. The count is a Query of the mailbox (``Select=COUNT``, stopping
  at the cap), so a send costs read units in proportion to the recipient's backlog, bounded by
  the cap; concurrent sends may each pass the check and overshoot the cap by their number.
- **Recipients per fan-out** (``RELAYNET_MAX_FANOUT``, 200): an ask or reply to a group with more
  members than that is 429 ``rate_limited`` (``details.recipients``, ``details.max``): nothing is
  sent to any member; address fewer at a time.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from relaynet import observability
from relaynet.config import settings
from relaynet.errors import RateLimited
from relaynet.store import mailboxes as mail_store

RETRY_FULL_MAILBOX_S = 30
RETRY_FANOUT_S = 60
_PARALLEL = 16  # mailbox counts of a fan-out run this many at a time


def check_fanout(recipients: int) -> None:
    """RateLimited when one message would go to more than ``RELAYNET_MAX_FANOUT`` mailboxes."""
    cap = settings().max_fanout
    if recipients > cap:
        observability.count("RateLimited", rate_limit="fanout")
        raise RateLimited(f"this message would reach {recipients} mailboxes; at most {cap} per message",
                          {"recipients": recipients, "max": cap}, headers={"Retry-After": str(RETRY_FANOUT_S)})


def check_mailboxes(net: str, mailboxes: list[dict[str, str]]) -> None:
    """RateLimited naming the first of ``mailboxes`` (``{"agent"}`` / ``{"instanceId"}``) that
    holds ``RELAYNET_MAILBOX_CAP`` undelivered messages or more."""
    if not mailboxes:
        return
    check_fanout(len(mailboxes))
    cap = settings().mailbox_cap

    def count(box: dict[str, str]) -> int:
        return mail_store.count_undelivered(net, box, cap)

    if len(mailboxes) == 1:
        counts = [count(mailboxes[0])]
    else:  # each worker runs in a copy of this context: the handler's DynamoDB declaration holds there too
        contexts = [contextvars.copy_context() for _ in mailboxes]
        with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(mailboxes))) as pool:
            counts = list(pool.map(lambda pair: pair[0].run(count, pair[1]), zip(contexts, mailboxes)))
    for box, n in zip(mailboxes, counts):
        if n >= cap:
            who = box.get("agent") or box.get("instanceId")
            observability.count("RateLimited", rate_limit="mailbox_cap")
            raise RateLimited(f"the mailbox of {who} holds {cap} undelivered messages; retry once it has read some",
                              {"mailbox": {"instanceId": box["instanceId"]} if "instanceId" in box else {"agent": box["agent"]},
                               "cap": cap}, headers={"Retry-After": str(RETRY_FULL_MAILBOX_S)})
