"""The tool catalogue, the one source of every tool's and endpoint's facts: name, surface, request
and response models, the domain function it calls, its DynamoDB actions, idempotency, and the
description an LLM reads.

The MCP bridge (tool list and input schemas) and ToolApp read it at run time; ``make generate``
(infra/relaynet_local/generate.py) writes the handler files, template.yaml's function blocks,
docs/openapi.json and the SDK's tables from it. Names are protocol (PROTOCOL.md 1) and never drift.
"""

from __future__ import annotations

import importlib
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Type

if TYPE_CHECKING:
    from pydantic import BaseModel

    from relaynet.models.common import Request

HOW_TO_ACT = (
    "Only tool calls reach other agents: your plain text output is seen by no one on the network."
)
CLAIMS_ARE_COORDINATION = (
    "Claims are coordination, not permission: holding one does not make a change right, and you "
    "never work on a scope another instance holds."
)


@dataclass(frozen=True)
class Operation:
    """What one Lambda behind API Gateway does, declared once: :mod:`relaynet.generate` writes its
    handler file (functions/<name>.py), its template.yaml function, log group and policy, its
    OpenAPI operation and the SDK's tables from this entry (``make generate``).

    - ``name``: the protocol's tool or endpoint name (PROTOCOL.md 1): the operationId, the handler
      file's stem and, split on ``_`` and capitalised, the logical id (``NetworkAskFunction``).
    - ``surface``: ``"worker"`` | ``"plugin"`` | ``"control"``: which tokens may call it, and the
      module of ``relaynet.models`` its request model lives in.
    - ``model_name``: the JSON body's pydantic model in ``relaynet.models.<surface>`` (None: no body).
    - ``response``: the 200 body's pydantic model in ``relaynet.models.results.<surface>``.
    - ``call``: the dotted path of the domain function the handler calls (a rename in the domain
      is one edit here), and ``args`` how the call is made: each a Python expression over
      ``caller`` (the authenticated :class:`relaynet.identity.Principal`), ``request`` (the
      validated body) and dotted ``relaynet.`` names (imported by the handler), optionally
      ``keyword=expression``. Default: ``(caller, request)``.
    - ``actions``: the DynamoDB item actions (``"GetItem"``, ...) its IAM policy allows, exactly;
      relaynet.store.table refuses any other while the handler runs (tests/test_policies.py).
    - ``idempotent``: it accepts an ``Idempotency-Key`` (PROTOCOL.md 2: creating writes), and then
      ``actions`` must include :data:`relaynet.store.table.IDEMPOTENCY_ACTIONS`;
      ``idempotent_when`` narrows it to requests where that condition over ``request`` holds.
    """

    name: str
    surface: str  # "worker" | "plugin" | "control"
    model_name: str | None
    description: str
    _: KW_ONLY
    response: str
    call: str
    actions: tuple[str, ...]
    args: tuple[str, ...] = ("caller", "request")
    idempotent: bool = False
    idempotent_when: str | None = None

    @property
    def model(self) -> Type[Request] | None:
        """The request model (pydantic), from ``relaynet.models.<surface>``; None: no body."""
        if self.model_name is None:
            return None
        return getattr(importlib.import_module(f"relaynet.models.{self.surface}"), self.model_name)

    @property
    def response_model(self) -> Type[BaseModel]:
        """The 200 body's model (pydantic), from ``relaynet.models.results.<surface>``; handlers
        never import it (it types the OpenAPI document and the tests check every answer)."""
        return getattr(importlib.import_module(f"relaynet.models.results.{self.surface}"), self.response)


@dataclass(frozen=True)
class Tool(Operation):
    """A tool of one surface: ``POST /v1/tools/<name>`` with ``model`` as the JSON body.

    ``model_name`` names the request model in ``relaynet.models.<surface>``; :attr:`model`
    imports it on first use, so a Lambda loads only its own surface's models (cold start).
    """

    method = "POST"

    @property
    def path(self) -> str:
        """The HTTP route, e.g. ``/v1/tools/network_ask``."""
        return f"/v1/tools/{self.name}"


