"""Each queue's demand for the next period, with daily and weekly seasonality and quantiles.

1. Resample every (queue, flavor, resource) series to hourly means on one common hourly grid
   (hours without a sample count as no demand).
2. Fit one scikit-learn `Ridge` on seasonal features, hour-of-day and day-of-week one-hots,
   with all series as outputs at once (they share the design matrix, so this is one solve).
3. Predict the horizon's hours; a quantile is the prediction plus that quantile of the
   series' in-sample residuals (split-conformal style), clipped at zero.

The optimizer uses the forecast as scenarios: every horizon hour at several quantile levels,
each equally likely, so "expected unmet demand" at a quota is an average over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl
from sklearn.linear_model import Ridge

SeriesKey = tuple[str, str, str]
"""(cluster_queue, flavor, resource)."""
LEVELS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)


@dataclass(frozen=True)
class Forecast:
    keys: tuple[SeriesKey, ...]
    start: datetime
    hours: int
    mean: np.ndarray
    """(hours, series) expected demand."""
    levels: tuple[float, ...]
    quantiles: np.ndarray
    """(levels, hours, series) demand quantiles."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_positions", {k: i for i, k in enumerate(self.keys)})

    def index(self, key: SeriesKey) -> int | None:
        positions: dict[SeriesKey, int] = self.__dict__["_positions"]
        return positions.get(key)

    def quantile(self, q: float) -> np.ndarray:
        """(hours, series) at level `q` (nearest computed level)."""
        i = int(np.argmin([abs(level - q) for level in self.levels]))
        return np.asarray(self.quantiles[i])


def hourly_matrix(history: pl.DataFrame) -> tuple[list[datetime], list[SeriesKey], np.ndarray]:
    """Step 1: (hours, keys, matrix hours x series) of hourly mean demand."""
    hourly = (
        history.with_columns(pl.col("ts").dt.truncate("1h"))
        .group_by("ts", "cluster_queue", "flavor", "resource")
        .agg(pl.col("demand").mean())
    )
    first, last = hourly["ts"].min(), hourly["ts"].max()
    assert isinstance(first, datetime) and isinstance(last, datetime)
    n = int((last - first) / timedelta(hours=1)) + 1
    hours = [first + timedelta(hours=i) for i in range(n)]
    names = hourly.select("cluster_queue", "flavor", "resource")
    keys = sorted({(r[0], r[1], r[2]) for r in names.iter_rows()})
    col = {k: i for i, k in enumerate(keys)}
    matrix = np.zeros((n, len(keys)))
    offsets = ((hourly["ts"] - first).dt.total_seconds() // 3600).cast(pl.Int64).to_numpy()
    columns = np.array([col[(a, b, c)] for a, b, c in names.iter_rows()], dtype=np.int64)
    matrix[offsets, columns] = hourly["demand"].to_numpy()
    return hours, keys, matrix


def seasonal_features(hours: Sequence[datetime]) -> np.ndarray:
    """One-hot hour of day (24) and day of week (7)."""
    x = np.zeros((len(hours), 31))
    for i, h in enumerate(hours):
        x[i, h.hour] = 1.0
        x[i, 24 + h.weekday()] = 1.0
    return x


def forecast(history: pl.DataFrame, horizon: timedelta, levels: Sequence[float] = LEVELS,
             alpha: float = 1.0) -> Forecast:
    """Steps 1-3 of the module docstring."""
    hours, keys, y = hourly_matrix(history)
    model = Ridge(alpha=alpha).fit(seasonal_features(hours), y)
    fitted = np.asarray(model.predict(seasonal_features(hours))).reshape(y.shape)
    residuals = y - fitted
    n = max(1, int(horizon / timedelta(hours=1)))
    future = [hours[-1] + timedelta(hours=i + 1) for i in range(n)]
    mean = np.clip(np.asarray(model.predict(seasonal_features(future))).reshape(n, len(keys)), 0, None)
    offsets = np.quantile(residuals, list(levels), axis=0)  # (levels, series)
    quantiles = np.clip(mean[None, :, :] + offsets[:, None, :], 0, None)
    return Forecast(tuple(keys), future[0], n, mean, tuple(levels), quantiles)
