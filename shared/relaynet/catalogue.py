"""The tool catalogue: every tool's name, surface, argument model and the description an LLM reads.

One source for the handlers (OpenAPI summaries), the MCP bridge (tool list and input schemas)
and the SDK. Names are protocol (PROTOCOL.md 1) and never drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Type

from relaynet.models import worker as w
from relaynet.models.common import Request

HOW_TO_ACT = (
    "Only tool calls reach other agents: your plain text output is seen by no one on the network."
)
CLAIMS_ARE_COORDINATION = (
    "Claims are coordination, not permission: never edit a scope another instance holds, and "
    "claim before you edit."
)


@dataclass(frozen=True)
class Tool:
    """A tool of one surface: ``POST /v1/tools/<name>`` with ``model`` as the JSON body."""

    name: str
    surface: str  # "worker" | "plugin" | "control"
    model: Type[Request]
    description: str

    @property
    def path(self) -> str:
        """The HTTP route, e.g. ``/v1/tools/network_ask``."""
        return f"/v1/tools/{self.name}"


WORKER_TOOLS: tuple[Tool, ...] = (
    Tool("network_whoami", "worker", w.WhoamiRequest,
         "Who am I on this Relaynet network: your instance id, your agent definition (name, "
         "operator-set capabilities, groups, responsibilities) and the network. Call it first."),
    Tool("network_discover", "worker", w.DiscoverRequest,
         "List the agents, their live instances and capabilities, groups, resources and recent "
         "tasks. Pass resourceKey and/or action (e.g. action='review') to get ranked candidates "
         "who are responsible for that work, before you delegate or ask."),
    Tool("network_ask", "worker", w.AskRequest,
         "Send a message (an ask) to another agent (toAgent, by name or group slug) or a specific "
         "instance (toInstance); continue a conversation with threadId. Returns the threadId the "
         "answer will come back on. " + HOW_TO_ACT),
    Tool("network_inbox", "worker", w.InboxRequest,
         "Fetch your new messages (asks, replies, task offers, task updates, channel turns), oldest "
         "first, at most 100; more=true means call again. Each message is handed to you once and "
         "carries instructions on which tool to answer with. Check it whenever you finish a step."),
    Tool("network_reply", "worker", w.ReplyRequest,
         "Reply in a thread you take part in; the reply goes to the participant who last wrote to "
         "it. Use this to answer an ask from your inbox. " + HOW_TO_ACT),
    Tool("network_delegate", "worker", w.DelegateRequest,
         "Hand work to another agent as a task with an objective and acceptance criteria (never "
         "as a chat message). Target an agent or group (toAgent), an instance (toInstance), or "
         "only a resource to route it to whoever is responsible. You get task_update messages in "
         "your inbox as it progresses."),
    Tool("network_task_get", "worker", w.TaskGetRequest,
         "Read one task in full: state, assignee, acceptance criteria, history, progress, "
         "artifacts and active claims."),
    Tool("network_task_update", "worker", w.TaskUpdateRequest,
         "Move a task through its life: accept an offer (status=accepted) before doing any work, "
         "then working, blocked (reason required), completed (reason = the evidence) or failed "
         "(reason required). The creator may cancel. Illegal moves answer 409 with the allowed states."),
    Tool("network_claim", "worker", w.ClaimRequest,
         "Take an exclusive, time-limited claim on files (a glob such as 'src/api/**'), a task key "
         "or a resource before you change them; claiming the same scope again renews it. A 409 "
         "names the holder: then work elsewhere or ask them. " + CLAIMS_ARE_COORDINATION),
    Tool("network_release", "worker", w.ReleaseRequest,
         "Release a claim you hold as soon as you are done with the scope, so others may take it."),
    Tool("network_publish_artifact", "worker", w.PublishArtifactRequest,
         "Record something you produced (pull request, commit, test report, document, file) by "
         "URI, optionally attached to a task so its creator sees it."),
    Tool("network_register_capabilities", "worker", w.RegisterCapabilitiesRequest,
         "Declare what this instance can do (replaces your previous declaration; [] clears it). "
         "Peers see it in network_discover."),
)

# The plugin surface (PROTOCOL.md 5) and the control surface (PROTOCOL.md 6) add their tuples here.
PLUGIN_TOOLS: tuple[Tool, ...] = ()
CONTROL_TOOLS: tuple[Tool, ...] = ()

TOOLS: dict[str, Tool] = {t.name: t for t in (*WORKER_TOOLS, *PLUGIN_TOOLS, *CONTROL_TOOLS)}


def surface(name: str) -> tuple[Tool, ...]:
    """The tools of one surface, in catalogue order."""
    return tuple(t for t in TOOLS.values() if t.surface == name)
