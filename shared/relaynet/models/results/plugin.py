"""The plugin surface's results (PROTOCOL.md 5): AG2's snake_case names where AG2 has them."""

from __future__ import annotations

from relaynet.models.results.common import Address, Channel, Entity, Envelope, Participant, Result, Task, TaskTarget


class DelegateResult(Result):
    """delegate: the consulting channel, its state, and the reply text (None: not within the timeout)."""

    channel_id: str
    state: str
    reply: str | None


class Cost(Entity):
    input_per_mtok: float
    output_per_mtok: float


class Peer(Entity):
    name: str
    summary: str
    capabilities: list[str]
    success_rate: float | None
    cost: Cost | None


class Passport(Entity):
    owner: str
    provider: str
    model: str
    cost: Cost | None


class Observed(Entity):
    """The hub's own record of an agent's work (never self-reported)."""

    tasks_total: int
    tasks_completed: int
    tasks_failed: int
    consults_answered: int
    consults_expired: int


class Resume(Entity):
    summary: str
    claimed_capabilities: list[str]
    domains: list[str]
    observed: Observed


class PeersResult(Result):
    """peers: ``find`` answers ``peers`` (+ ``nextCursor``); ``describe`` the passport, resume and SKILL.md."""

    peers: list[Peer] | None = None
    nextCursor: str | None = None
    passport: Passport | None = None
    resume: Resume | None = None
    skill_md: str | None = None


class ChannelsResult(Result):
    """channels: ``open`` answers the new channel's id, type, participants and seed envelope;
    ``list`` ``channels`` (+ ``nextCursor``); ``info`` the channel, whose turn it is, your tools and
    the last envelopes; ``close`` the state and reason."""

    channel_id: str | None = None
    type: str | None = None
    participants: list[Participant] | None = None
    seed_envelope_id: str | None = None
    state: str | None = None
    close_reason: str | None = None
    channels: list[Channel] | None = None
    nextCursor: str | None = None
    channel: Channel | None = None
    next_speaker: str | None = None
    your_tools: list[str] | None = None
    envelopes: list[Envelope] | None = None


class TasksResult(Result):
    """tasks: one ``task`` (progress, complete, status, cancel), ``tasks`` (+ ``nextCursor``) for
    list; ``wait`` answers ``done`` and, once the task is terminal, its summary's fields beside it
    (``id``, ``title``, ``state``, ``creator``, ``target``, ``assignee``, ``resource``,
    ``createdAt``, ``updatedAt``)."""

    task: Task | None = None
    tasks: list[Task] | None = None
    nextCursor: str | None = None
    done: bool | None = None
    id: str | None = None
    title: str | None = None
    state: str | None = None
    creator: Address | None = None
    target: TaskTarget | None = None
    assignee: str | None = None
    resource: str | None = None
    createdAt: str | None = None
    updatedAt: str | None = None


class SearchHit(Entity):
    id: str
    sender: str | None
    when: str
    excerpt: str


class Quote(Entity):
    id: str
    when: str
    text: str


class ContextResult(Result):
    """context: ``search`` answers ``results`` (+ ``nextCursor``), ``quote`` answers ``quotes``."""

    results: list[SearchHit] | None = None
    nextCursor: str | None = None
    quotes: list[Quote] | None = None


class SayResult(Result):
    """say: the envelope posted and the channel's state after it."""

    envelope_id: str
    seq: int
    channel_state: str


class HandoffResult(Result):
    """handoff: the envelope posted, who speaks next (None: finished) and the channel's state."""

    envelope_id: str
    seq: int
    next_speaker: str | None
    channel_state: str


