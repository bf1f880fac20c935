"""Rendering: message templates compiled per rules version and filled per locale (en, zh-CN), and the answer's
summary. May import: domain. Never decide or anything above.
"""
