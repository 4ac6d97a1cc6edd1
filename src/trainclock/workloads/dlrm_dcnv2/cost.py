"""The planner's cost model of a DLRM-DCNv2 member (workload/cost_model.py says how the planner uses it).

In the generic terms: the MLPs and cross layers are one data-parallel "layer" (no tensor or
pipeline split: `tensor_parallel_units` 1, `layers` 1), the 26 tables are `other_parameters` and
`sharded_parameters` as a sharded run lays them out (--embedding-sharding auto, the default on 2
or more processes; the full-size member as the MLPerf entries' HugeCTR does: its 13 small tables
replicated, see `sharded_tables`, whose lookups stay local and whose gradients join the dense
part's all-reduce): the planner divides the sharded ones over every device, leaves them out of
the data-parallel gradient traffic, updates only the rows a step's samples touch
(`sharded_parameters_touched_per_sample`, Adagrad's sparse update), and charges the all-to-all
of `exchange_values_per_sample` pooled values per sample each way. The
generic model splits the tables evenly; `fullest_rank_bytes` counts the split the run builds
(sharding.table_plan: the largest tables row-wise, the rest whole, the tiny ones replicated),
which the run's memory check uses.
Micro-batches are whole per-device batches of thousands of samples, as DLRM runs them.
FLOPs: 3x the forward matmuls of the MLPs and cross layers plus the bag sums (spec.py).
Progress is counted in epochs, as MLPerf's RCPs count it (1/4,195,197,692 epoch per sample for
the full size); the tiers' convergence is read off their reference runs."""

from __future__ import annotations

from dataclasses import dataclass

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.dlrm_dcnv2.sharding import table_plan
from trainclock.workloads.dlrm_dcnv2.spec import MEMBERS, MLPERF_ROUND, DlrmSpec

ADAGRAD_STATE_BYTES = 4  # one fp32 sum of squared gradients per parameter
FP32 = 4
INDEX_BYTES = 8  # an int64 row id of a sparse gradient
# HugeCTR's sharding planner keeps a table data parallel (replicated on every GPU) when its rows x
# dim x 8 bytes (fp32 weight and Adagrad sum) are below DP_SHARDING_THRESHOLD GB: 0.008 in NVIDIA's
# v3.1 single-node configs (0.0125 in the 8- and 16-node ones, which adds one table of 11,938 rows)
# (mlcommons/training_results_v3.1 NVIDIA/benchmarks/dlrm_dcnv2/implementations/hugectr/
# config_DGXH100_*.sh and sharding/planner.py). 13 of the 26 tables, 0.01% of the rows.
REPLICATED_BYTES_PER_VALUE = 8
REPLICATED_BELOW_BYTES = 0.008e9


