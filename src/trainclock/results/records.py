"""A reviewed entry as the rows the store keeps: plain column values, no database involved.

Values are made safe for both databases on the way: PostgreSQL's JSON rejects NaN and Infinity
and its text rejects NUL characters, which a damaged log can carry anywhere, and no driver can
encode a lone surrogate (a file name that is not UTF-8 holds them).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainclock.errors import DataError
from trainclock.mllog.reader import open_regular, without_surrogates
from trainclock.review.entry import EntryReview
from trainclock.review.json_files import accelerator_count
from trainclock.review.run_review import RunReview
from trainclock.results.unit_facts import entry_facts, metrics_json

CLOUD, ONPREM = "cloud", "onprem"
RUN_INDEX = re.compile(r"result_(\d+)\.txt")


@dataclass(frozen=True)
class RunRecord:
    values: dict[str, Any]  # columns of models.Run, without entry_id and imported_at
    evals: list[dict[str, Any]]  # columns of models.Eval, without run_id
    findings: list[dict[str, Any]]  # columns of models.Finding, without run_id

    @property
    def sha256(self) -> str:
        return self.values["sha256"]


@dataclass(frozen=True)
class EntryRecord:
    key: dict[str, str]  # the unique key of models.Entry: round, org, system, benchmark, division
    values: dict[str, Any]  # its other columns, without system_id and the timestamps
    system: dict[str, Any] | None  # columns of models.System, when the tree has a system description
    runs: list[RunRecord]

    @property
    def label(self) -> str:
        k = self.key
        return f"v{k['round']} {k['org'] or '?'} / {k['system'] or '?'} / {k['benchmark']}"


def availability(status: Any) -> str | None:
    """"cloud" or "onprem" from a system's status ("cloud", "Available on premise", ...) or a log's
    submission_status; None when it says neither (e.g. "available", "preview")."""
    if not isinstance(status, str):
        return None
    words = status.lower().replace("-", "").replace(" ", "")
    if "cloud" in words:
        return CLOUD
    if "onprem" in words or "onpremise" in words:
        return ONPREM
    return None


def entry_record(entry: EntryReview) -> EntryRecord:
    desc = entry.context.system_desc
    run_statuses = [r.header.get("submission_status") for r in entry.runs]
    # the system description decides; where it says neither cloud nor on-premise, the logs do
    status = next((s for s in [desc.get("status") if desc else None, *run_statuses] if availability(s)), None)
    key = {
        "round": entry.context.round,
        "org": entry.org or "",
        "system": entry.system or "",
        "benchmark": entry.workload or entry.benchmark or entry.name,
        "division": entry.division or "",
    }
    values = {
        "mlperf_benchmark": entry.benchmark,
        "availability": availability(status),
        "status": status if status is not None else _first_text(desc.get("status") if desc else None, *run_statuses),
        "score_minutes": entry.score_minutes,
        "summarizer_minutes": entry.summarizer_score,
        "verdict": entry.verdict,
        "reasons": list(entry.reasons),
        "runs_required": entry.rule.runs if entry.rule else None,
        "scaling_factor": entry.scaling_factor,
        "rcp_status": entry.rcp.status if entry.rcp else None,
        "rcp_message": entry.rcp.message if entry.rcp else None,
        "round_source": entry.context.round_source,
        "folder": str(entry.context.folder.resolve()),
    }
    runs = [run_record(run) for run in entry.runs]
    values.update(entry_facts([r.values for r in runs]))
    system = _system_record(entry.context.system_path, desc) if desc is not None and entry.context.system_path else None
    return EntryRecord(_clean(key), _clean(values), system, runs)


def run_record(run: RunReview) -> RunRecord:
    index = RUN_INDEX.fullmatch(run.path.name)
    values = {
        "sha256": file_sha256(run.path),
        "file_name": run.path.name,
        "path": str(run.path.resolve()),
        "run_index": _whole(index.group(1)) if index else None,
        "size_bytes": run.size_bytes,
        "status": run.status,
        "passed": run.passed,
        "time_to_train_ms": _number(run.time_to_train_ms),
        "minutes": _number(run.minutes),
        "progress_unit": run.progress_unit,
        "units_to_converge": _number(run.units_to_converge),
        "units_per_sample": _number(run.progress.units_per_sample),
        "samples_to_converge": _number(run.samples_to_converge),
        "metrics": metrics_json(run.metrics),
        "global_batch_size": _int64(run.global_batch_size),
        "submission_status": _first_text(run.header.get("submission_status")),
        "errors": run.error_count,  # the counted ones too: the listed findings stop at a limit per kind
        "warnings": run.warning_count,
        "header": run.header,
        "eval_spans": None if run.eval_spans is None else [[_number(n), a, b] for n, a, b in run.eval_spans],
    }
    evals = [{"seq": i, "progress": _number(p.progress), "value": _number(p.value),
              "value_json": None if _number(p.value) is not None else p.value,
              "metric": p.metric, "time_ms": _number(p.time_ms), "lineno": p.lineno}
             for i, p in enumerate(run.evals)]
    findings = [{"seq": i, "severity": f.severity, "rule": f.rule, "key": f.key, "message": f.message, "lineno": f.lineno}
                for i, f in enumerate(run.findings)]
    return RunRecord(_clean(values), _clean(evals), _clean(findings))


def _system_record(path: Path, desc: dict[str, Any]) -> dict[str, Any]:
    fields = _clean(desc)
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    nodes, per_node = _whole(desc.get("number_of_nodes")), _whole(desc.get("accelerators_per_node"))
    return {
        "name": path.stem,
        "description_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "submitter": _first_text(fields.get("submitter")),
        "division": _first_text(fields.get("division")),
        "status": _first_text(fields.get("status")),
        "number_of_nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerators": accelerator_count(desc),
        "accelerator_model": _first_text(fields.get("accelerator_model_name")),
        "host_processor_model": _first_text(fields.get("host_processor_model_name")),
        "framework": _first_text(fields.get("framework")),
        "fields": fields,
    }


def file_sha256(path: Path) -> str:
    try:
        with open_regular(path) as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise DataError(f"cannot read log {path}: {e.strerror}; check that it is a readable file") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int past the largest double
        return None
    return number if math.isfinite(number) else None


def _int64(value: int | None) -> int | None:
    """The value where a BIGINT column holds it; a damaged log can hold any integer."""
    return value if value is not None and -(2**63) <= value < 2**63 else None


def _whole(value: Any) -> int | None:
    if isinstance(value, str) and len(value) > 40:  # int() of thousands of digits is refused or slow
        return None
    try:
        return _int64(int(value))
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        return None


def _first_text(*values: Any) -> str | None:
    return next((_clean(v) for v in values if isinstance(v, str)), None)


def _clean(value: Any) -> Any:
    """JSON-safe and text-safe in both databases: NaN and infinities as text, NUL characters escaped."""
    if isinstance(value, str):
        return without_surrogates(value.replace("\x00", "\\x00"))
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {_clean(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
