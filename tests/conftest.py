"""Shared pytest plugins: each names a module that provides session fixtures for real servers."""

pytest_plugins: list[str] = ["tools.k8s_testenv.pytest_plugin", "tools.metrics_servers"]
