"""The sentencepiece unigram model the reference trains offline on the training transcripts
(scripts/create_sentencepieces.sh: 1023 pieces at full size); the tiers train a small one on theirs."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from trainclock.errors import DataError
from trainclock.storage import atomic_writer


def train(transcripts: Iterable[str], vocab: int, out: Path) -> None:
    import sentencepiece

    model = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(list(transcripts)), model_writer=model, vocab_size=vocab, model_type="unigram",
            character_coverage=1.0, bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    except RuntimeError as e:
        raise DataError(f"cannot train a {vocab}-piece sentencepiece model on these transcripts: "
                        f"{str(e).splitlines()[0][-160:]}") from None
    with atomic_writer(out, "wb") as f:
        f.write(model.getvalue())


def load(path: Path, vocab: int):
    import sentencepiece

    if not path.is_file():
        raise DataError(f"the sentencepiece model {path} is missing; run `trainclock data prepare` for this member")
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    if processor.get_piece_size() != vocab:
        raise DataError(f"{path} has {processor.get_piece_size()} pieces; this member's network expects {vocab}")
    return processor
