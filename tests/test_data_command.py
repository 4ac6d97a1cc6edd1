"""`trainclock data prepare` with no member: it prepares the member a benchmark declares as its
`default_member` (the README's first run), read from the registry, never named by the command;
with none declared, or several, or one that is no member, it asks for a member in one line."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainclock.commands import data
from trainclock.errors import UsageError
from trainclock.workload import registry

README = Path(__file__).resolve().parents[1] / "README.md"


def fake(key: str, members: list[str], default: str | None = None, prepared: list | None = None):
    workload = SimpleNamespace(key=key, full_size=members[-1],
                               members=lambda: [SimpleNamespace(name=m) for m in members],
                               prepare_data=lambda member, source, force=False: (prepared.append((member, force))
                                                                                  or f"{member} ready"))
    if default is not None:
        workload.default_member = default
    return workload


@pytest.fixture
def registered(monkeypatch):
    def use(*workloads):
        monkeypatch.setattr(registry, "workloads", lambda: list(workloads))
    return use


def test_no_member_prepares_the_declared_default(registered, capsys):
    prepared = []
    registered(fake("alpha", ["alpha-tiny", "alpha-full"], prepared=prepared),
               fake("beta", ["beta-tiny", "beta-mini", "beta-full"], default="beta-mini", prepared=prepared))
    assert data.prepare(SimpleNamespace(benchmark=None, data=None, force=True)) == 0
    assert prepared == [("beta-mini", True)]
    assert "beta-mini ready" in capsys.readouterr().out


def test_a_named_member_wins_over_the_default(registered):
    prepared = []
    registered(fake("alpha", ["alpha-tiny", "alpha-full"], prepared=prepared),
               fake("beta", ["beta-tiny", "beta-full"], default="beta-tiny", prepared=prepared))
    data.prepare(SimpleNamespace(benchmark="alpha-tiny", data=None, force=False))
    assert prepared == [("alpha-tiny", False)]


def test_with_no_default_declared_it_asks_for_a_member_and_shows_a_real_one(registered):
    registered(fake("alpha", ["alpha-tiny", "alpha-full"]))
    with pytest.raises(UsageError, match=r"no benchmark declares a default member: name one, e\.g\. "
                                         r"`trainclock data prepare alpha-tiny`"):
        registry.default_member()


def test_two_defaults_are_refused_naming_both(registered):
    registered(fake("alpha", ["alpha-tiny"], default="alpha-tiny"), fake("beta", ["beta-tiny"], default="beta-tiny"))
    with pytest.raises(UsageError, match=r"several benchmarks declare a default member \(alpha: alpha-tiny, "
                                         r"beta: beta-tiny\)"):
        registry.default_member()


def test_a_default_that_is_no_member_is_refused(registered):
    registered(fake("alpha", ["alpha-tiny"], default="alpha-huge"))
    with pytest.raises(UsageError, match="alpha declares 'alpha-huge' as the default member, but has no such member"):
        registry.default_member()


def test_the_parser_names_no_member_as_the_default():
    from trainclock.cli import build_parser

    args = build_parser().parse_args(["data", "prepare", "--force"])
    assert args.benchmark is None and args.func is data.prepare


def test_the_declared_default_is_the_readmes_first_run():
    """The README's first command runs the member a bare `trainclock data prepare` prepares."""
    declared = [w for w in registry.workloads() if getattr(w, "default_member", None)]
    if not declared:
        pytest.skip("no benchmark declares its default_member yet")
    first_run = re.search(r"trainclock run (\S+)", README.read_text()).group(1)
    assert registry.default_member() == first_run
