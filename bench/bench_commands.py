"""The month's other commands at fleet scale (issue 34's table): `report monthly` and
`recommend` of every kind on bench_scale's cached demo warehouse, a baseline tree beside this one.

Run: `python -m bench.bench_commands --gpus 1000 [--baseline-ref REF] [--bounded 2GiB]
[--name commands_1000]`; needs `python -m bench.bench_scale --gpus N --build-only` first (the
same `--cache`). Writes bench/results/<name>.json.

Each command runs as a child on its own copy of the warehouse (the report writes its manifest
and the commands may migrate), one after the other (2 shared cores), reaped with `os.wait4`:
wall, user + system CPU and peak RSS, exactly as bench_scale measures `refresh-serving`. The
baseline tree runs with DuckDB's default bound; this tree with `--bounded` where given (what
the chart's job gives DuckDB: half of its 4Gi limit), so the table says whether the command fits
the deployment, not only how fast it is. The outputs are compared: the recommendation and
advice documents must be equal, and the report's summary.csv byte for byte.

`--after-refresh`: first `refresh-serving` of each tree on a copy (figures kept as "refresh of
<side> (fills its day parts)"), and every command of a tree then starts from the day parts its
own refresh kept, as on a deployment whose chart refreshes every collect round (decision 0254).
Each its own: a tree whose stamps or kept reads differ would find none of the other's parts
and read the month whole (a baseline before 0261 read ours that way: 79.6 s against 27.2 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import difference, gpuledger_child, load_average, parts_beside, unpack_tree, write_result

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("profile-catalog", "overcommit", "autoscaling", "fragmentation", "dra-fragmentation", "dra-profiles")
COMMANDS: dict[str, list[str]] = {
    "report monthly": ["report", "monthly", "--out", "reports", "-o", "json"],
    # every row in both trees (before fbcdd6b `--all` alone still cut at 25)
    "recommend": ["recommend", "-o", "json", "--all", "--top", "1000000"],
    "recommend every advice kind": ["recommend", "-o", "json", *(a for k in KINDS for a in ("--kind", k))],
}


def run(tree: Path, source: Path, work: Path, args: list[str], *, period: str | None,
        bound: str | None, day_parts: Path | None = None) -> dict[str, Any]:
    """`gpuledger ARGS --period PERIOD` of `tree` on a fresh copy of `source` in `work` (the
    copy removed after: a 1,000-GPU warehouse is 1.3 GiB), beside `day_parts` where given."""
    figures = gpuledger_child(tree, source, work, [*args, *(("--period", period) if period else ())],
                              bound, day_parts=day_parts)
    (work / "w.duckdb").unlink()
    if figures["rc"] != 0:
        figures["stderr_tail"] = (work / "stderr").read_text(errors="replace")[-600:]
    return figures


def output_of(work: Path) -> bytes:
    """What a command produced to compare: the report's summary.csv, else its JSON output."""
    summaries = sorted(work.glob("reports/**/summary.csv"))
    return summaries[0].read_bytes() if summaries else (work / "stdout").read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bench-scale")
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--bounded", metavar="SIZE", help="this tree under warehouse.memory_limit SIZE")
    parser.add_argument("--command", action="append", choices=sorted(COMMANDS), help="default: all")
    parser.add_argument("--name", default="commands")
    parser.add_argument("--after-refresh", action="store_true",
                        help="every command starts from the day parts a refresh-serving of this tree kept")
    args = parser.parse_args()
    source = args.cache / f"demo-{args.gpus}-{args.period}.duckdb"
    if not source.exists():
        parser.error(f"{source}: build it first "
                     f"(python -m bench.bench_scale --gpus {args.gpus} --build-only)")
    ref = subprocess.run(["git", "rev-parse", "--short", args.baseline_ref], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    figures: dict[str, Any] = {"gpus": args.gpus, "period": args.period, "warehouse": str(source),
                               "after_refresh": args.after_refresh,
                               "baseline_ref": ref, "ours_memory_limit": args.bounded or "50% (default)",
                               "load_average_1_5_15": {"before": load_average()}, "commands": {}}
    with tempfile.TemporaryDirectory(prefix="bench-commands-", dir=args.cache) as tmp:
        baseline = unpack_tree(ref, Path(tmp) / "tree")
        trees = {"baseline": (baseline, None), "ours": (ROOT, args.bounded)}
        parts: dict[str, Path | None] = dict.fromkeys(trees)
        for side, (tree, bound) in trees.items() if args.after_refresh else ():
            refresh = Path(tmp) / f"refresh-{side}"
            filled = run(tree, source, refresh, ["refresh-serving", "--force"], period=None, bound=bound)
            if filled["rc"] != 0:
                parser.error(f"refresh-serving ({side}) failed: {filled.get('stderr_tail', '')}")
            figures[f"refresh of {side} (fills its day parts)"] = filled
            parts[side] = parts_beside(refresh)
        for name in args.command or list(COMMANDS):
            sides: dict[str, Any] = {}
            for side, (tree, bound) in trees.items():
                work = Path(tmp) / f"{name.replace(' ', '-')}-{side}"
                sides[side] = run(tree, source, work, COMMANDS[name], period=args.period, bound=bound,
                                  day_parts=parts[side])
                figures["load_average_1_5_15"][f"after {name} {side}"] = load_average()
            folder = Path(tmp) / name.replace(" ", "-")
            left, right = (output_of(Path(f"{folder}-{s}")) for s in ("baseline", "ours"))
            sides["same_output"] = left == right
            if left != right and not name.startswith("report"):  # how far apart, where JSON
                rel, other = difference(json.loads(left), json.loads(right))
                sides["output_difference"] = {"max_rel_diff": rel, "other_differences": other}
            sides["command"] = "gpuledger " + " ".join(COMMANDS[name]) + f" --period {args.period}"
            figures["commands"][name] = sides
    write_result(args.name, figures)


if __name__ == "__main__":
    main()
