"""A scripted agent for `relaynet worker`'s tests: what a model would do with RELAYNET_PROMPT,
through the SDK. It prints its prompt, reads its inbox, and for each task offer accepts, claims,
publishes an artifact and completes (``SCRIPTED_AGENT=complete``, the default); ``fail`` exits 1
right after accepting; ``hold`` accepts, then completes only once the file named by
``SCRIPTED_AGENT_GO`` exists. Asks are answered with a reply. ``SCRIPTED_AGENT_SAYS`` is printed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from relaynet.client import RelaynetClient


def main() -> int:
    mode = os.environ.get("SCRIPTED_AGENT", "complete")
    print("PROMPT:", os.environ["RELAYNET_PROMPT"], flush=True)
    if os.environ.get("SCRIPTED_AGENT_SAYS"):  # a variable of the launch: entry's env
        print("SAYS:", os.environ["SCRIPTED_AGENT_SAYS"], flush=True)
    with RelaynetClient(os.environ["RELAYNET_URL"], os.environ["RELAYNET_TOKEN"]) as hub:
        for message in hub.inbox()["messages"]:
            print("MAIL:", message["kind"], message.get("taskId"), flush=True)
            if message["kind"] == "ask":
                hub.reply(message["threadId"], "on it")
            if message["kind"] != "task_offer":
                continue
            task = message["taskId"]
            hub.task_update(task, "accepted")
            if mode == "fail":
                print("FAILING after accepting", task, flush=True)
                return 1
            if mode == "hold":
                go = Path(os.environ["SCRIPTED_AGENT_GO"])
                while not go.exists():
                    time.sleep(0.05)
            hub.task_update(task, "working")
            claim = hub.claim(f"work/{task}/**", task_id=task)
            hub.publish_artifact(f"https://artifacts.example.com/{task}/result.txt", label="result", task_id=task)
            hub.release(claim["claimId"])
            hub.task_update(task, "completed", "done: work/<task>/result.txt published")
            print("COMPLETED", task, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
