"""The reference's data format, read without TensorFlow: TFRecord framing (length, masked CRC-32C
of the length, payload, masked CRC-32C of the payload) around tf.train.Example protos, decoded by
hand (Example.features = 1 -> Features.feature map = 1 -> {key = 1, Feature = 2}; Feature:
bytes_list = 1, float_list = 2, int64_list = 3, each a repeated field 1, packed or not)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.storage import atomic_writer

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path: Path, verify: bool = True) -> Iterator[bytes]:
    """The payloads of a TFRecord file; a cut or corrupt record is a DataError naming the file."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read TFRecord file {path} ({e.strerror}); check the path") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        while header := f.read(12):
            if len(header) < 12:
                raise DataError(f"{path}: truncated TFRecord header; re-copy the file")
            (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if verify and masked_crc(header[:8]) != length_crc:
                raise DataError(f"{path}: corrupt TFRecord length (CRC mismatch); re-copy the file")
            if length + 4 > size - f.tell():  # checked before reading: a length of 2^40 must not allocate it
                raise DataError(f"{path}: a TFRecord of {length:,} bytes at byte {f.tell() - 12:,}, past the file's "
                                f"end ({size:,} bytes); the file is truncated or damaged, re-copy it")
            payload, tail = f.read(length), f.read(4)
            if len(payload) < length or len(tail) < 4:
                raise DataError(f"{path}: truncated TFRecord; re-copy the file")
            if verify and masked_crc(payload) != struct.unpack("<I", tail)[0]:
                raise DataError(f"{path}: corrupt TFRecord payload (CRC mismatch); re-copy the file")
            yield payload


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, pos = _varint(buf, pos)
            else:
                size = 4 if wire == 5 else 8
            if pos + size > len(buf):
                raise ValueError(f"a field of {size} bytes at byte {pos} of a {len(buf)}-byte message")
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _feature(buf: bytes) -> list:
    for kind, _, payload in _fields(buf):
        values: list = []
        for _, wire, v in _fields(payload):
            if kind == 1:
                values.append(v)
            elif kind == 2:
                if not isinstance(v, bytes) or len(v) % 4:
                    raise ValueError(f"a float feature of {len(v) if isinstance(v, bytes) else 'no'} bytes, "
                                     "not a multiple of 4")
                values.extend(struct.unpack(f"<{len(v) // 4}f", v))
            elif kind == 3:
                if wire not in (0, 2):
                    raise ValueError(f"an int64 feature of wire type {wire}")
                if wire == 2:  # packed varints
                    pos = 0
                    while pos < len(v):
                        x, pos = _varint(v, pos)
                        values.append(x - (1 << 64) if x >= 1 << 63 else x)
                else:
                    values.append(v - (1 << 64) if v >= 1 << 63 else v)
        return values
    return []


def parse_example(payload: bytes) -> dict[str, list]:
    out = {}
    for number, _, features in _fields(payload):
        if number != 1:
            continue
        for _, _, entry in _fields(features):
            key, value = None, b""
            if not isinstance(entry, bytes):
                raise ValueError("a feature entry that is not a message")
            for n, _, v in _fields(entry):
                if n == 1 and isinstance(v, bytes):
                    key = v.decode()
                elif n == 2 and isinstance(v, bytes):
                    value = v
            out[key] = _feature(value)
    return out


def read_instances(paths: list[Path], seq_len: int, max_predictions: int) -> dict[str, np.ndarray]:
    """Every example of the files as the arrays the loader trains on (fields of the reference)."""
    columns: dict[str, list] = {k: [] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                                "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    for path in paths:
        for i, payload in enumerate(records(path)):
            try:
                example = parse_example(payload)
                for key, column in columns.items():
                    column.append(example[key])
            except (KeyError, ValueError, IndexError, TypeError, UnicodeDecodeError, struct.error) as e:
                raise DataError(f"{path}: record {i} is not a BERT pre-training example ({type(e).__name__}: {e})") from None
    if not columns["input_ids"]:
        raise DataError(f"no examples in {', '.join(map(str, paths))}")
    try:
        out = {k: np.asarray(v, dtype=np.float32 if k == "masked_lm_weights" else np.int64) for k, v in columns.items()}
    except (ValueError, TypeError, OverflowError):
        raise DataError(f"examples of different lengths or values outside int64 in {', '.join(map(str, paths))}; expected {seq_len} tokens "
                        f"and {max_predictions} predictions each") from None
    out["next_sentence_labels"] = out["next_sentence_labels"].reshape(-1)
    return out


def _put_varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 values go on the wire as their two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _put_field(number: int, payload: bytes) -> bytes:
    return _put_varint(number << 3 | 2) + _put_varint(len(payload)) + payload


def encode_example(row: dict[str, np.ndarray]) -> bytes:
    """A tf.train.Example as TensorFlow serializes it: features sorted by key, int64 and float lists packed."""
    entries = b""
    for key in sorted(row):
        values = np.asarray(row[key]).reshape(-1)
        if values.dtype.kind == "f":
            feature = _put_field(2, _put_field(1, struct.pack(f"<{len(values)}f", *values.tolist())))
        else:
            feature = _put_field(3, _put_field(1, b"".join(_put_varint(int(v)) for v in values.tolist())))
        entries += _put_field(1, _put_field(1, key.encode()) + _put_field(2, feature))
    return _put_field(1, entries)


def write_instances(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """The instances as one TFRecord file of the reference's examples, written atomically."""

    with atomic_writer(path, "wb") as f:
        for i in range(len(arrays["input_ids"])):
            payload = encode_example({k: v[i] for k, v in arrays.items()})
            length = struct.pack("<Q", len(payload))
            f.write(length + struct.pack("<I", masked_crc(length)) + payload + struct.pack("<I", masked_crc(payload)))
