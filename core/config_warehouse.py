"""The `warehouse:` settings: how much memory DuckDB may hold and where it spills the rest
(docs/decisions/0221).

Its own module because `config.py` is near its size limit; the section repeats the `_Section`
rules (unknown keys refused, frozen) instead of importing it, because `config.py` imports
this module. What the values mean to DuckDB is `gpuledger.warehouse.connection.connect`'s business.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_SIZE = re.compile(r"^\s*(\d+(\.\d+)?)\s*(%|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
DEFAULT_MEMORY_LIMIT = "50%"


class WarehouseSettings(BaseModel):
    """`memory_limit` bounds DuckDB's buffer pool on every connection gpuledger opens: a size
    (`2GiB`, `1500MB`) or a share of the memory the process may use (`50%`: of the container's
    cgroup limit where one is set, else of the machine's RAM; DuckDB reads both). The rest is
    left to the Python frames the analyses build, which DuckDB's limit does not count.
    `temp_directory` is where DuckDB spills what does not fit (default: `<warehouse>.tmp`
    beside the warehouse file, the system's temporary folder for an in-memory database)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    memory_limit: str = Field(
        default=DEFAULT_MEMORY_LIMIT,
        description="DuckDB's memory bound on every connection: a size (2GiB, 1500MB) or a share "
        "of the memory the process may use (50%: of the container's limit, else of the RAM)",
    )
    temp_directory: str | None = Field(
        default=None,
        description="where DuckDB spills what does not fit in memory_limit (default: "
        "<warehouse>.tmp beside the warehouse file)",
    )

    @field_validator("memory_limit")
    @classmethod
    def _size(cls, value: str) -> str:
        match = _SIZE.match(value)
        if match is None:
            raise ValueError(f"{value!r}: expected a size like 2GiB or 1500MB, or a share like 50%")
        amount, unit = float(match.group(1)), match.group(3)
        if unit == "%" and not 0 < amount <= 100:
            raise ValueError(f"{value!r}: a share is more than 0% and at most 100%")
        if amount <= 0:
            raise ValueError(f"{value!r}: a memory limit above zero")
        return f"{match.group(1)}{unit}"

    @field_validator("temp_directory")
    @classmethod
    def _folder(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("an empty folder name; leave temp_directory out for the default")
        return value
