"""The RNN-T benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (LibriSpeech or espeak-ng speech, the reference network, the transducer loss,
greedy-decoded WER with the EMA weights, LAMB with its warmup-hold-decay rate, the rnnt log keys)."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.parallelize import build_parallelized
from trainclock.errors import UsageError
from trainclock.optim.ema import averaged
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.evaluation import shard_rows
from trainclock.workload.spec_base import division
from trainclock.workloads.rnnt.data import tokenizer
from trainclock.workloads.rnnt.data.batches import BucketBatches, Utterances, eval_batches
from trainclock.workloads.rnnt.data.prepare import Corpus, prepare_official, prepare_tier
from trainclock.workloads.rnnt.decode import greedy_decode
from trainclock.workloads.rnnt.features import features
from trainclock.workloads.rnnt.loss import transducer_loss
from trainclock.workloads.rnnt.metric import score, wer_sums
from trainclock.workloads.rnnt.model import RNNT
from trainclock.workloads.rnnt.optim import RnntLamb
from trainclock.workloads.rnnt.parallelize import PARALLELISM
from trainclock.workloads.rnnt.spec import MEMBERS, MLPERF_ROUND, RnntSpec, get_member
from trainclock.workloads.rnnt.cost import run_progress

RULES_DATASET = "librispeech"


class RnntWorkload(BenchmarkWorkload):
    key = "rnnt"
    full_size_flags = "--data LIBRISPEECH_DIR"
    mlperf_round = MLPERF_ROUND
    title = "RNN-T"
    specs = MEMBERS
    unit = batch_units = "utterances"
    ddp_only = "its greedy decoding cannot meet FSDP's all-gathers"
    needs_data = ("rnnt-librispeech trains on LibriSpeech: pass --data FOLDER (train-*/dev-clean folders of FLAC, "
                  "or the reference's librispeech-*-wav.json manifests); it is never downloaded")

    def describe(self, spec: RnntSpec) -> str:
        m = spec.model
        return f"LSTM {m.enc_hidden} x {m.enc_pre_layers}+{m.enc_post_layers}, {m.vocab} pieces"

    def build_job(self, spec: RnntSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        corpus = ctx.main_first(lambda: load_corpus(spec, settings.data))  # one rank synthesises the speech
        torch.manual_seed(seed)
        model = self.build_model(spec, ctx, device, settings)
        return rnnt_job(spec, model, corpus, seed, device)

    def build_model(self, spec: RnntSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        """The network as this rank trains it. Built whole (49M parameters), except for a meta
        device (a dry run), where it is built on meta."""
        return build_parallelized(lambda: RNNT(spec.model, spec.ema), device, ctx, PARALLELISM, compile=settings.compile,
                                  activation_checkpointing=settings.activation_checkpointing)

    def optimizer(self, spec: RnntSpec) -> RnntLamb:
        # the nominal training set's epoch (the data's own count sets it in a run)
        return rnnt_optimizer(spec, max(1, spec.train_utterances // spec.global_batch_size))

    def sample_loss(self, spec: RnntSpec, model: torch.nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        """The transducer loss of `rows` utterances padded as a full-size batch is: to the longest
        utterance the rules keep (max_duration, 16.7 s: with one duration bucket a batch's rows are
        drawn across all durations, and 192 of LibriSpeech's, most of them 12-16 s, all but always
        hold one near the cap), i.e. 557 feature frames of 240 (10 ms hop, 3 stacked, every 3rd
        kept), and transcripts of the mean utterance's piece rate at that length (45 pieces per
        12.3 s: 62). The loss reads only shapes (a lattice of T x U+1 per utterance). The features
        the job's loss computes from the audio first (features.py: without gradients, freed before
        the network runs) are left out: their buffers (at most 13 MB an utterance of 16.7 s, 0.2 GB
        for 16, measured on a CPU) are gone before the network's activations exist."""
        frames = math.ceil(spec.max_duration / spec.features.hop_s / spec.features.subsampling)
        pieces = math.ceil(spec.mean_pieces * spec.max_duration / spec.mean_duration)
        feats = torch.randn(rows, frames, spec.model.in_features, device=device)
        feat_lens = torch.full((rows,), frames, dtype=torch.long, device=device)
        labels = torch.randint(0, spec.model.vocab, (rows, pieces), device=device)
        label_lens = torch.full((rows,), pieces, dtype=torch.long, device=device)
        blank, emit, encoded = model(feats, feat_lens, labels)
        return transducer_loss(blank, emit, encoded, label_lens).mean()

    def fetch_data(self) -> str | None:
        return None  # the tiers synthesise their speech in prepare (nothing to download)

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.dataset == "librispeech" and data is None:
            raise UsageError("rnnt-librispeech prepares LibriSpeech from a local copy: pass --data FOLDER")
        corpus = load_corpus(spec, data, force)
        hours = sum(u.duration for u in corpus.train) / 3600
        return (f"{len(corpus.train)} training ({hours:.2f} h) and {len(corpus.eval)} evaluation utterances, "
                f"sentencepiece model {corpus.sentencepiece}")

    def cost(self, member: str):
        from trainclock.workloads.rnnt.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        """Made-up LibriSpeech (data/sample.py) of the member's utterance lengths: `samples` training
        utterances as train-clean-100, one dev-clean utterance, and at full size the reference's
        1023-piece sentencepiece model beside them (trained from a sample's few transcripts it would
        lack pieces; a tier's small model is trained from them when the run prepares the folder)."""
        from trainclock.workloads.rnnt.data.sample import write_librispeech

        spec = get_member(member)
        return str(write_librispeech(Path(folder), samples, seed, spec.model.vocab, spec.mean_duration,
                                     spec.max_duration, sentencepiece=spec.dataset == "librispeech"))


