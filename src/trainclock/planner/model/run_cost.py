"""What a predicted run costs: accelerator-hours, money at a given price, energy at rated power.
Only the timed part of a run (run_start to run_stop) is counted, as MLPerf times it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainclock.errors import UsageError
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.predict import Prediction
from trainclock.review.scoring import scoring_rule

HOURS_PER_MONTH = 8760 / 12

_PRICE = re.compile(r"^\$?\s*(?P<amount>\d[\d,]*(\.\d+)?|\.\d+)\s*/\s*(?P<unit>accelerator|gpu|chip|node)-(?P<period>hour|month)$")


@dataclass(frozen=True)
class Price:
    per_accelerator_hour: float  # in the currency the user gave
    text: str


@dataclass(frozen=True)
class RunCost:
    accelerator_hours: float
    runs_per_result: int
    per_run: float | None  # None without a price
    energy_kwh: float | None  # None without a power figure

    @property
    def per_result(self) -> float | None:
        return None if self.per_run is None else self.per_run * self.runs_per_result


def parse_price(text: str, accelerator: Accelerator) -> Price:
    """"37000/node-month", "$2.10/gpu-hour", "98/node-hour", "1.2/accelerator-month"."""
    match = _PRICE.match(text.strip().lower())
    if not match:
        raise UsageError(f"--price {text!r}: write AMOUNT/UNIT-PERIOD with UNIT accelerator, gpu, chip or node and "
                         f"PERIOD hour or month, e.g. 37000/node-month or 2.10/gpu-hour")
    amount = float(match["amount"].replace(",", ""))
    if amount <= 0:
        raise UsageError(f"--price {text!r}: the amount must be positive")
    per_unit_hour = amount / (HOURS_PER_MONTH if match["period"] == "month" else 1)
    per_accelerator = per_unit_hour / (accelerator.accelerators_per_node if match["unit"] == "node" else 1)
    return Price(per_accelerator, text)


def run_cost(prediction: Prediction, price: Price | None) -> RunCost:
    hours = prediction.time_to_train_s / 3600
    accelerator_hours = hours * prediction.count
    power = prediction.accelerator.power_watts
    return RunCost(
        accelerator_hours=accelerator_hours,
        runs_per_result=runs_per_result(prediction.cost.benchmark),
        per_run=None if price is None else accelerator_hours * price.per_accelerator_hour,
        energy_kwh=None if power is None else accelerator_hours * power / 1000,
    )


def runs_per_result(benchmark: str) -> int:
    """Runs that make one MLPerf result (their olympic mean is the score), by the review's scoring
    rules; 1 for a benchmark they do not know."""
    rule = scoring_rule(benchmark)
    return rule.runs if rule else 1
