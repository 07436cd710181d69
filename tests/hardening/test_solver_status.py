"""A plan is shown and stored only when every solver stage reached FEASIBLE or OPTIMAL.

Cases:
- `optimize mig` with `--max-changes-per-plan -1`, `--max-changes-per-node -3`, `--time-limit`
  NaN, -1 or 0 is refused in one line and stores nothing (it printed "FEASIBLE ... already
  optimal", exited 0 and stored a plan);
- `optimize quota` with `--time-limit nan` and `--horizon 100000d` likewise;
- the MIG count model itself: a plan limit it cannot meet (at most -1 GPUs changed) fails with
  the stage and INFEASIBLE; a budget too small to run a stage fails with NOT_RUN, never a plan;
- the quota model with a budget too small for its stages fails with `SolverError`;
- `require_reached` passes OPTIMAL/FEASIBLE and names every other status with its reason.
"""

from __future__ import annotations

import pytest

from gpuledger.core.errors import SolverError
from gpuledger.optimizer.mig.inputs import ModelDemand
from gpuledger.optimizer.mig.model import CountProblem, Group, solve_counts
from gpuledger.optimizer.quota.model import QuotaProblem, SeriesSpec, solve_quotas
from gpuledger.optimizer.solver_status import require_reached
from tests.hardening.conftest import DEMAND, FLEET
from tests.hardening.test_inputs import quota_argv


@pytest.mark.parametrize(("flags", "expected"), [
    (["--max-changes-per-plan", "-1"], "max changes per plan -1"),
    (["--max-changes-per-node", "-3"], "max changes per node -3"),
    (["--time-limit", "nan"], "time limit nan"),
    (["--time-limit", "-1"], "time limit -1"),
    (["--time-limit", "0"], "time limit 0"),
])
def test_mig_command_refuses_limits_it_cannot_honour(run_cli, tmp_path, flags, expected):
    warehouse = tmp_path / "w.duckdb"
    result = run_cli(["--warehouse", warehouse, "optimize", "mig", "--fleet", FLEET, "--demand", DEMAND,
                      *flags])
    line = result.assert_one_line_refusal(warehouse=warehouse)
    assert expected in line
    assert "FEASIBLE" not in result.out and "stored as" not in result.out


@pytest.mark.parametrize(("flags", "expected"), [
    (["--time-limit", "nan"], "time limit nan"),
    (["--horizon", "100000d"], "at most 366 days"),
])
def test_quota_command_refuses_limits_it_cannot_honour(run_cli, tmp_path, flags, expected):
    line = run_cli([*quota_argv(tmp_path), *flags]).assert_one_line_refusal(warehouse=tmp_path / "w.duckdb")
    assert expected in line


def small_problem(**limits):
    groups = (Group(model="H100-80GB", config=(("1g.10gb", 7),), busy=0, movable=True, size=4),
              Group(model="H100-80GB", config=None, busy=0, movable=True, size=4))
    targets = {"H100-80GB": ((("3g.40gb", 2),), (("1g.10gb", 7),), None)}
    demand = {"H100-80GB": ModelDemand("H100-80GB", {"3g.40gb": 6}, 1)}
    return CountProblem(groups=groups, targets=targets, demand=demand, **limits)


def test_mig_model_with_an_unmeetable_limit_is_infeasible_not_a_plan():
    solve_counts(small_problem(), 10)  # the same problem without the limit solves
    with pytest.raises(SolverError, match=r"MIG model: stage unmet_slices ended INFEASIBLE"):
        solve_counts(small_problem(max_changes_per_plan=-1), 10)


def test_mig_model_without_time_for_a_stage_fails():
    with pytest.raises(SolverError, match=r"stage unmet_slices ended NOT_RUN: the time limit"):
        solve_counts(small_problem(), 0.01)


def test_quota_model_without_time_for_its_stages_fails():
    import numpy as np

    series = tuple(
        SeriesSpec(queue=q, flavor="h100", resource="nvidia.com/gpu", pool="gpu", weight=1.0,
                   scenarios=np.array([float(k % 7) for k in range(40)]), hours=24.0,
                   old_nominal=4, old_borrowing=2, old_lending=None, shares_cohort=True)
        for q in ("a", "b")
    )
    problem = QuotaProblem(series=series, capacity={("gpu", "h100", "nvidia.com/gpu"): 8})
    assert solve_quotas(problem, 10).status in ("OPTIMAL", "FEASIBLE")
    with pytest.raises(SolverError):
        solve_quotas(problem, 0.001)


@pytest.mark.parametrize(("status", "reason"), [
    ("INFEASIBLE", "constraints cannot all hold"),
    ("UNKNOWN", "time limit of 2 s ran out"),
    ("NOT_RUN", "time limit of 2 s ran out"),
    ("MODEL_INVALID", "rejected the model"),
])
def test_require_reached_names_the_status(status, reason):
    require_reached("MIG", "gpus_used", "OPTIMAL", 2)
    require_reached("MIG", "gpus_used", "FEASIBLE", 2)
    with pytest.raises(SolverError, match=f"stage gpus_used ended {status}: .*{reason}"):
        require_reached("MIG", "gpus_used", status, 2)
