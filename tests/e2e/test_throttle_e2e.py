"""Stage throttling (template.yaml ``DefaultRouteSettings``), as the local stack enforces it over
real HTTP: a burst over the limit is 429 ``rate_limited`` with ``Retry-After`` and reaches no
handler; the bucket refills at the rate."""

from __future__ import annotations

import time

import httpx

from relaynet_local.template import load_template
from relaynet_local.throttle import RouteThrottle
from tests.conftest import TEMPLATE
from tests.e2e.conftest import start_hub, stop_hub


def test_the_local_stack_reads_the_templates_limits():
    throttle = RouteThrottle.from_template(load_template(TEMPLATE), environ={})
    params = load_template(TEMPLATE).parameters()
    assert (throttle.burst, throttle.rate) == (params["ThrottleBurstLimit"], params["ThrottleRateLimit"])
    assert RouteThrottle.from_template(load_template(TEMPLATE), {"RELAYNET_THROTTLE_BURST": "7"}).burst == 7


def test_a_burst_over_the_limit_is_429_and_writes_nothing(tmp_path):
    hub = start_hub(tmp_path, env={"RELAYNET_THROTTLE_BURST": "4", "RELAYNET_THROTTLE_RATE": "1"})
    try:
        planner, reviewer = hub.token("planner"), hub.token("reviewer")
        with httpx.Client(base_url=hub.url, timeout=30) as http:
            answers = [http.post("/v1/tools/network_ask", headers={"Authorization": f"Bearer {planner}"},
                                 json={"toAgent": "reviewer", "body": f"ping {n}"}) for n in range(8)]
            codes = [r.status_code for r in answers]
            assert codes.count(200) >= 4 and 429 in codes, codes
            refused = next(r for r in answers if r.status_code == 429)
            assert refused.json()["error"]["code"] == "rate_limited" and int(refused.headers["Retry-After"]) >= 1
            # another route has its own bucket: the inbox answers, holding only the admitted asks
            got = http.post("/v1/tools/network_inbox", headers={"Authorization": f"Bearer {reviewer}"}, json={})
            assert got.status_code == 200
            assert sorted(m["body"] for m in got.json()["messages"]) == sorted(
                f"ping {n}" for n, r in enumerate(answers) if r.status_code == 200)
            time.sleep(float(refused.headers["Retry-After"]) + 0.2)  # refilled at 1 per second
            again = http.post("/v1/tools/network_ask", headers={"Authorization": f"Bearer {planner}"},
                              json={"toAgent": "reviewer", "body": "later"})
            assert again.status_code == 200
    finally:
        stop_hub(hub)
