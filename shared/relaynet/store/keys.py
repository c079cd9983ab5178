"""Key shapes of the one table: the only place that spells them (docs/architecture.md lists the
access patterns each serves).

| item | PK | SK |
|---|---|---|
| token | ``TOKEN#<sha256>`` | ``TOKEN`` |
| network name index | ``NETNAME#<name>`` | ``NETNAME`` |
| network / agent / group / resource / instance | ``NET#<net>`` | ``META`` / ``AGENT#<name>`` / ``GROUP#<slug>`` / ``RES#<key>`` / ``INST#<id>`` |
| representative | ``REP#<name>`` | ``META`` |
| thread and its messages | ``NET#<net>#THR#<thr>`` | ``META`` / ``MSG#<msg>`` |
| mailbox entry (undelivered) | ``NET#<net>#MBOX#A#<agent>`` or ``NET#<net>#MBOX#I#<inst>`` | ``MSG#<msg>`` |
| task and its artifacts | ``NET#<net>#TASK#<task>`` | ``META`` / ``ART#<art>`` |
| artifact without task | ``NET#<net>#ARTS`` | ``ART#<art>`` |
| claims head and claims | ``NET#<net>#CLAIMS`` | ``HEAD`` / ``CLAIM#<clm>`` |

GSI1 (sparse, routing): ``GSI1PK = ROUTE``, ``GSI1SK = <due ms, 13 digits>#<net>#<task>`` on
tasks that are ``pending`` or ``offered`` only. GSI2 (listings): ``GSI2PK = NET#<net>#TASKS``,
``GSI2SK = <task id>`` on every task (newest first by ULID).
"""

from __future__ import annotations

META = "META"
ROUTE = "ROUTE"


def token(token_hash: str) -> tuple[str, str]:
    return f"TOKEN#{token_hash}", "TOKEN"


def network_name(name: str) -> tuple[str, str]:
    return f"NETNAME#{name}", "NETNAME"


def net(net_id: str) -> str:
    return f"NET#{net_id}"


def network(net_id: str) -> tuple[str, str]:
    return net(net_id), META


def agent(net_id: str, name: str) -> tuple[str, str]:
    return net(net_id), f"AGENT#{name}"


def group(net_id: str, slug: str) -> tuple[str, str]:
    return net(net_id), f"GROUP#{slug}"


def resource(net_id: str, key: str) -> tuple[str, str]:
    return net(net_id), f"RES#{key}"


def instance(net_id: str, inst_id: str) -> tuple[str, str]:
    return net(net_id), f"INST#{inst_id}"


def representative(name: str) -> tuple[str, str]:
    return f"REP#{name}", META


def thread_pk(net_id: str, thr_id: str) -> str:
    return f"{net(net_id)}#THR#{thr_id}"


def thread(net_id: str, thr_id: str) -> tuple[str, str]:
    return thread_pk(net_id, thr_id), META


def thread_message(net_id: str, thr_id: str, msg_id: str) -> tuple[str, str]:
    return thread_pk(net_id, thr_id), f"MSG#{msg_id}"


def mailbox_pk(net_id: str, address: dict) -> str:
    """``{"agent": name}`` or ``{"instanceId": id}`` -> the mailbox partition."""
    if "instanceId" in address:
        return f"{net(net_id)}#MBOX#I#{address['instanceId']}"
    return f"{net(net_id)}#MBOX#A#{address['agent']}"


def task_pk(net_id: str, task_id: str) -> str:
    return f"{net(net_id)}#TASK#{task_id}"


def task(net_id: str, task_id: str) -> tuple[str, str]:
    return task_pk(net_id, task_id), META


def tasks_index(net_id: str) -> str:
    return f"{net(net_id)}#TASKS"


def route_sk(due_ms: int, net_id: str, task_id: str) -> str:
    return f"{due_ms:013d}#{net_id}#{task_id}"


def artifact(net_id: str, art_id: str, task_id: str | None) -> tuple[str, str]:
    pk = task_pk(net_id, task_id) if task_id else f"{net(net_id)}#ARTS"
    return pk, f"ART#{art_id}"


def claims_pk(net_id: str) -> str:
    return f"{net(net_id)}#CLAIMS"


def claims_head(net_id: str) -> tuple[str, str]:
    return claims_pk(net_id), "HEAD"


def claim(net_id: str, claim_id: str) -> tuple[str, str]:
    return claims_pk(net_id), f"CLAIM#{claim_id}"
