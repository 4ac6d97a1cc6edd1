"""WER, the rnnt target metric: word edits (substitutions, deletions, insertions) over reference
words, over the whole validation set. Each data-parallel rank decodes its share of the utterances
(greedy, with the EMA weights) and returns torchmetrics WordErrorRate's two sums; the loop adds them
over ranks, so the rate is the set's, not a mean of per-rank rates."""

from __future__ import annotations

from trainclock.workload.base import EvalShard

METRIC = "WER"


def wer_sums(hypotheses: list[str], references: list[str]) -> EvalShard:
    from torchmetrics.text import WordErrorRate

    wer = WordErrorRate()
    if references:
        wer.update(hypotheses, references)
    return EvalShard(sums={"word_errors": wer.errors.double(), "words": wer.total.double()})


def score(stats: EvalShard) -> dict[str, float]:
    words = float(stats.sums["words"])
    return {METRIC: float(stats.sums["word_errors"]) / words if words else 1.0}
