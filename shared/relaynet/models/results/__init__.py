"""The 200 bodies of every tool and endpoint, as pydantic models (relaynet.catalogue names one
per entry): they type docs/openapi.json's responses, and the API tests validate every answer
against them. Handlers never import them (cold start); the wire JSON is the domain's dict.
"""
