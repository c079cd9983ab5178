"""Read template.yaml: the routes, the authorizer, the schedules, the environment and the table.

The local stack serves exactly what this module finds in the SAM template, so the template stays
the single source of truth for what is deployed and what runs locally.

Rules followed (SAM semantics, as far as the local stack needs them):

- A function's properties are ``Globals.Function`` overlaid by its own ``Properties``
  (``Environment.Variables`` are merged key by key). ``CodeUri`` is resolved relative to the
  template's directory.
- A route is an event of ``Type: HttpApi`` (method upper-cased, ``ANY`` allowed). It is
  authorised unless its ``Auth.Authorizer`` is ``NONE`` or its API has no ``DefaultAuthorizer``
  (and it names none). Only Lambda authorizers are supported, and at most one per template.
- A schedule is an event of ``Type: Schedule`` or ``ScheduleV2``.
- The table is the ``AWS::DynamoDB::Table`` that ``Globals.Function.Environment`` points
  ``RELAYNET_TABLE`` at, else the only table of the template.

Errors: :class:`TemplateError` for a template this module cannot make sense of (missing file,
unsupported authorizer, no table, ...).
"""

from __future__ import annotations

import copy
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

__all__ = [
    "TemplateError",
    "Function",
    "Route",
    "Schedule",
    "TableDef",
    "Template",
    "load_template",
    "find_template",
    "create_table",
    "table_request",
    "ref_target",
]


class TemplateError(ValueError):
    """The template is missing or uses something the local stack does not support."""


# --------------------------------------------------------------------------------------------
# YAML with CloudFormation short tags


class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe YAML loader that turns ``!Ref X`` into ``{"Ref": X}``, ``!GetAtt A.B`` into
    ``{"Fn::GetAtt": ["A", "B"]}`` and any other ``!Name v`` into ``{"Fn::Name": v}``. On
    libyaml's parser when PyYAML has it (the wheels do): template.yaml in 0.011 s instead of
    0.145 s, paid by every load_template (each local stack start, each test module that builds
    its table from the template; issue 29)."""


def _construct_cfn(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{tag_suffix}": value}


_CfnLoader.add_multi_constructor("!", _construct_cfn)


def load_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The template at ``path`` as plain Python data (short tags become long-form intrinsics)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.load(fh, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError as exc:
        raise TemplateError(f"template not found: {path}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("Resources"), dict):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources)")
    return doc


# --------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class Function:
    """One ``AWS::Serverless::Function`` as the local stack runs it.

    ``code_uri`` is an absolute directory, ``handler`` is ``"module.func"`` (``module`` may be
    dotted), ``environment`` holds its ``Environment.Variables`` (Globals merged with its own)
    as written in the template, unresolved (see :meth:`Template.resolve`).
    """

    logical_id: str
    code_uri: str
    handler: str
    timeout: int = 3
    memory_size: int = 128
    environment: dict[str, Any] = field(default_factory=dict)


class Route(NamedTuple):
    """An HTTP API route: ``(method, path, function_id, code_uri, handler, auth)``."""

    method: str
    path: str
    function_id: str
    code_uri: str
    handler: str
    auth: bool

    @property
    def route_key(self) -> str:
        """API Gateway's route key, e.g. ``"POST /v1/tools/network_ask"``."""
        return f"{self.method} {self.path}"


class Schedule(NamedTuple):
    """A scheduled function: ``(function, expression)``, e.g. ``rate(1 minute)``."""

    function: Function
    expression: str


@dataclass(frozen=True)
class TableDef:
    """The DynamoDB table of the template: its ``Properties`` as CloudFormation spells them."""

    logical_id: str
    properties: dict[str, Any]

    @property
    def ttl_attribute(self) -> str | None:
        """The TTL attribute name, if TTL is enabled."""
        spec = self.properties.get("TimeToLiveSpecification") or {}
        return spec.get("AttributeName") if spec.get("Enabled", True) else None


