"""Under ALIGNLINGS_STRICT=1 (set by scripts/test.sh as root and in CI) a skip is a failure, except for
tests marked needs_cuda: a missing TRL, bubblewrap, chromium or PostgreSQL must not pass silently."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = "pytester"

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
TESTS = '''
import pytest
def test_plain_skip():
    pytest.skip("a tool is missing")
@pytest.mark.needs_cuda
def test_gpu():
    pytest.skip("no GPU")
def test_runs():
    assert True
'''
MODULE_SKIP = '''
import pytest
pytest.importorskip("a_package_that_is_not_installed_anywhere")
def test_never():
    pass
'''


def _run(pytester, monkeypatch, strict: str):
    monkeypatch.setenv("ALIGNLINGS_STRICT", strict)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    needs_cuda: gpu\n")
    pytester.makepyfile(test_a=TESTS, test_b=MODULE_SKIP)
    return pytester.runpytest("-p", "no:cacheprovider", "--continue-on-collection-errors")


def test_strict_turns_skips_into_failures_but_not_cuda(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "1")
    result.assert_outcomes(passed=1, failed=1, skipped=1, errors=1)  # the module-level skip is a collection error
    result.stdout.fnmatch_lines(["*skipped under ALIGNLINGS_STRICT=1*"])


def test_without_strict_skips_stay_skips(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "0")
    result.assert_outcomes(passed=1, skipped=3)
