"""OpenBLAS on one thread in a `gpuledger` process (decision 0288): the command line sets it
before numpy loads, so the library starts with one thread, and a caller's own setting stands.
Checked in a fresh interpreter each: OpenBLAS reads the variable once, when it loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, os, sys
from gpuledger.cli import main
loaded_before = "numpy" in sys.modules or "scipy" in sys.modules
main(["--version"])
import numpy, scipy.cluster.vq  # noqa: F401  (the k-means' library, loaded after the setting)
print(json.dumps({"loaded_before": loaded_before, "threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "numpy_after": "numpy" in sys.modules}))
"""


def _probe(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                          check=True, timeout=120)
    answer: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_the_command_line_sets_one_blas_thread_before_numpy_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    answer = _probe(env)
    assert answer == {"loaded_before": False, "threads": "1", "numpy_after": True}


def test_a_callers_own_setting_stands() -> None:
    answer = _probe({**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert answer["threads"] == "2"
