"""DynamoDB requests, request units and the AWS bill per tool call: the figures behind the cost
table in README.md ("Deploy to AWS with SAM").

Run: ``.venv/bin/python benchmarks/requests_per_tool.py`` (or ``make cost``). Not a test, but
tests/test_policies.py runs the same scenarios under each function's declared DynamoDB actions.

Every call goes through the real Lambda handlers (the authorizer, then the tool's handler, with
the ``Idempotency-Key`` the SDK and the MCP bridge send on creating writes), against moto
in-process, on the demo network of examples/demo-network.yaml. A botocore hook on the process's
DynamoDB client attributes each request to the entry point whose declaration is running
(:func:`relaynet.store.table.current_declaration`) and models its request units with DynamoDB's
published rules, applied to the real items (read through a second, uninstrumented client):
reads 1 RRU per 4 KB (half for eventually consistent reads and for every GSI read), a Query
rounds the sum of the items it returns, an empty read costs the minimum; writes 1 WRU per 1 KB of
the larger of the old and new item, at least 1, plus the same again for each GSI the item is (or
was) in; a failed condition still costs the write; every item of a transaction counts twice
(a ConditionCheck like a write of the item it checks). Presence (at most one UpdateItem per
instance per minute) is written before the measured calls, so the figures are the steady state.

Prices (list prices, us-east-1, as stated in :data:`PRICES`) turn the counts into dollars per
million calls. Lambda duration is not measurable on moto: it is modelled as
``BASE_MS + PER_REQUEST_MS`` x DynamoDB requests at the template's 512 MB (warm containers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = str(ROOT / "functions")
TEMPLATE = ROOT / "template.yaml"


def _gsi_keys() -> list[tuple[str, ...]]:
    """Each global secondary index's key attributes, as template.yaml declares them: an item is
    in an index (and each write of it costs the index a copy) when it has all of them."""
    from relaynet_local.template import load_template

    table = load_template(TEMPLATE).table
    return [tuple(k["AttributeName"] for k in index["KeySchema"])
            for index in table.properties.get("GlobalSecondaryIndexes") or []]


GSI_KEYS = _gsi_keys()

#: List prices, us-east-1, from the AWS pricing pages (aws.amazon.com/api-gateway/pricing,
#: /lambda/pricing, /dynamodb/pricing/on-demand), recorded 2026-11-29; the DynamoDB on-demand
#: prices are those in force since the 1 November 2024 reduction. Free tiers not applied.
PRICES = {
    "http_api_per_million": 1.00,          # HTTP API requests, first 300 million a month
    "lambda_per_million": 0.20,            # Lambda requests
    "lambda_arm_gb_s": 0.0000133334,       # Lambda duration, arm64, first 7.5 billion GB-s a month
    "ddb_wru_per_million": 0.625,          # DynamoDB on-demand write request units, Standard class
    "ddb_rru_per_million": 0.125,          # DynamoDB on-demand read request units, Standard class
}
PRICES_DATE = "2026-11-29"
#: Lambda SnapStart for Python, us-east-1 (aws.amazon.com/lambda/pricing, "SnapStart"; read
#: 2026-12-06 from summaries of that page, which this machine cannot reach: check it). The cache is
#: charged per GB of the function's memory per second while a version is active, at least 3 hours
#: per version; a restore per GB of memory each time an environment resumes from the snapshot.
SNAPSTART_PRICES = {
    "cache_gb_s": 0.0000015046,
    "restore_gb": 0.0001397998,
}
SNAPSTART_PRICES_DATE = "2026-12-06"
SECONDS_PER_MONTH = 30 * 24 * 3600
MEMORY_GB = 0.5          # MemorySize 512 in template.yaml Globals
BASE_MS = 20             # modelled handler time outside DynamoDB (warm)
PER_REQUEST_MS = 8       # modelled in-region DynamoDB round trip


# --------------------------------------------------------------------------- item sizes

def _value_size(v: dict[str, Any]) -> int:
    (kind, val), = v.items()
    if kind == "S":
        return len(val.encode("utf-8"))
    if kind == "N":
        digits = len(val.lstrip("-").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "B":
        return len(val)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in val)
    if kind == "NS":
        return sum(_value_size({"N": n}) for n in val)
    if kind == "BS":
        return sum(len(b) for b in val)
    if kind == "L":
        return 3 + sum(1 + _value_size(e) for e in val)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_size(e) for k, e in val.items())
    raise ValueError(kind)


def item_size(item: dict[str, Any] | None) -> int:
    """An item's size as DynamoDB bills it (attribute names plus values; typed JSON in)."""
    return sum(len(k.encode("utf-8")) + _value_size(v) for k, v in (item or {}).items())


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


# --------------------------------------------------------------------------- the meter

@dataclass
class Usage:
    """What one entry point did during one measured call."""

    ops: Counter = field(default_factory=Counter)
    actions: set = field(default_factory=set)
    rru: float = 0.0
    wru: float = 0.0

    @property
    def requests(self) -> int:
        return sum(self.ops.values())


