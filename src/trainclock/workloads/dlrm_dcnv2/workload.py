"""The DLRM-DCNv2 benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (Criteo day files, the model, AUC, Adagrad, MLPerf log keys)."""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.embeddings import shard_embeddings
from trainclock.distributed.layout import Layout
from trainclock.distributed import dry_run
from trainclock.distributed.parallelize import Materialize, ModelParallelism, data_parallel_ignored, parallelize
from trainclock.errors import ResourceError, UsageError
from trainclock.optim.adagrad import Adagrad
from trainclock.workloads.dlrm_dcnv2.sharding import SHARDINGS, embedding_sharding, table_plan
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.spec_base import division
from trainclock.workloads.dlrm_dcnv2.data.dataset import CriteoDays, open_days
from trainclock.workloads.dlrm_dcnv2.metric import predictions, score
from trainclock.workloads.dlrm_dcnv2.spec import ADAGRAD_EPS, DENSE_FEATURES, MEMBERS, MLPERF_ROUND, DlrmSpec, get_member
from trainclock.workloads.dlrm_dcnv2.cost import run_progress

EVAL_MICRO_BATCH = 8192
# the MLPs and cross layers data parallel (DDP); the tables either replicated with them
# (--embedding-sharding none) or sharded over the ranks (sharding.py chooses, embeddings.py does it)
PARALLELISM = ModelParallelism()
RULES_DATASET = "criteo_1tb_multihot"