def run_progress(spec: DlrmSpec, samples_per_epoch: int | None = None) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike. `samples_per_epoch`: the training set's own
    size, where the job counts it from its data (default: the spec's)."""
    # MLPerf dlrm_dcnv2 logs progress as the fraction of the epoch under epoch_num
    return Progress(unit="samples", units_per_sample=1, log_key="epoch_num", log_in="epochs",
                    samples_per_epoch=samples_per_epoch or spec.samples_per_epoch)


@dataclass(frozen=True)
class DlrmCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: DlrmSpec

    @property
    def parameter_count(self) -> int:
        return self.spec.shape.parameter_count()

    layers = 1
    tensor_parallel_units = 1
    tensor_parallel_unit = "units (DLRM has no tensor-parallel split)"

    @property
    def layer_parameters(self) -> float:
        return float(self.spec.shape.dense_parameters())

    @property
    def other_parameters(self) -> float:
        return float(self.spec.shape.embedding_parameters())

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=self.spec.shape.flops_per_sample())

    @property
    def boundary_values_per_sample(self) -> float:
        return float(self.spec.shape.interaction_width)

    @property
    def sharded_tables(self) -> tuple[int, ...]:
        """The tables split over the devices. The full-size member (the Criteo tables) as the
        MLPerf submissions run it: all but those HugeCTR keeps data parallel (replicated), whose
        weights and Adagrad state (REPLICATED_BYTES_PER_VALUE per value) take less than
        REPLICATED_BELOW_BYTES. A tier's run shards by trainclock's own plan, which the generic
        model counts as every table split evenly (see the module's note)."""
        shape = self.spec.shape
        if self.spec.data != "criteo":
            return tuple(range(len(shape.rows)))
        return tuple(t for t, rows in enumerate(shape.rows)
                     if rows * shape.dim * REPLICATED_BYTES_PER_VALUE >= REPLICATED_BELOW_BYTES)

    @property
    def exchange_values_per_sample(self) -> float:
        """Pooled embedding values a sample sends between devices each way: one per sharded table
        (a replicated table is looked up where the sample is)."""
        return float(len(self.sharded_tables) * self.spec.shape.dim)

    @property
    def sharded_parameters(self) -> float:
        return float(sum(self.spec.shape.rows[t] for t in self.sharded_tables) * self.spec.shape.dim)

    @property
    def sharded_parameters_touched_per_sample(self) -> float:
        """At most: repeated ids in a batch touch a row once."""
        return float(sum(self.spec.shape.multi_hot[t] for t in self.sharded_tables) * self.spec.shape.dim)

    micro_batch_choices = (256, 512, 1024, 2048, 4096, 8192)

    @property
    def rows_touched_per_sample(self) -> int:
        """Embedding rows a sample reads and (sparse Adagrad) updates: its bag sizes summed."""
        return sum(self.spec.shape.multi_hot)

    optimizer_state_bytes_per_parameter = ADAGRAD_STATE_BYTES

    def fullest_rank_bytes(self, ranks: int) -> float:
        """fp32 weights, gradients and Adagrad state on the fullest of `ranks` data-parallel ranks,
        tables laid out as the run lays them: the dense part replicated with dense gradients; a
        table's weight and Adagrad sum where it is held, plus its gradient: dense where DDP
        all-reduces it (replicated tables; every table under "none" on 2+ processes), else one
        value row and an int64 id per id looked up, uncoalesced (a row-wise table's ids spread
        evenly over the ranks)."""
        shape, gbs = self.spec.shape, self.spec.global_batch_size
        row, looked_up = 2 * FP32 * shape.dim, FP32 * shape.dim + INDEX_BYTES
        dense = (2 * FP32 + ADAGRAD_STATE_BYTES) * shape.dense_parameters()
        plan = table_plan(self.spec, ranks)
        if plan is None:
            grads = (FP32 * shape.embedding_parameters() if ranks > 1
                     else gbs * sum(shape.multi_hot) * looked_up)
            return dense + row * sum(shape.rows) + grads
        fullest = 0.0
        for rank in range(ranks):
            grads = 0.0
            for t, placement in enumerate(plan.placement):
                if placement == "replicated":
                    grads += FP32 * shape.rows[t] * shape.dim
                elif placement == "row" or plan.owner[t] == rank:
                    grads += gbs * shape.multi_hot[t] * looked_up / (ranks if placement == "row" else 1)
            fullest = max(fullest, row * plan.rows_on(rank) + grads)
        return dense + fullest

    spec_progress = staticmethod(run_progress)

    sample_noun = "click samples"

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_samples

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        """16-bit values kept for backward per sample: every MLP layer's output, the pooled
        embeddings and dense vector (27 x dim), and per cross layer its low-rank and full outputs."""
        shape = self.spec.shape
        width = shape.interaction_width
        if recompute == "full":
            return 2.0 * micro_batch * width
        values = sum(shape.bottom) + sum(shape.top) + width + shape.cross_layers * (shape.cross_rank + 2 * width)
        return 2.0 * micro_batch * values

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)  # activations are small next to the tables: recomputing never pays

    @property
    def tp_collectives_per_layer(self) -> int:
        return 0

    @property
    def units_per_progress(self) -> float:
        return self.spec.samples_per_epoch  # the runs record samples, the rules count epochs

    def measured_efficiency(self) -> tuple[float, str] | None:
        return self.own_efficiency()
