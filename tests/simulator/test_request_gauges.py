"""The simulated vLLM queue gauges (`vllm:num_requests_waiting` / `_running` in token_samples).

Checked against the pods' own token counters, not the gauge code: the prompt tokens a pod
processed in a minute, divided by 60 s and by the tokens per request, times the seconds per
request, is its requests in flight (Little's law) to within one request (the counters are
floored and average the minute, the gauge is the instant). Running never exceeds the batch
limit and anything beyond it waits; the load is diurnal: more in flight at the 15:00 UTC peak
than at the 03:00 trough.
"""

from __future__ import annotations

import polars as pl

from gpuledger.simulator.samples import MAX_NUM_SEQS, PROMPT_TOKENS_PER_REQUEST, SECONDS_PER_REQUEST


def test_gauges_follow_the_token_counters(tiny_samples: dict[str, pl.DataFrame]) -> None:
    tok = tiny_samples["token_samples"].sort("namespace", "pod", "ts")
    assert tok.height and tok["num_requests_running"].null_count() == 0
    assert (tok["num_requests_running"] <= MAX_NUM_SEQS).all()
    assert tok.filter((pl.col("num_requests_waiting") > 0) & (pl.col("num_requests_running") < MAX_NUM_SEQS)
                      ).is_empty()
    flow = tok.with_columns(
        (pl.col("prompt_tokens_total").diff().over("namespace", "pod") / 60.0).alias("tokens_per_s"),
        (pl.col("num_requests_waiting") + pl.col("num_requests_running")).alias("in_flight"),
    ).drop_nulls("tokens_per_s").filter(pl.col("tokens_per_s") >= 0)
    expected = flow["tokens_per_s"] / PROMPT_TOKENS_PER_REQUEST * SECONDS_PER_REQUEST
    assert ((flow["in_flight"] - expected).abs() <= 1.0).mean() > 0.99  # type: ignore[operator]
    hour = tok.with_columns(pl.col("ts").dt.hour().alias("h"),
                            (pl.col("num_requests_waiting") + pl.col("num_requests_running")).alias("f"))
    peak = float(hour.filter(pl.col("h") == 15)["f"].mean())  # type: ignore[arg-type]
    trough = float(hour.filter(pl.col("h") == 3)["f"].mean())  # type: ignore[arg-type]
    assert peak > 3 * trough
