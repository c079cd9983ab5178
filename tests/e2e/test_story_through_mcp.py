"""The first working Relaynet, as agents see it: a planner, two coder instances and a reviewer
coordinate through the MCP bridge (`relaynet mcp worker`, one bridge process per instance,
driven by the official `mcp` client) against `relaynet serve` on a free port."""

from __future__ import annotations

import json
import os
from contextlib import AsyncExitStack

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.e2e.conftest import RELAYNET

pytestmark = pytest.mark.e2e


async def _open(stack: AsyncExitStack, url: str, token: str) -> ClientSession:
    params = StdioServerParameters(command=RELAYNET, args=["mcp", "worker"],
                                   env={"RELAYNET_URL": url, "RELAYNET_TOKEN": token, "PATH": os.environ["PATH"]})
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def _call(session: ClientSession, tool: str, **args):
    result = await session.call_tool(tool, args)
    text = result.content[0].text
    return (json.loads(text) if not result.is_error else text), result.is_error


async def _ok(session: ClientSession, tool: str, **args) -> dict:
    out, err = await _call(session, tool, **args)
    assert not err, f"{tool}: {out}"
    return out


def test_planner_delegates_a_coder_claims_and_completes_and_the_reviewers_answer(hub):
    async def story():
        async with AsyncExitStack() as stack:
            planner = await _open(stack, hub.url, hub.token("planner"))
            coders = [await _open(stack, hub.url, hub.token("coder", n)) for n in (0, 1)]
            reviewer = await _open(stack, hub.url, hub.token("reviewer"))

            tools = await planner.list_tools()
            assert len(tools.tools) == 12

            # Everyone learns who they are and declares what this instance can do.
            for n, coder in enumerate(coders):
                me = await _ok(coder, "network_whoami")
                assert me["agent"]["name"] == "coder" and me["instance"]["id"] == hub.instance("coder", n)
                await _ok(coder, "network_register_capabilities", capabilities=[{"id": "python", "name": "Python 3"}])
            assert (await _ok(planner, "network_whoami"))["agent"]["name"] == "planner"
            await _ok(planner, "network_register_capabilities", capabilities=[{"id": "triage", "name": "Triage"}])

            # The planner finds coders for the resource and delegates to the agent.
            found = await _ok(planner, "network_discover", resourceKey="https://github.com/acme/api.git", action="implement")
            assert found["candidates"][0]["agent"] == "coder"
            task = await _ok(planner, "network_delegate", toAgent="coder", title="Add /health",
                             objective="Add a GET /health endpoint to the API", acceptanceCriteria=["returns 200", "has a test"])
            assert task["state"] == "offered"

            # Exactly one coder instance gets the offer.
            inboxes = [await _ok(c, "network_inbox") for c in coders]
            offers = [(n, m) for n, box in enumerate(inboxes) for m in box["messages"] if m["kind"] == "task_offer"]
            assert len(offers) == 1
            n, offer = offers[0]
            assert offer["taskId"] == task["taskId"] and "network_task_update" in offer["instructions"]
            me, other = coders[n], coders[1 - n]

            await _ok(me, "network_task_update", taskId=task["taskId"], status="accepted")
            await _ok(me, "network_task_update", taskId=task["taskId"], status="working")
            claim = await _ok(me, "network_claim", scope="src/api/**", taskId=task["taskId"])

            refused, is_error = await _call(other, "network_claim", scope="src/api/handlers.py")
            assert is_error and "claim_conflict" in refused and hub.instance("coder", n) in refused

            art = await _ok(me, "network_publish_artifact", uri="https://ci.example.com/runs/42", type="test_report",
                            label="CI run 42", taskId=task["taskId"])
            await _ok(me, "network_task_update", taskId=task["taskId"], status="completed",
                      reason="GET /health returns 200; tests/test_health.py passes (CI run 42)")
            released = await _ok(me, "network_release", claimId=claim["claimId"])
            assert released["claimId"] == claim["claimId"]

            # The planner sees the completion and the full record.
            notices = (await _ok(planner, "network_inbox"))["messages"]
            assert [m["kind"] for m in notices] == ["task_update"] * 3
            assert "completed" in notices[-1]["body"]
            record = (await _ok(planner, "network_task_get", taskId=task["taskId"]))["task"]
            assert [h["state"] for h in record["history"]] == ["pending", "offered", "accepted", "working", "completed"]
            assert [a["artifactId"] for a in record["artifacts"]] == [art["artifactId"]]
            assert record["claims"] == []

            # An ask to the reviewers group and its reply round-trip.
            asked = await _ok(planner, "network_ask", toAgent="reviewers", subject="Review /health",
                              body="Please review the /health change")
            assert asked["recipients"] == [{"agent": "reviewer"}]
            got = (await _ok(reviewer, "network_inbox"))["messages"]
            assert [m["threadId"] for m in got] == [asked["threadId"]] and "network_reply" in got[0]["instructions"]
            await _ok(reviewer, "network_reply", threadId=asked["threadId"], body="Approved")
            answer = (await _ok(planner, "network_inbox"))["messages"]
            assert [(m["kind"], m["body"]) for m in answer] == [("reply", "Approved")]

    anyio.run(story)


def test_a_bad_token_surfaces_as_a_tool_error_not_a_crash(hub):
    async def run():
        async with AsyncExitStack() as stack:
            session = await _open(stack, hub.url, "rn_inst_" + "x" * 43)
            out, is_error = await _call(session, "network_whoami")
            assert is_error and "unauthenticated" in out

    anyio.run(run)
