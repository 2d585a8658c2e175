"""Errors the core raises. Front-ends turn them into messages (exit codes, chat replies) at the edge."""

from __future__ import annotations

from kb.errors import KnowledgeBaseError, TrainfixError

__all__ = ["TrainfixError", "InputError", "KnowledgeBaseError", "IndexError_"]


class InputError(TrainfixError):
    """The user's input cannot be used (unreadable file, wrong encoding, too large to accept)."""


class IndexError_(TrainfixError):
    """The vector/lexical index cannot be opened or built."""
