"""Operator bootstrap: apply a network spec, launch instances (PROTOCOL.md 9).

The admin CLI reaches the table directly with AWS credentials (or the local stack's embedded
store). Applying is idempotent: re-applying the same spec changes nothing and launches nothing
new; it prints the tokens of what it created.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from relaynet import cache, clock, ids
from relaynet.errors import InvalidArgument, NotFound
from relaynet.identity import REPRESENTATIVE_PREFIX, Principal, launch_instance, mint_token, token_item
from relaynet.models.common import NAME_PATTERN
from relaynet.resources import normalise as normalise_resource
from relaynet.store import a2a as a2a_store
from relaynet.store import directory as dir_store
from relaynet.store import networks as store

Grant = Literal["observe", "communicate", "delegate", "operate"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CapabilitySpec(_Spec):
    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    name: str
    description: str = ""


def _resource_key(raw: str) -> str:
    """A resource key that normalises (PROTOCOL.md 3), kept as written (apply normalises it);
    else the normaliser's message, so parse names the field before anything is stored."""
    try:
        normalise_resource(raw)
    except InvalidArgument as exc:
        raise ValueError(exc.details["fields"][0]["message"]) from None
    return raw


ResourceKeySpec = Annotated[str, AfterValidator(_resource_key)]


class ResponsibilitySpec(_Spec):
    resource: Optional[ResourceKeySpec] = None
    actions: list[str] = []
    priority: int = 0


class PushAuthenticationSpec(_Spec):
    schemes: Annotated[list[str], Field(min_length=1, max_length=5)]
    credentials: Optional[str] = None


class PushSpec(_Spec):
    """A definition's push endpoint (docs/protocol.md 10.3): A2A's push-notification config."""

    url: Annotated[str, Field(min_length=1, max_length=2048)]
    token: Annotated[str, Field(min_length=16, max_length=256)]
    authentication: Optional[PushAuthenticationSpec] = None


class A2AMemberSpec(_Spec):
    """A definition's ``a2a:`` entry (docs/protocol.md 13.4, issue 28 part 3): the agent is a remote
    A2A 1.0 agent whose Agent Card is at ``url``; ``authentication`` (A2A's ``AuthenticationInfo``:
    ``Authorization: <schemes[0]> <credentials>``) goes with every request to it. The credentials
    are stored, never shown (relaynet.push_view.public_config)."""

    url: Annotated[str, Field(min_length=1, max_length=2048)]
    authentication: Optional[PushAuthenticationSpec] = None


def _argv(raw: Any) -> Any:
    """A command as a list of arguments: a string is split as a POSIX shell would (no shell runs it)."""
    if isinstance(raw, str):
        try:
            return shlex.split(raw)
        except ValueError as exc:
            raise ValueError(f"not a command line ({exc})") from None
    return raw


_RESERVED_ENV = ("RELAYNET_URL", "RELAYNET_TOKEN", "RELAYNET_PROMPT")


def _run_env(env: dict[str, str]) -> dict[str, str]:
    reserved = sorted(set(env) & set(_RESERVED_ENV))
    if reserved:
        raise ValueError(f"{', '.join(reserved)} {'is' if len(reserved) == 1 else 'are'} set by the supervisor "
                         "for each run")
    return env


class LaunchSpec(_Spec):
    """A definition's ``launch:`` entry (docs/protocol.md 9, issue 27): ``relaynet serve --spec``
    supervises every instance of the agent whose token the tokens file holds, as ``relaynet
    worker`` does (relaynet.worker.Supervisor): it starts ``command`` when a task offer, an ask or
    a wake-up waits. Never stored in the table (it is the operator's machine, not the network's)."""

    command: Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_argv), Field(min_length=1)]
    timeout: Annotated[int, Field(ge=1, le=86400, description="seconds a run may take")] = 3600
    env: Annotated[dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str],
                   AfterValidator(_run_env)] = {}
    max_runs: Annotated[int, Field(ge=1, le=16)] = 1
    grace: Annotated[int, Field(ge=0, le=3600, description="seconds active runs get when the hub stops")] = 30


