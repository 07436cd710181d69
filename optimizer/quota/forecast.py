"""Each queue's demand for the next period, with daily and weekly seasonality and quantiles.

1. Every (queue, flavor, resource) series as hourly means on one common hourly grid
   (`optimizer.quota.demand`: hours without a sample count as no demand).
2. Fit one ridge regression on seasonal features, hour-of-day and day-of-week one-hots, with
   all series as outputs at once (they share the design matrix, so this is one solve of a
   31 x 31 system): the intercept unpenalized, the same estimator as scikit-learn's `Ridge`,
   written out because importing scikit-learn took longer than planning (decision 0172).
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

from gpuledger.optimizer.quota.demand import Demand, demand_of

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


def seasonal_features(hours: Sequence[datetime]) -> np.ndarray:
    """One-hot hour of day (24) and day of week (7)."""
    x = np.zeros((len(hours), 31))
    for i, h in enumerate(hours):
        x[i, h.hour] = 1.0
        x[i, 24 + h.weekday()] = 1.0
    return x


@dataclass(frozen=True)
class Ridge:
    """Least squares with an L2 penalty `alpha` on the coefficients, not on the intercept
    (features and outputs centred first), for every output column at once."""

    coef: np.ndarray
    intercept: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, alpha: float) -> Ridge:
        x_mean, y_mean = x.mean(axis=0), y.mean(axis=0)
        xc = x - x_mean
        coef = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - y_mean))
        return cls(coef, y_mean - x_mean @ coef)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x @ self.coef + self.intercept)


def forecast(history: Demand | pl.DataFrame, horizon: timedelta, levels: Sequence[float] = LEVELS,
             alpha: float = 1.0) -> Forecast:
    """Steps 1-3 of the module docstring (a long history is bucketed at its own step first)."""
    grid = history if isinstance(history, Demand) else demand_of(history, _step(history))
    hours, y = grid.hourly()
    model = Ridge.fit(seasonal_features(hours), y, alpha)
    residuals = y - model.predict(seasonal_features(hours))
    n = max(1, int(horizon / timedelta(hours=1)))
    future = [hours[-1] + timedelta(hours=i + 1) for i in range(n)]
    mean = np.clip(model.predict(seasonal_features(future)).reshape(n, len(grid.keys)), 0, None)
    offsets = np.quantile(residuals, list(levels), axis=0)  # (levels, series)
    quantiles = np.clip(mean[None, :, :] + offsets[:, None, :], 0, None)
    return Forecast(tuple(grid.keys), future[0], n, mean, tuple(levels), quantiles)


def _step(frame: pl.DataFrame) -> timedelta:
    step = frame["ts"].unique().sort().diff().drop_nulls().median()
    return step if isinstance(step, timedelta) else timedelta(hours=1)
