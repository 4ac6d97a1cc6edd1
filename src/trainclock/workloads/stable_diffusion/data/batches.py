"""Training batches: each epoch a permutation of the training set (drawn once per epoch, from (seed,
epoch)) cut into global batches; each sample of a batch with its own random stream, numbered by its
place in the run (step x global batch + position), for the latent drawn from its VAE moments, its
caption's dropout, its diffusion noise and its timestep. A rank draws and reads only its own rows,
and they are the same whatever the number of ranks.

Why a stream per sample: one stream for the whole batch (what the tiers trained on before) gives a
rank its rows only after drawing every value in front of them, and skipping a torch CPU generator
ahead costs about a third of drawing the values (8.4M normals, the full size's noise: 41 ms drawn,
14.5 ms skipped), so a rank would keep a third of the whole batch's work at any rank count. The tiers' targets were
measured on that single stream; the reference seeds (1-8) all reach them on these streams too, within
2,000 of sd-tiny's 3,200 samples (benchmarks/reference_targets.py, bf16)."""

from __future__ import annotations

import numpy as np
import torch

from trainclock.workloads.stable_diffusion.data.sets import TrainSet

SEED_SPACE = 2 ** 32  # torch keeps only the low 32 bits of a CPU generator's seed


def sample_generator(run_offset: int, sample: int) -> torch.Generator:
    """The random stream of the run's `sample`-th training sample (step x global batch + position):
    distinct for every sample of a run shorter than 2^32 samples."""
    return torch.Generator().manual_seed((run_offset + sample) % SEED_SPACE)


def normal_rows(shape: torch.Size, streams: list[torch.Generator]) -> torch.Tensor:
    """Standard normals of `shape`, row i from streams[i], drawn in place (no stacked copy: 67 MB a
    step at full size)."""
    out = torch.empty(shape)
    for row, generator in zip(out, streams):
        torch.randn(row.shape, generator=generator, out=row)
    return out


class SampleBatches:
    """job.batch: rows `rows` of step `step`'s global batch, built from (seed, step, rows) alone."""

    def __init__(self, train: TrainSet, global_batch_size: int, seed: int, latent_scale: float,
                 drop_caption: float, empty_id: torch.Tensor, timesteps: int) -> None:
        self.train, self.gbs, self.seed = train, global_batch_size, seed
        self.latent_scale, self.drop_caption, self.empty_id = latent_scale, drop_caption, empty_id
        self.timesteps = timesteps
        self.steps_per_epoch = max(1, len(train.ids) // global_batch_size)  # the last partial batch is dropped
        # runs of different seeds start their sample streams at unrelated places of the seed space
        self.run_offset = int(np.random.SeedSequence(seed).generate_state(1)[0])
        self._order: tuple[int, torch.Tensor] | None = None  # the current epoch's permutation

    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's permutation of the training set: drawn once an epoch (6.5M samples at full size)."""
        if self._order is None or self._order[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            self._order = (epoch, torch.randperm(len(self.train.ids), generator=generator))
        return self._order[1]

    def batch(self, step: int, rows: slice) -> dict[str, torch.Tensor]:
        epoch, index = divmod(step, self.steps_per_epoch)
        positions = range(self.gbs)[rows]
        pick = self.order(epoch)[index * self.gbs:(index + 1) * self.gbs][rows]
        streams = [sample_generator(self.run_offset, step * self.gbs + k) for k in positions]
        # each stream's draws in one fixed order (latent, caption, noise, timestep), whatever the other rows
        latents = self.train.latents[pick].float()
        if self.train.moments:
            mean, logvar = latents.chunk(2, dim=1)
            epsilon = normal_rows(mean.shape, streams)
            latents = (mean + (0.5 * logvar.clamp(-30, 20)).exp() * epsilon) * self.latent_scale
        ids = self.train.ids[pick].clone()
        if self.drop_caption:
            dropped = torch.stack([torch.rand((), generator=g) for g in streams]) < self.drop_caption
            ids[dropped] = self.empty_id
        noise = normal_rows(latents.shape, streams)
        timesteps = torch.stack([torch.randint(0, self.timesteps, (), generator=g) for g in streams])
        return {"latents": latents, "ids": ids, "noise": noise, "timesteps": timesteps}