@dataclass
class Template:
    """Everything the local stack needs from one template file.

    Attributes:
        path: the template file (absolute).
        document: the parsed template.
        functions: every serverless function by logical id.
        routes: every HttpApi route.
        authorizer: the Lambda authorizer function, or ``None`` if no route needs one.
        authorizer_ttl: ``ReauthorizeEvery`` of that authorizer (seconds; 0 when not cached).
        schedules: every scheduled function.
        table: the DynamoDB table, or ``None`` if the template has none.
    """

    path: str
    document: dict[str, Any]
    functions: dict[str, Function]
    routes: list[Route]
    authorizer: Function | None
    authorizer_ttl: int
    schedules: list[Schedule]
    table: TableDef | None

    def parameters(self) -> dict[str, Any]:
        """Parameter name -> its ``Default`` (``None`` without one)."""
        params = self.document.get("Parameters") or {}
        return {name: (spec or {}).get("Default") for name, spec in params.items()}

    def resolve(self, value: Any, refs: dict[str, Any] | None = None) -> Any:
        """Resolve the intrinsics a local run can know: ``Ref`` to a parameter (its default) or
        to a name in ``refs`` (e.g. the table's logical id -> the local table name), and
        ``Fn::Sub`` over those. Anything else resolves to ``None``."""
        known = {**self.parameters(), "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
                 "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
                 "AWS::StackName": "relaynet-local", **(refs or {})}
        if isinstance(value, dict) and len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return known.get(arg)
            if key == "Fn::Sub":
                text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
                scope = {**known, **{k: self.resolve(v, refs) for k, v in extra.items()}}
                missing = object()

                def sub(m: re.Match[str]) -> str:
                    got = scope.get(m.group(1), missing)
                    if got is missing or got is None:
                        raise KeyError(m.group(1))
                    return str(got)

                try:
                    return re.sub(r"\$\{([^}!]+)\}", sub, text)
                except KeyError:
                    return None
            if key.startswith("Fn::") or key == "Condition":
                return None
        if isinstance(value, bool):
            return "true" if value else "false"
        return value

    def environment(self, refs: dict[str, Any] | None = None,
                    function: Function | None = None) -> dict[str, str]:
        """``Globals.Function.Environment.Variables`` (or, given ``function``, that function's
        merged variables), resolved (see :meth:`resolve`); variables that cannot be resolved
        locally are left out."""
        if function is not None:
            variables = function.environment
        else:
            variables = (((self.document.get("Globals") or {}).get("Function") or {})
                         .get("Environment") or {}).get("Variables") or {}
        out: dict[str, str] = {}
        for name, raw in variables.items():
            value = self.resolve(raw, refs)
            if value is not None:
                out[name] = str(value)
        return out


# --------------------------------------------------------------------------------------------
# Parsing


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key == "Environment" and isinstance(value, dict) and isinstance(out.get(key), dict):
            merged = dict((out[key] or {}).get("Variables") or {})
            merged.update(value.get("Variables") or {})
            out[key] = {**out[key], **value, "Variables": merged}
        else:
            out[key] = copy.deepcopy(value)
    return out


