"""gpuledger's monitoring mixin: the alert rules and the Grafana dashboard from one Python source.

Why generated: the rules and the dashboard read the same series with the same selectors, and the
series are what `dashboards/metrics.py` publishes; written once here, a renamed series or label
is changed in one place, and a test (tests/deploy/test_mixin.py) fails when a generated file in
the repository is not what this writes. `python -m tools.mixin` writes them (docs/decisions/0191).
No Grafana SDK: the foundation SDK is not on PyPI here, and the dashboard JSON is plain data.
"""
