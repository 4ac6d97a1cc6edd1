"""The JSON files beside the logs of a result tree: systems/<system>.json and scaling.json."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trainclock.errors import DataError
from trainclock.mllog.reader import open_regular, without_surrogates

# above any system built (the largest MLPerf entries have ~10^4 accelerators): a count past these is a typo or damage
MAX_NODES = 1_000_000
MAX_PER_NODE = 100_000
MAX_ACCELERATORS = 10_000_000


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        with open_regular(path) as f:
            # a lone surrogate escape would crash every encoder downstream (terminal, database)
            data = without_surrogates(json.loads(f.read().decode("utf-8")))
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
    CPU-only system); None when the description lacks either, or they are not plausible whole
    numbers (count_problem says why)."""
    if not description or count_problem(description):
        return None
    try:
        return int(description["number_of_nodes"]) * int(description["accelerators_per_node"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def count_problem(description: dict[str, Any]) -> str | None:
    """Why the description's node and accelerator counts cannot be right, or None."""
    counts = []
    for name, limit in (("number_of_nodes", MAX_NODES), ("accelerators_per_node", MAX_PER_NODE)):
        value = description.get(name)
        if value is None:
            return None  # not stated: the count is unknown, which is no error
        try:
            count = int(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError, OverflowError):
            count = None
        if count is None or isinstance(value, float) and value != count or not 0 <= count <= limit:
            return f"{name} is {_shown(value)}, not a whole number from 0 to {limit:,}"
        counts.append(count)
    if counts[0] * counts[1] > MAX_ACCELERATORS:
        return f"{counts[0]:,} nodes x {counts[1]:,} accelerators is more than {MAX_ACCELERATORS:,} accelerators"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def scaling_factor(folder: Path) -> float:
    """The factor a review committee put in <benchmark folder>/scaling.json, else 1."""
    return scaling_file(folder)[0]


def scaling_file(folder: Path) -> tuple[float, Path | None]:
    """(the factor in <benchmark folder>/scaling.json, the file), else (1, None). Read only: the
    official RCP checker deletes and rewrites this file; a review never does."""
    path = folder / "scaling.json"
    if not path.exists():
        return 1.0, None
    factor = read_json_object(path, "scaling file").get("scaling_factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise DataError(f"scaling file {path} must hold {{\"scaling_factor\": <positive number>}}, "
                        f"found {factor!r}; fix or remove the file")
    return float(factor), path
