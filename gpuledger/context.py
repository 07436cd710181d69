"""Temporary alias of `gpuledger.command_context` (the module was renamed: `context` meant two
things, see `actuator/context.py`). Remove once no importer is left (plans commands, tests)."""

from gpuledger.command_context import Context

__all__ = ["Context"]
