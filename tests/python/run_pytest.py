#!/usr/bin/env python3
"""Runs the package's pytest tests for CTest: exit 0 when they pass, 1 when one fails, 77
(CTest's skip) when every selected test skipped for a missing resource -- unless
WPK_REQUIRE_TORCH=1 (as `make test` sets), where a skip is a failure.
    run_pytest.py [pytest arguments]
"""
import os
import sys
from pathlib import Path

import pytest

SKIP = 77


class Outcomes:
    def __init__(self):
        self.passed = self.skipped = 0
        self.reasons = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.passed:
            self.passed += 1
        elif report.skipped:
            self.skipped += 1
            self.reasons.append(str(report.longrepr[-1]) if report.longrepr else "")


def main():
    outcomes = Outcomes()
    here = str(Path(__file__).resolve().parent)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", here] + sys.argv[1:],
                       plugins=[outcomes])
    if code != 0:
        return 1
    if outcomes.skipped and not outcomes.passed:
        print("SKIP: " + "; ".join(sorted(set(outcomes.reasons))))
        return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
