"""Effective-dated unit prices per GPU model.

A price applies from its `effective_from` date (00:00 UTC) until the next entry of the same
model, so a price change in the middle of a billing period splits the period at the boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from gpuledger.core.config import Settings
from gpuledger.core.errors import ConfigError
from gpuledger.core.window import Window

_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class PriceSpan:
    model: str
    start: datetime
    end: datetime | None
    unit_price: float
    currency: str


class PriceBook:
    """Unit price per card-hour, per model, as half-open effective spans."""

    def __init__(self, settings: Settings) -> None:
        self.currency = settings.currency
        self.version = settings.price_book_version()
        spans: dict[str, list[PriceSpan]] = {}
        for entry in sorted(settings.price_book, key=lambda p: (p.model, p.effective_from)):
            currency = entry.currency or settings.currency
            if currency != settings.currency:
                raise ConfigError(
                    f"price_book: {entry.model} is priced in {currency} but the bill currency is "
                    f"{settings.currency}; one currency per fleet"
                )
            start = datetime.combine(entry.effective_from, time(), tzinfo=UTC)
            model_spans = spans.setdefault(entry.model, [])
            if model_spans:
                last = model_spans[-1]
                if last.start == start:
                    raise ConfigError(
                        f"price_book: {entry.model} has two prices effective {entry.effective_from}"
                    )
                model_spans[-1] = PriceSpan(last.model, last.start, start, last.unit_price, currency)
            model_spans.append(PriceSpan(entry.model, start, None, entry.unit_price, currency))
        self._spans = spans

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self._spans)

    def spans(self, model: str, window: Window) -> Iterator[PriceSpan]:
        """The price spans of `model` clipped to `window`; raises when a part is unpriced."""
        if model not in self._spans:
            raise ConfigError(f"price_book: no price for GPU model {model!r}")
        cursor = window.start
        for span in self._spans[model]:
            end = span.end or window.end
            start, stop = max(span.start, window.start), min(end, window.end)
            if start >= stop:
                continue
            if start > cursor:
                break
            yield PriceSpan(model, start, stop, span.unit_price, span.currency)
            cursor = stop
        if cursor < window.end:
            raise ConfigError(
                f"price_book: {model} has no price effective at {cursor.isoformat()}"
            )

    def price_at(self, model: str, moment: datetime) -> float:
        window = Window(moment, moment + _EPSILON)
        return next(self.spans(model, window)).unit_price
