"""`gpuledger budgets`: each team's budget used, left and forecast, and the thresholds crossed.

The numbers are `analytics.billing.budgets.budget_status` of the month's bill (the team page's tile and
the `/metrics` gauges read the same). `--notify` POSTs the alerts to `finance.budget_webhook`
(generic JSON with a Slack `text`); with `--fail-over` the exit code is 4 when a team is over
budget, so a CronJob can alert on it too. The bill's notes go to stderr as `bill`'s do;
`--as-computed` bills the roll-up under its stored rules (docs/decisions/0147).
"""

from __future__ import annotations

import argparse
import json

import click

from gpuledger.command_context import Context
from gpuledger.commands import output_option, runs, window_options
from gpuledger.commands._analytics_common import as_computed_option, bill_warnings, warn, window_from_args
from gpuledger.commands._output import emit, frame_csv
from gpuledger.core.errors import ConfigError

_SHOWN = ("team", "budget", "used", "left", "used_ratio", "forecast", "forecast_ratio", "threshold", "state")
OVER_BUDGET_EXIT = 4
"""Not 3 (access denied in the CLI contract): a distinct code a CronJob can alert on."""


@click.command("budgets", help="budget used, left and month-end forecast per team; alerts")
@window_options
@click.option("--notify", is_flag=True, help="POST the alerts to finance.budget_webhook")
@click.option("--fail-over", is_flag=True, help=f"exit {OVER_BUDGET_EXIT} when a team is over budget")
@output_option()
@as_computed_option
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.analytics.billing.bill import compute_bill
    from gpuledger.analytics.billing.budgets import alerts, budget_status
    from gpuledger.analytics.exports import rows_json
    from gpuledger.terminal_progress import busy

    window = window_from_args(args)
    with busy(f"billing {window}"), ctx.open_warehouse(read_only=True) as wh:
        bill = compute_bill(wh, window, ctx.settings, ("team",), grain="lines", as_computed=args.as_computed)
    warn(bill_warnings(bill))
    status = budget_status(bill, ctx.settings)
    found = alerts(status, ctx.settings.currency)
    document = {"schema": "gpuledger.budgets/v1", "period": bill.period, "currency": bill.currency,
                "teams": rows_json(status), "alerts": found}
    thresholds = list(ctx.settings.finance.budget_thresholds)
    emit(ctx, args.format, rows=status.to_dicts(), columns=_SHOWN,
         money=("budget", "used", "left", "forecast"),
         json_text=json.dumps(document, indent=2, default=str),
         csv_text=frame_csv(status, ("budget", "used", "left", "forecast"), bill.currency),
         title=f"Budgets {bill.period} ({bill.currency}; thresholds {thresholds})",
         footer=[str(a["summary"]) for a in found])
    if args.notify:
        _notify(ctx, found, bill.period)
    over = status.filter(status["state"] == "over").height
    return OVER_BUDGET_EXIT if args.fail_over and over else 0


def _notify(ctx: Context, found: list[dict[str, object]], period: str) -> None:
    from gpuledger.reports.budget_alerts import payload, post

    hook = ctx.settings.finance.budget_webhook
    if hook is None:
        raise ConfigError("budgets --notify: set finance.budget_webhook in the config first")
    status = post(hook.get_secret_value(), payload(found, period))
    warn([f"budget alerts sent ({len(found)} alert(s), HTTP {status})"])
