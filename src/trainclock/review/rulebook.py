"""The compliance rules as data: MLCommons' own rule files (one YAML per round and benchmark, shipped
in the mlperf-logging package) plus trainclock's files in review/rules/, loaded and compiled once.

The format is the official checker's: a list of records, `BEGIN: {CODE}`, `KEY: {NAME, REQ, PRE,
CHECK, POST, FIRST_CHECK, ATLEAST_ONE_CHECK}` and `END: {PRE, CHECK}`, whose code runs with `s`
(state shared by one file's records), `ll` (the log line) and `v` (its value and metadata).
trainclock's files may add `WHY` to a KEY: the sentence a failure is reported with.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

import yaml
from mlperf_logging.compliance_checker import mlp_compliance

OWN_RULES = Path(__file__).parent / "rules"
OFFICIAL_RULES = Path(mlp_compliance.__file__).parent
# trainclock's files first, but only for names the package lacks (a test keeps it so)
SEARCH_PATH = (OWN_RULES, OFFICIAL_RULES)
HOUSE_RULES = "trainclock/common.yaml"

# Rule files name the next file to check from log values (`{division}_common.yaml`), so a name
# is untrusted input: only `<folder>/<file>.yaml` made of plain characters is ever opened.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[0-9]+)*/[A-Za-z0-9_]+\.yaml")


@dataclass(frozen=True)
class Test:
    source: str
    code: CodeType


@dataclass(frozen=True)
class KeyRule:
    name: str
    req: str | None
    pre: CodeType | None
    checks: tuple[Test, ...]
    post: CodeType | None
    first_checks: tuple[Test, ...]
    target: Test | None  # ATLEAST_ONE_CHECK: some line of this key must pass it (the quality target)
    why: str | None


@dataclass(frozen=True)
class RuleFile:
    name: str  # as rule files refer to it, e.g. "training_X.Y.0/closed_<benchmark>.yaml"
    path: Path
    begin: CodeType | None
    keys: dict[str, KeyRule]
    end_pre: CodeType | None
    end_checks: tuple[Test, ...]


def official_start(round_: str) -> str:
    """The file the official checker starts from for a round ("X.Y")."""
    return f"{rules_folder(round_)}/common.yaml"


def rules_folder(round_: str) -> str:
    return f"training_{round_}.0"


def round_has_rules(round_: str) -> bool:
    return (OFFICIAL_RULES / rules_folder(round_) / "common.yaml").is_file()


@functools.lru_cache(maxsize=256)  # names come from logs: bounded, though real ones are few
def load(name: str) -> RuleFile | None:
    """The rule file `name`, or None if no folder on the search path has it (or the name is unsafe)."""
    if len(name) > 200 or not _SAFE_NAME.fullmatch(name):  # a 20,000-character benchmark name: "File name too long"
        return None
    for folder in SEARCH_PATH:
        path = folder / name
        if path.is_file():
            return _compile(name, path)
    return None


def _compile(name: str, path: Path) -> RuleFile:
    records = yaml.load(path.read_text(), Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader)) or []
    begin, end, keys = None, {}, {}
    for record in records:
        (kind, body), = record.items()
        if kind == "BEGIN":
            begin = _code(body["CODE"], f"{name}:BEGIN", "exec")
        elif kind == "END":
            end = body
        elif kind == "KEY":
            keys[body["NAME"]] = _key_rule(name, body)
    return RuleFile(name, path, begin, keys, _code(end.get("PRE"), f"{name}:END", "exec"),
                    _tests(end.get("CHECK"), f"{name}:END"))


def _key_rule(file: str, body: dict) -> KeyRule:
    where = f"{file}:{body['NAME']}"
    target = body.get("ATLEAST_ONE_CHECK")
    return KeyRule(
        name=body["NAME"],
        req=body.get("REQ"),
        pre=_code(body.get("PRE"), where, "exec"),
        checks=_tests(body.get("CHECK"), where),
        post=_code(body.get("POST"), where, "exec"),
        first_checks=_tests(body.get("FIRST_CHECK"), where),
        target=_tests(target, where)[0] if target else None,
        why=" ".join(body["WHY"].split()) if body.get("WHY") else None,
    )


def _tests(sources: str | list[str] | None, where: str) -> tuple[Test, ...]:
    if sources is None:
        return ()
    if isinstance(sources, str):
        sources = [sources]
    return tuple(Test(src.strip(), _code(src, where, "eval")) for src in sources)


def _code(source: str | None, where: str, mode: str) -> CodeType | None:
    return compile(source.strip(), where, mode) if source else None
