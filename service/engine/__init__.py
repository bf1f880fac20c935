"""The rules engine: line-aware YAML (`load`), rules compiled to an engine-neutral IR (`parse`, `ir`), static
analysis of conditions (`analyze`) and the durable_rules adapter (`durable`, the only importer of
durable_rules). May import: domain (vocabularies), memo. Never decide or anything above.
"""
