"""The RNN-T benchmark family (MLPerf Training rnnt: LibriSpeech speech recognition, plus CPU tiers)."""

from trainclock.workloads.rnnt.workload import RnntWorkload

WORKLOAD = RnntWorkload()
