"""Prepare a tier's data once into a cache folder under the data home:
  tokenizer.json   WordPiece vocabulary learned on the train documents (tokenizers library)
  train.npz        the static-masked training instances
  eval.npz         the fixed eval instances (held-out documents)
  meta.json        what was built, written last: its presence means complete
Everything follows from the source and a fixed data seed, never from the run's seed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from trainclock.errors import DataError
from trainclock.storage import data_home, discard_folder, staged_folder
from trainclock.workloads.bert.data.instances import SPECIALS, make_instances
from trainclock.workloads.bert.data.text import TextSource

FORMAT_VERSION = 1
DATA_SEED = 12345


@dataclass(frozen=True)
class Layout:
    """What a tier's instances look like: the cache key together with the source."""

    vocab_size: int
    seq_len: int
    max_predictions: int
    train_instances: int
    eval_instances: int


@dataclass(frozen=True)
class PreparedBert:
    folder: Path
    train: dict[str, np.ndarray]
    eval: dict[str, np.ndarray]
    vocab_size: int  # what the tokenizer learned (at most the layout's)


def prepared_folder(source: TextSource, layout: Layout) -> Path:
    key = hashlib.sha256(f"{FORMAT_VERSION}\0{source.fingerprint()}\0{layout}".encode()).hexdigest()[:12]
    return data_home() / "prepared" / f"bert-{source.name}-wp{layout.vocab_size}-s{layout.seq_len}-{key}"


def prepare(source: TextSource, layout: Layout, force: bool = False) -> PreparedBert:
    folder = prepared_folder(source, layout)
    if force:
        discard_folder(folder)  # in one step: no half cache left looking complete
    if not (folder / "meta.json").exists():
        _build(source, layout, folder)
    return load(folder)


def load(folder: Path) -> PreparedBert:
    hint = "rebuild it with `trainclock data prepare <member> --force`"
    try:
        meta = json.loads((folder / "meta.json").read_text())
        arrays = {split: dict(np.load(folder / f"{split}.npz")) for split in ("train", "eval")}
        vocab = int(meta["tokenizer_vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"prepared BERT data in {folder} is missing or corrupt ({type(e).__name__}); {hint}") from None
    for split, expected in meta["instances"].items():
        if len(arrays[split]["input_ids"]) != expected:
            raise DataError(f"prepared BERT data in {folder} is corrupt ({split}.npz has the wrong size); {hint}")
    return PreparedBert(folder, arrays["train"], arrays["eval"], vocab)


def tokenize(source: TextSource, layout: Layout) -> tuple[Tokenizer, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A WordPiece vocabulary learned on the train documents, and the (train, eval) instances: sentence
    pairs for next-sentence prediction, 15% of the tokens masked, all from DATA_SEED."""
    train_docs, eval_docs = source.documents()
    if not train_docs or not eval_docs:
        raise DataError(f"the {source.name} text gives too few documents for a train and an eval split; give it more text")
    tokenizer = wordpiece((line for doc in train_docs for line in doc), layout.vocab_size)
    ids = lambda docs: [[e.ids for e in tokenizer.encode_batch(doc, add_special_tokens=False)] for doc in docs]  # noqa: E731
    vocab = tokenizer.get_vocab_size()
    try:
        train = make_instances(ids(train_docs), layout.train_instances, layout.seq_len, layout.max_predictions,
                               vocab, DATA_SEED)
        evaluation = make_instances(ids(eval_docs), layout.eval_instances, layout.seq_len, layout.max_predictions,
                                    vocab, DATA_SEED + 1)
    except ValueError as e:
        raise DataError(f"the {source.name} text: {e}") from None
    return tokenizer, train, evaluation


def wordpiece(texts, vocab_size: int) -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)  # bert-large-uncased
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def _build(source: TextSource, layout: Layout, folder: Path) -> None:
    tokenizer, train, evaluation = tokenize(source, layout)
    vocab = tokenizer.get_vocab_size()
    with staged_folder(folder, "meta.json") as staging:
        tokenizer.save(str(staging / "tokenizer.json"))
        np.savez(staging / "train.npz", **train)
        np.savez(staging / "eval.npz", **evaluation)
        meta = {"format": FORMAT_VERSION, "source": source.name, "layout": layout.__dict__, "data_seed": DATA_SEED,
                "tokenizer_vocab_size": vocab,
                "instances": {"train": layout.train_instances, "eval": layout.eval_instances}}
        (staging / "meta.json").write_text(json.dumps(meta, indent=1))
