"""CP-SAT for the quota model is imported without pandas (decision 0205), and nothing else breaks.

In a fresh interpreter (the import state is per process): importing the quota model leaves
pandas out of `sys.modules`; CP-SAT still solves a small model whose optimum is worked out
here; a later `import pandas` is the real library (it has a version and makes a Series); and
cp_model's own pandas helpers refuse rather than run on a stand-in. A second case loads pandas
first: then the plain import is used and cp_model holds the real pandas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FRESH = """
import json, sys
import gpuledger.optimizer.quota.model
from gpuledger.optimizer.quota.cp_sat import cp_model
out = {"pandas_after_model": "pandas" in sys.modules}
m = cp_model.CpModel()
x, y = m.new_int_var(0, 10, "x"), m.new_int_var(0, 10, "y")
m.add(x + 2 * y <= 14)
m.add(3 * x - y >= 0)
m.maximize(3 * x + 4 * y)
s = cp_model.CpSolver()
out["status"] = s.solve(m) == cp_model.OPTIMAL
out["objective"] = s.objective_value
import pandas
out["real_pandas"] = bool(pandas.__version__) and bool(pandas.Series([1, 2]).sum() == 3)
try:
    m.new_int_var_series("z", pandas.Index([1, 2]), 0, 1)
    out["series_helper"] = "ran"
except (ImportError, TypeError):
    out["series_helper"] = "refused"
print(json.dumps(out))
"""

PANDAS_FIRST = """
import json, pandas
from gpuledger.optimizer.quota.cp_sat import cp_model
m = cp_model.CpModel()
v = m.new_int_var_series("z", pandas.Index([1, 2]), 0, 1)
print(json.dumps({"same_pandas": cp_model.pd is pandas, "series": len(v)}))
"""


def run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_quota_model_imports_cp_sat_without_pandas():
    got = run(FRESH)
    # the optimum of max 3x + 4y s.t. x + 2y <= 14, 3x - y >= 0, 0 <= x, y <= 10, by enumeration
    best = max(3 * x + 4 * y for x in range(11) for y in range(11) if x + 2 * y <= 14 and 3 * x - y >= 0)
    assert best == 38
    assert got == {"pandas_after_model": False, "status": True, "objective": best, "real_pandas": True,
                   "series_helper": "refused"}


def test_pandas_loaded_first_is_the_one_cp_model_uses():
    assert run(PANDAS_FIRST) == {"same_pandas": True, "series": 2}
