"""Screenshots of the operator page for the README: docs/ui-desktop.png (1280 wide, the whole
page), docs/ui-phone.png and docs/ui-phone-tasks.png (390 x 844, two screens), from a real `relaynet serve` with a small scene played through the
SDK (tasks in several states, two live claims, two open channels, asks), in headless Chromium.

Usage: python infra/scripts/ui_screenshots.py [OUT_DIR]   (default docs; `make screenshots`)
Needs /usr/bin/chromium (`make chromium`) and the test extra (playwright).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from relaynet.client import RelaynetClient  # noqa: E402
from tests.e2e import browser  # noqa: E402
from tests.e2e.conftest import start_hub, stop_hub  # noqa: E402


def spec() -> str:
    doc = yaml.safe_load((ROOT / "examples" / "demo-network.yaml").read_text())
    doc["agents"].append({"name": "tester", "description": "Runs the acceptance suite", "instances": 0})
    return yaml.safe_dump(doc, sort_keys=False)


def wait_offer(client: RelaynetClient, task_id: str) -> None:
    for _ in range(100):
        if any(m["kind"] == "task_offer" and m.get("taskId") == task_id for m in client.inbox()["messages"]):
            return
        time.sleep(0.1)
    raise RuntimeError(f"no offer of {task_id}")


def scene(hub) -> None:
    """What an operator would find mid-morning: work in progress, a blocked review, a task nobody
    can take yet, claims, a consult and a discussion waiting on someone."""
    planner, coder, coder2, reviewer = (RelaynetClient(hub.url, hub.token(agent, n))
                                        for agent, n in (("planner", 0), ("coder", 0), ("coder", 1), ("reviewer", 0)))
    try:
        done = planner.delegate("Fix the flaky login test", to_instance=hub.instance("coder", 1),
                                acceptance_criteria=["passes 50 runs in a row"])["taskId"]
        for status, reason in (("accepted", None), ("working", None), ("completed", "50/50 green in CI")):
            coder2.task_update(done, status, reason)
        health = planner.delegate("Add a /health endpoint", to_instance=hub.instance("coder"),
                                  acceptance_criteria=["GET /health answers 200", "documented in the README"])["taskId"]
        coder.task_update(health, "accepted")
        coder.task_update(health, "working")
        coder.claim("src/api/health.py", ttl_seconds=1800, task_id=health)
        coder.claim("tests/api/**", ttl_seconds=540, task_id=health)
        review = planner.delegate("Review the retry policy change", to_agent="reviewer")["taskId"]
        reviewer.task_update(review, "accepted")
        reviewer.task_update(review, "working")
        reviewer.task_update(review, "blocked", "waiting for the CI run of #42")
        planner.delegate("Run the acceptance suite on staging", to_agent="tester")
        planner.ask("Can you take the rate-limit bug after /health?", to_agent="coder")
        coder.ask("Is the new retry budget per client or global?", to_agent="planner")
        for body in ({"action": "open", "type": "consulting", "target": "reviewer", "intent": "retry policy",
                      "message": "Is exponential backoff with jitter enough here?"},
                     {"action": "open", "type": "discussion", "target": ["coder", "reviewer"],
                      "intent": "release plan", "message": "What ships in 0.2?"}):
            resp = httpx.post(f"{hub.url}/v1/tools/channels", json=body, timeout=30,
                              headers={"Authorization": f"Bearer {hub.token('planner')}"})
            resp.raise_for_status()
    finally:
        for c in (planner, coder, coder2, reviewer):
            c.close()


def main(out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    why = browser.missing()
    if why:
        raise SystemExit(why)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "spec.yaml").write_text(spec())
        hub = start_hub(Path(tmp), "--sweep-interval", "1", spec=Path(tmp) / "spec.yaml")
        try:
            scene(hub)
            ops = hub.tokens["representatives"]["ops"]
            with sync_playwright() as p:
                b = browser.launch(p)
                for name, viewport in (("ui-desktop.png", {"width": 1280, "height": 800}),
                                       ("ui-phone.png", {"width": 390, "height": 844})):
                    page = b.new_context(viewport=viewport, device_scale_factor=1).new_page()
                    page.goto(f"{hub.url}/v1/ui")
                    page.fill("#token", ops)
                    page.click("#signin-submit")
                    expect(page.locator("#claims [data-claim]")).to_have_count(2, timeout=20_000)
                    expect(page.locator("#channels [data-channel]")).to_have_count(2, timeout=20_000)
                    page.wait_for_timeout(1200)
                    if viewport["width"] > 600:
                        page.screenshot(path=str(out / name), full_page=True)
                        print(out / name)
                        continue
                    page.screenshot(path=str(out / name))  # a phone: the first screen, then the tasks and claims
                    print(out / name)
                    page.locator("#tasks").scroll_into_view_if_needed()
                    page.evaluate("window.scrollTo(0, document.getElementById('tasks').offsetTop - 60)")
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(out / "ui-phone-tasks.png"))
                    print(out / "ui-phone-tasks.png")
                b.close()
        finally:
            stop_hub(hub)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
