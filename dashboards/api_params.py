"""The query parameters of `/api/v1/*`: one table that validates requests and writes the OpenAPI.

Why one table: the parameters an endpoint accepts, the 400 that lists them for an unknown one
and the published OpenAPI description (`/api/v1/openapi.json`) must never disagree, so all
three are read from `ENDPOINTS` (issue 32: `start`, `end` and `window` were silently ignored,
answering 200 with the whole month).

The time model is the CLI's (`gpuledger bill --period|--start/--end`,
`commands._analytics_common.window_from_args`) plus OpenCost's relative windows, built only from
`core.period` and `core.window` (the one home of period arithmetic):
- `period=YYYY-MM` or `period=last` (the last complete month);
- `start=` and `end=` (ISO-8601, both), a half-open window `[start, end)`;
- `window=7d|30d|<N>d|<N>h|month-to-date`: the last N days/hours, or the running month, ending at
  the start of the current hour (so one hour's requests share a cached answer);
- none of them: the newest month with data.
At most one of the three forms per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuledger.core.errors import InputError
from gpuledger.core.period import Period
from gpuledger.core.window import HOUR, Window, as_utc, floor_time, parse_duration, parse_instant


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    example: str


PERIOD = Param("period", "calendar month YYYY-MM, or `last` (the last complete month); default: "
               "the newest month with data", "2026-11")
START = Param("start", "window start, ISO-8601 with an offset (with `end`); half-open [start, end)",
              "2026-11-01T00:00:00Z")
END = Param("end", "window end (exclusive), ISO-8601 with an offset (with `start`)", "2026-11-08T00:00:00Z")
WINDOW = Param("window", "relative window ending at the current hour: `7d`, `30d`, any `<N>d`/`<N>h`, "
               "or `month-to-date`", "7d")
TEAM = Param("team", "one team (leads: one they lead)", "vision")
NAMESPACE = Param("namespace", "one namespace", "vision-train")
TIME = (PERIOD, START, END, WINDOW)


@dataclass(frozen=True)
class Endpoint:
    path: str
    summary: str
    params: tuple[Param, ...]
    months_only: bool = False
    """Answered per calendar month only (stored month results): `period` is its time parameter."""

    def names(self) -> list[str]:
        return [p.name for p in self.params]


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/bill", "the `gpuledger.bill/v1` document of `gpuledger bill -o json`, with its notes", (
        *TIME, TEAM, Param("by", "comma-separated dimensions after team (at most 3 in all)", "team,model"),
        Param("as_computed", "`true`: the roll-up under its stored rules", "false"))),
    Endpoint("/idle", "idle GPU time per workload (`gpuledger idle -o json`)", (
        *TIME, TEAM, NAMESPACE, Param("by", "owner, pod or label:<key>", "owner"),
        Param("top", "how many workloads (1-5000, default 100)", "100"))),
    Endpoint("/recommendations", "the month's stored recommendations (`gpuledger recommend -o json`)",
             (PERIOD, TEAM, NAMESPACE, Param("all", "`true`: also the rows under the saving floor", "false")),
             months_only=True),
    Endpoint("/plans", "the stored plans (admins and viewers)", ()),
    Endpoint("/budgets", "each team's monthly budget: used, left, forecast, thresholds crossed "
             "(`gpuledger budgets -o json`)", (PERIOD, TEAM), months_only=True),
    Endpoint("/capacity", "what is free now in each shape, and each queue's headroom "
             "(`gpuledger capacity -o json`)", (TEAM,)),
    Endpoint("/why", "why each pending workload waits (`gpuledger why -o json`; leads: their teams)",
             (TEAM, Param("name", "one pod or workload", "train-7"))),
    Endpoint("/openapi.json", "this description", ()),
)
BY_PATH: Mapping[str, Endpoint] = {e.path: e for e in ENDPOINTS}


def check(path: str, args: Mapping[str, str]) -> None:
    """Refuse a parameter the endpoint does not take, naming the ones it does."""
    endpoint = BY_PATH[path]
    unknown = sorted(set(args) - set(endpoint.names()))
    if unknown:
        accepted = ", ".join(endpoint.names()) or "none"
        raise InputError(f"/api/v1{path}: unknown parameter{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(unknown)}; accepted: {accepted}")


@dataclass(frozen=True)
class Asked:
    """The time a request asked for: a month (`period` set) or any window."""

    window: Window
    period: str | None


def asked_time(args: Mapping[str, str], *, now: datetime, default_period: str,
               months_only: bool = False) -> Asked:
    """The request's window by the rules of the module docstring."""
    ranged = ["start/end"] if args.get("start") or args.get("end") else []
    given = [k for k in ("period", "window") if args.get(k)] + ranged
    if len(given) > 1:
        raise InputError(f"give one of period, start/end or window, not {' and '.join(given)}")
    if months_only and given and given[0] != "period":
        raise InputError("this answer is computed per calendar month: give period=YYYY-MM or period=last")
    if args.get("start") or args.get("end"):
        if not (args.get("start") and args.get("end")):
            raise InputError("give both start and end (ISO-8601, e.g. 2026-11-01T00:00:00Z)")
        return Asked(Window(parse_instant(args["start"]), parse_instant(args["end"])), None)
    if args.get("window"):
        return Asked(relative_window(args["window"], now), None)
    period = Period.parse(args["period"], now=now) if args.get("period") else Period.exact(default_period)
    return Asked(period.window, str(period))


def relative_window(text: str, now: datetime) -> Window:
    """`7d`, `30d`, `<N>h`, … or `month-to-date`, ending at the start of `now`'s hour."""
    end = floor_time(as_utc(now), HOUR)
    if text.strip().lower() == "month-to-date":
        start = Period.of(end).start
        if start >= end:
            raise InputError("window month-to-date: the month's first hour is not over yet")
        return Window(start, end)
    try:
        length = parse_duration(text)
    except InputError:
        raise InputError(f"window {text!r}: expected 7d, 30d, <N>d, <N>h or month-to-date") from None
    if length < HOUR:
        raise InputError(f"window {text!r}: at least one hour")
    return Window(end - length, end)


def openapi(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 description of `/api/v1`, from `ENDPOINTS`."""
    paths: dict[str, Any] = {}
    for e in ENDPOINTS:
        paths[f"/api/v1{e.path}"] = {"get": {
            "summary": e.summary,
            "parameters": [{"name": p.name, "in": "query", "required": False, "description": p.description,
                            "schema": {"type": "string"}, "example": p.example} for p in e.params],
            "responses": {
                "200": {"description": "the JSON document", "content": {"application/json": {}}},
                "400": {"description": "bad or unknown parameter: `error` names the accepted ones"},
                "401": {"description": "not signed in"}, "403": {"description": "not allowed to read it"},
                "503": {"description": "the data cannot be read now"},
            },
        }}
    return {"openapi": "3.1.0", "info": {"title": "gpuledger API", "version": version},
            "paths": paths}
