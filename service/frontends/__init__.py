"""Front ends for people and assistants: the `gpu-advisor` command (recommend, explain, rules, reload...), the
rules commands (`gpu-advisor-rules`, `make rules-check`) and the MCP server. They call the service over gRPC
or load a rules folder; they may import serving (credentials, logging), rulebook, wire, decide and domain.
Nothing imports them but bench.
"""
