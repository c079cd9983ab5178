"""The claims repository (relaynet.claims decides; this module lays out and writes; issue 25).

Three places hold a claim's state (docs/architecture.md "The table"):

* The **claim tree** of its namespace, ``NET#<net>#CLAIMTREE#<scopeType>#<resourceId>``: one item
  per claim at ``A#<anchor>//<instanceId>#<scope hash>``, where the anchor is the literal
  directory prefix every path the scope matches lies under (``soak/a1`` for ``soak/a1/**``, the
  empty root for ``**/*.md``). ``//`` ends the anchor (a normalised glob has no empty segment), so
  the items *at* an anchor are one sort-key prefix (``A#soak//``) and its whole subtree another
  (``A#soak/``). A tree item is ``pending`` (announced, not yet decided), ``granted`` (the claim)
  or ``defeated`` (lost to a claim that was granted). Beside the claims each anchor keeps a
  *mark*, ``A#<anchor>//~HW``, written with every announcement there (so a claim below it knows
  to read this anchor) and holding the largest fencing token granted there (``tok``), so a token
  outlives its claim; ``ttl`` 3 days after its last write, longer than any claim written with it
  lives without a renewal (which writes it again).
* A **reference** by claim id, ``NET#<net>#CLAIMS`` / ``CLAIM#<clm>``: the claim's immutable
  fields and where its tree item is (``treePk``, ``treeSk``), for release by id and listings.
* A **task index**, ``NET#<net>#CLAIMS`` / ``TASK#<task>#CLM#<clm>`` (a pointer per claim that
  carried the task) and ``TASK#<task>#HEAD`` (``counter``, added to by every grant or renewal
  carrying the task), so a task's terminal move finds its claims and sees one taken meanwhile.

Ended claims move to ``NET#<net>#CLAIMS#ENDED`` / ``CLAIM#<clm>`` for a day, as before. Tables
written before issue 25 kept every claim at ``NET#<net>#CLAIMS`` / ``CLAIM#<clm>`` (``kind``
``claim``) under one ``HEAD`` counter; :func:`legacy_claims` reads them for
relaynet.claims.migrate.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from relaynet.store import keys as k
from relaynet.store import table as t

TransactionCancelled = t.TransactionCancelled

KEEP_AFTER_END_S = 86_400  # ended claims stay readable a day (for release answers)
MARK_KEEP_S = 3 * 86_400  # an anchor's mark outlives the last claim written with it (at most a day) by 2 days
PENDING_KEEP_S = 3_600  # an announcement nobody decides (its caller died) is removed by TTL
MAX_SK_BYTES = 1024  # DynamoDB's limit on a sort key
_SUFFIX_BYTES = 80  # "//" + instance id + "#" + 32 hex digits, with room to spare
HW = "~HW"  # sorts after every instance id ("inst_...")


# --------------------------------------------------------------------------- the tree's keys


def anchor_fits(anchor: str) -> bool:
    """Whether a tree sort key with this anchor fits DynamoDB's 1,024-byte limit."""
    return len(f"A#{anchor}".encode()) + _SUFFIX_BYTES <= MAX_SK_BYTES


def tree_sk(anchor: str, instance_id: str, scope: str) -> str:
    """The sort key of ``instance_id``'s claim on ``scope`` at ``anchor`` ("" is the root): one
    item per instance and scope, so a renewal is a write to the same item."""
    digest = hashlib.sha256(scope.encode()).hexdigest()[:32]
    return f"A#{anchor}//{instance_id}#{digest}"


def high_water_sk(anchor: str) -> str:
    return f"A#{anchor}//{HW}"


def is_high_water(item: dict[str, Any]) -> bool:
    return item.get("kind") == "claim_hw"


