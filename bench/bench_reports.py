"""Benchmark: what a monthly report costs on top of the bill it is made from.

Baseline: `compute_bill` at team x model x sharing-mode grain (what `gpuledger bill` does).
Ours: `issue_monthly` (draft) end to end — the same bill plus idle allocations, recommendations,
the inputs hash, summary.csv, the FOCUS export (Parquet, the default), one PDF statement per team and
the fleet, and the manifest — with the FOCUS build and the PDF statements also timed alone.

Run: `python -m bench.bench_reports [--gpus 64] [--step-min 5]`; writes bench/results/reports.json.
`--focus-size --gpus 256 --step-min 30`: only the FOCUS files, Parquet (default) beside CSV (on
request), sized: bench/results/reports_focus_size.json.
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from bench.common import peak_rss_mib, timed, write_result
from gpuledger.core.config import Settings
from gpuledger.core.period import Period

PERIOD = "2024-11"


def _load(path: Path, gpus: int, step: timedelta) -> int:
    from gpuledger.simulator.engine import Simulation
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.warehouse import LoadBatch, Warehouse

    sim = Simulation(FleetSpec.default(gpus=gpus), Period.exact(PERIOD).window_at(step), seed=7)
    rows = 0
    with Warehouse.open(path) as wh:
        wh.load(LoadBatch(sim.inventory()))
        for window, frames in sim.batches(timedelta(days=1)):
            wh.load(LoadBatch(frames, window=window))
            rows += frames["gpu_samples"].height
    return rows


def focus_size(gpus: int, step: timedelta) -> None:
    """The FOCUS export's files for one month of `gpus` cards, Parquet (the default) beside CSV
    (on request), written from the same frame in the same run; sizes also per 256 GPUs (the
    size scales with card-days x holders, not with the sample step)."""
    from gpuledger.reports.billing import month_bill, summary_lines
    from gpuledger.reports.focus import focus_frame, write_focus
    from gpuledger.warehouse import Warehouse

    settings = Settings()
    with tempfile.TemporaryDirectory() as tmp:
        wh_path = Path(tmp) / "bench.duckdb"
        samples, load_s = timed(lambda: _load(wh_path, gpus, step))
        with Warehouse.open(wh_path, read_only=True) as wh:
            bill = month_bill(wh, settings, PERIOD)
        frame = focus_frame(bill.detail, summary_lines(bill), bill.window, settings, bill.currency,
                            rules=bill.raw.rules)
        sizes, seconds = {}, {}
        for fmt in ("parquet", "csv"):
            folder = Path(tmp) / fmt
            folder.mkdir()
            files, seconds[fmt] = timed(partial(write_focus, frame, folder, (fmt,)))
            sizes[fmt] = files[0].stat().st_size
    mib = 2**20
    write_result("reports_focus_size", {
        "fleet": {"gpus": gpus, "period": PERIOD, "step_minutes": step.total_seconds() / 60,
                  "gpu_samples": samples, "focus_rows": frame.height, "focus_columns": frame.width},
        "baseline_csv_mib": round(sizes["csv"] / mib, 2),
        "ours_parquet_mib": round(sizes["parquet"] / mib, 2),
        "csv_mib_per_256_gpus": round(sizes["csv"] / mib * 256 / gpus, 2),
        "parquet_mib_per_256_gpus": round(sizes["parquet"] / mib * 256 / gpus, 2),
        "csv_over_parquet": round(sizes["csv"] / sizes["parquet"], 2),
        "write_s": {k: round(v, 3) for k, v in seconds.items()},
        "load_s": round(load_s, 1),
    })


def main() -> None:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.reports.billing import month_bill, summary_lines
    from gpuledger.reports.compose import build_statements, gather
    from gpuledger.reports.focus import focus_frame
    from gpuledger.reports.html import render_statement
    from gpuledger.reports.monthly import issue_monthly
    from gpuledger.reports.pdf import write_statements
    from gpuledger.reports.statement import LIMITS
    from gpuledger.warehouse import Warehouse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--step-min", type=int, default=5)
    parser.add_argument("--focus-size", action="store_true",
                        help="only size the FOCUS files (Parquet vs CSV): "
                             "bench/results/reports_focus_size.json")
    args = parser.parse_args()
    if args.focus_size:
        focus_size(args.gpus, timedelta(minutes=args.step_min))
        return
    settings = Settings()
    now = datetime(2024, 12, 2, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        wh_path = Path(tmp) / "bench.duckdb"
        samples, load_s = timed(lambda: _load(wh_path, args.gpus, timedelta(minutes=args.step_min)))
        with Warehouse.open(wh_path, read_only=True) as wh:
            window = Period.exact(PERIOD).window
            compute_bill(wh, window, settings, ("team", "model", "sharing_mode"))  # warm caches
            _, bill_s = timed(lambda: compute_bill(wh, window, settings, ("team", "model", "sharing_mode")))
            result, report_s = timed(lambda: issue_monthly(wh, settings, PERIOD, Path(tmp) / "out", now=now))
            bill = month_bill(wh, settings, PERIOD)
            frame, focus_s = timed(lambda: focus_frame(
                bill.detail, summary_lines(bill), bill.window, settings, bill.currency, rules=bill.raw.rules))
            data, gather_s = timed(lambda: gather(wh, settings, PERIOD))
        statements = build_statements(data, settings, "DRAFT", now)
        out = Path(tmp) / "pdf"
        out.mkdir()

        def render() -> dict[Path, int]:
            jobs = [(out / f"{st.key}.pdf", [render_statement(st, limits) for limits in LIMITS])
                    for st in statements]
            return write_statements(jobs, out / "statements.pdf", processes=settings.reports.pdf_processes)[1]

        pages, pdf_s = timed(render)
    figures = {
        "fleet": {"gpus": args.gpus, "period": PERIOD, "step_minutes": args.step_min,
                  "gpu_samples": samples, "detail_rows": bill.detail.height,
                  "focus_rows": frame.height, "statements": len(statements),
                  "pdf_pages": pages[out / "statements.pdf"]},
        "baseline_bill_s": round(bill_s, 3),
        "ours_report_s": round(report_s, 3),
        "ours_over_baseline": round(report_s / bill_s, 2) if bill_s else None,
        "phases_s": {"gather (bill+idle+recommend+hash)": round(gather_s, 3),
                     "focus_build": round(focus_s, 3), "statements_pdf": round(pdf_s, 3)},
        "focus_rows_per_s": round(frame.height / focus_s) if focus_s else None,
        "seconds_per_statement_pdf": round(pdf_s / len(statements), 3),
        "load_s": round(load_s, 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "report_folder_files": len(result.totals["pdf_pages"]) + 4,
    }
    write_result("reports", figures)


if __name__ == "__main__":
    main()
