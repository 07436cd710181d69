"""Helm built from Go modules for the chart tests (lint, template), cached like the apiserver.

See `tools.helm_build.builder` and docs/decisions/0065-helm-chart.md.
"""
