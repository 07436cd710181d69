"""vLLM token counters by serving pod and model → `token_samples`.

Counters are stored raw, exactly as the server reported them at each instant. A counter reset
(the pod restarted) shows as a drop; it is not a bad sample. Consumers compute the tokens in a
span with `counter_increase`: the sum of positive steps plus, after a drop, the new value
(what Prometheus' `increase()` does, without extrapolation). Storing raw values instead of
per-step increases keeps a re-collected window identical and lets a reset at a chunk boundary
be seen from either side.

HA Prometheus pairs answer every counter twice, once per replica label (`prom_parse.REPLICA_LABELS`):
the copies are merged by the one HA rule (`prom_parse.merge_replicas`) and counted
`ha_duplicate`, so a pod's tokens are never doubled and a gap in one replica is filled by the
other. Two different series on one (namespace, pod, model) remain `duplicate_series`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import polars as pl

from gpuledger.collectors.chunks import Chunk
from gpuledger.collectors.prom_parse import REPLICA_LABELS, Matrix, merge_replica_fields
from gpuledger.collectors.quality import Quality
from gpuledger.collectors.tabulate import tabulate
from gpuledger.core.frames import TOKEN_SAMPLES, polars_schema

METRICS: dict[str, str] = {
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:num_requests_waiting": "num_requests_waiting",
    "vllm:num_requests_running": "num_requests_running",
}
"""Counters (raw, may reset) and the two queue gauges the autoscaling advice reads."""
KEY_LABELS: tuple[str, ...] = ("model_name", "namespace", "pod", "exported_namespace", "exported_pod")
"""The labels that name a token series' (namespace, pod, model)."""
LABELS: tuple[str, ...] = (*KEY_LABELS, *REPLICA_LABELS)
"""The labels fetched: the key's, then the default replica labels (see `fetch_labels`)."""
BOUNDS = {name: (0.0, float("inf")) for name in METRICS.values()}


def fetch_labels(replica_labels: Sequence[str] = REPLICA_LABELS) -> tuple[str, ...]:
    """The labels to fetch with `replica_labels` as the HA labels (the key's first)."""
    return (*KEY_LABELS, *(r for r in replica_labels if r not in KEY_LABELS))


def build_token_samples(
    matrices: Mapping[str, Matrix], chunk: Chunk, now: datetime, quality: Quality, *,
    replica_labels: Sequence[str] = REPLICA_LABELS,
) -> pl.DataFrame:
    """Per-counter answers → `token_samples` rows, HA copies merged first."""
    matrices = merge_replica_fields(matrices, replica_labels, quality, TOKEN_SAMPLES.name)
    keys = {
        "namespace": pl.coalesce("exported_namespace", "namespace").fill_null(""),
        "pod": pl.coalesce("exported_pod", "pod").fill_null(""),
        "model_name": pl.col("model_name").fill_null(""),
    }
    wide = tabulate(matrices, KEY_LABELS, keys, BOUNDS, chunk=chunk, now=now, table=TOKEN_SAMPLES.name,
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
