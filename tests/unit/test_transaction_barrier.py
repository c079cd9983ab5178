"""The local stack's transaction barrier (relaynet_local.dynamodb_local.TransactionBarrier): a
call whose last request was a transaction is not answered until DynamoDB Local has served a
request after it (one GetItem of the barrier's own); a call that read or wrote anything else
after its transaction, or made none, costs no barrier.

On DynamoDB Local, through the hub's own client (relaynet.store.table.client) made after the
barrier is installed, as the local stack makes it. The kill -9 of the store behind the rule is
tests/e2e/test_durable_store.py."""

from __future__ import annotations

import threading

import pytest

from relaynet.store import table as t
from relaynet_local.dynamodb_local import TransactionBarrier


@pytest.fixture
def barrier(server_table):
    b = TransactionBarrier(server_table, t.table_name()).install()
    t.reset()
    try:
        yield b
    finally:
        b.uninstall()
        t.reset()


def _transaction(sk: str) -> None:
    t.client().transact_write_items(TransactItems=[{"Put": {"TableName": t.table_name(), "Item": {
        "PK": {"S": "BARRIER-TEST"}, "SK": {"S": sk}}}}])


def _cancelled() -> None:
    with pytest.raises(t.client().exceptions.TransactionCanceledException):
        t.client().transact_write_items(TransactItems=[{"ConditionCheck": {
            "TableName": t.table_name(), "Key": {"PK": {"S": "BARRIER-TEST"}, "SK": {"S": "none"}},
            "ConditionExpression": "attribute_exists(PK)"}}])


def _read() -> None:
    t.client().get_item(TableName=t.table_name(), Key={"PK": {"S": "BARRIER-TEST"}, "SK": {"S": "none"}},
                        ConsistentRead=True)


def _update() -> None:
    t.client().update_item(TableName=t.table_name(), Key={"PK": {"S": "BARRIER-TEST"}, "SK": {"S": "n"}},
                           UpdateExpression="SET n = :n", ExpressionAttributeValues={":n": {"N": "1"}})


def test_a_transaction_with_nothing_after_it_gets_one_barrier_and_a_second_settle_none(barrier):
    _transaction("a")
    barrier.settle()
    assert barrier.barriers_sent == 1
    barrier.settle()
    assert barrier.barriers_sent == 1


@pytest.mark.parametrize("after", [_read, _update])
def test_a_call_that_sent_another_request_after_its_transaction_needs_no_barrier(barrier, after):
    _transaction("a")
    after()
    barrier.settle()
    assert barrier.barriers_sent == 0


def test_a_call_that_made_no_transaction_needs_no_barrier(barrier):
    _read()
    barrier.settle()
    assert barrier.barriers_sent == 0


@pytest.mark.parametrize("last", ["another transaction", "a cancelled transaction"])
def test_a_transaction_after_the_transaction_settles_nothing(barrier, last):
    _transaction("a")
    if last == "another transaction":
        _transaction("b")
    else:
        _cancelled()
    barrier.settle()
    assert barrier.barriers_sent == 1


def test_the_barrier_is_per_thread(barrier):
    """A thread's transaction is settled by its own barrier; another thread that only read sends
    none, and neither settle answers for the other."""
    sent: dict[str, int] = {}

    def reader() -> None:
        _read()
        barrier.settle()
        sent["reader"] = barrier.barriers_sent

    _transaction("a")
    th = threading.Thread(target=reader)
    th.start()
    th.join(30)
    assert sent == {"reader": 0}
    barrier.settle()
    assert barrier.barriers_sent == 1


def test_an_ag2_answer_posted_after_a_transaction_leaves_only_once_it_is_settled(barrier):
    """The AG2 wire answers from inside its handler (postToConnection, relaynet.ag2.ops.flush),
    before the stack's settle after the handler: the barrier's GetItem goes before that post, and
    the settle after it then sends none. A post with nothing unsettled sends no barrier."""
    import http.server

    import boto3

    seen: list[tuple[str, int]] = []

    class Management(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.path, barrier.barriers_sent))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Management)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        management = boto3.client("apigatewaymanagementapi", region_name="us-east-1",
                                  endpoint_url=f"http://127.0.0.1:{server.server_address[1]}/ag2",
                                  aws_access_key_id="local", aws_secret_access_key="local")
        _transaction("answered")
        management.post_to_connection(ConnectionId="c1", Data=b"{}")
        barrier.settle()
        management.post_to_connection(ConnectionId="c2", Data=b"{}")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [("/ag2/@connections/c1", 1), ("/ag2/@connections/c2", 1)]
    assert barrier.barriers_sent == 1


def test_a_cold_burst_of_threads_makes_one_client_each_and_every_call_is_served(barrier):
    """The local stack serves a burst of first calls at once (issue 31: 32 claims at a start).
    The hub's client and the barrier's are each made once, whatever the number of threads
    asking for them together, and every thread's transaction is settled through them."""
    import boto3

    barrier.uninstall()
    boto3.setup_default_session()  # as a process starts: nothing loaded yet
    barrier.install()
    t.reset()
    n = 16
    start = threading.Barrier(n)
    hub_clients, barrier_clients, errors = [], [], []

    def first_call(i: int) -> None:
        try:
            start.wait()
            hub_clients.append(t.client())
            barrier_clients.append(barrier.client())
            _transaction(f"burst{i}")
            barrier.settle()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_call, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len({id(c) for c in hub_clients}) == 1 and len(hub_clients) == n
    assert len({id(c) for c in barrier_clients}) == 1 and len(barrier_clients) == n
    assert barrier.barriers_sent == n
    got = t.client().batch_get_item(RequestItems={t.table_name(): {"ConsistentRead": True, "Keys": [
        {"PK": {"S": "BARRIER-TEST"}, "SK": {"S": f"burst{i}"}} for i in range(n)]}})
    assert len(got["Responses"][t.table_name()]) == n


def test_reset_makes_a_new_hub_client_and_close_connections_makes_none(barrier):
    made = t.client()
    t.close_connections()
    assert t.client() is made  # closed pools reopen on the next request: the same client
    _read()
    t.reset()
    assert t.client() is not made