def read_around(pk: str, anchor: tuple[str, ...], *, exact_only: bool = False) -> list[dict[str, Any]]:
    """Every tree item that could overlap a claim at ``anchor``, strongly consistent: the items
    of its whole subtree, itself included (one Query), and the items at each proper prefix of it
    that has a mark (one BatchGetItem of the marks, sent with the Query; then one Query per
    marked prefix, at once). Marks are written with every announcement, so a prefix without one
    holds no claim an announcement of ours has to see (module docstring). ``exact_only``: only
    the items at ``anchor`` (task scopes, which overlap only when equal). A claim whose
    ancestors hold no claims costs two reads, whatever its depth and whatever the network holds
    elsewhere; the root's subtree (a prefix-less glob such as ``**/*.md``) is the namespace."""
    path = "/".join(anchor)
    if exact_only:
        return t.query(pk, sk_prefix=f"A#{path}//")
    if not anchor:
        return t.query(pk, sk_prefix="A#")
    ancestors = ["/".join(anchor[:depth]) for depth in range(len(anchor))]
    marks: dict[tuple[str, str], dict[str, Any]] = {}
    subtree = t.in_parallel(
        lambda: t.query(pk, sk_prefix=f"A#{path}/"),
        lambda: marks.update(get_trees((pk, high_water_sk(a)) for a in ancestors)))[0]
    marked = [a for a in ancestors if (pk, high_water_sk(a)) in marks]
    return [*t.query_prefixes(pk, [f"A#{a}//" for a in marked]), *subtree]


def get_tree(pk: str, sk: str) -> dict[str, Any] | None:
    """One tree item, strongly consistent, or None."""
    return t.get(pk, sk)


