"""Knowledge-base ingestion: parse the guide and runbooks in ``kb/sources`` into ``kb/records``.

Public API: :func:`run_ingest` returns an :class:`IngestReport`; the CLI only renders it.
"""

from ingest.pipeline import IngestReport, run_ingest

__all__ = ["IngestReport", "run_ingest"]
