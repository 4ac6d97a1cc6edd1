"""Training throughput and MFU of an RNN-T CPU tier, trainclock's step against the plain loop a
user would otherwise write (the MLCommons reference's train.py loop body), side by side on the same
batches and start weights.

  trainclock: the generic loop's train_step over the rnnt job (micro-batches, gradient norm and
              clipping, LAMB with the moving average of the weights updated in its step, the
              chunked joint under activation checkpointing)
  plain:      the reference's loop body: log_probs = model(feats, lens, y, y_lens) over the whole
              (B, T, U+1, V) joint; loss = transducer loss; loss.backward(); clip_grad_norm_(1);
              optimizer.step() (the same LAMB); apply_ema(model, ema_model, decay) over the
              state dict, on a copy of the same network and weights

Batches are read before the timing (the loop's own batches); both steps compute the features from
the batch's audio inside the step, as the reference does (on the GPU). It prints utterances/s,
audio seconds per second (the batch's audio after speed perturbation), MFU against the machine's
matmul peak, and the ratio trainclock / plain. Each step's batch has new lengths: the first step
at a shape pays oneDNN's primitive creation, so short runs read low.

  python benchmarks/rnnt_throughput.py [--member rnnt-mini] [--steps 8]

On a GPU, --full times trainclock's step of the full-size network (49M, 1023 pieces) in bf16 on
generated features of LibriSpeech's mean utterance (12.3 s: 410 stacked frames, 45 pieces), 16
utterances a micro-batch as the reference's 8-GPU run (1024 / 8 GPUs / 8 accumulation steps):

  python benchmarks/rnnt_throughput.py --full --device cuda [--steps 20]
"""

from __future__ import annotations

import copy

import torch

import harness
from trainclock.optim.base import parameter_groups
from trainclock.optim.lamb import LambOptimizer
from trainclock.workloads.rnnt.features import SAMPLE_RATE, features
from trainclock.workloads.rnnt.loss import lattice_log_probs, transducer_loss
from trainclock.workloads.rnnt.spec import get_member
from timing import autocast_for, timed


def plain_step(job, spec, precision: str, batches):
    model = copy.deepcopy(job.model)  # the same start weights, before trainclock trains them
    model.ema = None  # the plain loop keeps its own average, as the reference's apply_ema does
    ema_model = copy.deepcopy(model)
    o = job.optimizer
    optimizer = LambOptimizer(parameter_groups(model, o.weight_decay), lr=o.lr_at(0), betas=(o.beta1, o.beta2),
                              eps=o.eps, weight_decay=o.weight_decay)
    autocast = autocast_for(precision)

    def step(s: int) -> None:
        b = batches[s]
        feats, lens = features(b, spec.features)  # the reference computes them in its loop too (on the GPU)
        with autocast():
            f, f_lens = model.encode(feats, lens)
            g, _ = model.predict(b["labels"])
            blank, emit = lattice_log_probs(model.joint(f, g), b["labels"], spec.model.blank)
            loss = transducer_loss(blank, emit, f_lens, b["label_lens"]).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():  # the reference's apply_ema
            weights = model.state_dict()
            for k, v in ema_model.state_dict().items():
                v.copy_(spec.ema * v + (1 - spec.ema) * weights[k])

    return step


def full_size(device: torch.device, steps: int, micro: int = 16) -> None:
    from trainclock.workloads.rnnt.model import RNNT

    spec = get_member("rnnt-librispeech")
    model = RNNT(spec.model, spec.ema).to(device)  # with the weight average the step updates
    optimizer = job_optimizer(spec).build(model)
    frames, pieces = int(spec.mean_duration * 100 / spec.features.subsampling), int(spec.mean_pieces)
    g = torch.Generator().manual_seed(0)
    batch = {"feats": torch.randn(micro, frames, spec.model.in_features, generator=g),
             "feat_lens": torch.full((micro,), frames), "labels": torch.randint(0, spec.model.vocab, (micro, pieces), generator=g),
             "label_lens": torch.full((micro,), pieces)}
    batch = {k: v.to(device) for k, v in batch.items()}
    loss_of = lambda m, b: transducer_loss(*m(b["feats"], b["feat_lens"], b["labels"])[:2], (b["feat_lens"] + 1) // 2,  # noqa: E731
                                           b["label_lens"]).mean()
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16)  # noqa: E731

    def step() -> None:
        with autocast():
            loss = loss_of(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = timed(lambda _s: step(), steps, first=3, warm_up=3, device=device)
    flops = spec.flops_per_sample(frames * spec.features.subsampling / 100, pieces) * micro / seconds
    memory = torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else 0.0
    print(f"rnnt-librispeech on {device}: micro-batch {micro}, {frames} frames, {pieces} pieces, bf16: "
          f"{micro / seconds:.1f} utterances/s, {micro * spec.mean_duration / seconds:.0f} audio s/s, "
          f"{flops / 1e12:.1f} TFLOP/s, peak memory {memory:.1f} GiB")


def job_optimizer(spec):
    from trainclock.workloads.rnnt.optim import RnntLamb

    return RnntLamb(spec.learning_rate, 275, spec.warmup_epochs, spec.hold_epochs, spec.exp_gamma,
                    beta1=spec.beta1, beta2=spec.beta2)


def main() -> None:
    p = harness.parser(__doc__, member="rnnt-mini", steps=8)
    p.add_argument("--full", action="store_true", help="the full-size network on generated features (GPU)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    if args.full:
        full_size(torch.device(args.device), args.steps)
        return
    bench = harness.Bench.build(args.member)  # the tier's speech, cached
    spec = bench.spec
    bench.header(args.steps)
    for i, precision in enumerate(("fp32", "bf16")):
        if i:
            bench = bench.rebuild()
        batches = bench.batches(args.steps + 1)  # the loop's own batches, for both loops
        audio_s = sum(float(b["samples"].sum()) / SAMPLE_RATE for b in batches[1:]) / args.steps  # after speed perturbation
        plain = plain_step(bench.job, spec, precision, batches)
        harness.compare({"trainclock": bench.step(batches, precision), "plain": plain}, bench, args.steps,
                        label=f"{precision:4}", extras=lambda seconds: f"{audio_s / seconds:7.1f} audio s/s")


if __name__ == "__main__":
    main()
