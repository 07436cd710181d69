"""vLLM token counters by serving pod and model → `token_samples`.

Counters are stored raw, exactly as the server reported them at each instant. A counter reset
(the pod restarted) shows as a drop; it is not a bad sample. Consumers compute the tokens in a
span with `counter_increase`: the sum of positive steps plus, after a drop, the new value
(what Prometheus' `increase()` does, without extrapolation). Storing raw values instead of
per-step increases keeps a re-collected window identical and lets a reset at a chunk boundary
be seen from either side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import Matrix
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.tabulate import tabulate
from gpuledger.core.frames import TOKEN_SAMPLES, polars_schema

METRICS: dict[str, str] = {
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
}
LABELS: tuple[str, ...] = ("model_name", "namespace", "pod", "exported_namespace", "exported_pod")
BOUNDS = {name: (0.0, float("inf")) for name in METRICS.values()}


def build_token_samples(
    matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality,
) -> pl.DataFrame:
    keys = {
        "namespace": pl.coalesce("exported_namespace", "namespace").fill_null(""),
        "pod": pl.coalesce("exported_pod", "pod").fill_null(""),
        "model_name": pl.col("model_name").fill_null(""),
    }
    wide = tabulate(matrices, LABELS, keys, BOUNDS, chunk=chunk, now=now, table=TOKEN_SAMPLES.name,
                    quality=quality)
    schema = polars_schema(TOKEN_SAMPLES)
    return wide.select(
        *(pl.col(c).cast(schema[c]) if c in wide.columns else pl.lit(None, schema[c]).alias(c)
          for c in TOKEN_SAMPLES.column_names)
    )


def counter_increase(values: Sequence[float | None]) -> float:
    """Total increase of a raw counter across resets (a drop restarts from zero)."""
    total = 0.0
    previous: float | None = None
    for value in values:
        if value is None:
            continue
        if previous is not None:
            total += value - previous if value >= previous else value
        previous = value
    return total
