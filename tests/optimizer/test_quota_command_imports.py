"""`gpuledger optimize quota` loads only what it uses (issue 30: its imports in a second).

In a fresh interpreter (imports are per process) the real command runs on a queues file and a
history CSV, end to end (read, fit, backtest, solve, print); then the libraries no step of it
needs must be absent from `sys.modules`: the dashboards' (dash, plotly), the reports'
(reportlab, weasyprint), the cluster client (kubernetes), scikit-learn and scipy (the forecast
is written out, decision 0172), and pandas (CP-SAT is imported without it, decision 0205). The
ones it does use are there, so the run is the real path and not an early exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
UNUSED = ("dash", "plotly", "reportlab", "weasyprint", "kubernetes", "sklearn", "scipy", "pandas")
USED = ("ortools", "numpy", "polars")

RUN = """
import json, sys
from gpuledger.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "loaded": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def test_optimize_quota_loads_none_of_the_libraries_it_does_not_use(tmp_path: Path) -> None:
    spec = {"cohortName": "all", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}
    queues = {"clusterQueues": [{"metadata": {"name": q, "resourceVersion": "1"}, "spec": spec} for q in "ab"]}
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump(queues))
    start = datetime(2026, 10, 5, tzinfo=UTC)
    rows = ["ts,cluster_queue,flavor,resource,demand"]
    for i in range(24 * 21):
        ts = (start + timedelta(hours=i)).isoformat()
        rows += [f"{ts},a,h100,nvidia.com/gpu,7.0", f"{ts},b,h100,nvidia.com/gpu,1.0"]
    (tmp_path / "h.csv").write_text("\n".join(rows) + "\n")
    argv = ["--warehouse", str(tmp_path / "w.duckdb"), "optimize", "quota", "--queues",
            str(tmp_path / "queues.yaml"), "--history", str(tmp_path / "h.csv"), "--no-save",
            "--time-limit", "20"]
    out = subprocess.run([sys.executable, "-c", RUN, *argv], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # a wants 3 more GPUs all the time, b has 3 to spare: the plan moves them and says so
    assert result["rc"] == 0, out.stderr
    assert "pending GPU-hours 1,008.0 → 0.0" in out.stdout
    loaded = set(result["loaded"])
    assert set(USED) <= loaded
    assert sorted(loaded & set(UNUSED)) == []
