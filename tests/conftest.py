"""Shared pytest plugins: each names a module that provides session fixtures for real servers."""

pytest_plugins: list[str] = []