def load_corpus(spec: RnntSpec, data: str | None, force: bool = False) -> Corpus:
    if data is not None:
        return prepare_official(Path(data).expanduser(), spec.model.vocab, force)
    return prepare_tier(spec.name, spec.train_utterances, spec.eval_utterances, spec.model.vocab, force)


def rnnt_job(spec: RnntSpec, model: torch.nn.Module, corpus: Corpus, seed: int, device: torch.device) -> TrainJob:
    """The job around a built model and a loaded corpus; tests build one directly to write logs."""
    processor = tokenizer.load(corpus.sentencepiece, spec.model.vocab)
    in_memory = spec.dataset == "synthetic"
    train = Utterances([u for u in corpus.train if u.duration <= spec.max_duration], processor, cache=in_memory)
    if len(train) < spec.global_batch_size:
        raise UsageError(f"{len(train)} training utterances cannot fill a global batch of {spec.global_batch_size}")
    evals = Utterances(corpus.eval, processor, cache=in_memory)
    batches = BucketBatches(train, spec.global_batch_size, spec.buckets, spec.features, seed)
    optimizer = rnnt_optimizer(spec, batches.steps_per_epoch)
    cached: dict[tuple[int, int], list] = {}

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        if shard not in cached:  # evaluation features carry no augmentation: computed once, kept on the device
            rows = shard_rows(len(evals), shard)
            cached[shard] = [(*features({k: v.to(device) for k, v in b.items()}, spec.features), b["rows"])
                             for b in eval_batches(evals, spec.features, rows, spec.eval_batch)]
        net = getattr(m, "module", m)
        hypotheses, references = [], []
        with torch.no_grad(), autocast(), averaged(net):  # decoded with the weight average, as the reference's
            for feats, feat_lens, ids in cached[shard]:
                hypotheses += [processor.decode(p) for p in greedy_decode(net, feats, feat_lens, spec.max_symbols)]
                references += [evals.items[int(i)].transcript for i in ids]
        return wer_sums(hypotheses, references)

    def loss(m: torch.nn.Module, b: dict) -> torch.Tensor:
        feats, feat_lens = features(b, spec.features)  # on the batch's device, in fp32
        blank, emit, frames = m(feats, feat_lens, b["labels"])
        return transducer_loss(blank, emit, frames, b["label_lens"]).mean()

    epoch = len(train)
    return member_job(
        spec,
        division=division(spec, spec.dataset, RULES_DATASET),
        model=model,
        batch=batches.batch,  # a rank decodes only its own rows
        loss=loss,
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec, epoch),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.flops_per_sample(float(train.durations.mean()),
                                               sum(map(len, train.labels)) / len(train)),
        optimizer=optimizer,
        eval_schedule=EvalSchedule(every=max(1, int(spec.eval_every_epochs * epoch))),
        eval_samples=len(evals),
        max_samples=spec.epochs * epoch,
        log_keys=log_keys(spec, len(train)),
        cpu_prefetch_steps=1,  # decoding FLAC releases the GIL (the tiers' audio is in memory: then cheap)
    )


def rnnt_optimizer(spec: RnntSpec, steps_per_epoch: int) -> RnntLamb:
    return RnntLamb(spec.learning_rate, steps_per_epoch, spec.warmup_epochs, spec.hold_epochs, spec.exp_gamma,
                    beta1=spec.beta1, beta2=spec.beta2)


def log_keys(spec: RnntSpec, train_utterances: int) -> dict:
    """The benchmark-specific keys, as the closed rnnt rules ask for them."""
    f = spec.features
    return {
        "data_train_max_duration": spec.max_duration,
        "data_train_num_buckets": spec.buckets,
        "data_speed_perturbaton_min": f.speed_min,  # sic: the rules spell it so
        "data_speed_perturbaton_max": f.speed_max,
        "data_spec_augment_freq_n": f.freq_masks,
        "data_spec_augment_freq_min": f.freq_min,
        "data_spec_augment_freq_max": f.freq_max,
        "data_spec_augment_time_n": f.time_masks,
        "data_spec_augment_time_min": f.time_min,
        "data_spec_augment_time_max": f.time_max,
        "model_weights_initialization_scale": spec.model.weights_init_scale,
        "model_eval_ema_factor": spec.ema,
        "eval_max_prediction_symbols": spec.max_symbols,
        "train_samples": train_utterances,
    }
