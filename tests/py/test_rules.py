"""Project rules the test suite itself keeps: no test skips (a missing tool or package is a
broken setup, and fails with what to run: tests/py/needs.py, `make toolchain`)."""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SKIPS = re.compile(r"pytest\.(importorskip|skip)\(|@pytest\.mark\.(skip|skipif|xfail)\b")


def test_no_test_skips_or_expected_failures():
    found = [f"{p.relative_to(TESTS)}:{i}: {line.strip()}"
             for p in sorted(TESTS.rglob("*.py")) if p.name != "test_rules.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if SKIPS.search(line)]
    assert not found, found
