"""Effective-dated unit prices per GPU model, with a default catalog behind them.

A price applies from its `effective_from` date (00:00 UTC) until the next entry of the same
model, so a price change in the middle of a billing period splits the period at the boundary.

Where a price comes from, in order:
1. the configured `price_book` (always wins: it is the operator's own number);
2. the default catalog `core/data/gpu_price_catalog.yaml` (approximate public on-demand list
   prices for the NVIDIA data-center models, documented there as defaults to override), so a
   newcomer's first bill never fails on a model nobody priced;
3. nothing: the model is *unpriced*. `spans` raises (`ConfigError`), and the bill decides what
   that means (billed at zero on lines marked `unpriced`, or an error under `--strict-prices`).

Names are matched the way collectors spell them: dcgm-exporter `modelName`
(`NVIDIA A100 80GB PCIe`), GPU feature discovery `nvidia.com/gpu.product`
(`NVIDIA-A100-80GB-PCIe`, plus `-SHARED` under time-slicing and `-MIG-...` under the MIG single
strategy, both stripped), and `core.mig.canonical_model` names (`H100-80GB`); case-insensitive,
and a space matches a dash, since the GFD label is the NVML name with spaces replaced.

Two entries of one model and date (its spellings fold into one key) with the same price are one
price; with different prices the book is refused in one line naming both entries as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from functools import cache
from typing import Any, Literal

from gpuledger.core.config import PriceEntry, Settings
from gpuledger.core.errors import ConfigError
from gpuledger.core.window import Window

_EPSILON = timedelta(microseconds=1)
_GFD_SUFFIX = re.compile(r"(-SHARED|-MIG-.*)$", re.IGNORECASE)
CATALOG_PATH = "data/gpu_price_catalog.yaml"
"""The default catalog, inside the `gpuledger.core` package."""
PriceSource = Literal["price_book", "catalog"]


@dataclass(frozen=True, slots=True)
class PriceSpan:
    model: str
    start: datetime
    end: datetime | None
    unit_price: float
    currency: str


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One default price: the catalog's canonical name, price per card-hour and currency."""

    canonical: str
    unit_price: float
    currency: str


def strip_gfd_suffix(product: str) -> str:
    """A GFD `nvidia.com/gpu.product` value without the suffixes that are not the model:
    `-SHARED` (time-slicing) and `-MIG-<profile>` / `-MIG-INVALID` (MIG single strategy)."""
    return _GFD_SUFFIX.sub("", product.strip())


def model_key(name: str) -> str:
    """The matching key of a model name: GFD suffixes stripped, case folded, spaces as dashes."""
    return re.sub(r"[\s_]+", "-", strip_gfd_suffix(name)).casefold()


def _catalog_entries(raw: Any) -> dict[str, CatalogEntry]:
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), list):
        raise ConfigError(f"core/{CATALOG_PATH}: expected a mapping with a `models` list")
    currency = str(raw.get("currency", "USD"))
    out: dict[str, CatalogEntry] = {}
    for item in raw["models"]:
        entry = CatalogEntry(str(item["canonical"]), float(item["unit_price"]), currency)
        for name in (entry.canonical, *(item.get("aliases") or ())):
            key = model_key(str(name))
            known = out.get(key)
            if known is not None and known.canonical != entry.canonical:
                raise ConfigError(
                    f"core/{CATALOG_PATH}: {name!r} names both {known.canonical} and {entry.canonical}"
                )
            out[key] = entry
    return out


@cache
def price_catalog() -> dict[str, CatalogEntry]:
    """The default catalog keyed by `model_key` of every canonical name and alias."""
    from importlib import resources

    import yaml

    text = resources.files("gpuledger.core").joinpath(CATALOG_PATH).read_text()
    return _catalog_entries(yaml.safe_load(text))


