"""OR-Tools' CP-SAT for the quota model, imported without pandas (decision 0205).

`ortools.sat.python.cp_model` (9.15, `cp_model.py` line 62) imports pandas at module level for
its `pd.Series` helpers (`new_int_var_series`, `new_bool_var_series`, `*_interval_var_series`
and the solver's `values`/`boolean_values` of a series), which the quota model never calls.
pandas is about a second of the command's imports (the solve itself takes a few hundredths),
so the module is loaded here with a stand-in `pandas` that holds only the two names
`cp_model` reads while it is imported (`pd.Index` and `pd.Series`, in its annotations and one
type alias). The stand-in is taken out of `sys.modules` right after, so a later
`import pandas` anywhere gets the real one; only cp_model's own series helpers then refuse
(a real `pd.Index` is not the stand-in's, and the stand-in's classes cannot be made). If
pandas or cp_model is already loaded there is nothing to save and the plain import is used.

Import `cp_model` from here, not from ortools, in the quota stage.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NoReturn

MODULE = "ortools.sat.python.cp_model"


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise ImportError(f"{MODULE} was loaded by gpuledger.optimizer.quota.cp_sat without pandas: "
                      "its pandas Series helpers are not available in this process")


def _stand_in() -> types.ModuleType:
    """A module named pandas with the two classes cp_model names at import; neither can be made."""
    stub = types.ModuleType("pandas", "stand-in while ortools' cp_model is imported (quota.cp_sat)")
    for name in ("Index", "Series"):
        setattr(stub, name, type(name, (), {"__new__": _refuse}))
    return stub


def _preload() -> None:
    if MODULE in sys.modules or "pandas" in sys.modules:
        return
    stub = _stand_in()
    sys.modules["pandas"] = stub
    try:
        __import__(MODULE)
    finally:
        if sys.modules.get("pandas") is stub:
            del sys.modules["pandas"]


_preload()

from ortools.sat.python import cp_model  # noqa: E402  (after the preload, which it then finds)

__all__ = ["cp_model"]
