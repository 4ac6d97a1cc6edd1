"""A second workload that lives only in the tests: a small image classifier on generated data.
Unlike GPT-3 it counts images, logs progress in epochs, aims at a higher-is-better accuracy,
trains with SGD and momentum, and its batches are dicts. It joins the registry through
$TRAINCLOCK_WORKLOADS=tests.workloads.toyvision, with no change anywhere else: the proof that
the workload interface carries a benchmark that is not GPT-3."""

from tests.workloads.toyvision.workload import ToyVision

WORKLOAD = ToyVision()