class DlrmWorkload(BenchmarkWorkload):
    key = "dlrm_dcnv2"
    full_size_flags = "--data DIR --nproc N"
    mlperf_round = MLPERF_ROUND
    title = "DLRM-DCNv2"
    specs = MEMBERS
    needs_data = ("dlrm-criteo1tb trains on Criteo 1TB multi-hot: pass --data FOLDER holding day_0 .. day_23 "
                  "_dense.npy, _labels.npy and _sparse_multi_hot.npz")

    def parameter_count(self, spec: DlrmSpec) -> int:
        return spec.shape.parameter_count()

    def describe(self, spec: DlrmSpec) -> str:
        s = spec.shape
        return (f"26 tables of dim {s.dim} ({sum(s.rows):,} rows), {s.cross_layers} cross layers rank {s.cross_rank}, "
                f"top {'-'.join(map(str, s.top))}")

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--embedding-sharding", choices=SHARDINGS, default=None,
                           help="how the embedding tables are split over the processes: the planner's mix (auto: "
                                "the largest tables' rows over all processes, the others whole on one, the tiny "
                                "ones copied to each), whole tables per process (table), every table's rows over "
                                "all processes (row), or a full copy on each (none); default auto under --nproc 2 "
                                "or more, none on one process")

    def configure(self, spec: DlrmSpec, settings: RunSettings, layout: Layout, device: torch.device) -> DlrmSpec:
        return replace(spec, embedding_sharding=embedding_sharding(settings.extra.get("embedding_sharding"), layout,
                                                                   len(spec.shape.rows)))

    def check_run(self, spec: DlrmSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        super().check_run(spec, settings, layout, device)
        if spec.data == "criteo" and device.type != "meta":  # a dry run (on meta) sizes itself
            check_fits(spec, device, layout.dp)  # at the run's batch: tables of no more rows than a rank's samples are copied

    def build_job(self, spec: DlrmSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        return build_job(spec, settings, seed, ctx, device)

    def build_model(self, spec: DlrmSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        return build_model(spec, ctx, device, settings)

    def optimizer(self, spec: DlrmSpec) -> Adagrad:
        return Adagrad(spec.learning_rate, eps=ADAGRAD_EPS)

    def sample_loss(self, spec: DlrmSpec, model: torch.nn.Module, rows: int,
                    device: torch.device) -> torch.Tensor | None:
        if spec.embedding_sharding != "none":
            return None  # the exchange reads every rank's batch size back: fake tensors have no values
        batch = {"dense": torch.randn(rows, DENSE_FEATURES, device=device),
                 "sparse": torch.cat([torch.randint(0, n, (rows, hot), device=device)
                                      for n, hot in zip(spec.shape.rows, spec.shape.multi_hot)], dim=1),
                 "labels": torch.randint(0, 2, (rows,), device=device).float()}
        return loss(model, batch)

    def fetch_data(self) -> str | None:
        return None  # the tiers' click logs are generated by `trainclock data prepare`, nothing to install

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.data == "criteo":
            if data is None:
                raise UsageError("dlrm-criteo1tb reads the official Criteo multi-hot files: pass --data FOLDER")
            days = open_days(Path(data).expanduser(), spec.train_days, spec.shape.rows, spec.shape.multi_hot,
                             spec.global_batch_size)
            return f"{days.train_rows:,} train and {len(days.validation):,} validation samples in {data}"
        from trainclock.workloads.dlrm_dcnv2.data.clicks import prepare

        folder, meta = prepare(spec, force=force)
        return (f"{spec.train_days} days of {spec.rows_per_day:,} clicks and {meta['validation_samples']:,} "
                f"validation samples (click rate {meta['click_rate']:.1%}, best achievable AUC {meta['best_auc']}) "
                f"in {folder}")

    def cost(self, member: str):
        from trainclock.workloads.dlrm_dcnv2.cost import DlrmCost

        return DlrmCost(get_member(member))

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        from trainclock.workloads.dlrm_dcnv2.data.sample import write_sample

        return write_sample(get_member(member), folder, samples, seed)


def check_fits(spec: DlrmSpec, device: torch.device, ranks: int) -> None:
    """Refuse a model whose weights, gradients and Adagrad state exceed the device on its fullest
    rank, tables laid out as this run lays them (cost.py's fullest_rank_bytes)."""
    from trainclock.workloads.dlrm_dcnv2.cost import DlrmCost

    need = DlrmCost(spec).fullest_rank_bytes(ranks)
    if device.type == "cuda":
        have = torch.cuda.mem_get_info(device)[1]
    else:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise ResourceError(f"{spec.name} needs about {need / 2**30:,.0f} GiB for weights, gradients and Adagrad "
                            f"state but this {device.type} device has {have / 2**30:,.0f} GiB; shard its tables over more "
                            f"processes (--nproc, --embedding-sharding auto or row)")


def load_days(spec: DlrmSpec, settings: RunSettings, ctx: ParallelContext) -> tuple[CriteoDays, str]:
    if spec.data == "criteo" or settings.data is not None:
        folder = Path(settings.data).expanduser() if settings.data else None
        if folder is None:
            raise UsageError(f"{spec.name} needs --data FOLDER of Criteo day files")
        return open_days(folder, spec.train_days, spec.shape.rows, spec.shape.multi_hot, spec.global_batch_size), \
            "criteo_1tb_multihot" if spec.data == "criteo" else "criteo_format"
    from trainclock.workloads.dlrm_dcnv2.data.clicks import prepare

    folder, _ = ctx.main_first(lambda: prepare(spec))  # one rank generates, the others read the cache
    return open_days(folder, spec.train_days, spec.shape.rows, spec.shape.multi_hot, spec.global_batch_size), "clicks"


def build_job(spec: DlrmSpec, settings: RunSettings, seed: int, ctx: ParallelContext,
              device: torch.device) -> TrainJob:
    days, dataset = load_days(spec, settings, ctx)
    torch.manual_seed(seed)
    model = build_model(spec, ctx, device, settings)
    eval_micro = max(EVAL_MICRO_BATCH, spec.micro_batch_size)

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        return predictions(m, days, eval_micro, shard, autocast, device)

    def batch(step: int, rows: slice) -> dict[str, torch.Tensor]:
        return days.train_batch(seed, step, spec.global_batch_size, rows)

    return dlrm_job(spec, model, batch, evaluate, dataset, days, ctx.dp_size)


def build_model(spec: DlrmSpec, ctx: ParallelContext, device: torch.device, settings: RunSettings) -> torch.nn.Module:
    """DLRM as this rank trains it, from the seed the caller set. The tiers: every rank builds the
    same full model and keeps its part of the tables, so 1 and N processes start alike; the full
    size's 26B table parameters never fit one process: each rank makes only its part of them (the
    start then differs from one process's, as it must). On a meta device the model is made where a
    dry run makes tensors: as its fake tensors, the table shards too (on meta outside one)."""
    from trainclock.workloads.dlrm_dcnv2.model import build_model as dlrm_model
    from trainclock.workloads.dlrm_dcnv2.model import init_table

    on_meta = device.type == "meta"
    plan = table_plan(spec, ctx.dp_size)
    sharded = plan is not None
    whole = (not sharded or spec.data != "criteo") and not on_meta
    dp_mesh = ctx.mesh["dp"] if sharded else None  # sliced before any fake mode: the mesh stays real
    with (dry_run.fake_tensor_mode() or torch.device("meta")) if on_meta else contextlib.nullcontext():
        # tables DDP all-reduces keep dense gradients: NCCL all-reduces no sparse tensor
        model = dlrm_model(spec.shape, table_device=None if whole else "meta",
                           sparse=sharded or ctx.dp_size == 1)
        if whole:
            model = model.to(device)
        if sharded:
            if not whole:  # each rank draws other rows than its peers
                torch.manual_seed(torch.initial_seed() + 1 + ctx.env.rank)
            # each rank's loss is the mean over its own samples and DDP averages the dense gradients:
            # the tables' gradients, summed over every rank's samples by the exchange, take 1/dp too
            names = shard_embeddings(model, plan, dp_mesh, grad_scale=1 / ctx.dp_size, init=init_table)
            data_parallel_ignored(model, names)
            if not on_meta:
                model = model.to(device)
    return parallelize(model, ctx, PARALLELISM, compile=settings.compile,
                       activation_checkpointing=settings.activation_checkpointing,
                       materialize=Materialize(device) if on_meta else None)


def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["dense"], batch["sparse"])
    return F.binary_cross_entropy_with_logits(logits.float(), batch["labels"])


def dlrm_job(spec: DlrmSpec, model: torch.nn.Module, batch, evaluate, dataset: str, days: CriteoDays,
             ranks: int) -> TrainJob:
    run_division = division(spec, dataset, RULES_DATASET)
    return member_job(
        spec,
        division=run_division,
        model=model,
        batch=batch,
        loss=loss,
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.shape.flops_per_sample(),
        optimizer=Adagrad(spec.learning_rate, eps=ADAGRAD_EPS),  # as DlrmWorkload.optimizer
        eval_schedule=EvalSchedule(every=spec.eval_every_samples),
        # the rules' count for the full size (the first half of day 23); what was read is logged beside it
        eval_samples=spec.eval_samples if run_division == "closed" or spec.data == "criteo" else len(days.validation),
        max_samples=min(spec.max_samples, days.blocks(spec.global_batch_size) * spec.global_batch_size),
        log_keys=log_keys(spec, dataset, days, ranks),
    )


def log_keys(spec: DlrmSpec, dataset: str, days: CriteoDays, ranks: int) -> dict:
    plan = table_plan(spec, ranks)
    return {
        "dataset": dataset,
        "embedding_dim": spec.shape.dim,
        "num_embeddings_per_feature": list(spec.shape.rows),
        "multi_hot_sizes": list(spec.shape.multi_hot),
        "dcn_num_layers": spec.shape.cross_layers,
        "dcn_low_rank_dim": spec.shape.cross_rank,
        "trainclock_train_samples_available": days.train_rows,
        "trainclock_eval_samples_read": len(days.validation),
        "trainclock_embedding_sharding": spec.embedding_sharding,  # auto, table, row or none (replicated)
        # where each table lived: replicated, table (whole on one rank) or row (split over all)
        "trainclock_embedding_placement": list(plan.placement) if plan else ["replicated"] * len(spec.shape.rows),
    }
