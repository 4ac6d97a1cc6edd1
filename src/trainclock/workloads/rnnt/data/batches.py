"""Training and evaluation batches: utterances tokenised, ordered by the reference's bucketing
sampler (each epoch: the utterances sorted by duration into `buckets` equal groups, each group
shuffled, the epoch cut into global batches, the batches shuffled), their audio decoded and padded
with each utterance's augmentation draws (augment.py) from (seed, step, position) beside it. The
features are computed from these on the device, in the job's loss (features.py). Everything a
batch's row holds is a function of (seed, step, position), so 1 and 2 processes train on the same
rows, and a rank decodes only its own."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from trainclock.workloads.rnnt.augment import Draws, draw
from trainclock.workloads.rnnt.data.librispeech import Utterance, load_audio
from trainclock.workloads.rnnt.features import FeatureConfig


class Utterances:
    """A split's utterances with their pieces; audio read lazily (kept in memory when `cache`)."""

    def __init__(self, utterances: Sequence[Utterance], processor, cache: bool) -> None:
        self.items = list(utterances)
        self.labels = [processor.encode(u.transcript) for u in self.items]
        self.durations = np.array([u.duration for u in self.items])
        self._audio: dict[int, np.ndarray] | None = {} if cache else None

    def __len__(self) -> int:
        return len(self.items)

    def audio(self, i: int) -> np.ndarray:
        if self._audio is None:
            return load_audio(self.items[i])
        if i not in self._audio:
            self._audio[i] = load_audio(self.items[i])
        return self._audio[i]


def collate(audio: list[np.ndarray], draws: list[Draws], labels: list[list[int]]) -> dict[str, torch.Tensor]:
    """A padded batch of raw int16 audio and the draws features.py applies: the padding of the
    audio, the frame masks and the labels runs to the longest of these rows (zeros beyond each
    row's own length); the time mask's width is the rows' most feature frames."""
    B = len(audio)
    waves = np.zeros((B, max(len(a) for a in audio)), dtype=np.int16)
    time_mask = np.zeros((B, max(len(d.time_mask) for d in draws)), dtype=bool)
    pieces = np.zeros((B, max(1, max(len(y) for y in labels))), dtype=np.int64)
    for i, (a, d, y) in enumerate(zip(audio, draws, labels)):
        waves[i, :len(a)] = a
        time_mask[i, :len(d.time_mask)] = d.time_mask
        pieces[i, :len(y)] = y
    longs = lambda values: torch.tensor(values, dtype=torch.long)  # noqa: E731
    return {"audio": torch.from_numpy(waves), "audio_lens": longs([len(a) for a in audio]),
            "speed": longs([d.speed for d in draws]), "samples": longs([d.samples for d in draws]),
            "dither_seeds": longs([d.dither_seed for d in draws]),
            "freq_mask": torch.from_numpy(np.stack([d.freq_mask for d in draws])),
            "time_mask": torch.from_numpy(time_mask),
            "labels": torch.from_numpy(pieces), "label_lens": longs([len(y) for y in labels])}


class BucketBatches:
    """job.batch. A rank decodes only its own rows of a step: the epoch's order (a few integers a
    row) is drawn whole on every rank, the audio (FLAC decoding: the host's cost) and the draws only
    for `rows`, each from its global position, so they are the same whatever the number of ranks.
    The features, the cost that was the host's, are computed on the device in the loss. The decoder
    releases the GIL: the job asks the loop to build the next step's rows on its prefetch thread on
    a CPU too (TrainJob.cpu_prefetch_steps).

    Padding: collate pads to the longest of the rank's rows, not of the whole batch; the loss and
    the network's outputs do not depend on the padding's length. features.py reads each utterance
    up to its own length and zeroes its frames past its end, the encoder's LSTMs run forward in
    time (a frame never reads a later one), model.encode zeroes the frames past each utterance's end
    before stacking, the prediction network is causal along the labels, and transducer_loss reads
    the lattice only up to each utterance's own T and U. (Dropout would draw its masks over the
    padded shape, but its draws already differ with the rank count; the CPU tiers train without it.)"""

    def __init__(self, data: Utterances, global_batch_size: int, buckets: int, features: FeatureConfig,
                 seed: int) -> None:
        self.data, self.gbs, self.buckets, self.features, self.seed = data, global_batch_size, buckets, features, seed
        self.steps_per_epoch = max(1, len(data) // global_batch_size)  # the last partial batch is dropped
        self._orders: dict[int, np.ndarray] = {}  # one whole value per epoch: safe to read from both threads

    def order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            rng = np.random.default_rng([self.seed, epoch])
            by_duration = np.argsort(self.data.durations, kind="stable")
            groups = [rng.permutation(g) for g in np.array_split(by_duration, max(1, self.buckets))]
            flat = np.concatenate(groups)[:self.steps_per_epoch * self.gbs].reshape(self.steps_per_epoch, self.gbs)
            self._orders = {e: o for e, o in self._orders.items() if e >= epoch - 1}
            self._orders[epoch] = flat[rng.permutation(self.steps_per_epoch)]
        return self._orders[epoch]

    def batch(self, step: int, rows: slice = slice(None)) -> dict[str, torch.Tensor]:
        """Rows `rows` of step `step`'s global batch."""
        epoch, index = divmod(step, self.steps_per_epoch)
        utterances = self.order(epoch)[index]
        # each utterance's augmentation is drawn from its position k in the global batch, not in the rank's rows
        positions = range(self.gbs)[rows]
        ids = [int(utterances[k]) for k in positions]
        audio = [self.data.audio(i) for i in ids]
        draws = [draw(len(a), self.features, np.random.default_rng([self.seed, step, k]), train=True)
                 for a, k in zip(audio, positions)]
        return collate(audio, draws, [self.data.labels[i] for i in ids])


def eval_batches(data: Utterances, features: FeatureConfig, rows: range, batch: int) -> list[dict[str, torch.Tensor]]:
    """Evaluation batches of `rows`: raw audio without augmentation, the dither from a fixed
    per-utterance seed."""
    out = []
    for start in range(rows.start, rows.stop, batch):
        ids = range(start, min(start + batch, rows.stop))
        audio = [data.audio(i) for i in ids]
        draws = [draw(len(a), features, np.random.default_rng([0, i]), train=False) for a, i in zip(audio, ids)]
        out.append({**collate(audio, draws, [data.labels[i] for i in ids]), "rows": torch.tensor(list(ids))})
    return out
