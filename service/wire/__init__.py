"""The wire contract: the generated proto code (the only importer of it) mapped to and from the domain,
request validation (`INVALID_ARGUMENT` with field paths) and the JSON Schema that tools (MCP) are given.
May import: domain. Never decide, engine, rulebook, serving or front ends.
"""
