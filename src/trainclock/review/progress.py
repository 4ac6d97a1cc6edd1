"""How far training had got at a log line: the progress count of its metadata (mllog.progress
reads it, in the result summarizer's order of preference of fields)."""

from __future__ import annotations

from typing import Any

from trainclock.mllog.progress import PROGRESS_FIELDS
from trainclock.mllog.progress import count_field as progress_field
from trainclock.mllog.progress import logged_count as progress

__all__ = ["PROGRESS_FIELDS", "line_progress", "progress", "progress_field"]


def line_progress(value: dict[str, Any]) -> int | float | None:
    """Progress of a compliance line ({"value": ..., "metadata": ...}); stable diffusion's rules
    build virtual lines with the step inside the value."""
    metadata = value.get("metadata")
    found = progress(metadata) if isinstance(metadata, dict) else None
    inner = value.get("value")
    if found is None and isinstance(inner, dict):
        found = progress(inner)
    return found
