"""What changes with scale beyond the alpha-beta traffic (issue 38): the wait for the slowest
data-parallel replica when a cost model declares that its samples' work varies, the all-to-all's own
share of the network's line rate, fitted where an entry exchanges across nodes, and the
recommender's small tables kept replicated (out of the all-to-all), as HugeCTR's planner keeps them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from trainclock.errors import DataError
from trainclock.planner.model import collectives as comm, workload_view
from trainclock.planner.model.step_time import (
    Efficiency, exchange_crosses_nodes, expected_max_normal, micro_batch_times, step_time,
    straggler_seconds)

from .helpers import accelerator, plan
from .test_sharded_parameters import Tables

EFF = Efficiency(compute=0.5)


@dataclass(frozen=True)
class Varying(Tables):
    """The tables' model without tables, whose samples' work varies by `sample_work_cv`."""

    sharded: float = 0.0
    sample_work_cv: float = 0.2


def test_expected_maximum_of_normals_grows_with_the_count_and_matches_known_values():
    assert expected_max_normal(1) == 0.0
    values = [expected_max_normal(n) for n in (2, 4, 8, 64, 1024)]
    assert values == sorted(values)
    # exact expected maxima of 2, 8 and 64 standard normals: 0.564, 1.424, 2.410
    for n, exact in ((2, 0.5642), (8, 1.4236), (64, 2.4096)):
        assert expected_max_normal(n) == pytest.approx(exact, rel=0.05)


def test_straggler_wait_grows_with_replicas_and_shrinks_with_samples_per_replica():
    assert straggler_seconds(1.0, 0.0, 4, 64) == 0.0 and straggler_seconds(1.0, 0.2, 4, 1) == 0.0
    assert straggler_seconds(1.0, 0.2, 4, 64) > straggler_seconds(1.0, 0.2, 4, 8) > 0.0
    assert straggler_seconds(1.0, 0.2, 16, 8) == pytest.approx(straggler_seconds(1.0, 0.2, 4, 8) / 2)
    assert straggler_seconds(1.0, 0.2, 4, 8) == pytest.approx(0.2 / 2 * expected_max_normal(8))


def test_step_waits_for_the_slowest_replica_only_where_the_cost_model_declares_variation():
    p = plan(dp=8, micro_batch=1024, precision="fp32", zero=0)
    varying, steady = step_time(Varying(), 8192, p, accelerator(), EFF), step_time(Varying(sample_work_cv=0.0), 8192,
                                                                                  p, accelerator(), EFF)
    assert steady.straggler_s == 0.0 and Tables().sample_work_cv == 0.0
    assert varying.straggler_s == pytest.approx(varying.compute_s * 0.2 / math.sqrt(1024) * expected_max_normal(8))
    assert ("waiting for the slowest replica", varying.straggler_s) in varying.rows()
    assert varying.step_s == pytest.approx(steady.step_s + varying.straggler_s)


def test_a_negative_declared_variation_is_refused_once_where_the_planner_takes_the_cost_model(monkeypatch):
    class Declaring:
        key = "declaring"

        def cost(self, member):
            return Varying(sample_work_cv=-0.1)

    monkeypatch.setattr(workload_view.registry, "find", lambda name: (Declaring(), "declaring-tiny"))
    with pytest.raises(DataError, match="declaring-tiny's cost model declares sample_work_cv -0.1"):
        workload_view.cost_model("declaring-tiny")


def test_exchange_network_share_slows_only_the_all_to_all_that_leaves_the_node():
    inside, across = plan(dp=8, micro_batch=1024, precision="fp32", zero=0), plan(dp=16, micro_batch=1024,
                                                                                  precision="fp32", zero=0)
    slow = Efficiency(compute=0.5, exchange_network=0.4)
    assert not exchange_crosses_nodes(Tables(), inside, accelerator())
    assert exchange_crosses_nodes(Tables(), across, accelerator())
    assert not exchange_crosses_nodes(Tables(sharded=0.0), across, accelerator())
    assert micro_batch_times(Tables(), inside, accelerator(), slow).exchange == pytest.approx(
        micro_batch_times(Tables(), inside, accelerator(), EFF).exchange)
    # 16 ranks on 2 nodes: half of each rank's 1024 x 2000 fp32 values leave by the 10 GB/s network
    off_node = 8 / 16 * 1024 * 2000 * 4
    assert micro_batch_times(Tables(), across, accelerator(), EFF).exchange == pytest.approx(
        off_node / (10e9 * comm.LINK_EFFICIENCY))
    assert micro_batch_times(Tables(), across, accelerator(), slow).exchange == pytest.approx(off_node / (10e9 * 0.4))


def test_recommender_keeps_its_small_tables_replicated_and_out_of_the_all_to_all():
    from trainclock.workload import registry

    workload, member = registry.find("dlrm_dcnv2")
    cost = workload.cost(member)
    rows = cost.spec.shape.rows
    replicated = [t for t in range(len(rows)) if t not in cost.sharded_tables]
    # HugeCTR's DP_SHARDING_THRESHOLD 0.008 GB: rows x 128 x 8 bytes below it, i.e. fewer than 7,813 rows
    assert all(rows[t] < 7813 for t in replicated) and all(rows[t] >= 7813 for t in cost.sharded_tables)
    assert len(cost.sharded_tables) == 13 and cost.exchange_values_per_sample == 13 * 128
    assert cost.sharded_parameters == sum(rows[t] for t in cost.sharded_tables) * 128 < cost.other_parameters
