"""Runs the official MLCommons compliance checker (mlperf_logging) on a log file."""

from __future__ import annotations

import os
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.compliance_checker.mlp_parser import parse_file

RULES = Path(mlp_compliance.__file__).parent


def check(path: Path, config: str = "training_3.1.0/common.yaml", follow: bool = False) -> list[str]:
    """Messages of the failed rules in `config`; with follow, also of the configs it enqueues
    (division and benchmark rules), as the official checker does."""
    checker = mlp_compliance.make_checker("training", "3.1.0", quiet=False, werror=False)
    loglines, errors = parse_file(str(path), ruleset="3.1.0")
    assert not errors, errors
    if follow:
        checker.check_loglines(loglines, config)
    else:
        checker.configured_checks(loglines, os.path.join(RULES, config))
        mlp_compliance.enqueued_configs.clear()
    return [*checker.overwritable.values(), *checker.not_overwritable]