def catalog_entry(model: str) -> CatalogEntry | None:
    """The catalog's default for `model` (any spelling the collectors produce), or None."""
    return price_catalog().get(model_key(model))


def _resolve(model: str) -> str:
    """One key per model however it is spelled: the catalog's canonical name where known."""
    entry = catalog_entry(model)
    return model_key(entry.canonical) if entry is not None else model_key(model)


def _two_prices(a: tuple[int, PriceEntry], b: tuple[int, PriceEntry], currency: str) -> str:
    """The one line refusing two different prices of one model on one date: both entries, as
    the book spells them (two spellings fold into one catalog key: `H100-80GB` and
    `NVIDIA H100 80GB HBM3` are one model)."""
    def line(index: int, entry: PriceEntry) -> str:
        return (f"price_book[{index}] {{model: {entry.model!r}, unit_price: {entry.unit_price:g}, "
                f"currency: {entry.currency or currency}, effective_from: {entry.effective_from}}}")

    (_, ea), (_, eb) = a, b
    known = catalog_entry(ea.model)
    same = "spell one model" if ea.model != eb.model else "are the same model"
    return (f"price_book: {line(*a)} and {line(*b)} {same} ({known.canonical if known else ea.model}) "
            f"with two prices effective {ea.effective_from}; keep one")


class PriceBook:
    """Unit price per card-hour, per model, as half-open effective spans.

    `use_catalog=False` prices from the configured `price_book` alone (what the book held before
    the catalog existed). The catalog is used only in the bill's currency (no conversion).
    """

    def __init__(self, settings: Settings, *, use_catalog: bool = True) -> None:
        self.currency = settings.currency
        self.version = settings.price_book_version()
        self.use_catalog = use_catalog
        spans: dict[str, list[PriceSpan]] = {}
        entries = sorted(enumerate(settings.price_book),
                         key=lambda ie: (_resolve(ie[1].model), ie[1].effective_from, ie[0]))
        first: tuple[int, PriceEntry] | None = None  # the entry behind the last span added
        for index, entry in entries:
            currency = entry.currency or settings.currency
            if currency != settings.currency:
                raise ConfigError(
                    f"price_book: {entry.model} is priced in {currency} but the bill currency is "
                    f"{settings.currency}; one currency per fleet"
                )
            start = datetime.combine(entry.effective_from, time(), tzinfo=UTC)
            model_spans = spans.setdefault(_resolve(entry.model), [])
            if model_spans:
                last = model_spans[-1]
                if last.start == start:
                    assert first is not None
                    if last.unit_price == entry.unit_price:
                        continue  # the same price under two spellings of one model: one price
                    raise ConfigError(_two_prices(first, (index, entry), settings.currency))
                model_spans[-1] = PriceSpan(last.model, last.start, start, last.unit_price, currency)
            model_spans.append(PriceSpan(entry.model, start, None, entry.unit_price, currency))
            first = (index, entry)
        self._spans = spans

    @property
    def models(self) -> tuple[str, ...]:
        """The configured models (as the `price_book` spells them)."""
        return tuple(spans[0].model for spans in self._spans.values())

    def source(self, model: str) -> PriceSource | None:
        """Where `model`'s price comes from, or None when it has none anywhere."""
        if _resolve(model) in self._spans:
            return "price_book"
        entry = catalog_entry(model) if self.use_catalog else None
        if entry is not None and entry.currency == self.currency:
            return "catalog"
        return None

    def spans(self, model: str, window: Window) -> Iterator[PriceSpan]:
        """The price spans of `model` clipped to `window`; raises when a part is unpriced."""
        source = self.source(model)
        if source is None:
            raise ConfigError(f"price_book: no price for GPU model {model!r}")
        if source == "catalog":
            entry = catalog_entry(model)
            assert entry is not None
            yield PriceSpan(model, window.start, window.end, entry.unit_price, entry.currency)
            return
        cursor = window.start
        for span in self._spans[_resolve(model)]:
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
