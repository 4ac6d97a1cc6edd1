"""Prepare a tier's data once into a cache folder under the data home:
  tokenizer.json   WordPiece vocabulary learned on the train documents (tokenizers library)
  train.npz        the static-masked training instances
  eval.npz         the fixed eval instances (held-out documents)
  meta.json        what was built, written last: its presence means complete
Everything follows from the source and a fixed data seed, never from the run's seed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from trainclock.errors import DataError
from trainclock.storage import build_once, discard_folder, prepared_path
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
    return prepared_path(f"bert-{source.name}-wp{layout.vocab_size}-s{layout.seq_len}", FORMAT_VERSION,
                         source.fingerprint(), layout)


def prepare(source: TextSource, layout: Layout, force: bool = False) -> PreparedBert:
    folder = prepared_folder(source, layout)
    if not force and (folder / "meta.json").exists():
        try:
            return load(folder, layout)
        except DataError:
            # a broken cache (damaged, or made by a version that let the vocabulary outgrow the
            # model) is never kept: removed in one step, then made anew below
            force = True
    _build(source, layout, folder, force)
    try:
        return load(folder, layout)
    except DataError:
        discard_folder(folder)
        raise


def load(folder: Path, layout: Layout | None = None) -> PreparedBert:
    """The prepared data in `folder`, checked against `layout` where given (every id inside the
    model's vocabulary): one DataError line where anything is missing, damaged or out of range."""
    import zipfile
    import zlib

    from trainclock.workloads.bert.data.official import check_instances

    hint = "rebuild it with `trainclock data prepare <member> --force`"
    try:
        meta = json.loads((folder / "meta.json").read_text())
        arrays = {}
        for split in ("train", "eval"):
            with np.load(folder / f"{split}.npz", allow_pickle=False) as saved:
                arrays[split] = {k: saved[k] for k in saved.files}
        vocab = int(meta["tokenizer_vocab_size"])
        instances = {split: int(meta["instances"][split]) for split in ("train", "eval")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"prepared BERT data in {folder} is missing or corrupt ({type(e).__name__}); {hint}") from None
    if layout is not None and vocab > layout.vocab_size:
        raise DataError(f"prepared BERT data in {folder} has a vocabulary of {vocab:,} for a model of "
                        f"{layout.vocab_size:,} embeddings; {hint}")
    for split, expected in instances.items():
        check_instances(arrays[split], f"prepared BERT data {folder / f'{split}.npz'}",
                        None if layout is None else layout.vocab_size)
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
    """A WordPiece vocabulary of at most `vocab_size` entries (the model's embeddings). The trainer
    keeps every character it meets, and its ##-continuations, whatever vocab_size says: text of a
    large alphabet (CJK: thousands of characters) outgrows the model. There the alphabet is limited
    to the most frequent characters (the rest read as [UNK]) until the vocabulary fits; text that
    fits at once (the tiers' English) is trained exactly as before, so their data and targets hold."""
    texts = list(texts)
    tokenizer, limit = _train_wordpiece(texts, vocab_size, None), None
    while tokenizer.get_vocab_size() > vocab_size and limit != 1:
        # a character and its ##-continuation may both enter: shrink the alphabet by the excess each time
        size = tokenizer.get_vocab_size()
        limit = vocab_size - len(SPECIALS) if limit is None else max(1, min(limit - 1, limit * vocab_size // size))
        tokenizer = _train_wordpiece(texts, vocab_size, limit)
    if tokenizer.get_vocab_size() > vocab_size:
        raise DataError(f"the text's WordPiece vocabulary has {tokenizer.get_vocab_size():,} entries, more than the "
                        f"model's {vocab_size:,} embeddings; give it text of a smaller alphabet")
    return tokenizer


def _train_wordpiece(texts: list[str], vocab_size: int, limit_alphabet: int | None) -> Tokenizer:
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)  # bert-large-uncased
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    limit = {} if limit_alphabet is None else {"limit_alphabet": limit_alphabet}
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False, **limit)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def _build(source: TextSource, layout: Layout, folder: Path, force: bool = False) -> None:

    def write(staging: Path) -> None:
        tokenizer, train, evaluation = tokenize(source, layout)
        tokenizer.save(str(staging / "tokenizer.json"))
        np.savez(staging / "train.npz", **train)
        np.savez(staging / "eval.npz", **evaluation)
        meta = {"format": FORMAT_VERSION, "source": source.name, "layout": layout.__dict__, "data_seed": DATA_SEED,
                "tokenizer_vocab_size": tokenizer.get_vocab_size(),
                "instances": {"train": layout.train_instances, "eval": layout.eval_instances}}
        (staging / "meta.json").write_text(json.dumps(meta, indent=1))

    build_once(folder, "meta.json", write, force)
