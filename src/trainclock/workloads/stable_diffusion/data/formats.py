"""The official stable_diffusion data formats, read with the standard library and pyarrow:
  - webdataset shards (the reference's laion400m moments: <key>.npy = VAE moments 8 x 64 x 64,
    <key>.txt = caption; the raw-image variant holds <key>.jpg/.png instead of .npy): shard_index.py;
  - the LAION metadata parquet, whose rows with LICENSE "?" the reference drops (filter-metadata.py);
  - the COCO-2014 evaluation captions TSV (val2014_30k.tsv: image_id, id, caption; a header row);
  - FID reference statistics (.npz with mu and sigma, pytorch-fid's layout)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from trainclock.errors import DataError


def licensed_keys(parquet: Path) -> set[str]:
    """Keys of the metadata rows the reference keeps: LICENSE other than "?"."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(parquet, columns=["key", "LICENSE"])
    except (OSError, KeyError, ValueError) as e:
        raise DataError(f"cannot read metadata parquet {parquet} ({e}); it needs columns key and LICENSE") from None
    keys, licenses = table.column("key").to_pylist(), table.column("LICENSE").to_pylist()
    return {str(k) for k, lic in zip(keys, licenses) if lic != "?"}


def read_captions_tsv(path: Path) -> list[tuple[int, int, str]]:
    """(image_id, id, caption) rows of the COCO evaluation TSV."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError as e:
        raise DataError(f"cannot read captions TSV {path} ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise DataError(f"captions TSV {path} is not UTF-8 text (byte {e.start}); write it as UTF-8, "
                        "as the reference's val2014_30k.tsv is") from None
    except csv.Error as e:
        raise DataError(f"captions TSV {path} is not a readable TSV ({e}); it must be the COCO captions TSV "
                        "(image_id, id, caption)") from None
    try:
        captions = [(int(r["image_id"]), int(r["id"]), r["caption"]) for r in rows]
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{path} is not the COCO captions TSV (a header image_id, id, caption and integer ids)") from None
    for number, (_, _, text) in enumerate(captions, start=2):
        if not isinstance(text, str):
            raise DataError(f"{path} line {number} has no caption; every row needs image_id, id and caption")
    if not captions:
        raise DataError(f"captions TSV {path} holds no captions; it must be the COCO captions TSV "
                        "(a header image_id, id, caption and one row per caption)")
    return captions


def write_fid_stats(path: Path, mu: np.ndarray, sigma: np.ndarray, count: int) -> None:
    np.savez(path, mu=mu, sigma=sigma, count=count)


def read_fid_stats(path: Path) -> dict[str, np.ndarray]:
    import zipfile
    import zlib

    try:
        with np.load(path, allow_pickle=False) as data:
            stats = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, AttributeError) as e:
        raise DataError(f"cannot read FID statistics {path} ({e}); it must be an .npz with mu and sigma") from None
    if not isinstance(stats, dict) or "mu" not in stats or "sigma" not in stats:
        raise DataError(f"{path} lacks mu (d) and sigma (d x d), as pytorch-fid writes them")
    mu, sigma = stats["mu"], stats["sigma"]
    if (mu.ndim != 1 or len(mu) == 0 or sigma.shape != (len(mu),) * 2 or mu.dtype.kind not in "fiu"
            or sigma.dtype.kind not in "fiu"):
        raise DataError(f"{path} lacks mu (d) and sigma (d x d), as pytorch-fid writes them: it holds mu "
                        f"{mu.dtype} {mu.shape} and sigma {sigma.dtype} {sigma.shape}")
    if not (np.isfinite(mu).all() and np.isfinite(sigma).all()):
        raise DataError(f"{path} holds non-finite values in mu or sigma; regenerate the FID statistics")
    if "count" in stats:
        count = stats["count"]
        if count.shape != () or count.dtype.kind not in "iu" or int(count) < 2:
            raise DataError(f"{path} has count {count.dtype} {count.shape}: it must be the number of reference "
                            "images (an integer of at least 2)")
    return stats
