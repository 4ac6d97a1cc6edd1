"""The JSON files beside the logs of a result tree: systems/<system>.json and scaling.json."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trainclock.errors import DataError


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DataError(f"cannot read {what} {path}: {e.strerror}; check that it is a readable file") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError and undecodable bytes are ValueErrors
        raise DataError(f"{what} {path} is not valid JSON ({str(e).splitlines()[0][:100]}); "
                        "fix or remove the file") from None
    if not isinstance(data, dict):
        raise DataError(f"{what} {path} must hold a JSON object, not {type(data).__name__}; fix or remove the file")
    return data


def system_description(path: Path) -> dict[str, Any]:
    """The fields of an MLPerf systems/<system>.json."""
    return read_json_object(path, "system description")


def accelerator_count(description: dict[str, Any] | None) -> int | None:
    """number_of_nodes x accelerators_per_node, as the MLPerf results table counts them (0 for a
    CPU-only system); None when the description lacks either or they are not whole numbers."""
    if not description:
        return None
    try:
        return int(description["number_of_nodes"]) * int(description["accelerators_per_node"])
    except (KeyError, TypeError, ValueError):
        return None


def scaling_factor(folder: Path) -> float:
    """The factor a review committee put in <benchmark folder>/scaling.json, else 1."""
    path = folder / "scaling.json"
    if not path.exists():
        return 1.0
    factor = read_json_object(path, "scaling file").get("scaling_factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise DataError(f"scaling file {path} must hold {{\"scaling_factor\": <positive number>}}, "
                        f"found {factor!r}; fix or remove the file")
    return float(factor)