def ref_target(value: Any) -> str | None:
    """The logical id behind ``!Ref X``, ``!Ref X.Alias`` (SAM's AutoPublishAlias) or
    ``!GetAtt X.Arn`` (else ``None``)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"]).split(".")[0]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return target[0] if isinstance(target, list) else str(target).split(".")[0]
    return None


def _int(value: Any, default: int, params: dict[str, Any]) -> int:
    target = ref_target(value)
    if target is not None:
        value = params.get(target)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _function(doc: dict[str, Any], logical_id: str, base_dir: Path, params: dict[str, Any]) -> Function:
    globals_fn = ((doc.get("Globals") or {}).get("Function")) or {}
    props = _merge(globals_fn, doc["Resources"][logical_id].get("Properties") or {})
    code_uri, handler = props.get("CodeUri"), props.get("Handler")
    if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"{logical_id}: needs a local CodeUri and a Handler 'module.func'")
    return Function(
        logical_id=logical_id,
        code_uri=str((base_dir / code_uri).resolve()),
        handler=handler,
        timeout=_int(props.get("Timeout"), 3, params),
        memory_size=_int(props.get("MemorySize"), 128, params),
        environment=dict(((props.get("Environment") or {}).get("Variables")) or {}),
    )


def _api_props(doc: dict[str, Any], api_id: str | None) -> dict[str, Any]:
    globals_api = ((doc.get("Globals") or {}).get("HttpApi")) or {}
    if api_id is None:  # SAM's implicit ServerlessHttpApi
        return globals_api
    resource = doc["Resources"].get(api_id) or {}
    if resource.get("Type") != "AWS::Serverless::HttpApi":
        raise TemplateError(f"ApiId {api_id!r} is not an AWS::Serverless::HttpApi")
    return _merge(globals_api, resource.get("Properties") or {})


def _pick_table(doc: dict[str, Any]) -> TableDef | None:
    tables = {lid: r for lid, r in doc["Resources"].items() if r.get("Type") == "AWS::DynamoDB::Table"}
    if not tables:
        return None
    variables = ((((doc.get("Globals") or {}).get("Function") or {}).get("Environment") or {})
                 .get("Variables") or {})
    wanted = ref_target(variables.get("RELAYNET_TABLE"))
    if wanted not in tables:
        if len(tables) > 1:
            raise TemplateError("several tables and no Globals RELAYNET_TABLE: !Ref <Table>")
        wanted = next(iter(tables))
    return TableDef(wanted, copy.deepcopy(tables[wanted].get("Properties") or {}))


def load_template(path: str | os.PathLike[str]) -> Template:
    """Parse the SAM template at ``path`` (see the module docstring for the rules)."""
    path = Path(path).resolve()
    doc = load_yaml(path)
    base_dir = path.parent
    params = {name: (spec or {}).get("Default") for name, spec in (doc.get("Parameters") or {}).items()}
    functions: dict[str, Function] = {}
    routes: list[Route] = []
    schedules: list[Schedule] = []
    authorizer_ids: set[str] = set()
    authorizer_ttl = 0

    for logical_id, resource in doc["Resources"].items():
        if not isinstance(resource, dict) or resource.get("Type") != "AWS::Serverless::Function":
            continue
        fn = _function(doc, logical_id, base_dir, params)
        functions[logical_id] = fn
        events = ((resource.get("Properties") or {}).get("Events")) or {}
        for event_name, event in events.items():
            kind, props = event.get("Type"), event.get("Properties") or {}
            if kind in ("Schedule", "ScheduleV2"):
                expression = props.get("Schedule") or props.get("ScheduleExpression") or ""
                schedules.append(Schedule(fn, str(expression)))
            elif kind == "HttpApi":
                if "Path" not in props or "Method" not in props:
                    raise TemplateError(f"{logical_id}.{event_name}: HttpApi needs Path and Method "
                                        "(the $default catch-all route is not supported locally)")
                api = _api_props(doc, ref_target(props.get("ApiId")))
                auth = api.get("Auth") or {}
                name = (props.get("Auth") or {}).get("Authorizer") or auth.get("DefaultAuthorizer")
                needs_auth = bool(name) and name != "NONE"
                if needs_auth:
                    spec = (auth.get("Authorizers") or {}).get(name)
                    target = ref_target((spec or {}).get("FunctionArn"))
                    if not target:
                        raise TemplateError(f"{logical_id}.{event_name}: authorizer {name!r} "
                                            "is not a Lambda authorizer of its API")
                    authorizer_ids.add(target)
                    authorizer_ttl = _int(((spec.get("Identity") or {}).get("ReauthorizeEvery")),
                                          0, params)
                method = str(props["Method"]).upper()
                routes.append(Route("ANY" if method == "X-AMAZON-APIGATEWAY-ANY-METHOD" else method,
                                    str(props["Path"]), logical_id, fn.code_uri, fn.handler,
                                    needs_auth))

    if len(authorizer_ids) > 1:
        raise TemplateError(f"the local stack supports one Lambda authorizer, found {sorted(authorizer_ids)}")
    authorizer = None
    if authorizer_ids:
        authorizer_id = authorizer_ids.pop()
        if authorizer_id not in functions:
            raise TemplateError(f"authorizer {authorizer_id!r} is not an AWS::Serverless::Function")
        authorizer = functions[authorizer_id]
    return Template(str(path), doc, functions, routes, authorizer, authorizer_ttl, schedules,
                    _pick_table(doc))


def find_template(template: str | os.PathLike[str] | None = None) -> Path:
    """The template to serve: ``template`` if given, else ``template.yaml`` in the current
    directory, else the one at the repository root (this package lives in ``<root>/infra/``)."""
    if template is not None:
        return Path(template).resolve()
    for candidate in (Path.cwd() / "template.yaml",
                      Path(__file__).resolve().parents[2] / "template.yaml"):
        if candidate.is_file():
            return candidate
    raise TemplateError("no template.yaml in the current directory or the repository root")


# --------------------------------------------------------------------------------------------
# The table


def table_request(table: TableDef, table_name: str) -> dict[str, Any]:
    """The ``CreateTable`` request for ``table``, named ``table_name`` (always
    ``PAY_PER_REQUEST``; PITR, SSE and streams are AWS concerns and left out)."""
    props = table.properties
    request: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if props.get(key):
            request[key] = [{k: v for k, v in index.items()
                             if k in ("IndexName", "KeySchema", "Projection")}
                            for index in props[key]]
    return request


def create_table(client: Any, template_path: str | os.PathLike[str], table_name: str,
                 *, exist_ok: bool = False, timeout: float = 30.0) -> dict[str, Any]:
    """Create ``table_name`` with the key schema, indexes and TTL of the template's table.

    ``client`` is a boto3 DynamoDB client. Waits until the table is ``ACTIVE`` and returns its
    ``DescribeTable`` description. An existing table raises the client's
    ``ResourceInUseException`` unless ``exist_ok``: then its data is left as it is and the
    global secondary indexes the template has and the table lacks are added (a table kept on
    disk by DynamoDB Local since an older template; DynamoDB builds a new index from the items
    already there), each waited for until ``ACTIVE``. A template without a table raises
    :class:`TemplateError`.
    """
    table = load_template(template_path).table
    if table is None:
        raise TemplateError(f"{template_path}: no AWS::DynamoDB::Table")
    request = table_request(table, table_name)
    try:
        client.create_table(**request)
    except client.exceptions.ResourceInUseException:
        if not exist_ok:
            raise
        return _add_missing_indexes(client, request, timeout)
    deadline = time.monotonic() + timeout
    while True:
        description = client.describe_table(TableName=table_name)["Table"]
        if description.get("TableStatus") == "ACTIVE" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if table.ttl_attribute:
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
        )
    return description


def _add_missing_indexes(client: Any, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Add to the existing table each GSI of ``request`` (a CreateTable request) it lacks, one
    UpdateTable at a time (DynamoDB's rule), waiting until each is ``ACTIVE``; returns the
    table's description."""
    name = request["TableName"]
    description = client.describe_table(TableName=name)["Table"]
    have = {i["IndexName"] for i in description.get("GlobalSecondaryIndexes") or []}
    wanted = [i for i in request.get("GlobalSecondaryIndexes") or [] if i["IndexName"] not in have]
    types = {a["AttributeName"]: a for a in request["AttributeDefinitions"]}
    for index in wanted:
        attributes = [types[k["AttributeName"]] for k in index["KeySchema"]]
        client.update_table(TableName=name, AttributeDefinitions=attributes,
                            GlobalSecondaryIndexUpdates=[{"Create": index}])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            description = client.describe_table(TableName=name)["Table"]
            status = {i["IndexName"]: i.get("IndexStatus") for i in description.get("GlobalSecondaryIndexes") or []}
            if status.get(index["IndexName"]) == "ACTIVE" and description.get("TableStatus") == "ACTIVE":
                break
            time.sleep(0.2)
    return description
