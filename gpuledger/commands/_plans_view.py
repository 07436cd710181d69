"""Placeholder: the verbs of this half of `gpuledger plans` are registered here."""

from __future__ import annotations

import argparse
from typing import Any


def register_verbs(verbs: argparse._SubParsersAction[Any]) -> None:
    """Add this module's verbs to the `plans` command."""
