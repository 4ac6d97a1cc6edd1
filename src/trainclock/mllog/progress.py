"""The progress codec: how a run's progress count is written in its MLPerf log and read back.

A benchmark counts its progress in a unit (tokens, images, samples, epochs, steps), `units_per_sample`
of them in one training sample. Its log writes the count under the key its rules name (epoch_num,
samples_count, step_num), counting one of:

  units    the unit itself (e.g. tokens under epoch_num)
  samples  training samples
  epochs   passes over the training set, samples_per_epoch samples each (often a fraction of one)
  steps    optimizer steps, samples_per_step (the global batch size) samples each

A trainclock log says which in its header, in one event (UNIT_KEY): the unit as its value, and
{"per_sample", "logged_in", "samples_per_epoch"} as its metadata (the global batch size, a step's
samples, is a header key of its own). `ProgressCodec.header` writes that event, `ProgressCodec.read`
reads it back; `count` is what the log writes after so many samples, `units` what a logged count
is in units, `samples` how many training samples so many units are. `logged_count` reads the count
of any log line back from its metadata, in the result summarizer's order of preference of fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

UNIT_KEY = "trainclock_progress_unit"
COUNTED_IN = ("units", "samples", "epochs", "steps")  # what one count in the log is
# units that count passes over the data or optimizer steps: no amount of data by themselves, so
# no throughput unit (a rate in them says nothing across batch sizes; samples do)
PASS_UNITS = ("epochs", "steps")
PROGRESS_FIELDS = ("samples_count", "epoch_num", "step_num")  # where a line's metadata carries its count
_LIMIT = 2**63  # no real count comes near; past it, float arithmetic (means, rates) would overflow


@dataclass(frozen=True)
class ProgressCodec:
    unit: str | None = "samples"  # what progress is counted in; None: unknown (a log that does not say)
    units_per_sample: float | None = 1  # units in one training sample; None: unknown
    logged_in: str = "units"  # what one count in the log is (COUNTED_IN)
    samples_per_epoch: float | None = None  # needed where logged_in is "epochs"
    samples_per_step: float | None = None  # needed where logged_in is "steps": the global batch size
    # training samples in one unit, where units_per_sample is unknown (an official log counting
    # steps: its global_batch_size)
    samples_per_unit: float | None = None

    # writing

    def count(self, samples: int) -> int | float:
        """The count a log writes after `samples` training samples."""
        if self.logged_in == "units":
            return samples * self.units_per_sample
        if self.logged_in == "epochs":
            return samples / self.samples_per_epoch
        if self.logged_in == "steps":
            return samples // self.samples_per_step
        return samples

    def header(self) -> tuple[str, str | None, dict[str, Any]]:
        """The header event that says how the log counts: (key, value, metadata)."""
        return UNIT_KEY, self.unit, {"per_sample": self.units_per_sample, "logged_in": self.logged_in,
                                     "samples_per_epoch": self.samples_per_epoch}

    # reading

    @classmethod
    def read(cls, value: Any, metadata: dict[str, Any], global_batch_size: int | None) -> ProgressCodec:
        """The codec a log's UNIT_KEY event (its value and metadata) describes; `global_batch_size`:
        the header's, a step's samples. Anything malformed reads as unknown: a unit that is no
        string is None, a per_sample that is no positive number None, a logged_in it does not know
        (or none: trainclock's first logs) counts units."""
        per_sample = metadata.get("per_sample")
        per_epoch = metadata.get("samples_per_epoch")
        logged_in = metadata.get("logged_in", "units")
        return cls(unit=value if isinstance(value, str) and value else None,
                   units_per_sample=float(per_sample) if _positive(per_sample) else None,
                   logged_in=logged_in if logged_in in COUNTED_IN else "units",
                   samples_per_epoch=per_epoch if _positive(per_epoch) else None,
                   samples_per_step=global_batch_size)

    @property
    def units_per_count(self) -> float:
        """How many units one count of the log is (1 where what it needs is unknown)."""
        per_sample = self.units_per_sample or 1
        if self.logged_in == "samples":
            return float(per_sample)
        if self.logged_in == "epochs" and self.samples_per_epoch:
            return float(per_sample * self.samples_per_epoch)
        if self.logged_in == "steps" and self.samples_per_step is not None:
            return float(per_sample * self.samples_per_step)
        return 1.0

    def units(self, count: int | float | None) -> int | float | None:
        """The units a logged count is; a whole number where it is one (to a millionth)."""
        per_count = self.units_per_count
        if count is None or per_count == 1.0:
            return count
        units = count * per_count
        return round(units) if abs(units - round(units)) < 1e-6 * max(1.0, abs(units)) else units

    def units_in(self, samples: int | float) -> int | float:
        """Progress units in `samples` training samples (a throughput in units, a planned run's length)."""
        return samples if self.unit == "samples" else samples * self.units_per_sample

    def samples(self, units: int | float | None) -> int | float | None:
        """Training samples in `units`, where the codec knows how they relate (else None)."""
        if units is None or self.unit is None:
            return None
        if self.unit == "samples":
            return units
        if self.units_per_sample:
            return units / self.units_per_sample
        if self.samples_per_unit:
            return units * self.samples_per_unit
        return None


def logged_count(fields: dict) -> int | float | None:
    """The count a log line's metadata carries: the first finite one among PROGRESS_FIELDS."""
    name = count_field(fields)
    return None if name is None else fields[name]


def count_field(fields: dict) -> str | None:
    """Which of PROGRESS_FIELDS logged_count() reads in a metadata dict; None where none is a finite count."""
    for name in PROGRESS_FIELDS:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _LIMIT:
            return name
        if isinstance(value, float) and math.isfinite(value):
            return name
    return None


def _positive(value: Any) -> bool:
    """A finite positive number (not a bool)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer past the largest double
        return False
