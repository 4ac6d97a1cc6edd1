"""Reference convergence point statistics, as mlperf_logging's rcp_checker computes them: for each
reference batch size the olympic mean of the reference runs' convergence, and the fastest
submission mean a one-sided t-test (alpha 0.05) still accepts; references slower than the
interpolation of their neighbours are pruned; other batch sizes are interpolated.

Why not call rcp_checker itself: it imports scipy.stats for one Student t CDF, and that import
alone (about 1.5 s here) is several times the whole review of a round's results. The t CDF for
an integer number of degrees of freedom has a closed form (Abramowitz & Stegun 26.7.3-4), used
below; tests/review check every statistic against rcp_checker's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.05  # rcp_checker's significance level
TOLERANCE = 0.0001  # rcp_checker's bisection stops at this width, in the progress unit
# how a reference was picked for a batch size (rcp_checker.check_directory's cases)
EXACT, INTERPOLATED, BELOW_ALL, ABOVE_ALL, NONE = "exact", "interpolated", "below all", "above all", "none"


@dataclass(frozen=True)
class Reference:
    name: str  # the record's name in rcps_<benchmark>.json, or how it was interpolated
    batch_size: int
    mean: float  # olympic mean of the reference runs' convergence points
    stdev: float  # population standard deviation of all of them
    min_epochs: float  # the fastest submission mean the t-test accepts

    @property
    def max_speedup(self) -> float:
        return self.mean / self.min_epochs

    @property
    def min_mean(self) -> float:
        # the official comparison is against mean / max speedup; kept in that form to compare alike
        return self.mean / self.max_speedup


class References:
    """The references of one benchmark and round (a parsed rcps_<benchmark>.json)."""

    def __init__(self, records: dict, submission_runs: int, drop: int) -> None:
        self.submission_runs = submission_runs
        self.drop = drop
        refs = [self._reference(name, record) for name, record in records.items()]
        self.all = sorted((r for r in refs if r is not None), key=lambda r: r.batch_size)
        self.pruned = self._prune(self.all)

    def _reference(self, name: str, record: dict) -> Reference | None:
        points = sorted(record.get("Epochs to converge") or record.get("samples to converge") or [])
        kept = points[self.drop:len(points) - self.drop]
        if not kept:
            return None
        mean = sum(kept) / len(kept)
        overall = sum(points) / len(points)
        stdev = math.sqrt(sum((p - overall) ** 2 for p in points) / len(points))  # numpy.std: ddof 0
        return Reference(name, record["BS"], mean, stdev, self._min_acceptable_mean(mean, stdev, len(kept)))

    def _min_acceptable_mean(self, mean: float, stdev: float, reference_runs: int) -> float:
        if stdev == 0:
            return mean
        submission_runs = self.submission_runs - 2  # the olympic mean drops two
        low, high = 0.0, mean
        mid = (low + high) / 2
        while high - low > TOLERANCE:
            # rcp_checker passes the sample sizes the other way round; kept for identical results
            if _one_sided_p(mid, mean, stdev, reference_runs, submission_runs) > ALPHA:
                high = mid
            else:
                low = mid
            mid = (low + high) / 2
        return mid

    def _prune(self, refs: list[Reference]) -> list[Reference]:
        """Keep the lower envelope: drop references with a smaller batch size than the fastest
        one, and any converging slower than the interpolation of its neighbours."""
        if not refs:
            return []
        fastest = min(refs, key=lambda r: r.mean)
        kept = [r for r in refs if r.batch_size >= fastest.batch_size]
        i = 1
        while i < len(kept) - 1:
            if kept[i].mean > _interpolate(kept[i].batch_size, kept[i - 1], kept[i + 1], "mean"):
                del kept[i]  # and check the next one against the new neighbours
            else:
                i += 1
        return kept

    def interpolated(self, batch_size: int, low: Reference, high: Reference) -> Reference:
        mean = _interpolate(batch_size, low, high, "mean")
        stdev = _interpolate(batch_size, low, high, "stdev")
        min_epochs = self._min_acceptable_mean(mean, stdev, self.submission_runs * 2)
        return Reference(f"interpolated between batch sizes {low.batch_size} and {high.batch_size}",
                         batch_size, mean, stdev, min_epochs)

    def for_batch_size(self, batch_size: int) -> tuple[Reference | None, str]:
        """The reference to compare with, as rcp_checker.check_directory picks it among the pruned
        ones, and a note on how it was picked (the reason when there is none)."""
        ref, note, _ = self.pick(batch_size)
        return ref, note

    def pick(self, batch_size: int) -> tuple[Reference | None, str, str]:
        """for_batch_size, and which of check_directory's cases it is: EXACT, INTERPOLATED,
        BELOW_ALL (compared with the smallest), ABOVE_ALL or NONE (no reference to compare with)."""
        for ref in self.pruned:
            if ref.batch_size == batch_size:
                return ref, ref.name, EXACT
        below = [r for r in self.pruned if r.batch_size < batch_size]
        above = [r for r in self.pruned if r.batch_size > batch_size]
        if below and above:
            ref = self.interpolated(batch_size, below[-1], above[0])
            return ref, ref.name, INTERPOLATED
        if above:
            return above[0], f"batch size {batch_size} is below every reference; compared with {above[0].name}", BELOW_ALL
        if below:
            return None, (f"no reference at or above batch size {batch_size} (the largest is {below[-1].batch_size}); "
                          "MLPerf asks the submitter for one"), ABOVE_ALL
        return None, "the reference file has no usable records", NONE


def _interpolate(batch_size: int, low: Reference, high: Reference, field: str) -> float:
    # numpy.interp's arithmetic, so that the result is the same float
    y0, y1 = getattr(low, field), getattr(high, field)
    slope = (y1 - y0) / (high.batch_size - low.batch_size)
    return slope * (batch_size - low.batch_size) + y0


def _one_sided_p(mean: float, reference_mean: float, stdev: float, n1: int, n2: int) -> float:
    """scipy.stats.ttest_ind_from_stats(mean, stdev, n1, reference_mean, stdev, n2, equal_var=True)
    turned one-sided as rcp_checker does: the probability of a t this low, i.e. the t CDF."""
    df = n1 + n2 - 2
    pooled_variance = ((n1 - 1) * stdev**2 + (n2 - 1) * stdev**2) / df
    t = (mean - reference_mean) / math.sqrt(pooled_variance * (1 / n1 + 1 / n2))
    return student_t_cdf(t, df)


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with an integer df >= 1 (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    term = total = 1.0
    if df % 2:  # odd: A = 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        signed_a = 2 / math.pi * (theta + (sin * math.cos(theta) * total if df > 1 else 0.0))
    else:  # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        for k in range(1, df // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        signed_a = sin * total
    return 0.5 + signed_a / 2

