"""The Stable Diffusion benchmark family (MLPerf Training stable_diffusion: SD v2 on LAION-400M
latents, FID and CLIP score on COCO-2014 captions, plus CPU tiers on captioned Fashion-MNIST items)."""

from trainclock.workloads.stable_diffusion.workload import StableDiffusionWorkload

WORKLOAD = StableDiffusionWorkload()