class AgentSpec(_Spec):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str = ""
    capabilities: list[CapabilitySpec] = []
    groups: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = []
    responsibilities: list[ResponsibilitySpec] = []
    instances: Annotated[int, Field(ge=0, le=100)] = 0
    passport: dict[str, Any] = {}
    resume: dict[str, Any] = {}
    skill_md: Optional[str] = None
    inbound_from: list[str] = ["*"]
    push: Optional[PushSpec] = None
    launch: Optional[LaunchSpec] = None
    a2a: Optional[A2AMemberSpec] = None


class GroupSpec(_Spec):
    slug: Annotated[str, Field(pattern=NAME_PATTERN)]
    members: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = []


class ResourceSpec(_Spec):
    key: ResourceKeySpec


class RepresentativeSpec(_Spec):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    grants: dict[str, Grant] = {}


class NetworkSpec(_Spec):
    """One YAML document of a spec file (PROTOCOL.md 9)."""

    network: Annotated[str, Field(pattern=NAME_PATTERN)]
    agents: list[AgentSpec] = []
    groups: list[GroupSpec] = []
    resources: list[ResourceSpec] = []
    representatives: list[RepresentativeSpec] = []


def parse(text: str, *, check_store: bool = True) -> list[NetworkSpec]:
    """All network documents of a spec file. Raises InvalidArgument with one entry per bad field.

    Every check is made without the table except one: a representative's grant on a network the
    file does not declare must name a network that exists in the table. ``check_store=False``
    leaves that one out (``relaynet serve --spec`` validates the file before its store starts;
    :func:`apply_spec` makes it once the store is up).
    """
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"the spec is not valid YAML: {exc}") from None
    specs = []
    for n, doc in enumerate(docs):
        try:
            specs.append(NetworkSpec.model_validate(doc))
        except ValidationError as exc:
            fields = [{"field": f"documents[{n}]." + ".".join(str(p) for p in e["loc"]), "message": e["msg"].removeprefix("Value error, ")}
                      for e in exc.errors()]
            raise InvalidArgument(f"document {n} of the spec is invalid", fields) from None
    _check(specs, check_store)
    return specs


def _check(specs: list[NetworkSpec], check_store: bool) -> None:
    names = [s.network for s in specs]
    if len(set(names)) != len(names):
        raise InvalidArgument("a network is declared twice in the spec")
    for spec in specs:
        agents = {a.name for a in spec.agents}
        if len(agents) != len(spec.agents):
            raise InvalidArgument(f"network {spec.network}: an agent is declared twice")
        slugs = {g.slug for g in spec.groups} | {g for a in spec.agents for g in a.groups}
        if agents & slugs:
            raise InvalidArgument(f"network {spec.network}: agent names and group slugs share one namespace: {sorted(agents & slugs)}")
        from relaynet.push import check_url

        for i, agent in enumerate(spec.agents):
            if agent.push is not None:
                check_url(agent.push.url, f"{spec.network}.agents[{i}].push.url")
            if agent.a2a is not None:
                check_url(agent.a2a.url, f"{spec.network}.agents[{i}].a2a.url")
                if agent.launch is not None or agent.instances > 1:
                    raise InvalidArgument(f"network {spec.network}: agent {agent.name} is an A2A agent (a2a:): the hub "
                                          "runs its one instance, so it takes neither launch: nor instances above 1")
        for group in spec.groups:
            unknown = set(group.members) - agents
            if unknown:
                raise InvalidArgument(f"network {spec.network}: group {group.slug} names unknown agents {sorted(unknown)}")
    if not check_store:
        return
    for rep in (r for s in specs for r in s.representatives):
        unknown = set(rep.grants) - set(names) - set(existing_network_names(rep.grants))
        if unknown:
            raise InvalidArgument(f"representative {rep.name} has grants on unknown networks {sorted(unknown)}")


def existing_network_names(names) -> list[str]:
    """Which of ``names`` already exist in the table."""
    return store.existing_names(names)


def _network_id(name: str) -> tuple[str, bool]:
    """The id of network ``name``, creating it if needed: (id, created)."""
    existing = store.name_item(name)
    if existing:
        return existing["networkId"], False
    net_id = ids.new_id("net")
    if not store.create_network(net_id, name, clock.now_iso()):
        return store.name_item(name)["networkId"], False
    return net_id, True


