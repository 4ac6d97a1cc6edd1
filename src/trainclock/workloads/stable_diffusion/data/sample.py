"""Made-up LAION-400M moments in the layout the reference prepares them (webdataset shards of
img2dataset's 10,000 samples, <key>.npy VAE moments + <key>.txt caption, a metadata parquet per
shard), the COCO evaluation captions TSV, and a CLIP tokenizer in the SD2 checkpoint's layout
(checkpoint/tokenizer/vocab.json + merges.txt), for measuring the host pipeline at full size
without the real set (write_sample_data) and for tests:

  moments     float16 (8, 64, 64) per sample: the VAE's mean (std 5.5: the latents' scale before
              the reference's 0.18215) and log-variance (about -11) over a 512 x 512 image, 64 KB
              as the real .npy files (420 GB for 6,513,144 samples)
  captions    alt-text of 3 + Poisson(8) words (about 11, as LAION's and COCO's) of a made-up
              language: 10,000 pseudo-words with Zipf frequencies
  tokenizer   CLIP's byte-level BPE layout (49,408 ids: 512 byte tokens, merges, <|startoftext|>
              49406, <|endoftext|> 49407) with merges learned on the language, so a caption costs
              the tokenizer what a real one does; SD2's own files are never downloaded

The text encoder, VAE and evaluators (Inception, ViT-H/14) are not written: a job on the meta device
reads no weights (official.py). Everything is a function of the seed; the contents are noise, so no
FID or CLIP target is reachable."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path

import numpy as np

from trainclock.workloads.stable_diffusion.official import CAPTIONS_TSV

SHARD_SAMPLES = 10_000  # img2dataset's default number_sample_per_shard
EVAL_CAPTIONS = 1  # the smallest evaluation set the job accepts
CLIP_VOCAB = 49_408  # SD2's (OpenCLIP ViT-H/14's) token ids
BPE_CAPTIONS = 5_000  # the tokenizer's training text: ~1 s, and every frequent word gets its merges
LEXICON = 10_000
LATENT_STD = 1 / 0.18215  # the reference scales latents by 0.18215 to unit variance

ONSETS = "b c d f g h k l m n p r s t w y bl br ch cr dr fr gr pl pr sh sp st th tr wh".split()
VOWELS = "a e i o u a e i o ea ee ou".split()
CODAS = ["", "", "", "", "n", "r", "s", "t", "d", "l", "ng", "st", "nd"]


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def write_shard(path: Path, samples: Mapping[str, Mapping[str, bytes]]) -> Path:
    """An uncompressed webdataset tar: <key>.<ext> members, a sample's files next to each other."""
    with tarfile.open(path, "w") as tar:
        for key, files in samples.items():
            for ext, data in files.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


@cache
def lexicon() -> tuple[np.ndarray, np.ndarray]:
    """(words, probabilities) of the made-up language, the same for every seed."""
    rng = np.random.default_rng(512)
    words: dict[str, None] = {}
    while len(words) < LEXICON:
        words.setdefault("".join(ONSETS[rng.integers(len(ONSETS))] + VOWELS[rng.integers(len(VOWELS))]
                                 + CODAS[rng.integers(len(CODAS))] for _ in range(1 + int(rng.binomial(2, 0.4)))))
    zipf = 1.0 / np.arange(1, LEXICON + 1)
    return np.array(sorted(words, key=len)), zipf / zipf.sum()  # frequent words short, as in English


def caption(rng: np.random.Generator) -> str:
    words, p = lexicon()
    return " ".join(words[rng.choice(LEXICON, 3 + int(rng.poisson(8)), p=p)])


def moments(rng: np.random.Generator, channels: int, side: int) -> np.ndarray:
    """float16 (2 x channels, side, side): the VAE posterior's mean, then its log-variance."""
    mean = rng.standard_normal((channels, side, side), dtype=np.float32) * LATENT_STD
    logvar = -11.0 + rng.standard_normal((channels, side, side), dtype=np.float32) * 0.5
    return np.concatenate([mean, logvar]).astype(np.float16)


def byte_alphabet() -> list[str]:
    """GPT-2's and CLIP's bytes_to_unicode, in its order: the printable bytes stand for themselves,
    the rest are moved to U+0100 upwards."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + i) for i in range(len(moved))]


def learned_merges(texts: Iterable[str]) -> list[tuple[str, str]]:
    """BPE merges learned on `texts` with CLIP's normalisation and pre-tokenisation (transformers'
    CLIPTokenizer), words ending in </w>."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                                 normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"),
                             behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    trainer = trainers.BpeTrainer(vocab_size=CLIP_VOCAB - 2, end_of_word_suffix="</w>", show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def filler_merges() -> Iterator[tuple[str, str]]:
    """Merges of Latin-1 letters that ASCII captions never reach: they only fill the vocabulary to
    CLIP's size, so ids and the merge table are as large as SD2's."""
    latin = [chr(c) for c in range(ord("¡"), ord("ÿ") + 1) if c != 0xAD]
    for suffix in ("", "</w>"):
        for a in latin:
            for b in latin:
                yield a, b + suffix
    for a in latin:
        for b in latin:
            for c in latin:
                yield a + b, c


def write_clip_tokenizer(folder: Path, texts: Iterable[str]) -> Path:
    """vocab.json and merges.txt as CLIP's: the 256 byte tokens, the same with </w>, one token per
    merge in merge order, then <|startoftext|> and <|endoftext|> at 49406 and 49407."""
    base = byte_alphabet()
    vocab = {t: i for i, t in enumerate(base + [t + "</w>" for t in base])}
    merges = []
    for a, b in [*learned_merges(texts), *filler_merges()]:
        if len(vocab) == CLIP_VOCAB - 2:
            break
        if a + b not in vocab and a in vocab and b in vocab:
            vocab[a + b] = len(vocab)
            merges.append(f"{a} {b}")
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = CLIP_VOCAB - 2, CLIP_VOCAB - 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return folder


def write_laion(folder: Path, samples: int, seed: int, channels: int, side: int) -> Path:
    """`samples` moments + captions in shards <n>.tar (keys <shard:05d><index:04d>, as img2dataset
    names them) with <n>.parquet (key, caption, LICENSE), val2014_30k.tsv and checkpoint/tokenizer/
    under `folder`; returns the folder --data names."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for shard, start in enumerate(range(0, samples, SHARD_SAMPLES)):
        rng = np.random.default_rng([seed, shard])
        keys = [f"{shard:05d}{i:04d}" for i in range(min(SHARD_SAMPLES, samples - start))]
        captions = [caption(rng) for _ in keys]
        write_shard(folder / f"{shard:05d}.tar", {key: {"npy": npy_bytes(moments(rng, channels, side)),
                                                        "txt": text.encode()} for key, text in zip(keys, captions)})
        # every row licensed: the filter then keeps all `samples`
        pq.write_table(pa.table({"key": keys, "caption": captions, "LICENSE": ["cc-by"] * len(keys)}),
                       folder / f"{shard:05d}.parquet")
    rng = np.random.default_rng([seed])  # apart from every shard's [seed, shard]
    rows = "".join(f"{i}\t{100 + i}\t{caption(rng)}.\n" for i in range(EVAL_CAPTIONS))
    (folder / CAPTIONS_TSV).write_text("image_id\tid\tcaption\n" + rows, encoding="utf-8")
    write_clip_tokenizer(folder / "checkpoint" / "tokenizer", (caption(rng) for _ in range(BPE_CAPTIONS)))
    return folder
