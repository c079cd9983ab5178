"""relaynet_local: the Relaynet local stack (``relaynet serve``); nothing here is deployed.

It serves the routes of template.yaml over real HTTP by building API Gateway (HTTP API,
payload 2.0) events and calling the same handlers and authorizer as AWS does, runs the
scheduled functions on a timer, and runs its store: DynamoDB Local by default, moto's server with
``--store memory``, or a given endpoint.

Modules:
    template  parse template.yaml: routes, authorizer, schedules, environment; ``create_table``
    lambdas   load handlers from their files (warm containers) and invoke them with a context
    events    build HTTP API v2.0, authorizer REQUEST and scheduled events
    server    ``LocalStack`` (in-process, for tests) and ``serve`` (the blocking entry point)
    store_setup     find or fetch Java and DynamoDB Local (``relaynet store setup``)
    dynamodb_local  DynamoDB Local as a supervised child process; the transaction barrier
    memory_store    moto's server behind one lock (``--store memory``)
"""

from relaynet_local.server import LocalStack, mcp_config_text, serve, write_tokens
from relaynet_local.template import Route, TemplateError, create_table, load_template

__all__ = ["LocalStack", "serve", "write_tokens", "mcp_config_text", "Route", "TemplateError",
           "create_table", "load_template"]
