"""Errors of the knowledge base layer; ``assistant.errors`` re-exports them (``kb`` imports nothing from ``assistant``)."""

from __future__ import annotations


class TrainfixError(Exception):
    """Base class: ``str(err)`` is a complete, user-readable message (no traceback needed)."""


class KnowledgeBaseError(TrainfixError):
    """The knowledge base on disk is missing or inconsistent (a file that does not load, records not ingested)."""
