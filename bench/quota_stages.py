"""Child of `bench.bench_quota`: one tree's `optimize quota` on a warehouse, stage by stage.

Run with that tree first on PYTHONPATH: `python bench/quota_stages.py WAREHOUSE`. Prints one JSON
line: seconds for the imports (the CLI and the quota planner; the CLI's alone beside it, and
whether pandas was imported by the end; the imports' and the whole run's CPU seconds, which the
load does not inflate), reading the inputs, and the plan,
with the time spent inside the demand floors, the forecast, the solver and the backtest (the
backtest's figure includes the floors, forecasts and solves of its own refits). The stage
functions are wrapped by name where the tree's modules hold them, so the base tree is timed the
same way without changes to it.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

STAGES = {"floors": "demand_floors", "forecast": "forecast", "solve": "solve_quotas",
          "backtest": "run_backtest"}


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    import gpuledger.cli  # noqa: F401  (what the command imports first)
    cli = time.perf_counter() - started
    from gpuledger.core.config import Settings
    from gpuledger.optimizer.quota import fit, planner
    from gpuledger.optimizer.quota.inputs import quota_inputs_from_warehouse
    from gpuledger.warehouse import Warehouse
    imports, imports_cpu = time.perf_counter() - started, time.process_time() - cpu
    spent: dict[str, float] = defaultdict(float)
    modules: list[Any] = [fit, planner]
    try:
        from gpuledger.optimizer.quota import held_out
        modules.append(held_out)
    except ImportError:
        pass
    for stage, attr in STAGES.items():
        for module in modules:
            if hasattr(module, attr):
                setattr(module, attr, _timed(getattr(module, attr), stage, spent))
    t = time.perf_counter()
    with Warehouse.open(sys.argv[1], read_only=True) as wh:
        inputs = quota_inputs_from_warehouse(wh, timedelta(days=28))
    read = time.perf_counter() - t
    t = time.perf_counter()
    plan = planner.plan_quota(inputs, planner.QuotaOptions(time_limit_s=120), Settings(), datetime.now(UTC))
    total = time.perf_counter() - t
    e = plan.evaluation
    print(json.dumps({"imports_s": round(imports, 2), "imports_cpu_s": round(imports_cpu, 2),
                      "imports_cli_s": round(cli, 2), "cpu_s": round(time.process_time() - cpu, 2),
                      "pandas_imported": "pandas" in sys.modules,
                      "inputs_s": round(read, 2), "plan_s": round(total, 2),
                      **{f"{k}_s": round(v, 2) for k, v in spent.items()},
                      "verdict": e.verdict if e else None, "headline": e.headline if e else None}))


def _timed(fn: Any, stage: str, spent: dict[str, float]) -> Any:
    depth = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                spent[stage] += time.perf_counter() - t
    return wrapper


if __name__ == "__main__":
    main()