def get_trees(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Tree items by key (BatchGetItem, strongly consistent): ``{(pk, sk): item}`` of those that exist."""
    return t.batch_get(keys)


def mark_action(pk: str, anchor: str, now_ms: int) -> dict[str, Any]:
    """Write ``anchor``'s mark (its ``tok`` untouched), kept :data:`MARK_KEEP_S` from now."""
    return t.tx_update(pk, high_water_sk(anchor), "SET #kind = :k, #ttl = :ttl", names={"#kind": "kind", "#ttl": "ttl"},
                       k="claim_hw", ttl=now_ms // 1000 + MARK_KEEP_S)


def announce(item: dict[str, Any]) -> dict[str, Any] | None:
    """Put a ``pending`` tree item on ``attribute_not_exists``, with its anchor's mark, in one
    transaction: None when written, else the item already there (read strongly consistent), or
    ``{}`` when it vanished in between or the transaction met another one (call again)."""
    try:
        t.transact([t.tx_put(item, "attribute_not_exists(PK)"),
                    mark_action(item["PK"], item["anchor"], int(item["announcedAt"]))])
        return None
    except TransactionCancelled as exc:
        if exc.reasons and exc.reasons[0] == "ConditionalCheckFailed":
            return t.get(item["PK"], item["SK"]) or {}
        return {}


def withdraw(pk: str, sk: str, attempt: str) -> bool:
    """Delete an announcement that lost (its own ``attempt`` only). False if it was not there."""
    return t.delete_if(pk, sk, "attempt = :a", a=attempt)


def replace_dead(item: dict[str, Any], seen: dict[str, Any]) -> bool:
    """Put a new announcement over a dead one of the same instance and scope (defeated, or an
    announcement whose caller died), on condition that it is still the one seen. False if not."""
    try:
        t.transact([t.tx_put(item, "attempt = :a AND #st = :s", names={"#st": "state"},
                             a=seen["attempt"], s=seen["state"]),
                    mark_action(item["PK"], item["anchor"], int(item["announcedAt"]))])
        return True
    except TransactionCancelled:
        return False


def grant_action(item: dict[str, Any], *, token: int, expires_ms: int, task_id: str | None,
                 ref_ttl: int) -> dict[str, Any]:
    """Update the caller's announcement to ``granted`` on condition that it is still the one it
    wrote and nobody touched it since it was read (``attempt``, ``state = pending``, ``rev``)."""
    return t.tx_update(
        item["PK"], item["SK"],
        "SET #st = :g, fencingToken = :tok, expiresAt = :exp, #ttl = :ttl, refTtl = :rttl"
        + (", taskId = :tid" if task_id else ""),
        "attempt = :a AND #st = :p AND rev = :rev",
        names={"#st": "state", "#ttl": "ttl"}, g="granted", tok=token, exp=expires_ms,
        ttl=expires_ms // 1000 + KEEP_AFTER_END_S, rttl=ref_ttl, a=item["attempt"], p="pending",
        rev=int(item.get("rev", 0)), **({"tid": task_id} if task_id else {}))


def defeat_action(item: dict[str, Any], winner_id: str) -> dict[str, Any]:
    """Mark another instance's announcement (as read) ``defeated`` by ``winner_id``."""
    return t.tx_update(item["PK"], item["SK"], "SET #st = :d, defeatedBy = :w", "attempt = :a AND #st = :p",
                       names={"#st": "state"}, d="defeated", w=winner_id, a=item["attempt"], p="pending")


def touch_action(item: dict[str, Any]) -> dict[str, Any]:
    """Move the caller's own overlapping announcement (as read) on a revision, so its grant reads
    again and takes a token above the one granted now."""
    return t.tx_update(item["PK"], item["SK"], "SET rev = rev + :one", "attempt = :a AND #st = :p",
                       names={"#st": "state"}, one=1, a=item["attempt"], p="pending")


def high_water_action(pk: str, anchor: str, token: int, now_ms: int) -> dict[str, Any]:
    """Raise ``anchor``'s mark to ``token``, on condition that it is below it (its TTL renewed)."""
    return t.tx_update(pk, high_water_sk(anchor), "SET tok = :t, #kind = :k, #ttl = :ttl",
                       "attribute_not_exists(tok) OR tok < :t", names={"#kind": "kind", "#ttl": "ttl"},
                       t=token, k="claim_hw", ttl=now_ms // 1000 + MARK_KEEP_S)


def renew_action(item: dict[str, Any], expires_ms: int, task_id: str | None, *,
                 ref_ttl: int | None = None) -> dict[str, Any]:
    """Extend a granted claim read at its ``expiresAt`` (the TTL moves with it; ``taskId`` set
    when given; ``refTtl`` when its reference's TTL moves too)."""
    sets = "SET expiresAt = :exp, #ttl = :ttl" + (", taskId = :tid" if task_id else "") \
        + (", refTtl = :rttl" if ref_ttl is not None else "")
    return t.tx_update(
        item["PK"], item["SK"], sets, "#st = :g AND expiresAt = :seen", names={"#ttl": "ttl", "#st": "state"},
        g="granted", exp=expires_ms, ttl=expires_ms // 1000 + KEEP_AFTER_END_S, seen=int(item["expiresAt"]),
        **({"tid": task_id} if task_id else {}), **({"rttl": ref_ttl} if ref_ttl is not None else {}))


def ref_ttl_update(net: str, claim_id: str, ref_ttl: int) -> dict[str, Any]:
    """Keep a renewed claim's reference past its new end (``refTtl`` on the tree item says when)."""
    return t.tx_update(*k.claim(net, claim_id), "SET #ttl = :ttl", "attribute_exists(PK)",
                       names={"#ttl": "ttl"}, ttl=ref_ttl)


def ref_put(net: str, tree: dict[str, Any], ref_ttl: int) -> dict[str, Any]:
    """The reference by id of a claim being granted (``tree`` as it will be stored)."""
    pk, sk = k.claim(net, tree["id"])
    ref = {"PK": pk, "SK": sk, "kind": "claim_ref", "treePk": tree["PK"], "treeSk": tree["SK"], "ttl": ref_ttl,
           **{f: tree.get(f) for f in ("id", "scopeType", "scope", "resourceId", "holder", "createdAt")}}
    return t.tx_put(ref, "attribute_not_exists(PK)")


def end_actions(net: str, tree: dict[str, Any], end_ms: int, reason: str) -> list[dict[str, Any]]:
    """Move a granted claim (its tree item as read) to the ended partition: Delete the tree item
    on ``expiresAt = :seen``, Delete its reference, Put the ended record (``endedAt``,
    ``endReason`` ``released`` | ``expired``, ``ttl`` a day after the end)."""
    pk, sk = k.ended_claim(net, tree["id"])
    fields = ("id", "scopeType", "scope", "resourceId", "holder", "createdAt", "taskId", "expiresAt", "fencingToken")
    ended = {"PK": pk, "SK": sk, "kind": "ended_claim", **{f: tree.get(f) for f in fields},
             "endedAt": end_ms, "endReason": reason, "ttl": end_ms // 1000 + KEEP_AFTER_END_S}
    return [
        t.tx_delete(tree["PK"], tree["SK"], "#st = :g AND expiresAt = :seen", names={"#st": "state"},
                    g="granted", seen=int(tree["expiresAt"])),
        t.tx_delete(*k.claim(net, tree["id"])),
        t.tx_put(ended, "attribute_not_exists(PK)"),
    ]


def release_actions(net: str, ref: dict[str, Any], now_ms: int) -> list[dict[str, Any]]:
    """A holder's release by id (its reference as read): Delete the tree item on condition that it
    is this claim, granted and live by the caller's clock (``expiresAt > :now``), Delete the
    reference, Put the ended record (``released``)."""
    pk, sk = k.ended_claim(net, ref["id"])
    fields = ("id", "scopeType", "scope", "resourceId", "holder", "createdAt")
    ended = {"PK": pk, "SK": sk, "kind": "ended_claim", **{f: ref.get(f) for f in fields},
             "endedAt": now_ms, "releasedAt": now_ms, "endReason": "released", "ttl": now_ms // 1000 + KEEP_AFTER_END_S}
    return [
        t.tx_delete(ref["treePk"], ref["treeSk"], "id = :id AND #st = :g AND expiresAt > :now",
                    names={"#st": "state"}, id=ref["id"], g="granted", now=now_ms),
        t.tx_delete(*k.claim(net, ref["id"])),
        t.tx_put(ended, "attribute_not_exists(PK)"),
    ]


# --------------------------------------------------------------------------- references and tasks


def get_ref(net: str, claim_id: str) -> dict[str, Any] | None:
    """The claim's reference (or, in a table not yet migrated, its pre-issue-25 item), or None."""
    return t.get(*k.claim(net, claim_id))


def get_ended(net: str, claim_id: str) -> dict[str, Any] | None:
    """The claim's record in the ended partition (strongly consistent), or None."""
    return t.get(*k.ended_claim(net, claim_id))


def exists(net: str, claim_id: str) -> bool:
    """Whether a claim of that id is live or ended (at most two strongly consistent GetItems)."""
    return get_ref(net, claim_id) is not None or get_ended(net, claim_id) is not None


def refs(net: str) -> list[dict[str, Any]]:
    """Every claim reference of the network (one Query, paged), oldest id first."""
    return [r for r in t.query(k.claims_pk(net), sk_prefix="CLAIM#") if r.get("kind") == "claim_ref"]


def trees_of(rs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tree items the references point to, in the references' order (BatchGetItem)."""
    rs = list(rs)
    got = get_trees((r["treePk"], r["treeSk"]) for r in rs)
    out = []
    for r in rs:
        item = got.get((r["treePk"], r["treeSk"]))
        if item is not None and item.get("id") == r["id"]:
            out.append(item)
    return out


def task_index_actions(net: str, task_id: str, tree: dict[str, Any], ttl: int) -> list[dict[str, Any]]:
    """A claim carrying ``task_id`` (granted or renewed): its pointer in the task's index, and an
    unconditional ``ADD counter 1`` on the task's head (claims of one task never refuse each other;
    a terminal move that read the head before sees it moved)."""
    pk, prefix = k.task_claims(net, task_id)
    return [
        t.tx_put({"PK": pk, "SK": f"{prefix}CLM#{tree['id']}", "kind": "task_claim", "id": tree["id"],
                  "treePk": tree["PK"], "treeSk": tree["SK"], "ttl": ttl}),
        t.tx_update(pk, f"{prefix}HEAD", "ADD #c :one", names={"#c": "counter"}, one=1),
    ]


def read_task(net: str, task_id: str) -> tuple[int, list[dict[str, Any]]]:
    """(the task head's counter, the pointers of its index): one strongly consistent Query in
    descending order, so the head (``HEAD`` sorts after ``CLM#``) is read before the pointers
    (Query is only read-committed against transactions)."""
    pk, prefix = k.task_claims(net, task_id)
    counter, pointers = 0, []
    for item in t.query(pk, sk_prefix=prefix, forward=False):
        if item["SK"] == f"{prefix}HEAD":
            counter = int(item.get("counter", 0))
        else:
            pointers.append(item)
    return counter, pointers


def task_head_check(net: str, task_id: str, counter: int) -> dict[str, Any]:
    """A ConditionCheck that the task's head is still at ``counter`` (absent while 0): no claim
    carrying the task was granted or renewed since the read that saw it."""
    pk, prefix = k.task_claims(net, task_id)
    return t.tx_check(pk, f"{prefix}HEAD", "#c = :seen" if counter else "attribute_not_exists(#c)",
                      names={"#c": "counter"}, **({"seen": counter} if counter else {}))


# --------------------------------------------------------------------------- the layout before issue 25


def legacy_claims(net: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the old ``HEAD`` item or None, the old-layout claim items) of a network."""
    items = t.query(k.claims_pk(net), sk_prefix="CLAIM#")
    return t.get(*k.claims_head(net)), [i for i in items if i.get("kind") == "claim"]


def networks() -> list[str]:
    """Every network id of the table (one Scan of the network items; migration only)."""
    out = []
    kwargs: dict[str, Any] = {"TableName": t.table_name(), "FilterExpression": "SK = :meta AND begins_with(PK, :net)",
                              "ExpressionAttributeValues": t.values(meta=k.META, net="NET#"),
                              "ProjectionExpression": "PK"}
    while True:
        resp = t.client().scan(**kwargs)
        out += [t.decode(i)["PK"][len("NET#"):] for i in resp.get("Items", [])]
        if not resp.get("LastEvaluatedKey"):
            return out
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def migrate_actions(net: str, old: dict[str, Any], tree: dict[str, Any] | None, ref_ttl: int
                    ) -> list[dict[str, Any]]:
    """Move one old-layout claim: a live one to its tree item (``tree``, granted) and a reference
    over the old item (on condition that it is still the old one, at the expiry read); a lapsed
    one (``tree`` None) to the ended partition."""
    if tree is None:
        pk, sk = k.ended_claim(net, old["id"])
        ended = {**old, "PK": pk, "SK": sk, "kind": "ended_claim", "endedAt": int(old["expiresAt"]),
                 "endReason": "released" if old.get("releasedAt") else "expired",
                 "ttl": int(old["expiresAt"]) // 1000 + KEEP_AFTER_END_S}
        return [t.tx_delete(old["PK"], old["SK"], "#kind = :c AND expiresAt = :seen", names={"#kind": "kind"},
                            c="claim", seen=int(old["expiresAt"])),
                t.tx_put(ended, "attribute_not_exists(PK)")]
    ref = {"PK": old["PK"], "SK": old["SK"], "kind": "claim_ref", "treePk": tree["PK"], "treeSk": tree["SK"],
           "ttl": ref_ttl, **{f: tree.get(f) for f in ("id", "scopeType", "scope", "resourceId", "holder", "createdAt")}}
    return [t.tx_put(tree, "attribute_not_exists(PK)"),
            t.tx_put(ref, "#kind = :c AND expiresAt = :seen", names={"#kind": "kind"}, c="claim",
                     seen=int(old["expiresAt"]))]


def delete_head(net: str) -> bool:
    """Delete the old layout's HEAD counter (after its claims moved)."""
    return t.delete_if(*k.claims_head(net), "attribute_exists(PK)")



# --------------------------------------------------------------------------- a tree item's key, for relaynet.claims


def tree_pk(net: str, scope_type: str, resource_id: str | None) -> str:
    """The partition of the claim tree of one namespace: ``NET#<net>#CLAIMTREE#<scopeType>#<resourceId>``
    (module docstring; relaynet.store.keys.claim_tree_pk)."""
    return k.claim_tree_pk(net, scope_type, resource_id)


def tree_key(item: dict[str, Any]) -> tuple[str, str]:
    """``(pk, sk)`` of a tree item as read: where to read it again (:func:`get_tree`)."""
    return item["PK"], item["SK"]


def sk_of(item: dict[str, Any]) -> str:
    """The sort key of a tree item as read (:func:`tree_sk`, :func:`high_water_sk`)."""
    return item["SK"]


def tree_item(pk: str, sk: str, **fields: Any) -> dict[str, Any]:
    """A tree item at ``(pk, sk)`` with ``fields`` (an announcement for :func:`announce`)."""
    return {"PK": pk, "SK": sk, **fields}


def rekeyed(item: dict[str, Any], pk: str, sk: str, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """``item``'s fields but its key and ``drop``, at ``(pk, sk)``: a claim moving to a new place
    (a claim of the layout before issue 25 moving into its tree, relaynet.claims.migrate_network)."""
    return {**{f: v for f, v in item.items() if f not in ("PK", "SK", *drop)}, "PK": pk, "SK": sk}
