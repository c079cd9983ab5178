"""DynamoDB requests and consumed capacity per ``network_ask`` and per ``network_inbox``.

Run: ``.venv/bin/python benchmarks/bench_delivery.py [--bodies 200,4096]``. Not a test.

Every call goes through the real Lambda handlers (the authorizer, then the tool's handler with
its Idempotency-Key and presence handling), against moto in-process. Two hooks on the process's
DynamoDB client count what the call costs:

- ``before-parameter-build``: asks every request for ``ReturnConsumedCapacity='TOTAL'`` and the
  ``reported`` column sums what the endpoint answered. Moto answers fixed placeholder figures (not
  derived from item sizes); pointed at DynamoDB the column is the bill.
- ``before-call`` / ``after-call``: record each request and model its capacity with DynamoDB's
  published rules, applied to the real items (read through a second, uninstrumented client):
  reads 1 RCU per 4 KB (strongly consistent; half for eventually consistent), a Query rounds the
  sum of the items it read, an empty read costs the minimum; writes 1 WCU per 1 KB of the larger
  of the old and new item, a delete the old item, at least 1; transactional items count twice.
  Items filtered out of a Query by a filter expression are invisible to the hooks and not
  counted (none are in these scenarios).

Scenarios (each with a fresh network state): ``network_ask`` to one agent, to a 10-member and to a
150-member group, with an ``Idempotency-Key`` as the SDK and the MCP bridge always send one (plus
the agent case without a key), and ``network_inbox`` returning 0, 1, 10 and 100 messages. Presence
is refreshed before the measured call, so the figures are the steady state (presence adds at
most one UpdateItem per instance per minute).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "infra"))

os.environ.update(
    AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-bench", POWERTOOLS_LOG_LEVEL="ERROR",
)
os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

FUNCTIONS = str(ROOT / "functions")
TEMPLATE = ROOT / "template.yaml"
GSI_KEYS = ("GSI1PK", "GSI2PK", "GSI3PK")


# --------------------------------------------------------------------------- item sizes
# DynamoDB's sizing rules live in requests_per_tool.py (beside this script); one copy of them.
from requests_per_tool import item_size, read_units as _read_units, write_units as _write_units  # noqa: E402


# --------------------------------------------------------------------------- the meter

class Meter:
    """Counts requests by operation and models their capacity; see the module docstring."""

    def __init__(self, client: Any, raw: Any, table: str):
        self.raw, self.table = raw, table
        self.reset()
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._before)
        events.register("after-call.dynamodb", self._after)
        self._pending: list[dict[str, Any]] = []

    def reset(self) -> None:
        self.ops: Counter[str] = Counter()
        self.rcu = 0.0
        self.wcu = 0.0
        self.reported = 0.0

    def _old(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.raw.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        """Ask for the consumed capacity, count the request and read the items it will change."""
        op = model.name
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params["ReturnConsumedCapacity"] = "TOTAL"
        self.ops[op] += 1
        pre: dict[str, Any] = {"op": op, "params": params}
        if op == "PutItem":
            pre["old"] = [self._old({k: params["Item"][k] for k in ("PK", "SK")})]
        elif op in ("UpdateItem", "DeleteItem"):
            pre["old"] = [self._old(params["Key"])]
        elif op == "TransactWriteItems":
            olds = []
            for action in params["TransactItems"]:
                (kind, body), = action.items()
                key = {k: body["Item"][k] for k in ("PK", "SK")} if kind == "Put" else body["Key"]
                olds.append(self._old(key))
            pre["old"] = olds
        elif op == "BatchWriteItem":
            olds = []
            for req in params["RequestItems"][self.table]:
                (kind, body), = req.items()
                key = {k: body["Item"][k] for k in ("PK", "SK")} if kind == "PutRequest" else body["Key"]
                olds.append(self._old(key))
            pre["old"] = olds
        self._pending.append(pre)

    def _gsi(self, old: dict | None, new: dict | None) -> int:
        units = 0
        for g in GSI_KEYS:
            if (old and g in old) or (new and g in new):
                units += _write_units(max(item_size(old), item_size(new)))
        return units

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        pre = self._pending.pop()
        op, params = pre["op"], pre["params"]
        cc = parsed.get("ConsumedCapacity")
        for c in (cc if isinstance(cc, list) else [cc] if cc else []):
            self.reported += float(c.get("CapacityUnits", 0))
        if parsed.get("Error") or http_response.status_code >= 400:
            if op in ("PutItem", "UpdateItem", "DeleteItem"):  # a failed condition still costs
                self.wcu += _write_units(item_size(pre["old"][0]))
            elif op == "TransactWriteItems":
                self.wcu += 2 * sum(_write_units(item_size(o)) for o in pre["old"])
            return
        if op == "GetItem":
            self.rcu += _read_units(item_size(parsed.get("Item")), params.get("ConsistentRead", False))
        elif op == "BatchGetItem":
            consistent = params["RequestItems"][self.table].get("ConsistentRead", False)
            got = parsed.get("Responses", {}).get(self.table, [])
            self.rcu += sum(_read_units(item_size(i), consistent) for i in got)
            self.rcu += _read_units(0, consistent) * (len(params["RequestItems"][self.table]["Keys"]) - len(got))
        elif op == "Query":
            consistent = params.get("ConsistentRead", False) and "IndexName" not in params
            self.rcu += _read_units(sum(item_size(i) for i in parsed.get("Items", [])), consistent)
        elif op == "PutItem":
            new = params["Item"]
            self.wcu += _write_units(max(item_size(pre["old"][0]), item_size(new))) + self._gsi(pre["old"][0], new)
        elif op == "UpdateItem":
            new = self._old(params["Key"])
            self.wcu += _write_units(max(item_size(pre["old"][0]), item_size(new))) + self._gsi(pre["old"][0], new)
        elif op == "DeleteItem":
            self.wcu += _write_units(item_size(pre["old"][0])) + self._gsi(pre["old"][0], None)
        elif op == "TransactWriteItems":
            for action, old in zip(params["TransactItems"], pre["old"]):
                (kind, body), = action.items()
                if kind == "Put":
                    new = body["Item"]
                elif kind == "Update":
                    new = self._old(body["Key"])
                elif kind == "Delete":
                    new = None
                else:  # ConditionCheck: counted like a transactional write of the item checked
                    new = old
                self.wcu += 2 * (_write_units(max(item_size(old), item_size(new))) + self._gsi(old, new))
        elif op == "BatchWriteItem":
            for req, old in zip(params["RequestItems"][self.table], pre["old"]):
                (kind, body), = req.items()
                new = body["Item"] if kind == "PutRequest" else None
                self.wcu += _write_units(max(item_size(old), item_size(new))) + self._gsi(old, new)

    def line(self) -> str:
        ops = " ".join(f"{op}x{n}" for op, n in sorted(self.ops.items()))
        return f"{sum(self.ops.values()):>4}  {self.rcu:>6.1f}  {self.wcu:>6.0f}  {self.reported:>8.1f}  {ops}"


# --------------------------------------------------------------------------- the network

def spec(n_members: int = 150) -> str:
    members = [f"m{i:03d}" for i in range(n_members)]
    lines = ["network: bench", "agents:",
             "  - {name: sender, instances: 1, description: Sends asks to everyone, "
             "capabilities: [{id: plan, name: Plan, description: Plans work for the others}]}",
             "  - {name: receiver, instances: 1, description: Answers asks, "
             "capabilities: [{id: answer, name: Answer, description: Answers questions about the API}]}"]
    for m in members:
        lines.append(f"  - {{name: {m}, instances: 0, description: 'Member {m} of the crowd, a worker agent', "
                     f"capabilities: [{{id: work, name: Work, description: Does a share of the work}}], "
                     f"responsibilities: [{{resource: github.com/acme/api, actions: [implement], priority: 1}}]}}")
    lines += ["groups:", f"  - {{slug: ten, members: [{', '.join(members[:10])}]}}",
              f"  - {{slug: crowd, members: [{', '.join(members)}]}}"]
    return "\n".join(lines) + "\n"


def call(tool: str, body: dict[str, Any], token: str, key: str | None = None) -> tuple[int, dict[str, Any]]:
    from relaynet_local.events import authorizer_event, http_event
    from relaynet_local.lambdas import LambdaContext, load_handler

    path = f"/v1/tools/{tool}"
    route = f"POST {path}"
    hdrs = [("content-type", "application/json"), ("authorization", f"Bearer {token}")]
    if key:
        hdrs.append(("idempotency-key", key))
    auth = load_handler(FUNCTIONS, "authorizer.handler")(
        authorizer_event("POST", path, route_key=route, identity=[f"Bearer {token}"], headers=hdrs), None)
    event = http_event("POST", path, route_key=route, headers=hdrs, body=json.dumps(body),
                       authorizer_context=auth["context"])
    resp = load_handler(FUNCTIONS, f"{tool}.handler")(event, LambdaContext(tool, 29.0, 512))
    return resp["statusCode"], json.loads(resp["body"])


def _fast_moto_transactions() -> None:
    """moto deep-copies a table once per *action* of a transaction (its rollback copy): copy it
    once per transaction instead, or a 100-action transaction takes seconds. Figures unchanged."""
    import copy
    import threading
    import types

    from moto.dynamodb import models

    local = threading.local()

    def deepcopy(obj: Any, memo: Any = None) -> Any:
        tables = getattr(local, "tables", None)
        if tables is None or memo is not None or type(obj).__name__ != "Table":
            return copy.deepcopy(obj, memo)
        return tables.setdefault(id(obj), copy.deepcopy(obj))

    real = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: Any) -> Any:
        local.tables = {}
        try:
            return real(self, transact_items)
        finally:
            local.tables = None

    models.copy = types.SimpleNamespace(deepcopy=deepcopy)
    models.DynamoDBBackend.transact_write_items = transact_write_items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bodies", default="200,4096", help="message body sizes in bytes, comma separated")
    args = ap.parse_args(argv)
    bodies = [int(b) for b in args.bodies.split(",")]

    from relaynet import admin, identity, messaging
    from relaynet.identity import authorize
    from relaynet.models import worker as w
    from relaynet.store import table as t
    from relaynet_local.template import create_table

    _fast_moto_transactions()
    with mock_aws():
        t.reset()
        raw = boto3.client("dynamodb")
        create_table(raw, TEMPLATE, os.environ["RELAYNET_TABLE"])
        tokens = admin.apply_spec(spec())["networks"]["bench"]["instances"]
        sender_tok, receiver_tok = tokens["sender"][0]["token"], tokens["receiver"][0]["token"]
        sender, receiver = authorize(sender_tok), authorize(receiver_tok)
        meter = Meter(t.client(), raw, os.environ["RELAYNET_TABLE"])

        def drain(tok: str) -> None:
            while call("network_inbox", {}, tok)[1].get("more"):
                pass

        def steady(p: Any) -> None:
            """Write presence now if due, so the measured call shows the steady state (no write)."""
            identity.touch(p)
        print(f"{'scenario':<42} {'body':>5}  {'req':>4}  {'RCU':>6}  {'WCU':>6}  {'reported':>8}  requests by operation")
        for size in bodies:
            text = ("x" * size)
            for label, to, keyed in (("network_ask -> agent", "receiver", True),
                                     ("network_ask -> agent, no Idempotency-Key", "receiver", False),
                                     ("network_ask -> group of 10", "ten", True),
                                     ("network_ask -> group of 150", "crowd", True)):
                steady(sender)
                meter.reset()
                status, out = call("network_ask", {"body": text, "toAgent": to}, sender_tok,
                                   str(uuid.uuid4()) if keyed else None)
                assert status == 200, out
                print(f"{label:<42} {size:>5}  {meter.line()}")
            drain(receiver_tok)
            for n in (0, 1, 10, 100):
                for i in range(n):
                    messaging.ask(sender, w.AskRequest(body=text, toAgent="receiver"))
                steady(receiver)
                meter.reset()
                status, out = call("network_inbox", {}, receiver_tok)
                assert status == 200 and len(out["messages"]) == n, (status, len(out.get("messages", [])))
                print(f"{f'network_inbox returning {n}':<42} {size:>5}  {meter.line()}")
                drain(receiver_tok)
        t.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
