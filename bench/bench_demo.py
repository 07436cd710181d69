"""`gpuledger demo --no-serve` end to end: time to the first printed bill and to the end, per stage.

Run: `python -m bench.bench_demo [--gpus 256] [--period 2026-10] [--baseline-ref REF] [--one-by-one]
[--until-bill] [--alternate N]`.

Two demos of the same fleet, month and seed, as a user runs them (`python -m gpuledger demo`
in a fresh folder, no config):
- baseline: the tree at `--baseline-ref` (default: where this branch left main, so the only
  difference is the demo's own structure), unpacked with `git archive` into a temporary folder;
- ours: this working tree.
They run side by side by default (started together, so both see the same machine load: on a
shared 2-core machine the ratio is the figure, the seconds drift), or `--one-by-one`.

Stages are read from when each line of the demo's output appears (stdout and the progress lines
on stderr), so both trees are timed by the same rule without instrumenting either: simulate +
load + roll-up (to the `loaded` line; the baseline's progress lines split simulate + load from
roll-up), bill (to `Bill for`), Volcano + idle (to `Fleet advice`), advice (to its last row),
reports (to `Reports for`), MIG plan, quota plan, and the end (process exit). Writes
bench/results/demo.json with machine facts, the load average before, during and after, and
whether both demos printed the same lines from `loaded` to the reports (counts, bill, idle,
advice: the same demo, only faster). `--until-bill` stops each demo once its bill, Volcano and
idle lines are out (the first-bill goal on a busy machine, in half the time; written to
bench/results/demo_first_bill.json, the lines compared up to there). `--alternate N` runs the
baseline then ours N times, one at a time, each run's end, CPU seconds and peak memory (the
process's own, `bench.common.OWN_PEAK`) recorded (bench/results/demo_alternating.json): the
memory goal's figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import own_peak_command, own_peak_mib, unpack_tree, write_result

ROOT = Path(__file__).resolve().parent.parent
MARKS = (  # (stage that ends when this line first appears, its prefix)
    ("simulate + load + roll-up", "loaded "),
    ("bill", "Bill for "),
    ("volcano + idle", "Fleet advice, one row"),
    ("reports", "Reports for "),
    ("mig plan", "Proposed quota plan"),
    ("quota plan", "demo finished"),
)

STOP_AT = "Fleet advice, one row"
"""With `--until-bill`, each demo is stopped when this line appears."""


class Run:
    """One demo process, every output line stamped with seconds since its start."""

    def __init__(self, name: str, tree: Path, work: Path, gpus: int, period: str, *,
                 until_bill: bool = False) -> None:
        self.name = name
        self.until_bill = until_bill
        self.lines: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        work.mkdir(parents=True)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("GPULEDGER_WAREHOUSE", None)
        self._peak_report = work / "peak_kib"
        cmd = own_peak_command(self._peak_report, ["demo", "--gpus", str(gpus), "--period", period,
                                                   "--no-serve", "--out", str(work / "demo")])
        self.ended: float | None = None
        self.cpu_s: float | None = None  # user + system seconds of the whole demo (set by wait)
        self.peak_rss_mib: int | None = None  # the demo process's peak resident set (set by wait)
        self.closed: float | None = None  # set by the stdout reader
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._readers = [threading.Thread(target=self._read, args=(stream, tag), daemon=True)
                         for stream, tag in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, tag: str) -> None:
        for line in stream:
            with self._lock:
                self.lines.append((time.perf_counter() - self.started, tag, line.rstrip("\n")))
            if self.until_bill and tag == "out" and line.startswith(STOP_AT):
                self.proc.kill()  # the bill, Volcano and idle lines are out: enough for this run
        if tag == "out":  # stdout closes as the process exits (the other may still be running)
            self.closed = time.perf_counter() - self.started

    def wait(self, timeout: float) -> int:
        """The exit status; reaps the process with `os.wait4` for the CPU seconds it used."""
        deadline = time.perf_counter() + timeout
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                self.proc.kill()
                pid, status, usage = os.wait4(self.proc.pid, 0)
                break
            time.sleep(0.1)
        rc = os.waitstatus_to_exitcode(status)
        self.proc.returncode = rc
        self.cpu_s = round(usage.ru_utime + usage.ru_stime, 1)
        self.peak_rss_mib = round(own_peak_mib(self._peak_report, usage))
        for reader in self._readers:
            reader.join()
        self.ended = self.closed if self.closed is not None else time.perf_counter() - self.started
        return rc

    def first(self, prefix: str, tag: str = "out") -> float | None:
        return next((t for t, s, line in self.lines if s == tag and line.startswith(prefix)), None)

    def figures(self, rc: int) -> dict[str, Any]:
        marks: dict[str, float | None] = {stage: self.first(prefix) for stage, prefix in MARKS}
        reports = marks["reports"]
        before = [t for t, s, line in self.lines
                  if s == "out" and line.strip() and reports is not None and t < reports]
        marks["advice"] = max(before) if before else None  # its rows print together, at its end
        order = ["simulate + load + roll-up", "bill", "volcano + idle", "advice", "reports",
                 "mig plan", "quota plan"]
        stages: dict[str, float | None] = {}
        previous: float | None = 0.0
        for stage in order:
            now = marks[stage]
            stages[stage] = round(now - previous, 1) if now is not None and previous is not None else None
            previous = now
        load_end = max((t for t, s, line in self.lines
                        if s == "err" and line.startswith("  simulate + load: ")), default=None)
        rolled = marks["simulate + load + roll-up"]
        return {
            "rc": rc,
            "first_bill_s": _round(marks["bill"]),
            "end_s": _round(self.ended),
            "cpu_s": self.cpu_s,
            "peak_rss_mib": self.peak_rss_mib,
            "demo_finished_line_s": _round(marks["quota plan"]),
            "stages_s": stages,
            "split_s": {  # only the baseline prints simulate + load and roll-up apart
                "simulate + load": _round(load_end),
                "roll-up": _round(rolled - load_end) if rolled is not None else None,
            } if load_end is not None else None,
            "stderr_tail": [line for _, s, line in self.lines if s == "err"][-3:] if rc else [],
        }

    def shown(self) -> list[str]:
        """What the demo printed from the `loaded` line up to the reports: the loaded counts,
        the bill, Volcano, idle and advice rows (no paths, no plan ids, no timings)."""
        out = [line for _, s, line in self.lines if s == "out"]
        begin = next((i for i, line in enumerate(out) if line.startswith("loaded ")), len(out))
        last = STOP_AT if self.until_bill else "Reports for "
        end = next((i for i, line in enumerate(out) if line.startswith(last)), len(out))
        return out[begin:end]


def _round(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--period", default="2026-10")
    parser.add_argument("--baseline-ref", default=None,
                        help="git ref of the baseline (default: the merge-base with main)")
    parser.add_argument("--one-by-one", action="store_true", help="run the baseline, then ours")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--until-bill", action="store_true",
                        help="stop each demo after its bill (first-bill figures only)")
    parser.add_argument("--alternate", type=int, default=0, metavar="N",
                        help="N rounds of the baseline then ours, one at a time (time and peak "
                        "memory of each run: bench/results/demo_alternating.json)")
    args = parser.parse_args()
    ref = args.baseline_ref or subprocess.run(
        ["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    if args.alternate:
        alternate(ref, args.alternate, args.gpus, args.period, args.timeout)
        return
    load: dict[str, Any] = {"before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        base_tree = unpack_tree(ref, Path(tmp) / "baseline-tree")
        trees = {"baseline": base_tree, "ours": ROOT}
        results: dict[str, Any] = {}
        runs: dict[str, Run] = {}
        for name, tree in trees.items():
            runs[name] = Run(name, tree, Path(tmp) / name, args.gpus, args.period,
                               until_bill=args.until_bill)
            if args.one_by_one:
                results[name] = runs[name].figures(runs[name].wait(args.timeout))
                load[f"after {name}"] = os.getloadavg()
        if not args.one_by_one:
            time.sleep(60)
            load["during"] = os.getloadavg()
            for name, run in runs.items():
                results[name] = run.figures(run.wait(args.timeout))
        load["after"] = os.getloadavg()
    base, ours = results["baseline"], results["ours"]
    shown = {name: run.shown() for name, run in runs.items()}
    differ = [(a, b) for a, b in zip(shown["baseline"], shown["ours"], strict=False) if a != b]
    write_result("demo_first_bill" if args.until_bill else "demo", {
        "gpus": args.gpus, "period": args.period, "baseline_ref": ref,
        "mode": ("one by one" if args.one_by_one else "side by side (started together)")
        + (", each stopped after its bill" if args.until_bill else ""),
        "load_average_1_5_15": load,
        "baseline": base, "ours": ours,
        "first_bill_ratio": _ratio(base["first_bill_s"], ours["first_bill_s"]),
        "end_ratio": _ratio(base["end_s"], ours["end_s"]),
        "same_output": {  # the same demo: every line from `loaded` to the reports, equal
            "lines": len(shown["ours"]),
            "equal": bool(shown["ours"]) and shown["baseline"] == shown["ours"],
            "first_differences": differ[:3],
        },
        "goals": {"first_bill_s": 60, "end_s": 120,
                  "first_bill_met": (ours["rc"] == 0 or args.until_bill)
                  and (ours["first_bill_s"] or 1e9) <= 60,
                  "end_met": None if args.until_bill else ours["rc"] == 0 and (ours["end_s"] or 1e9) <= 120},
    })


def alternate(ref: str, rounds: int, gpus: int, period: str, timeout: float) -> None:
    """`rounds` x (the baseline, then ours), one demo at a time, so each sees the machine alone
    and both see it in turns: the end, CPU seconds and peak memory of every run, with the load
    average after it, and whether each printed the baseline's first lines (bill to advice)."""
    runs: list[dict[str, Any]] = []
    shown: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        trees = {"baseline": unpack_tree(ref, Path(tmp) / "baseline-tree"), "ours": ROOT}
        for turn in range(rounds):
            for name, tree in trees.items():
                run = Run(name, tree, Path(tmp) / f"{name}-{turn}", gpus, period)
                figures = run.figures(run.wait(timeout))
                shown.setdefault(name, run.shown())
                runs.append({"tree": name, "round": turn + 1, **{k: figures[k] for k in (
                    "rc", "end_s", "cpu_s", "peak_rss_mib", "first_bill_s", "stages_s")},
                    "load_1_5_15_after": [round(x, 2) for x in os.getloadavg()]})

    def median(name: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs if r["tree"] == name))

    write_result("demo_alternating", {
        "gpus": gpus, "period": period, "baseline_ref": ref,
        "mode": f"{rounds} rounds of the baseline then ours, one at a time", "runs": runs,
        "median": {name: {"end_s": median(name, "end_s"), "peak_rss_mib": median(name, "peak_rss_mib")}
                   for name in ("baseline", "ours")},
        "same_output": {"lines": len(shown["ours"]), "equal": shown["baseline"] == shown["ours"]},
        "goals": {"end_s": 60, "peak_rss_mib": 1536},
    })


def _ratio(before: float | None, after: float | None) -> float | None:
    return round(before / after, 2) if before and after else None


if __name__ == "__main__":
    main()
