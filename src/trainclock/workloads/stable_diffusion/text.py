"""Captions to token ids: the tiers' word-level tokenizer over their closed vocabulary (with CLIP's
layout: BOS, words, EOS, padding to a fixed length), or SD2's CLIP BPE tokenizer from local files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from trainclock.errors import DataError

PAD, BOS, EOS, UNKNOWN = 0, 1, 2, 3


class WordTokenizer:
    def __init__(self, words: Sequence[str], length: int):
        self.index = {w: i + 4 for i, w in enumerate(words)}
        self.length = length

    @property
    def vocab_size(self) -> int:
        return len(self.index) + 4

    def __call__(self, captions: Sequence[str]) -> torch.Tensor:
        ids = torch.full((len(captions), self.length), PAD, dtype=torch.long)
        for row, text in enumerate(captions):
            tokens = [BOS, *(self.index.get(w, UNKNOWN) for w in text.lower().split())][:self.length - 1] + [EOS]
            ids[row, :len(tokens)] = torch.tensor(tokens)
        return ids


class ClipTokenizer:
    """SD2's tokenizer (vocab.json + merges.txt in the text encoder's folder), padded to 77."""

    def __init__(self, folder: Path, length: int = 77):
        from transformers import CLIPTokenizer

        for name in ("vocab.json", "merges.txt"):
            if not (folder / name).is_file():
                raise DataError(f"the CLIP tokenizer needs {folder / name}; pass --checkpoint with the SD2 "
                                "checkpoint's tokenizer/ and text_encoder/ folders")
        try:
            self.tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
        except Exception as e:  # noqa: BLE001 - json, unicode and merge-table errors alike
            detail = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise DataError(f"cannot read the CLIP tokenizer in {folder} ({detail}); vocab.json and merges.txt "
                            "must be the SD2 checkpoint's tokenizer files") from None
        self.length = length

    def __call__(self, captions: Sequence[str]) -> torch.Tensor:
        return self.tokenizer(list(captions), padding="max_length", truncation=True, max_length=self.length,
                              return_tensors="pt").input_ids
