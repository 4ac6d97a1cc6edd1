"""The Stable Diffusion benchmark family (MLPerf Training stable_diffusion: SD v2 on LAION-400M
latents, FID and CLIP score on COCO-2014 captions, plus CPU tiers on captioned Fashion-MNIST items)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("diffusers", "transformers", "torchmetrics")  # the UNet and schedulers, the CLIP text tower, FID

import logging

# diffusers imports torchao where it is installed (the fp8 extra) and warns of names torchao 0.18
# dropped, and torch of torchao's pytree enums: on every run, and nothing a user can act on
logging.getLogger("diffusers.quantizers.torchao.torchao_quantizer").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

from trainclock.workloads.stable_diffusion.workload import StableDiffusionWorkload  # noqa: E402

WORKLOAD = StableDiffusionWorkload()
