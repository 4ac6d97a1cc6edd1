"""The RNN-T benchmark family (MLPerf Training rnnt: LibriSpeech speech recognition, plus CPU tiers)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("torchmetrics", "sentencepiece", "soundfile")  # WER, the piece vocabulary, FLAC audio

from trainclock.workloads.rnnt.workload import RnntWorkload

WORKLOAD = RnntWorkload()