class Meter:
    """Counts requests by entry point and operation and models their request units."""

    def __init__(self, client: Any, raw: Any):
        from relaynet.store import table

        self._table = table
        self.raw = raw
        self.usage: dict[str, Usage] = {}
        self.seen_actions: dict[str, set[str]] = {}  # every call, measured or not
        self._pending: list[dict[str, Any]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        self.usage = {}

    def _old(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.raw.get_item(TableName=self._table.table_name(), Key=key, ConsistentRead=True).get("Item")

    @staticmethod
    def _key(kind: str, body: dict[str, Any]) -> dict[str, Any]:
        return {k: body["Item"][k] for k in ("PK", "SK")} if kind in ("Put", "PutRequest") else body["Key"]

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        decl = self._table.current_declaration()
        owner = decl.owner if decl else "-"
        op = model.name
        actions, _tables = self._table.required_actions(op, params)
        self.usage.setdefault(owner, Usage()).ops[op] += 1
        self.usage[owner].actions |= actions
        self.seen_actions.setdefault(owner, set()).update(actions)
        pre: dict[str, Any] = {"owner": owner, "op": op, "params": params, "old": []}
        if op == "PutItem":
            pre["old"] = [self._old(self._key("Put", params))]
        elif op in ("UpdateItem", "DeleteItem"):
            pre["old"] = [self._old(params["Key"])]
        elif op == "TransactWriteItems":
            pre["old"] = [self._old(self._key(*next(iter(a.items())))) for a in params["TransactItems"]]
        elif op == "BatchWriteItem":
            reqs = next(iter(params["RequestItems"].values()))
            pre["old"] = [self._old(self._key(*next(iter(r.items())))) for r in reqs]
        self._pending.append(pre)

    @staticmethod
    def _gsi(old: dict | None, new: dict | None) -> int:
        return sum(write_units(max(item_size(old), item_size(new)))
                   for g in GSI_KEYS if (old and all(a in old for a in g)) or (new and all(a in new for a in g)))

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        pre = self._pending.pop()
        use, op, params, old = self.usage[pre["owner"]], pre["op"], pre["params"], pre["old"]
        if parsed.get("Error") or http_response.status_code >= 400:
            if op in ("PutItem", "UpdateItem", "DeleteItem"):
                use.wru += write_units(item_size(old[0]))
            elif op == "TransactWriteItems":
                use.wru += 2 * sum(write_units(item_size(o)) for o in old)
            return
        if op == "GetItem":
            use.rru += read_units(item_size(parsed.get("Item")), params.get("ConsistentRead", False))
        elif op == "BatchGetItem":
            (_name, req), = params["RequestItems"].items()
            got = next(iter(parsed.get("Responses", {}).values()), [])
            consistent = req.get("ConsistentRead", False)
            use.rru += sum(read_units(item_size(i), consistent) for i in got)
            use.rru += read_units(0, consistent) * (len(req["Keys"]) - len(got))
        elif op in ("Query", "Scan"):
            consistent = params.get("ConsistentRead", False) and "IndexName" not in params
            use.rru += read_units(sum(item_size(i) for i in parsed.get("Items", [])), consistent)
        elif op == "TransactGetItems":
            use.rru += 2 * sum(read_units(item_size(r.get("Item")), True) for r in parsed.get("Responses", []))
        elif op in ("PutItem", "UpdateItem", "DeleteItem"):
            new = params["Item"] if op == "PutItem" else (self._old(params["Key"]) if op == "UpdateItem" else None)
            use.wru += write_units(max(item_size(old[0]), item_size(new))) + self._gsi(old[0], new)
        elif op == "TransactWriteItems":
            for action, before in zip(params["TransactItems"], old):
                (kind, body), = action.items()
                new = {"Put": lambda: body["Item"], "Update": lambda: self._old(body["Key"]),
                       "Delete": lambda: None}.get(kind, lambda: before)()
                use.wru += 2 * (write_units(max(item_size(before), item_size(new))) + self._gsi(before, new))
        elif op == "BatchWriteItem":
            reqs = next(iter(params["RequestItems"].values()))
            for req, before in zip(reqs, old):
                (kind, body), = req.items()
                new = body["Item"] if kind == "PutRequest" else None
                use.wru += write_units(max(item_size(before), item_size(new))) + self._gsi(before, new)


# --------------------------------------------------------------------------- calling the handlers

def call(tool: str, body: dict[str, Any], token: str, key: str | None = None,
         query: str = "") -> tuple[int, dict[str, Any]]:
    """``POST /v1/tools/<tool>`` (or an endpoint's ``method path``, relaynet.catalogue.ENDPOINTS)
    as API Gateway does it: the authorizer, then the handler; ``query`` is the raw query string."""
    from relaynet_local.events import authorizer_event, http_event
    from relaynet_local.lambdas import LambdaContext, load_handler

    from relaynet import catalogue

    endpoint = catalogue.ENDPOINTS.get(tool)
    method, path = (endpoint.method, endpoint.path) if endpoint else ("POST", f"/v1/tools/{tool}")
    route = f"{method} {path}"
    hdrs = [("content-type", "application/json"), ("authorization", f"Bearer {token}")]
    if key:
        hdrs.append(("idempotency-key", key))
    auth = load_handler(FUNCTIONS, "authorizer.handler")(
        authorizer_event(method, path, route_key=route, identity=[f"Bearer {token}"], headers=hdrs), None)
    event = http_event(method, path, route_key=route, query=query, headers=hdrs, body=json.dumps(body),
                       authorizer_context=auth["context"])
    resp = load_handler(FUNCTIONS, f"{tool}.handler")(event, LambdaContext(tool, 29.0, 512))
    return resp["statusCode"], json.loads(resp["body"])


@contextmanager
def clock_at(now_ms: int | None) -> Iterator[None]:
    """Run the body with the domain's clock reading ``now_ms`` (None: the real time)."""
    from relaynet import clock

    real = clock.now_ms
    if now_ms is not None:
        clock.now_ms = lambda: now_ms  # type: ignore[assignment]
    try:
        yield
    finally:
        clock.now_ms = real  # type: ignore[assignment]


def run_sweep(now_ms: int | None = None) -> dict[str, int]:
    """The scheduled sweep's handler, optionally at another time."""
    from relaynet_local.lambdas import LambdaContext, load_handler

    with clock_at(now_ms):
        return load_handler(FUNCTIONS, "sweep.handler")({"source": "aws.events"}, LambdaContext("sweep", 60.0, 512))


@contextmanager
def push_env() -> Iterator[None]:
    """The local stack's webhook settings (loopback receivers allowed, no retry delay) and a public
    URL for the A2A bridge's push configs."""
    from relaynet.config import settings

    saved = {k: os.environ.get(k) for k in ("RELAYNET_PUSH_ALLOW_LOOPBACK", "RELAYNET_PUSH_RETRY_BASE_SECONDS",
                                            "RELAYNET_PUBLIC_URL")}
    os.environ.update(RELAYNET_PUSH_ALLOW_LOOPBACK="true", RELAYNET_PUSH_RETRY_BASE_SECONDS="0",
                      RELAYNET_PUBLIC_URL="https://bench.example.com")
    settings.cache_clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        settings.cache_clear()


class LoopbackReceiver:
    """A webhook receiver on 127.0.0.1 answering ``status`` to every POST (a daemon thread)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.status, self.count = 204, 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.count += 1
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def run_notifier(image: dict[str, Any]) -> dict[str, Any]:
    """The notifier's handler on a one-record stream batch: the INSERT of item ``image``."""
    from relaynet_local.lambdas import LambdaContext, load_handler
    from relaynet_local.streams import lambda_record

    from relaynet.store import table

    typed = table.encode(image)
    record = {"eventID": uuid.uuid4().hex, "eventName": "INSERT", "dynamodb": {
        "Keys": {"PK": typed["PK"], "SK": typed["SK"]}, "NewImage": typed, "SequenceNumber": "1",
        "SizeBytes": len(json.dumps(typed)), "StreamViewType": "NEW_IMAGE"}}
    event = {"Records": [lambda_record(record, "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/x", "us-east-1")]}
    return load_handler(FUNCTIONS, "notifier.handler")(event, LambdaContext("notifier", 60.0, 512))


def push_steps(state: dict[str, Any], ok: Callable[..., dict[str, Any]], key: Callable[[], str],
               by_inst: dict[str, str], tok: dict[str, str], net: dict[str, Any]) -> Iterator["Step"]:
    """The webhook steps of :func:`scenario` (see there)."""
    from relaynet_local.lambdas import LambdaContext, load_handler

    from relaynet.store import keys as k
    from relaynet.store import table

    coder = net["instances"]["coder"][0]["instanceId"]

    def set_push() -> None:
        state["receiver"] = LoopbackReceiver()
        with push_env():
            ok("push_config_set", {"url": state["receiver"].url, "token": "t" * 32}, "coder0")

    def notify(status: int, outcome: str) -> None:
        state["receiver"].status = status
        sent = ok("network_ask", {"toInstance": coder, "body": "webhook ping"}, "planner0", key())
        pk = k.mailbox_pk(net["networkId"], {"instanceId": coder})
        image = table.get(pk, f"MSG#{sent['messageId']}")
        with push_env():
            assert run_notifier(image) == {"batchItemFailures": []}
        assert table.get(*k.instance(net["networkId"], coder)).get("pushLastStatus") == status, outcome
        state["pushed_image"] = image

    def second_path() -> None:  # in AWS both the write's Invoke and the stream hand the notifier each entry
        posts = state["receiver"].count
        with push_env():
            assert run_notifier(state["pushed_image"]) == {"batchItemFailures": []}
        assert state["receiver"].count == posts, "the second path posted again"

    def retry(status: int, expect: str) -> None:
        from relaynet import clock

        state["receiver"].status = status
        with push_env(), clock_at(clock.now_ms() + (1000 if expect == "delivered" else 3_600_000)):
            stats = load_handler(FUNCTIONS, "push_retry.handler")({"source": "aws.events"},
                                                                 LambdaContext("push_retry", 60.0, 512))
        assert stats[expect] == 1, stats

    yield Step("push_config_set (PUT /v1/push)", "push_config_set", False, set_push)
    yield Step("notifier (a mailbox entry, delivered)", "notifier", False, lambda: notify(204, "delivered"))
    yield Step("notifier (the same entry by the other push path: a duplicate, nothing sent)", "notifier", False,
               second_path)
    yield Step("notifier (a mailbox entry, receiver failing)", "notifier", False, lambda: notify(503, "retrying"))
    yield Step("push_retry (a due retry, delivered)", "push_retry", False, lambda: retry(204, "delivered"))
    yield Step("notifier (receiver failing again)", "notifier", False, lambda: notify(500, "retrying"))
    yield Step("push_retry (window over: marked failed)", "push_retry", False, lambda: retry(500, "failed"))
    yield Step("notifier (receiver failing, a retry scheduled)", "notifier", False, lambda: notify(503, "retrying"))
    yield Step("push_config_delete (DELETE /v1/push)", "push_config_delete", False,
               lambda: ok("push_config_delete", {}, "coder0"))
    yield Step("supervisor_state_set (PUT /v1/supervisor)", "supervisor_state_set", False, lambda: ok(
        "supervisor_state_set", {"state": "idle", "activeRuns": 0, "maxRuns": 1, "runsStarted": 1, "lastRun": {
            "number": 1, "exit": 0, "timedOut": False, "endedAt": "2026-12-03T10:00:00.000Z", "blocked": [],
            "log": ".relaynet/worker/run-0001.log"}}, "coder0"))
    yield Step("push_retry (no config any more: dropped)", "push_retry", False, lambda: retry(204, "dropped"))


@dataclass
class Step:
    """One measured call: ``label`` in the table, ``tool`` (or ``sweep``), ``typical`` rows are
    the ones a million calls are priced from."""

    label: str
    tool: str
    typical: bool
    run: Callable[[], Any]


def scenario(tokens: dict[str, Any], network: str = "demo") -> Iterator[Step]:
    """The demo story, one tool call per step: whoami, discover, capabilities, ask / inbox /
    reply, delegate / accept / claim / publish / task_get / release / complete, the sweep, and
    the variants that exercise every declared action (idempotent retries, a failed keyed
    write, a claim renewal, an expired offer, a requeue)."""
    insts = tokens["networks"][network]["instances"]
    tok = {f"{agent}{n}": i["token"] for agent, lst in insts.items() for n, i in enumerate(lst)}
    by_inst = {i["instanceId"]: i["token"] for lst in insts.values() for i in lst}
    state: dict[str, Any] = {}

    def ok(tool: str, body: dict[str, Any], who: str, key: str | None = None, expect: int = 200,
           query: str = "") -> dict[str, Any]:
        status, out = call(tool, body, tok.get(who) or by_inst[who], key, query)
        assert status == expect, f"{tool} as {who}: {status} {out} (a 500 is logged; UndeclaredAction = a missing declaration)"
        return out

    def key() -> str:
        return str(uuid.uuid4())

    def ask() -> None:
        state["ask_key"] = key()
        state["ask_body"] = {"toAgent": "reviewer", "subject": "Review the health endpoint",
                             "body": "Could you review PR 42 (adds GET /health)? It is small."}
        state["thread"] = ok("network_ask", state["ask_body"], "planner0", state["ask_key"])["threadId"]

    def delegate(to: str, name: str) -> None:
        out = ok("network_delegate", {"toAgent": to, "objective": "Add a GET /health endpoint to the API",
                                      "acceptanceCriteria": ["returns 200", "has a test"]}, "planner0", key())
        state[name] = out

    def task_update(status: str, **extra: Any) -> None:
        t = state["task"]
        ok("network_task_update", {"taskId": t["taskId"], "status": status, **extra}, t["assignee"])

    def claim(scope: str = "src/api/**", name: str = "claim") -> None:
        t = state["task"]
        state[name] = ok("network_claim", {"scope": scope, "taskId": t["taskId"], "ttlSeconds": 900}, t["assignee"])

    def release(name: str) -> None:
        ok("network_release", {"claimId": state[name]["claimId"]}, state["task"]["assignee"])

    def offer_expiry(name: str) -> int:
        from relaynet import tasks

        net = tokens["networks"][network]["networkId"]
        return int(tasks.load_task(net, state[name]["taskId"])["offerExpiresAt"]) + 1

    def swept(at: int, outcome: str | None = None, launch: str | None = None) -> None:
        state["swept_at"] = at
        if launch:  # an operator starts one more instance (not a tool call: unmeasured)
            from relaynet import admin

            with clock_at(at - 1):
                admin.launch(network, launch)
        stats = run_sweep(at)
        assert outcome is None or stats.get(outcome, 0) >= 1, (outcome, stats)

    yield Step("network_whoami", "network_whoami", True, lambda: ok("network_whoami", {}, "coder0"))
    yield Step("network_discover", "network_discover", True, lambda: ok("network_discover", {}, "planner0"))
    yield Step("network_discover (candidates)", "network_discover", False, lambda: ok(
        "network_discover", {"resourceKey": "github.com/acme/api", "action": "review"}, "planner0"))
    yield Step("network_register_capabilities", "network_register_capabilities", True, lambda: ok(
        "network_register_capabilities", {"capabilities": [{"id": "python", "name": "Python",
                                                             "description": "Writes Python"}]}, "coder0"))
    yield Step("network_ask", "network_ask", True, ask)
    yield Step("network_ask (retried with its key)", "network_ask", False,
               lambda: ok("network_ask", state["ask_body"], "planner0", state["ask_key"]))
    yield Step("network_ask (404, with a key)", "network_ask", False,
               lambda: ok("network_ask", {"toAgent": "ghost", "body": "hi"}, "planner0", key(), expect=404))
    yield Step("inbox_summary (1 message)", "inbox_summary", True, lambda: ok("inbox_summary", {}, "reviewer0"))
    # answered at once; a wait with nothing waiting makes one more Query per 0.5 s (mailbox.WAIT_POLL_SECONDS)
    yield Step("inbox_wait (1 message waiting)", "inbox_wait", True,
               lambda: ok("inbox_wait", {}, "reviewer0", query="timeout=20"))
    yield Step("network_inbox (1 message)", "network_inbox", True,
               lambda: ok("network_inbox", {}, "reviewer0"))
    yield Step("network_inbox (empty)", "network_inbox", False, lambda: ok("network_inbox", {}, "reviewer0"))
    yield Step("network_ask (a 4 KB body)", "network_ask", False, lambda: ok(
        "network_ask", {"toAgent": "reviewer", "body": "x" * 4096}, "planner0", key()))
    yield Step("network_inbox (a 4 KB message)", "network_inbox", False, lambda: ok("network_inbox", {}, "reviewer0"))
    yield Step("network_reply", "network_reply", True, lambda: ok(
        "network_reply", {"threadId": state["thread"], "body": "Approved, one nit inline."}, "reviewer0", key()))
    yield Step("network_delegate", "network_delegate", True, lambda: delegate("coder", "task"))
    yield Step("network_task_update (accept)", "network_task_update", True, lambda: task_update("accepted"))
    yield Step("network_task_update (working)", "network_task_update", True, lambda: task_update("working"))
    yield Step("network_claim", "network_claim", True, claim)
    yield Step("network_claim (renew)", "network_claim", False, claim)
    yield Step("claims_check (10 paths, one held by another)", "claims_check", True, lambda: ok(
        "claims_check", {"paths": ["src/api/routes.py", *(f"docs/page_{i}.md" for i in range(9))]}, "planner0"))
    yield Step("network_publish_artifact", "network_publish_artifact", True, lambda: ok(
        "network_publish_artifact", {"uri": "https://github.com/acme/api/pull/42", "type": "pull_request",
                                     "label": "PR 42", "taskId": state["task"]["taskId"]},
        state["task"]["assignee"], key()))
    yield Step("network_task_get", "network_task_get", True, lambda: ok(
        "network_task_get", {"taskId": state["task"]["taskId"]}, "planner0"))
    yield Step("network_release", "network_release", True, lambda: release("claim"))
    yield Step("network_claim (a second scope)", "network_claim", False, lambda: claim("docs/**", "claim2"))
    yield Step("network_task_update (complete)", "network_task_update", True, lambda: task_update(
        "completed", reason="PR 42 merged; tests green"))  # releases the task's active claim
    yield Step("network_release (already released)", "network_release", False, lambda: release("claim2"))
    yield Step("sweep (nothing due)", "sweep", True, lambda: run_sweep())

    def lapsed_claim() -> None:
        from relaynet import clock

        ok("network_claim", {"scope": "tmp/short/**", "ttlSeconds": 1}, "coder1")
        with clock_at(clock.now_ms() + 5000):  # the short claim lapsed: this call moves it out
            ok("network_claim", {"scope": "tmp/**", "ttlSeconds": 60}, "coder1")  # its region holds the lapsed one

    yield Step("network_claim (tidies a lapsed claim)", "network_claim", False, lapsed_claim)
    # The sweep's other paths, at the times they happen: an offer to the only reviewer expires
    # (nobody else is eligible), another reviewer instance starts, the task goes to it, and a
    # later run tidies up after it.
    yield Step("network_delegate (to reviewer)", "network_delegate", False, lambda: delegate("reviewer", "review"))
    yield Step("sweep (an expired offer)", "sweep", False, lambda: swept(offer_expiry("review"), "expired"))
    yield Step("sweep (a new instance is eligible)", "sweep", False, lambda: swept(
        state["swept_at"] + 1000, "offered", launch="reviewer"))
    yield Step("sweep (a few minutes later)", "sweep", False, lambda: swept(state["swept_at"] + 180_000))

    # The plugin surface (PROTOCOL.md 5): peers, a conversation, a workflow, a consult, tasks.
    yield Step("peers (find)", "peers", True, lambda: ok("peers", {"action": "find", "sort_by": "cost"}, "planner0"))

    def next_page(tool: str, body: dict[str, Any], who: str) -> None:  # a second page: the cursor is verified
        first = ok(tool, {**body, "limit": 1}, who)
        assert first["nextCursor"], f"{tool} {body}: one page of 1 should have a cursor: {first}"
        ok(tool, {**body, "limit": 1, "cursor": first["nextCursor"]}, who)

    yield Step("peers (find, next page)", "peers", False, lambda: next_page("peers", {"action": "find"}, "planner0"))
    yield Step("peers (describe)", "peers", False, lambda: ok("peers", {"action": "describe", "name": "coder"}, "planner0"))

    def open_conversation() -> None:
        state["ch"] = ok("channels", {"action": "open", "type": "conversation", "target": "reviewer",
                                      "intent": "release notes", "message": "Can you draft the release notes?"},
                         "planner0", key())["channel_id"]

    yield Step("channels (open with a message)", "channels", True, open_conversation)
    yield Step("say", "say", True, lambda: ok("say", {"channel_id": state["ch"], "content": "Drafting them now."},
                                              "reviewer0", key()))
    yield Step("channels (info)", "channels", False, lambda: ok("channels", {"action": "info", "channel_id": state["ch"]},
                                                               "planner0"))
    yield Step("channels (list)", "channels", False, lambda: ok("channels", {"action": "list"}, "planner0"))
    yield Step("context (search)", "context", True, lambda: ok("context", {"action": "search", "query": "release"},
                                                               "planner0"))
    yield Step("context (search, next page)", "context", False, lambda: next_page(
        "context", {"action": "search", "query": "e"}, "planner0"))
    yield Step("context (quote)", "context", False, lambda: ok(
        "context", {"action": "quote", "speaker": "reviewer", "channel_id": state["ch"]}, "planner0"))
    yield Step("channels (close)", "channels", False, lambda: ok("channels", {"action": "close", "channel_id": state["ch"]},
                                                                "planner0"))

    def open_workflow() -> None:
        graph = {"initial_speaker": "planner", "transitions": [
            {"when": {"name": "from_speaker", "args": {"agent_id": "planner"}},
             "then": {"name": "agent", "args": {"agent_id": "reviewer"}}, "priority": 0}],
            "default_target": {"name": "terminate", "args": {"reason": "sequence_complete"}}, "max_turns": 2}
        state["wf"] = ok("channels", {"action": "open", "type": "workflow", "target": "reviewer",
                                      "knobs": {"graph": graph}}, "planner0", key())["channel_id"]

    yield Step("channels (open a workflow)", "channels", False, open_workflow)
    yield Step("handoff", "handoff", True, lambda: ok("handoff", {"channel_id": state["wf"], "content": "spec attached",
                                                                 "context": {"stage": "review"}}, "planner0", key()))
    yield Step("handoff (finish)", "handoff", False, lambda: ok(
        "handoff", {"channel_id": state["wf"], "finish": "LGTM", "reason": "approved"}, "reviewer0", key()))
    def short_channel() -> None:  # a channel whose TTL lapses: the sweep expires it
        from relaynet import clock

        ok("channels", {"action": "open", "type": "conversation", "target": "coder", "ttl": 1}, "planner0", key())
        assert run_sweep(clock.now_ms() + 5000)["channels_expired"] == 1

    yield Step("sweep (a channel past its TTL)", "sweep", False, short_channel)
    yield Step("delegate (a consult, not waiting)", "delegate", True, lambda: ok(
        "delegate", {"target": "reviewer", "prompt": "Is the /health change safe to ship?", "timeout": 0},
        "planner0", key()))

    def plugin_task() -> None:
        delegate("coder", "ptask")
        state["task"] = state["ptask"]
        task_update("accepted")

    yield Step("network_delegate (for the tasks tool)", "network_delegate", False, plugin_task)
    yield Step("tasks (progress)", "tasks", True, lambda: ok(
        "tasks", {"action": "progress", "task_id": state["ptask"]["taskId"], "payload": {"step": "tests written"}},
        state["ptask"]["assignee"]))
    yield Step("tasks (status)", "tasks", False, lambda: ok("tasks", {"action": "status", "task_id": state["ptask"]["taskId"]},
                                                            "planner0"))
    yield Step("tasks (list)", "tasks", False, lambda: ok("tasks", {"action": "list", "scope": "all"}, "planner0"))
    yield Step("tasks (wait, not yet)", "tasks", False, lambda: ok(
        "tasks", {"action": "wait", "task_id": state["ptask"]["taskId"], "timeout": 0}, "planner0"))
    yield Step("network_claim (for the task)", "network_claim", False, lambda: ok(
        "network_claim", {"scope": "src/health/**", "taskId": state["ptask"]["taskId"]}, state["ptask"]["assignee"]))
    yield Step("tasks (complete)", "tasks", False, lambda: ok(
        "tasks", {"action": "complete", "task_id": state["ptask"]["taskId"], "result": "merged as PR 43"},
        state["ptask"]["assignee"]))

    # Webhooks (docs/protocol.md 10.3): coder #0 sets a push endpoint (a receiver on loopback);
    # the notifier handles the stream record of its next mailbox entry, delivered or failing; the
    # scheduled push retry delivers a due retry, or marks one failed once its window is over.
    yield from push_steps(state, ok, key, by_inst, tok, tokens["networks"][network])

    # The control surface (PROTOCOL.md 6), as the demo's representative `ops` (grant operate).
    tok["ops"] = tokens["representatives"]["ops"]
    net_id = tokens["networks"][network]["networkId"]
    for tool, body, typical in (("control_whoami", {}, True), ("control_list_networks", {}, False),
                                ("control_use_network", {"networkId": net_id}, False),
                                ("control_network_status", {}, True), ("control_list_agents", {}, False),
                                ("control_find_agents", {"resourceKey": "github.com/acme/api", "action": "review"}, False),
                                ("control_list_tasks", {"limit": 10}, False), ("control_list_blocked", {}, False),
                                ("control_get_history", {"limit": 20}, False), ("control_get_graph", {}, False),
                                ("control_channel_send", {"body": "All quiet; one task pending review."}, False),
                                ("control_channel_history", {}, False)):
        yield Step(tool, tool, typical, lambda tool=tool, body=body: ok(tool, body, "ops"))
    yield Step("control_channel_send (again)", "control_channel_send", False, lambda: ok(
        "control_channel_send", {"body": "Still quiet."}, "ops"))
    yield Step("control_channel_history (next page)", "control_channel_history", False, lambda: next_page(
        "control_channel_history", {}, "ops"))
    yield Step("control_task_status", "control_task_status", False, lambda: ok(
        "control_task_status", {"taskId": state["ptask"]["taskId"]}, "ops"))
    yield Step("control_get_thread", "control_get_thread", False, lambda: ok(
        "control_get_thread", {"threadId": state["thread"]}, "ops"))

    def control_ask() -> None:
        state["ops_thread"] = ok("control_ask", {"toAgent": "planner", "body": "Status of /health?"}, "ops", key())["threadId"]

    yield Step("control_ask", "control_ask", True, control_ask)
    yield Step("control_reply", "control_reply", False, lambda: ok(
        "control_reply", {"threadId": state["ops_thread"], "body": "Thanks."}, "ops"))

    def control_delegate() -> None:
        state["ops_task"] = ok("control_delegate", {"toAgent": "coder", "objective": "Bump the API version"},
                               "ops", key())

    yield Step("control_delegate", "control_delegate", False, control_delegate)
    yield Step("network_claim (on the representative's task)", "network_claim", False, lambda: ok(
        "network_claim", {"scope": "VERSION", "taskId": state["ops_task"]["taskId"]}, "coder0"))
    yield Step("control_ask (404)", "control_ask", False, lambda: ok(
        "control_ask", {"toAgent": "ghost", "body": "hello?"}, "ops", key(), expect=404))
    yield Step("control_cancel_task", "control_cancel_task", False, lambda: ok(
        "control_cancel_task", {"taskId": state["ops_task"]["taskId"], "reason": "not needed"}, "ops"))
    yield Step("control_wake_agent", "control_wake_agent", False, lambda: ok(
        "control_wake_agent", {"toAgent": "reviewer", "reason": "review waiting"}, "ops"))

    def launch() -> None:
        state["launched"] = ok("control_launch_agent", {"agentName": "coder"}, "ops")
        tok["launched"] = state["launched"]["token"]
        state["held"] = ok("network_claim", {"scope": "scratch/**"}, "launched")

    yield Step("control_launch_agent", "control_launch_agent", False, launch)
    yield Step("control_release_claim", "control_release_claim", False, lambda: ok(
        "control_release_claim", {"claimId": state["held"]["claimId"]}, "ops"))

    def two_step(tool: str) -> None:
        inst = state["launched"]["instanceId"]
        first = ok(tool, {"instanceId": inst}, "ops")
        ok(tool, {"instanceId": inst, "confirmationId": first["confirmationId"]}, "ops")

    yield Step("network_claim (held by the instance about to stop)", "network_claim", False, lambda: ok(
        "network_claim", {"scope": "scratch/**"}, "launched"))
    yield Step("control_delegate (to the instance about to stop)", "control_delegate", False, lambda: ok(
        "control_delegate", {"toInstance": state["launched"]["instanceId"], "objective": "Tidy scratch/"}, "ops",
        key()))
    # the stop releases that claim and returns that task to pending, in one transaction
    yield Step("control_stop_agent (both steps)", "control_stop_agent", False, lambda: two_step("control_stop_agent"))
    yield Step("control_restart_agent (both steps)", "control_restart_agent", False,
               lambda: two_step("control_restart_agent"))

    yield from a2a_steps(tok, ok)
    yield from a2a_bridge_steps(tok, ok, network)
    yield from ag2_steps(tok)


def a2a_call(stem: str, method: str, path: str, route: str, params: dict[str, str], token: str | None = None,
             body: Any = None) -> dict[str, Any]:
    """One request to an A2A route (docs/protocol.md 13) as API Gateway makes it: the authorizer
    first when ``token`` is given; the answer's JSON."""
    from relaynet_local.events import authorizer_event, http_event
    from relaynet_local.lambdas import LambdaContext, load_handler

    hdrs = [("content-type", "application/json"), ("a2a-version", "1.0"), ("host", "bench.example.com")]
    context = None
    if token is not None:
        hdrs.append(("authorization", f"Bearer {token}"))
        context = load_handler(FUNCTIONS, "authorizer.handler")(
            authorizer_event(method, path, route_key=route, identity=[f"Bearer {token}"], headers=hdrs), None)["context"]
    event = http_event(method, path, route_key=route, headers=hdrs, body=json.dumps(body) if body is not None else None,
                       path_parameters=params, authorizer_context=context)
    resp = load_handler(FUNCTIONS, f"{stem}.handler")(event, LambdaContext(stem, 29.0, 512))
    answer = json.loads(resp["body"])
    assert resp["statusCode"] == 200 and "error" not in answer, answer
    return answer


def a2a_steps(tok: dict[str, str], ok: Callable[..., dict[str, Any]], network: str = "demo") -> Iterator[Step]:
    """A2A (docs/protocol.md 13): the coder's card and the network's cards; as the planner,
    SendMessage (a new task, then a follow-up in its thread), GetTask, ListTasks, a push
    notification config on the task, the notifier posting its assignee's accept, and CancelTask
    once the assignee claimed a path for it (the cancel releases the claim). ``ok`` calls a tool as a named token (the scenario's)."""
    state: dict[str, Any] = {}
    base = f"/a2a/{network}/coder"
    params = {"network": network, "agent": "coder"}

    def rpc(method: str, rpc_params: dict[str, Any]) -> dict[str, Any]:
        return a2a_call("a2a_rpc", "POST", base, "POST /a2a/{network}/{agent}", params, tok["planner0"],
                        {"jsonrpc": "2.0", "id": 1, "method": method, "params": rpc_params})["result"]

    def send(text: str, task_id: str | None = None) -> None:
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
        if task_id:
            message["taskId"] = task_id
        state["task"] = rpc("SendMessage", {"message": message, "configuration": {"historyLength": 0}})["task"]

    yield Step("a2a agent card", "a2a_card", True, lambda: a2a_call(
        "a2a_card", "GET", f"{base}/.well-known/agent-card.json", "GET /a2a/{network}/{agent}/.well-known/agent-card.json",
        params))
    yield Step("a2a cards of a network", "a2a_card", False, lambda: a2a_call(
        "a2a_card", "GET", f"/a2a/{network}", "GET /a2a/{network}", {"network": network}))
    yield Step("a2a SendMessage (a new task)", "a2a_rpc", True, lambda: send("Port the CLI to the new config loader"))
    yield Step("a2a SendMessage (a follow-up in the task's thread)", "a2a_rpc", False,
               lambda: send("Keep the old flags working", state["task"]["id"]))
    yield Step("a2a GetTask (with history)", "a2a_rpc", True, lambda: rpc("GetTask", {"id": state["task"]["id"]}))
    yield Step("a2a ListTasks (a page of 10)", "a2a_rpc", False, lambda: rpc("ListTasks", {"pageSize": 10}))

    def push_config() -> None:
        state["receiver"] = LoopbackReceiver()
        with push_env():
            rpc("CreateTaskPushNotificationConfig", {"taskId": state["task"]["id"], "url": state["receiver"].url,
                                                     "token": "t" * 32})

    def pushed() -> None:
        from relaynet.store import directory, table
        from relaynet.store import keys as k

        task_id = state["task"]["id"]
        net = directory.network_id(network)
        state["assignee"] = ok("network_task_get", {"taskId": task_id}, "planner0")["task"]["assignee"]
        ok("network_task_update", {"taskId": task_id, "status": "accepted"}, state["assignee"])
        entry = next(i for i in table.query(k.events_pk(net), forward=False, limit=10)
                     if i.get("taskId") == task_id and i.get("a2aPush"))
        with push_env():
            assert run_notifier(entry) == {"batchItemFailures": []}
        assert state["receiver"].count == 1, "the transition was not posted"

    yield Step("a2a CreateTaskPushNotificationConfig", "a2a_rpc", False, push_config)
    yield Step("notifier (an A2A push: a transition of a task with a config, posted)", "notifier", False, pushed)

    def cancel() -> None:
        task_id = state["task"]["id"]
        assignee = state["assignee"]
        ok("network_claim", {"scope": "cli/config/**", "taskId": task_id, "ttlSeconds": 600}, assignee)
        rpc("CancelTask", {"id": task_id})

    yield Step("a2a CancelTask (accepted, one claim released)", "a2a_rpc", False, cancel)


class LoopbackA2A:
    """A remote A2A 1.0 agent on 127.0.0.1 for the bridge's steps (a daemon thread): its card at
    ``/card``, JSON-RPC at ``/rpc``; SendMessage makes a task in ``state`` (SUBMITTED), GetTask
    answers its current ``state`` (set by the step, with one URL artifact once COMPLETED),
    CancelTask cancels it; with ``push`` its card says ``pushNotifications`` and ``configs`` keeps
    each push config SendMessage carried. The tests drive the SDK's own server
    (tests/e2e/test_a2a_bridge_e2e.py); this one only has to be there while the DynamoDB requests
    are counted."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.state = "TASK_STATE_SUBMITTED"
        self.tasks: dict[str, str] = {}
        self.push = False
        self.configs: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._send({"name": "ci-remote", "description": "", "version": "1", "supportedInterfaces": [
                    {"url": f"{outer.base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                    "capabilities": {"pushNotifications": outer.push}})

            def do_POST(self) -> None:  # noqa: N802
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                params = req["params"]
                if req["method"] == "SendMessage":
                    task_id = uuid.uuid4().hex
                    outer.tasks[task_id] = "TASK_STATE_SUBMITTED"
                    if "taskPushNotificationConfig" in (params.get("configuration") or {}):
                        outer.configs.append(params["configuration"]["taskPushNotificationConfig"])
                else:
                    task_id = params["id"]
                    outer.tasks[task_id] = "TASK_STATE_CANCELED" if req["method"] == "CancelTask" else outer.state
                task = {"id": task_id, "contextId": "ctx", "status": {"state": outer.tasks[task_id]}}
                if outer.tasks[task_id] == "TASK_STATE_COMPLETED":
                    task["artifacts"] = [{"artifactId": "a1", "name": "report", "parts": [
                        {"url": "https://example.com/reports/1.html"}]}]
                self._send({"jsonrpc": "2.0", "id": req["id"],
                            "result": {"task": task} if req["method"] == "SendMessage" else task})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def a2a_bridge_steps(tok: dict[str, str], ok: Callable[..., dict[str, Any]], network: str = "demo") -> Iterator[Step]:
    """The A2A bridge (docs/protocol.md 13.4): a remote agent ``ci-remote`` joins the network
    (``a2a:`` in a spec applied now); the scheduled bridge reads its card with nothing offered,
    sends a task the planner delegated to it, polls it while the remote works, mirrors its
    completion (the artifact published, the task completed), and turns a Relaynet cancel into
    CancelTask. Then the remote takes push configs: a task is sent with one, the remote's
    notification is received (a2a_push_in), and the bridge run its receipt's stream record
    starts follows the task at once."""
    from relaynet_local.events import http_event
    from relaynet_local.lambdas import LambdaContext, load_handler

    from relaynet import admin, clock

    remote = LoopbackA2A()
    state: dict[str, Any] = {"at": clock.now_ms()}
    with push_env():
        admin.apply_spec(f"network: {network}\nagents:\n  - name: ci-remote\n    a2a: {{url: '{remote.base}/card'}}\n")

    def bridge(later_ms: int, **expect: int) -> None:
        state["at"] += later_ms
        with push_env(), clock_at(state["at"]):
            stats = load_handler(FUNCTIONS, "a2a_bridge.handler")({"source": "aws.events"},
                                                                 LambdaContext("a2a_bridge", 120.0, 512))
        assert {key: stats[key] for key in expect} == expect, stats

    def delegate(objective: str) -> None:
        state["task"] = ok("network_delegate", {"toAgent": "ci-remote", "objective": objective}, "planner0",
                           str(uuid.uuid4()))["taskId"]

    bridge(0, members=1)  # the first run after the apply also records the member's status
    yield Step("a2a_bridge (a member, nothing offered; a minute on)", "a2a_bridge", True,
               lambda: bridge(61_000, members=1, sent=0))
    delegate("Quarantine the flaky tests")
    yield Step("a2a_bridge (an offer accepted, sent with SendMessage)", "a2a_bridge", False,
               lambda: bridge(1000, sent=1))
    remote.state = "TASK_STATE_WORKING"
    yield Step("a2a_bridge (a poll: the remote started work)", "a2a_bridge", False,
               lambda: bridge(3000, polled=1, moved=1))
    remote.state = "TASK_STATE_COMPLETED"
    yield Step("a2a_bridge (a poll: completed, its artifact published)", "a2a_bridge", False,
               lambda: bridge(3000, polled=1, moved=1))
    remote.state = "TASK_STATE_WORKING"
    delegate("Bisect the nightly failure")

    def cancelled() -> None:
        bridge(1000, sent=1)
        ok("network_task_update", {"taskId": state["task"], "status": "cancelled", "reason": "not needed"}, "planner0")

    cancelled()
    yield Step("a2a_bridge (cancelled in Relaynet: CancelTask)", "a2a_bridge", False,
               lambda: bridge(3000, cancelled=1))

    remote.push, remote.state = True, "TASK_STATE_WORKING"
    bridge(61_000, members=1)  # the card now says pushNotifications
    delegate("Rerun the flaky suite")
    yield Step("a2a_bridge (an offer sent with a push config)", "a2a_bridge", False, lambda: bridge(1000, sent=1))
    config = remote.configs[-1]
    path = config["url"].removeprefix("https://bench.example.com")
    _, _, net_id, _, inst_id, task_id = path.split("/")

    def notify() -> None:
        resp = load_handler(FUNCTIONS, "a2a_push_in.handler")(http_event(
            "POST", path, route_key="POST /a2a/{network}/push/{instance}/{task}",
            headers=[("content-type", "application/json"), ("x-a2a-notification-token", config["token"])],
            body=json.dumps({"statusUpdate": {"taskId": "remote", "status": {"state": "TASK_STATE_COMPLETED"}}}),
            path_parameters={"network": net_id, "instance": inst_id, "task": task_id}), LambdaContext("a2a_push_in", 9.0, 512))
        assert resp["statusCode"] == 200, resp

    remote.state = "TASK_STATE_COMPLETED"
    yield Step("a2a_push_in (a remote's notification, its token proven)", "a2a_push_in", False, notify)

    def receipt_run() -> None:
        from relaynet.store import a2a as a2a_store
        from relaynet.store import table

        image = table.encode(a2a_store.receipt(net_id, inst_id, task_id))
        state["at"] += 500
        with push_env(), clock_at(state["at"]):
            out = load_handler(FUNCTIONS, "a2a_bridge.handler")(
                {"Records": [{"eventName": "MODIFY", "dynamodb": {"NewImage": image}}]},
                LambdaContext("a2a_bridge", 120.0, 512))
        assert out == {"batchItemFailures": []} and tasks_state(task_id) == "completed", out

    def tasks_state(tid: str) -> str:
        return ok("network_task_get", {"taskId": tid}, "planner0")["task"]["state"]

    yield Step("a2a_bridge (a push receipt from the stream: followed at once, completed)", "a2a_bridge", False,
               receipt_run)


def ag2_event(route: str, connection_id: str, body: Any = None) -> dict[str, Any]:
    """An API Gateway WebSocket event: ``$connect``/``$disconnect`` or a frame (``body``, JSON)."""
    kind = {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}.get(route, "MESSAGE")
    event: dict[str, Any] = {"requestContext": {
        "routeKey": route, "eventType": kind, "connectionId": connection_id, "stage": "ag2",
        "domainName": "bench.execute-api.us-east-1.amazonaws.com", "apiId": "bench"}}
    if body is not None:
        event["body"] = json.dumps(body)
    return event


def ag2_steps(tok: dict[str, str]) -> Iterator[Step]:
    """The AG2 wire (docs/protocol.md 12), frames as AG2's HubClient sends them: two connections
    register (planner, reviewer), a consulting channel opens with the invite/ack handshake, a
    question is posted and acked, the WAL is read, the reviewer re-attaches with a hello, the
    notifier delivers a stream record, the keepalive pings an idle connection, a disconnect.
    postToConnection goes to moto's management API."""
    from relaynet_local.lambdas import LambdaContext, load_handler

    state: dict[str, Any] = {}

    def run(stem: str, event: dict[str, Any]) -> Any:
        return load_handler(FUNCTIONS, f"{stem}.handler")(event, LambdaContext(stem, 29.0, 512))

    def request(conn: str, op: str, params: dict[str, Any]) -> None:
        run("ag2_frames", ag2_event("request", conn, {"kind": "request", "request_id": uuid.uuid4().hex, "op": op,
                                                      "params": params}))

    def passport(name: str) -> dict[str, Any]:
        return {"name": name, "kind": "human", "auth": {"scheme": "api_key", "claim": {"token": tok[f"{name}0"]}}}

    def register(conn: str, name: str) -> None:
        run("ag2_connection", ag2_event("$connect", conn))
        request(conn, "register", {"passport": passport(name), "resume": {}, "skill_md": None, "rule": None})

    def create() -> None:
        from relaynet import channels

        request("bench-a", "create_channel", {"creator_id": "planner", "manifest_type": "consulting",
                                              "participants": ["reviewer"]})
        listed = channels.list_channels(state["planner"], state="active", limit=1)  # the channel just opened
        state["channel_id"] = listed["channels"][0]["channel_id"]

    from relaynet.identity import authorize

    state["planner"] = authorize(tok["planner0"])
    state["net"] = state["planner"].network_id
    saved = os.environ.get("RELAYNET_AG2_MANAGEMENT_URL")  # the notifier's and keepalive's, as template.yaml sets it
    os.environ["RELAYNET_AG2_MANAGEMENT_URL"] = "https://bench.execute-api.us-east-1.amazonaws.com/ag2"
    try:
        yield from _ag2_story(run, request, register, create, state, tok)
    finally:
        if saved is None:
            os.environ.pop("RELAYNET_AG2_MANAGEMENT_URL", None)
        else:
            os.environ["RELAYNET_AG2_MANAGEMENT_URL"] = saved


def _ag2_story(run: Callable[..., Any], request: Callable[..., None], register: Callable[..., None],
               create: Callable[[], None], state: dict[str, Any], tok: dict[str, str]) -> Iterator[Step]:
    yield Step("ag2 $connect + register (planner)", "ag2_connection", False, lambda: register("bench-a", "planner"))
    yield Step("ag2 register (reviewer)", "ag2_frames", False, lambda: register("bench-b", "reviewer"))
    yield Step("ag2 create_channel (consulting, invite sent)", "ag2_frames", False, create)
    yield Step("ag2 post_envelope (the invite's ack; the answer to create_channel)", "ag2_frames", False,
               lambda: request("bench-b", "post_envelope", {"envelope": _ag2_envelope(
                   state["channel_id"], "reviewer", "ag2.channel.invite.ack", {"channel_id": state["channel_id"]})}))
    yield Step("ag2 post_envelope (a question)", "ag2_frames", False, lambda: request(
        "bench-a", "post_envelope", {"envelope": _ag2_envelope(state["channel_id"], "planner", "ag2.msg.text",
                                                               {"text": "Is /health cached?"})}))

    def notifier() -> None:
        from relaynet.store import ag2 as store
        from relaynet.store import table as t

        item = [i for i in store.channel_items(state["net"], state["channel_id"]) if i["SK"].startswith("ENV#")][-1]
        state["envelope_id"] = item["envelope_id"]
        record = {"eventID": "1", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                  "awsRegion": "us-east-1", "dynamodb": {"Keys": {"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}},
                                                         "NewImage": t.encode(item), "SequenceNumber": "1",
                                                         "SizeBytes": 1, "StreamViewType": "NEW_IMAGE"}}
        assert run("ag2_notifier", {"Records": [record]}) == {"batchItemFailures": []}

    yield Step("ag2 notifier (an envelope to an AG2 recipient)", "ag2_notifier", False, notifier)
    yield Step("ag2 receipt (ack: the cursor moves)", "ag2_frames", False, lambda: run("ag2_frames", ag2_event(
        "receipt", "bench-b", {"kind": "receipt", "envelope_id": state["envelope_id"], "status": "ack",
                               "recipient_id": "reviewer", "channel_id": state["channel_id"], "reason": ""})))
    yield Step("ag2 read_wal", "ag2_frames", False, lambda: request(
        "bench-a", "read_wal", {"channel_id": state["channel_id"], "since": 0, "until": None}))
    yield Step("ag2 hello (re-attach with replay)", "ag2_frames", False, lambda: run("ag2_frames", ag2_event(
        "hello", "bench-b", {"kind": "hello", "name": "reviewer", "auth_scheme": "api_key",
                             "auth_claim": {"token": tok["reviewer0"]}, "since_envelope_id": ""})))

    yield Step("ag2 create_channel (an invite nobody acks)", "ag2_frames", False, lambda: request(
        "bench-a", "create_channel", {"creator_id": "planner", "manifest_type": "conversation",
                                      "participants": ["reviewer"]}))

    def keepalive() -> None:
        from relaynet import clock

        with clock_at(clock.now_ms() + 5 * 60_000):
            assert run("ag2_keepalive", {"source": "aws.events"}) == {"pinged": 2, "invite_timeouts": 1}

    yield Step("ag2 keepalive (idle connections pinged, an unacked invite timed out)", "ag2_keepalive", False,
               keepalive)
    yield Step("ag2 $disconnect (the reviewer's: its bindings and delivery markers go too)", "ag2_connection",
               False, lambda: run("ag2_connection", ag2_event("$disconnect", "bench-b")))


def _ag2_envelope(channel_id: str, sender: str, event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """An AG2 ``Envelope.to_dict()`` as the client posts it (the hub stamps id and time)."""
    return {"channel_id": channel_id, "sender_id": sender, "audience": None, "event_type": event_type,
            "event_data": data, "envelope_id": "", "task_id": None, "causation_id": None, "trace_id": None,
            "priority": "normal", "depth": 0, "idempotency_key": None, "created_at": "", "ttl_seconds": None}

# --------------------------------------------------------------------------- the bill

def lambda_cost(requests: int) -> float:
    """Dollars for one invocation: the request plus the modelled duration."""
    seconds = (BASE_MS + PER_REQUEST_MS * requests) / 1000
    return PRICES["lambda_per_million"] / 1e6 + MEMORY_GB * seconds * PRICES["lambda_arm_gb_s"]


def ddb_cost(use: Usage) -> float:
    return (use.rru * PRICES["ddb_rru_per_million"] + use.wru * PRICES["ddb_wru_per_million"]) / 1e6


def measure(steps: Iterator[Step], meter: Meter) -> list[tuple[Step, dict[str, Usage]]]:
    """Run each step with a fresh meter; returns ``(step, usage by entry point)``."""
    out = []
    for step in steps:
        meter.reset()
        step.run()
        out.append((step, dict(meter.usage)))
    return out


#: Functions a schedule runs, not a caller: no API Gateway request, not in the tool calls' mix.
SCHEDULED = ("sweep", "push_retry", "a2a_bridge")


def table_markdown(results: list[tuple[Step, dict[str, Usage]]], typical_only: bool = True) -> str:
    rows = ["| call | DynamoDB requests | RRU | WRU | DynamoDB $ | Lambda $ | API $ | total $ per million |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    totals = []
    for step, usage in results:
        if typical_only and not step.typical:
            continue
        use = usage.get(step.tool, Usage())
        api = PRICES["http_api_per_million"] if step.tool not in SCHEDULED else 0.0
        dd, lam = ddb_cost(use) * 1e6, lambda_cost(use.requests) * 1e6
        total = dd + lam + api
        if step.tool not in SCHEDULED and step.typical:
            totals.append(total)
        ops = ", ".join(f"{op} {n}" for op, n in sorted(use.ops.items()))
        rows.append(f"| `{step.label}` | {use.requests} ({ops}) | {use.rru:g} | {use.wru:g} | {dd:.2f} | "
                    f"{lam:.2f} | {api:.2f} | **{total:.2f}** |")
    auth = next((u["authorizer"] for _s, u in results if "authorizer" in u), Usage())
    auth_cost = (ddb_cost(auth) + lambda_cost(auth.requests)) * 1e6
    mean = sum(totals) / len(totals) if totals else 0.0
    rows.append(f"| authorizer, per cache miss | {auth.requests} (GetItem) | {auth.rru:g} | {auth.wru:g} | "
                f"{ddb_cost(auth) * 1e6:.2f} | {lambda_cost(auth.requests) * 1e6:.2f} | - | **{auth_cost:.2f}** |")
    rows.append(f"| the demo story's mix (mean of its {len(totals)} tool calls) | | | | | | | **{mean:.2f}** "
                f"(+{auth_cost:.2f} when every call misses the authorizer cache) |")
    return "\n".join(rows)


def snapstart_functions(template: Path = TEMPLATE) -> list[str]:
    """The logical ids of the functions whose published versions SnapStart snapshots when the
    ``SnapStart`` parameter is Enabled (the Globals' ``ApplyOn``, unless the function sets None)."""
    from relaynet_local.template import load_yaml

    doc = load_yaml(template)
    default = (doc["Globals"]["Function"].get("SnapStart") or {}).get("ApplyOn")
    out = []
    for lid, res in doc["Resources"].items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        apply_on = (res["Properties"].get("SnapStart") or {}).get("ApplyOn", default)
        if apply_on not in (None, "None"):
            out.append(lid)
    return out


def push_at_write_markdown(results: list[tuple[Step, dict[str, Usage]]]) -> str:
    """What the push at the write costs in AWS (relaynet.push_at_write), per record the notifiers'
    filters take: one more notifier invocation (the stream still hands every record over), each
    record priced as if it rode an invocation of its own (the stream batches up to 10, the write's
    Invoke carries one commit's records), plus the writer's Invoke (one more request's modelled
    duration at 512 MB). For a webhook pushed the second invocation finds the delivery made
    (measured: the duplicate step); for a mailbox entry of a network without webhooks it reads
    the network's ``pushState`` (one strongly consistent GetItem, modelled: 1 RRU)."""
    by_label = {step.label: usage.get(step.tool, Usage()) for step, usage in results}
    first = by_label["notifier (a mailbox entry, delivered)"]
    dup = by_label["notifier (the same entry by the other push path: a duplicate, nothing sent)"]
    invoke = MEMORY_GB * PER_REQUEST_MS / 1000 * PRICES["lambda_arm_gb_s"] * 1e6
    second = (ddb_cost(dup) + lambda_cost(dup.requests)) * 1e6 + invoke
    quiet = (PRICES["ddb_rru_per_million"] / 1e6 + lambda_cost(1)) * 1e6 + invoke
    before = (ddb_cost(first) + lambda_cost(first.requests)) * 1e6
    return (f"Push at the write (AWS: the writer invokes the two notifiers asynchronously, the stream still runs) adds, "
            f"per record their filters take: for a webhook pushed, a second notifier run that finds the delivery made "
            f"({dup.requests} DynamoDB requests) and the writer's Invoke, **${second:.2f} per million** (the delivery "
            f"itself: ${before:.2f}); for any other mailbox entry or AG2 envelope (a network without webhooks), one "
            f"short run, **${quiet:.2f} per million** (modelled: 1 GetItem). `PushAtWrite=Disabled` (`RELAYNET_PUSH_AT_WRITE=false`) removes "
            f"it (the stream alone delivers).")


def snapstart_markdown() -> str:
    """SnapStart's own charges (issue 30): the cache, a fixed charge per function version whatever
    the load, and a restore per cold start; what turning it off saves."""
    functions = snapstart_functions()
    per_function = MEMORY_GB * SECONDS_PER_MONTH * SNAPSTART_PRICES["cache_gb_s"]
    restore = MEMORY_GB * SNAPSTART_PRICES["restore_gb"] * 1e6
    return (f"SnapStart (the `SnapStart` parameter, Enabled by default) adds, for the {len(functions)} request-path "
            f"functions at {int(MEMORY_GB * 1024)} MB: **${per_function * len(functions):,.2f} a month** of snapshot "
            f"cache whatever the load (${per_function:.2f} per function version, each version charged for at least "
            f"3 hours; a deploy replaces them), and **${restore:.2f} per million cold starts** restored "
            f"(${SNAPSTART_PRICES['cache_gb_s']:.10f} per GB-second cached, ${SNAPSTART_PRICES['restore_gb']:.10f} per GB "
            f"restored, us-east-1, {SNAPSTART_PRICES_DATE}). `SnapStart=Disabled` removes both.")


@contextmanager
def demo_stack(table_name: str = "relaynet-bench") -> Iterator[tuple[dict[str, Any], Meter]]:
    """moto, the table from template.yaml, the demo network applied, presence written, a meter."""
    import boto3
    from moto import mock_aws

    from relaynet import admin
    from relaynet.store import table as t
    from relaynet_local.template import create_table

    with mock_aws():
        t.reset()
        raw = boto3.client("dynamodb")
        create_table(raw, TEMPLATE, table_name)
        tokens = admin.apply_spec((ROOT / "examples" / "demo-network.yaml").read_text())
        for lst in tokens["networks"]["demo"]["instances"].values():
            for inst in lst:
                call("network_whoami", {}, inst["token"])  # presence written: later calls are steady state
        try:
            yield tokens, Meter(t.client(), raw)
        finally:
            t.reset()


README_BEGIN = "<!-- cost table: written by `make cost` (benchmarks/requests_per_tool.py --readme) -->"
README_END = "<!-- end of cost table -->"


def write_readme(table: str, readme: Path = ROOT / "README.md") -> None:
    """Replace the table between :data:`README_BEGIN` and :data:`README_END` in ``readme`` (the
    README's cost table is generated, never copied by hand). Raises SystemExit without markers."""
    text = readme.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"{readme} has no {README_BEGIN!r} ... {README_END!r} block")
    readme.write_text(text[:start + len(README_BEGIN)] + "\n" + table + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="also list the variant steps")
    ap.add_argument("--readme", action="store_true",
                    help=f"also write the table into README.md between {README_BEGIN!r} and {README_END!r}")
    args = ap.parse_args(argv)
    sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "infra")]
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
                      AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-bench",
                      POWERTOOLS_LOG_LEVEL="ERROR", POWERTOOLS_TRACE_DISABLED="true",
                      POWERTOOLS_METRICS_DISABLED="true")
    os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    with demo_stack() as (tokens, meter):
        results = measure(scenario(tokens), meter)
    table = (table_markdown(results, typical_only=not args.all) + "\n\n" + snapstart_markdown() + "\n\n"
             + push_at_write_markdown(results))
    print(table)
    if args.readme:
        write_readme(table)
        print(f"\n(README.md's cost table rewritten from these figures)")
    print()
    print(f"Prices (us-east-1 list prices, {PRICES_DATE}): " + ", ".join(f"{k} {v}" for k, v in PRICES.items()))
    print(f"Lambda duration modelled as {BASE_MS} ms + {PER_REQUEST_MS} ms per DynamoDB request at "
          f"{int(MEMORY_GB * 1024)} MB arm64.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
