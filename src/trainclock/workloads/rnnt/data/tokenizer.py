"""The sentencepiece unigram model the reference trains offline on the training transcripts
(scripts/create_sentencepieces.sh: 1023 pieces at full size); the tiers train a small one on theirs."""

from __future__ import annotations

import io
import re
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
        raise DataError(f"cannot train a {vocab}-piece sentencepiece model on these transcripts: {reason(e)}") from None
    with atomic_writer(out, "wb") as f:
        f.write(model.getvalue())


def load(path: Path, vocab: int):
    import sentencepiece

    if not path.is_file():
        raise DataError(f"the sentencepiece model {path} is missing; run `trainclock data prepare` for this member")
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError, ValueError) as e:
        raise DataError(f"{path} is not a sentencepiece model ({reason(e)}); use the reference's "
                        "librispeech1023.model, or remove it so that one is trained from the transcripts") from None
    if processor.get_piece_size() != vocab:
        raise DataError(f"{path} has {processor.get_piece_size()} pieces; this member's network expects {vocab}")
    return processor


def reason(error: BaseException, width: int = 200) -> str:
    """sentencepiece's message, readable in one line: its first non-empty line without the
    "INTERNAL: src/file.cc(744) [check]" prefix where a sentence follows it, cut at its end, not its
    start (the start is what names the problem)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    line = lines[0] if lines else type(error).__name__
    detail = re.sub(r"^[A-Za-z]+: src/\S+\(\d+\) \[.*?\]\s*", "", line)
    line = detail or line
    return line if len(line) <= width else line[:width - 3] + "..."
