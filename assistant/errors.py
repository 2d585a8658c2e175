"""Errors the core raises. Front-ends turn them into messages (exit codes, chat replies) at the edge."""

from __future__ import annotations


class TrainfixError(Exception):
    """Base class: ``str(err)`` is a complete, user-readable message (no traceback needed)."""


class InputError(TrainfixError):
    """The user's input cannot be used (unreadable file, wrong encoding, too large to accept)."""


class KnowledgeBaseError(TrainfixError):
    """The knowledge base on disk is missing or inconsistent (e.g. records not ingested)."""


class IndexError_(TrainfixError):
    """The vector/lexical index cannot be opened or built."""