WORKER_TOOLS: tuple[Tool, ...] = (
    Tool("network_whoami", "worker", "WhoamiRequest",
         "Who am I on this Relaynet network: your instance id, your agent definition (name, "
         "operator-set capabilities, groups, responsibilities) and the network. Call it first. "
         + HOW_TO_ACT,
         response="NetworkWhoamiResult", call="relaynet.directory.whoami", args=("caller",),
         actions=("BatchGetItem", "UpdateItem")),
    Tool("network_discover", "worker", "DiscoverRequest",
         "List the agents, their live instances and capabilities, groups, resources and recent "
         "tasks. Pass resourceKey and/or action (e.g. action='review') to get ranked candidates "
         "who are responsible for that work, before you delegate or ask.",
         response="NetworkDiscoverResult", call="relaynet.directory.discover",
         args=("caller", "request", "relaynet.tasks.recent(caller.network_id)"),
         actions=("Query", "UpdateItem")),
    Tool("network_ask", "worker", "AskRequest",
         "Send a message (an ask) to another agent (toAgent: an agent name, or a group slug to "
         "reach every member but your own agent) or a specific instance (toInstance); continue a "
         "conversation with threadId. Returns the threadId the answer will come back on; the "
         "answer arrives in network_inbox. Unknown names are 404 and nothing is sent. "
         + HOW_TO_ACT,
         response="NetworkAskResult", call="relaynet.messaging.ask",
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
    Tool("network_inbox", "worker", "InboxRequest",
         "Fetch your new messages (asks, replies, task offers, task updates, channel turns), oldest "
         "first, at most 100; more=true means call again. Each message is handed to exactly one "
         "instance of your agent, once, and carries instructions naming the tool to act with; "
         "follow them. Check it whenever you finish a step and before you stop. " + HOW_TO_ACT,
         response="NetworkInboxResult", call="relaynet.messaging.inbox", args=("caller",),
         actions=("Query", "BatchGetItem", "UpdateItem", "DeleteItem", "PutItem")),
    Tool("network_reply", "worker", "ReplyRequest",
         "Reply in a thread you take part in; the reply goes to the participant who last wrote to "
         "it (403 if your agent is not a participant). Use this to answer an ask from your inbox. "
         + HOW_TO_ACT,
         response="NetworkReplyResult", call="relaynet.messaging.reply",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"), idempotent=True),
    Tool("network_delegate", "worker", "DelegateRequest",
         "Hand work to another agent as a task with an objective and acceptance criteria (never "
         "as a chat message). Target an agent or group (toAgent), an instance (toInstance), or "
         "only a resource to route it to whoever is responsible. You get task_update messages in "
         "your inbox as it progresses. " + HOW_TO_ACT,
         response="NetworkDelegateResult", call="relaynet.tasks.delegate",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"), idempotent=True),
    Tool("network_task_get", "worker", "TaskGetRequest",
         "Read one task in full: state, assignee, acceptance criteria, history, progress, "
         "artifacts and active claims.",
         response="NetworkTaskGetResult", call="relaynet.tasks.get",
         args=("caller", "request", "relaynet.claims.active_for_task"),
         actions=("BatchGetItem", "Query", "UpdateItem")),
    Tool("network_task_update", "worker", "TaskUpdateRequest",
         "Move a task through its life: accept an offer (status=accepted) before doing any work, "
         "and only then work; then report working, blocked (reason required), completed (reason = "
         "the evidence) or failed (reason required). The creator may cancel. Illegal moves answer "
         "409 with the allowed states. The creator learns only what you report here. " + HOW_TO_ACT,
         response="NetworkTaskUpdateResult", call="relaynet.tasks.update",
         args=("caller", "request", "on_terminal=relaynet.claims.release_for_task"),
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")),
    Tool("network_claim", "worker", "ClaimRequest",
         "Take an exclusive, time-limited claim on files (a glob such as 'src/api/**'), a task key "
         "or a resource before you change them; claiming the same scope again renews it. A 409 "
         "names the holder: then work elsewhere or ask them. " + CLAIMS_ARE_COORDINATION,
         response="NetworkClaimResult", call="relaynet.claims.claim",
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")),
    Tool("network_release", "worker", "ReleaseRequest",
         "Release a claim you hold as soon as you are done with the scope, so others may take it. "
         + CLAIMS_ARE_COORDINATION,
         response="NetworkReleaseResult", call="relaynet.claims.release",
         actions=("GetItem", "PutItem", "UpdateItem", "DeleteItem")),
    Tool("network_publish_artifact", "worker", "PublishArtifactRequest",
         "Record something you produced (pull request, commit, test report, document, file) by "
         "URI, optionally attached to a task so its creator sees it.",
         response="NetworkPublishArtifactResult", call="relaynet.artifacts.publish",
         actions=("GetItem", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"), idempotent=True),
    Tool("network_register_capabilities", "worker", "RegisterCapabilitiesRequest",
         "Declare what this instance can do (replaces your previous declaration; [] clears it). "
         "Peers see it in network_discover.",
         response="NetworkRegisterCapabilitiesResult", call="relaynet.directory.register_capabilities",
         actions=("UpdateItem",)),
)

# The plugin surface (PROTOCOL.md 5) and the control surface (PROTOCOL.md 6) add their tuples here.
PLUGIN_TOOLS: tuple[Tool, ...] = (
    Tool("delegate", "plugin", "ConsultRequest",
         "Consult another agent once and wait for its answer: opens a consulting channel with "
         "target, posts your prompt, and returns the reply text (or null if it has not come within "
         "the timeout; then check channels info). For real work with acceptance criteria use "
         "network_delegate instead. " + HOW_TO_ACT,
         response="DelegateResult", call="relaynet.plugin_tools.consult.delegate",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
    Tool("peers", "plugin", "PeersRequest",
         "Find other agents (action='find': filter by query over their summary or a capability id; "
         "sort_by name, cost or track_record) or read one in full (action='describe', name=...: "
         "passport, resume with observed track record, and its SKILL.md).",
         response="PeersResult", call="relaynet.plugin_tools.peers.peers_tool",
         actions=("GetItem", "Query", "UpdateItem")),
    Tool("channels", "plugin", "ChannelsRequest",
         "Structured conversations with turn-taking: action='open' (type conversation | discussion | "
         "consulting | workflow, target name or names, optional first message), 'list' your "
         "channels, 'info' (whose turn it is, your_tools, the last 20 envelopes), 'close'. "
         "New envelopes reach you through network_inbox.",
         response="ChannelsResult", call="relaynet.plugin_tools.channels.channels_tool",
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True, idempotent_when='request.action == "open"'),
    Tool("tasks", "plugin", "TasksRequest",
         "Work on the hub's tasks: action='progress' (report progress on a task assigned to you), "
         "'complete' (result = the evidence), 'list' (yours or all), 'status', 'wait' (until it "
         "finishes or timeout), 'cancel' (a task you created).",
         response="TasksResult", call="relaynet.plugin_tools.tasks.tasks_tool",
         args=("caller", "request", "on_terminal=relaynet.claims.release_for_task"),
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")),
    Tool("context", "plugin", "ContextRequest",
         "Look things up: action='search' (query over messages in your channels, or "
         "scope='knowledge' for the network's tasks and artifacts) or action='quote' (a speaker's "
         "last recent_n texts in a channel or thread you can see).",
         response="ContextResult", call="relaynet.plugin_tools.context.context_tool",
         actions=("GetItem", "Query", "UpdateItem")),
    Tool("say", "plugin", "SayRequest",
         "Post text in a conversation, discussion or consulting channel when it is your turn "
         "(channels info shows your_tools). Out of turn is refused with not_your_turn. " + HOW_TO_ACT,
         response="SayResult", call="relaynet.plugin_tools.channels.say",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
    Tool("handoff", "plugin", "HandoffRequest",
         "Take your turn in a workflow channel: optional content, context variables to set, then "
         "finish (a summary; closes the workflow with reason) or target (who speaks next) or let "
         "the workflow graph decide (tool names the routing tool you called).",
         response="HandoffResult", call="relaynet.plugin_tools.channels.handoff",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
)
CONTROL_TOOLS: tuple[Tool, ...] = (
    Tool("control_whoami", "control", "NoArgs",
         "Who you are as a representative: your grants per network and the active network.",
         response="ControlWhoamiResult", call="relaynet.control.grants.whoami", args=("caller",),
         actions=("GetItem", "BatchGetItem")),
    Tool("control_list_networks", "control", "ListNetworksRequest",
         "The networks you hold grants on, with the grant level of each (limit default 50; pass "
         "nextCursor as cursor for the next page).",
         response="ControlListNetworksResult", call="relaynet.control.grants.list_networks",
         args=("caller", "request.limit", "request.cursor"),
         actions=("GetItem", "BatchGetItem")),
    Tool("control_use_network", "control", "UseNetworkRequest",
         "Make a network your active one; later calls without networkId act on it (needs observe).",
         response="ControlUseNetworkResult", call="relaynet.control.grants.use_network",
         args=("caller", "request.networkId"),
         actions=("GetItem", "UpdateItem")),
    Tool("control_network_status", "control", "NoArgs",
         "Counts for the network (agents, instances by availability, tasks by state, active claims, open "
         "channels), plus the live claims (holder, scope, expiresAt) and open channels (type, whose turn).",
         response="ControlNetworkStatusResult", call="relaynet.control.observe.network_status",
         args=("caller", "request.networkId"),
         actions=("GetItem", "BatchGetItem", "Query")),
    Tool("control_list_agents", "control", "ListAgentsRequest",
         "Every agent definition with its instances and their availability, by name (limit default "
         "50; pass nextCursor as cursor for the next page).",
         response="ControlListAgentsResult", call="relaynet.control.observe.list_agents",
         args=("caller", "request.networkId", "request.limit", "request.cursor"),
         actions=("GetItem", "Query")),
    Tool("control_find_agents", "control", "FindAgentsRequest",
         "Rank the agents responsible for a resource and/or action, as network_discover does.",
         response="ControlFindAgentsResult", call="relaynet.control.observe.find_agents",
         args=("caller", "request.networkId", "request.resourceKey", "request.action"),
         actions=("GetItem", "Query")),
    Tool("control_list_tasks", "control", "ListTasksRequest",
         "Tasks of the network, newest first, optionally of one status.",
         response="ControlListTasksResult", call="relaynet.control.tasks.list_tasks",
         args=("caller", "request.networkId", "request.status", "request.limit", "request.cursor"),
         actions=("GetItem", "Query")),
    Tool("control_task_status", "control", "TaskRequest",
         "One task in full: history, progress, artifacts and claims.",
         response="ControlTaskStatusResult", call="relaynet.control.tasks.task_status",
         args=("caller", "request.networkId", "request.taskId"),
         actions=("GetItem", "BatchGetItem", "Query")),
    Tool("control_list_blocked", "control", "NoArgs",
         "What is stuck: blocked tasks, pending tasks nobody is eligible for, offline instances holding tasks.",
         response="ControlListBlockedResult", call="relaynet.control.observe.list_blocked",
         args=("caller", "request.networkId"),
         actions=("GetItem", "Query")),
    Tool("control_get_history", "control", "HistoryRequest",
         "Recent events of the network (messages, task transitions, claims, channel events), newest first.",
         response="ControlGetHistoryResult", call="relaynet.control.observe.history",
         args=("caller", "request.networkId", "request.limit", "request.cursor"),
         actions=("GetItem", "Query")),
    Tool("control_get_thread", "control", "ThreadRequest",
         "A thread with all its messages.",
         response="ControlGetThreadResult", call="relaynet.control.messages.get_thread",
         args=("caller", "request.networkId", "request.threadId"),
         actions=("GetItem", "Query")),
    Tool("control_get_graph", "control", "NoArgs",
         "The network as a graph {nodes, edges}: agents, instances, groups, resources; delegations, asks, claims, membership.",
         response="ControlGetGraphResult", call="relaynet.control.graph.graph",
         args=("caller", "request.networkId"),
         actions=("GetItem", "BatchGetItem", "Query")),
    Tool("control_ask", "control", "ControlAskRequest",
         "Send an ask to an agent, group or instance as the representative (needs communicate).",
         response="ControlAskResult", call="relaynet.control.messages.ask",
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
    Tool("control_reply", "control", "ControlReplyRequest",
         "Reply in a thread as the representative (needs communicate).",
         response="ControlReplyResult", call="relaynet.control.messages.reply",
         actions=("GetItem", "Query", "PutItem", "UpdateItem")),
    Tool("control_delegate", "control", "ControlDelegateRequest",
         "Create a task for an agent, group, instance or resource on your owner's behalf (needs delegate).",
         response="ControlDelegateResult", call="relaynet.control.tasks.delegate",
         actions=("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"),
         idempotent=True),
    Tool("control_wake_agent", "control", "WakeRequest",
         "Nudge an agent or instance with a notice in its inbox, and a wake event to its push "
         "endpoint if it has one (needs operate).",
         response="ControlWakeAgentResult", call="relaynet.control.messages.wake",
         actions=("GetItem", "PutItem")),
    Tool("control_launch_agent", "control", "LaunchRequest",
         "Register a new instance of an agent and get its token, shown once (needs operate).",
         response="ControlLaunchAgentResult", call="relaynet.control.instances.launch_agent",
         args=("caller", "request.networkId", "request.agentName"),
         actions=("GetItem", "PutItem", "ConditionCheckItem")),
    Tool("control_stop_agent", "control", "TwoStepRequest",
         "Stop an instance in two steps: first call returns a confirmationId (valid 5 minutes); call again with it to revoke the token, release its claims and requeue its tasks (needs operate).",
         response="ControlStopAgentResult", call="relaynet.control.instances.stop_agent",
         args=("caller", "request.networkId", "request.instanceId", "request.confirmationId"),
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")),
    Tool("control_restart_agent", "control", "TwoStepRequest",
         "Restart an instance in two steps (confirmationId as for stop): rotates its token (the new one is shown once) and clears stopped (needs operate).",
         response="ControlRestartAgentResult", call="relaynet.control.instances.restart_agent",
         args=("caller", "request.networkId", "request.instanceId", "request.confirmationId"),
         actions=("GetItem", "PutItem", "UpdateItem", "DeleteItem")),
    Tool("control_release_claim", "control", "ReleaseClaimRequest",
         "Release any claim of the network, e.g. one held by a stuck instance (needs operate).",
         response="ControlReleaseClaimResult", call="relaynet.control.claims.release_claim",
         args=("caller", "request.networkId", "request.claimId"),
         actions=("GetItem", "PutItem", "DeleteItem")),
    Tool("control_cancel_task", "control", "CancelTaskRequest",
         "Cancel a non-terminal task (needs delegate).",
         response="ControlCancelTaskResult", call="relaynet.control.tasks.cancel_task",
         args=("caller", "request.networkId", "request.taskId", "request.reason"),
         actions=("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")),
    Tool("control_channel_send", "control", "ChannelSendRequest",
         "Post a message into your conversation with your owner.",
         response="ControlChannelSendResult", call="relaynet.control.conversation.channel_send",
         args=("caller", "request.body", "request.conversationId"),
         actions=("PutItem",)),
    Tool("control_channel_history", "control", "ChannelHistoryRequest",
         "Read your conversation with your owner, oldest first.",
         response="ControlChannelHistoryResult", call="relaynet.control.conversation.channel_history",
         args=("caller", "request.conversationId", "request.limit", "request.cursor"),
         actions=("GetItem", "Query")),
)

TOOLS: dict[str, Tool] = {t.name: t for t in (*WORKER_TOOLS, *PLUGIN_TOOLS, *CONTROL_TOOLS)}


@dataclass(frozen=True)
class Endpoint(Operation):
    """An HTTP endpoint beside the tools, never an MCP tool (the tool surfaces are fixed,
    PROTOCOL.md 1): ``method path`` with operationId ``name``, for tokens of ``surface``.
    ``query_name`` names the model of its query string in ``relaynet.models.<surface>`` (None:
    it takes none); ``args`` then name the parsed query ``query``."""

    _: KW_ONLY
    method: str
    path: str
    query_name: str | None = None

    @property
    def query_model(self) -> Type[BaseModel] | None:
        """The query string's model (pydantic), from ``relaynet.models.<surface>``; None: none."""
        if self.query_name is None:
            return None
        return getattr(importlib.import_module(f"relaynet.models.{self.surface}"), self.query_name)


#: The endpoints for clients that are not an LLM choosing tools: hooks, webhook set-up.
ENDPOINTS: dict[str, Endpoint] = {e.name: e for e in (
    Endpoint("inbox_summary", "worker", None, method="GET", path="/v1/inbox/summary",
             description="Count your undelivered messages by kind, and the oldest one's createdAt, without "
             "delivering anything (network_inbox delivers). One DynamoDB request: cheap enough for "
             "a hook to call before every prompt.",
             response="InboxSummaryResult", call="relaynet.mailbox.summary", args=("caller",),
             actions=("Query", "UpdateItem")),
    Endpoint("inbox_wait", "worker", None, method="GET", path="/v1/inbox/wait", query_name="InboxWaitQuery",
             description="Wait until a message is undelivered for you, then answer the inbox summary "
             "(as GET /v1/inbox/summary); at timeout seconds (at most MaxWaitSeconds) answer it as "
             "it is, undelivered 0. Delivers nothing: call network_inbox next. A long poll for "
             "clients that can hold neither an event stream nor a webhook.",
             response="InboxSummaryResult", call="relaynet.mailbox.wait", args=("caller", "query.timeout"),
             actions=("Query", "UpdateItem")),
    Endpoint("claims_check", "worker", "ClaimsCheckRequest", method="POST", path="/v1/claims/check",
             description="Which of these paths (relative to the repository's top level; at most 1,000) are "
             "covered by another instance's live path claim: holder, scope, expiresAt and taskId per "
             "path. Writes nothing; your own claims never conflict. For commit guards and edit hooks.",
             response="ClaimsCheckResult", call="relaynet.claims.check",
             actions=("BatchGetItem", "Query", "UpdateItem")),  # UpdateItem: the caller's presence (PROTOCOL.md 3), no claim
    Endpoint("push_config_set", "worker", "PushConfigRequest", method="PUT", path="/v1/push",
             description="Set this instance's push endpoint (A2A's push-notification config: url, token, "
             "authentication): the hub POSTs a signed event there when mail, a task offer or a "
             "wake-up arrives for it. Replaces the previous one; overrides its agent definition's.",
             response="PushConfigSetResult", call="relaynet.push.set_config",
             actions=("UpdateItem",)),
    Endpoint("supervisor_state_set", "worker", "SupervisorStateRequest", method="PUT", path="/v1/supervisor",
             description="Report the run state of this instance's supervisor (relaynet worker): idle, running, "
             "stopping or stopped, active and started runs, the last run's exit. Sent at each change and "
             "every 60 s; control_list_agents shows it, as lost once 180 s pass without a report.",
             response="SupervisorStateSetResult", call="relaynet.supervision.set_state",
             actions=("UpdateItem",)),
    Endpoint("push_config_delete", "worker", None, method="DELETE", path="/v1/push",
             description="Remove this instance's own push endpoint (its agent definition's, if any, applies again).",
             response="PushConfigDeleteResult", call="relaynet.push.delete_config", args=("caller",),
             actions=("UpdateItem",)),
)}


def surface(name: str) -> tuple[Tool, ...]:
    """The tools of one surface, in catalogue order."""
    return tuple(t for t in TOOLS.values() if t.surface == name)
