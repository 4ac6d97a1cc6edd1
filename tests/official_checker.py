"""Runs the official MLCommons compliance checker (mlperf_logging) on a log file."""

from __future__ import annotations

import os
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.compliance_checker.mlp_parser import parse_file

RULES = Path(mlp_compliance.__file__).parent


def check(path: Path, config: str | None = None, follow: bool = False, round_: str = "3.1") -> list[str]:
    """Messages of the failed rules of round `round_` in `config` (default: the round's common.yaml);
    with follow, also of the configs it enqueues (division and benchmark rules), as the official
    checker does."""
    ruleset = f"{round_}.0"
    config = config or f"training_{ruleset}/common.yaml"
    checker = mlp_compliance.make_checker("training", ruleset, quiet=False, werror=False)
    loglines, errors = parse_file(str(path), ruleset=ruleset)
    assert not errors, errors
    if follow:
        checker.check_loglines(loglines, config)
    else:
        checker.configured_checks(loglines, os.path.join(RULES, config))
        mlp_compliance.enqueued_configs.clear()
    return [*checker.overwritable.values(), *checker.not_overwritable]
