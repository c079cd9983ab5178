"""The OpenAPI 3 document of every tool, generated from the catalogue's pydantic models by
powertools (PROTOCOL.md 2: each operation's ``operationId`` is the tool name)."""

import functools
import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import __version__, catalogue


def _register(app: APIGatewayHttpResolver, tool: catalogue.Tool) -> None:
    model = tool.model

    def route(request: Annotated[model, Body()]) -> dict:  # type: ignore[valid-type]
        raise NotImplementedError  # never called: the document only

    route.__name__ = tool.name
    app.post(tool.path, operation_id=tool.name, summary=tool.name, description=tool.description,
             tags=[tool.surface])(route)


@functools.lru_cache(maxsize=1)
def document() -> "dict[str, Any]":
    """The OpenAPI document as a dict (cached per container)."""
    app = APIGatewayHttpResolver(enable_validation=True)
    for tool in catalogue.TOOLS.values():
        _register(app, tool)
    doc = json.loads(app.get_openapi_json_schema(title="Relaynet", version=__version__,
                                                 description="A coordination hub for AI agents."))
    doc.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    doc["security"] = [{"bearer": []}]
    return doc
