"""How far training had got at a log line: the progress field of its metadata, in the result
summarizer's order of preference."""

from __future__ import annotations

import math
from typing import Any

PROGRESS_FIELDS = ("samples_count", "epoch_num", "step_num")
_LIMIT = 2**63  # no real count comes near; past it, float arithmetic (means, rates) would overflow


def progress(fields: dict) -> int | float | None:
    """The first finite progress count among PROGRESS_FIELDS of a metadata dict."""
    name = progress_field(fields)
    return None if name is None else fields[name]


def progress_field(fields: dict) -> str | None:
    """Which of PROGRESS_FIELDS progress() reads in a metadata dict; None where none is a finite count."""
    for name in PROGRESS_FIELDS:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _LIMIT:
            return name
        if isinstance(value, float) and math.isfinite(value):
            return name
    return None


def line_progress(value: dict[str, Any]) -> int | float | None:
    """Progress of a compliance line ({"value": ..., "metadata": ...}); stable diffusion's rules
    build virtual lines with the step inside the value."""
    metadata = value.get("metadata")
    found = progress(metadata) if isinstance(metadata, dict) else None
    inner = value.get("value")
    if found is None and isinstance(inner, dict):
        found = progress(inner)
    return found
