"""Modules the tests need: missing means a broken setup, so the test fails (it never skips)."""
from __future__ import annotations

import importlib

import pytest


def module(name: str):
    """`import name`, or a failure that says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.fail(f"{name} is not installed ({e}): run `make setup` (pyproject.toml extras "
                    "test and npu)")