def apply_spec(text: str) -> dict[str, Any]:
    """Apply a spec file's networks idempotently. Returns the tokens document of PROTOCOL.md 9:
    ``{"networks": {name: {"networkId", "instances": {agent: [{"instanceId", "token"}]}}},
    "representatives": {name: token}}`` listing only what this call created.

    Raises InvalidArgument for an invalid spec (nothing is written).
    """
    from relaynet import cursors

    specs = parse(text)
    cursors.ensure_key()
    out: dict[str, Any] = {"networks": {}, "representatives": {}}
    net_ids: dict[str, str] = {}
    for spec in specs:
        net_id, _ = _network_id(spec.network)
        net_ids[spec.network] = net_id
        out["networks"][spec.network] = {"networkId": net_id, "instances": _apply_network(net_id, spec)}
    for rep in (r for s in specs for r in s.representatives):
        token = _apply_representative(rep, net_ids)
        if token:
            out["representatives"][rep.name] = token
    for net_id in net_ids.values():  # this process sees what it applied at once (relaynet.cache)
        cache.drop_network(net_id)
    for rep in (r for s in specs for r in s.representatives):
        cache.representatives.drop(lambda key, name=rep.name: key[1] == name)
    return out


def _apply_network(net_id: str, spec: NetworkSpec) -> dict[str, list[dict[str, str]]]:
    membership: dict[str, set[str]] = {g.slug: set(g.members) for g in spec.groups}
    for agent in spec.agents:
        for slug in agent.groups:
            membership.setdefault(slug, set()).add(agent.name)
    if any(agent.push is not None for agent in spec.agents):  # before the configs (has_push_config)
        dir_store.mark_push_configured(net_id)
    for agent in spec.agents:
        doc = agent.model_dump(exclude={"instances", "launch"})  # launch: the operator's machine (LaunchSpec)
        doc["groups"] = sorted(s for s, members in membership.items() if agent.name in members)
        for resp in doc["responsibilities"]:
            if resp["resource"] is not None:
                resp["resource"] = normalise_resource(resp["resource"])
        store.put_agent(net_id, agent.name, doc)
    for slug, members in membership.items():
        store.put_group(net_id, slug, sorted(members))
    resource_keys = {normalise_resource(r.key) for r in spec.resources}
    resource_keys |= {normalise_resource(r.resource) for a in spec.agents for r in a.responsibilities if r.resource}
    for key in sorted(resource_keys):
        store.put_resource(net_id, key)
    existing = store.instances(net_id)
    created: dict[str, list[dict[str, str]]] = {}
    for agent in spec.agents:
        mine = [i for i in existing if i["agent"] == agent.name]
        if agent.a2a is not None:  # the bridge's instance: no token (relaynet.a2a.bridge)
            a2a_store.register(net_id, agent.name, mine)
            continue
        for inst in mine:
            if inst.get("bridge"):
                a2a_store.unregister(net_id, inst["id"])
        have = len(mine)
        for _ in range(max(0, agent.instances - have)):
            created.setdefault(agent.name, []).append(launch_instance(net_id, agent.name))
    return created


def _apply_representative(rep: RepresentativeSpec, net_ids: dict[str, str]) -> str | None:
    grants = {}
    for name, level in rep.grants.items():
        grants[net_ids.get(name) or store.name_item(name)["networkId"]] = level
    existing = dir_store.representative(rep.name)
    if existing:
        store.set_grants(rep.name, grants)
        return None
    token = mint_token(REPRESENTATIVE_PREFIX)
    principal = Principal("representative", rep=rep.name)
    store.register_representative(rep.name, ids.new_id("rep"), grants, clock.now_iso(), token_item(token, principal))
    return token


def launch(network: str, agent: str) -> dict[str, str]:
    """``relaynet admin launch NETWORK AGENT``: one more instance. Returns ``{instanceId, token}``.

    ``network`` is a network name or id. Raises NotFound.
    """
    if network.startswith("net_"):
        net_id = network
        if store.network(net_id) is None:
            raise NotFound(f"no network {network!r}")
    else:
        item = store.name_item(network)
        if item is None:
            raise NotFound(f"no network named {network!r}")
        net_id = item["networkId"]
    return launch_instance(net_id, agent)
