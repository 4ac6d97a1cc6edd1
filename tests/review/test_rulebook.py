"""The rule files: trainclock's add to the official ones without replacing any, and a name made
from log values can only ever open a rule file."""

from __future__ import annotations

from trainclock.review import rulebook


def test_own_rule_files_only_fill_gaps_in_the_official_ones():
    own = sorted(p.relative_to(rulebook.OWN_RULES) for p in rulebook.OWN_RULES.glob("*/*.yaml"))
    assert [str(p) for p in own] == ["trainclock/common.yaml", "training_3.0.0/open_gpt3.yaml",
                                     "training_3.1.0/open_gpt3.yaml"]
    for relative in own:
        assert not (rulebook.OFFICIAL_RULES / relative).exists(), f"mlperf-logging now ships {relative}: drop ours"


def test_every_rule_file_of_the_supported_rounds_compiles():
    for round_ in ("3.0", "3.1"):
        folder = rulebook.rules_folder(round_)
        names = {p.name for p in (rulebook.OFFICIAL_RULES / folder).glob("*.yaml")} | {"open_gpt3.yaml"}
        for name in names:
            rules = rulebook.load(f"{folder}/{name}")
            assert rules is not None and (rules.keys or rules.begin), name
    house = rulebook.load(rulebook.HOUSE_RULES)
    assert all(rule.why for rule in house.keys.values() if rule.checks)


def test_unsafe_or_unknown_names_load_nothing():
    for name in ("../common.yaml", "training_3.1.0/../../x.yaml", "/etc/passwd", "training_3.1.0/open_x.yaml",
                 "training_3.1.0/closed_{'a': 1}.yaml", "training_3.1.0/common.yml"):
        assert rulebook.load(name) is None, name
