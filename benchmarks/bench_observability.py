"""What observability costs a tool call (relaynet.observability): the Lambda-level wrapping
(inject_lambda_context, the one metrics flush, the per-request keys and the one "request" log line) around
a handler that does nothing, and a call that also counts one EMF metric. Not a test.

Run: ``.venv/bin/python benchmarks/bench_observability.py [--calls 5000]``.

Log lines go to an in-memory stream (in Lambda they go to stdout, which the runtime ships to
CloudWatch), EMF records to /dev/null; metrics are on, tracing off (as in Lambda without the
X-Ray SDK's subsegments). Prints microseconds per call (median of 5 rounds) for: the bare
handler, instrumented at WARNING (no request line), instrumented at INFO (the deployed default),
and instrumented at INFO counting one metric (one EMF record flushed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "infra"))
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "relaynet")
os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)

from relaynet import observability  # noqa: E402
from relaynet_local.lambdas import LambdaContext  # noqa: E402


def per_call_us(fn, calls: int) -> float:
    event = {"requestContext": {"requestId": "0123456789abcdef"}}
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            fn(event, LambdaContext("NetworkWhoamiFunction", 29.0, 512))
        rounds.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    observability.logger.registered_handler.setStream(io.StringIO())

    def bare(event, context):
        return {"statusCode": 200}

    def counting(event, context):
        observability.count("ClaimConflict")
        return {"statusCode": 409}

    rows = [("bare handler", bare, None)]
    rows.append(("instrumented, WARNING", observability.instrument(bare, name="network_whoami", source="http"), "WARNING"))
    rows.append(("instrumented, INFO", observability.instrument(bare, name="network_whoami", source="http"), "INFO"))
    rows.append(("INFO + one metric", observability.instrument(counting, name="network_claim", source="http"), "INFO"))
    print(f"{'case':<24} {'us/call':>9}")
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        results = []
        for name, fn, level in rows:
            if level:
                logging.getLogger(observability.logger.name).setLevel(level)
            results.append((name, per_call_us(fn, args.calls)))
    for name, us in results:
        print(f"{name:<24} {us:>9.1f}")


if __name__ == "__main__":
    main()
