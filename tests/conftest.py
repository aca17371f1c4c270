"""Shared pytest setup: run the tests from a checkout without installing the package."""

from __future__ import annotations

import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parent.parent / "src"
if str(_SRC) not in sys.path:
    # `pip install -e .` makes this a no-op; without it, `pytest` still imports src/alignlings
    sys.path.insert(0, str(_SRC))


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models and tensors: torch's intra-op thread hand-off costs milliseconds per op on a busy
    2-core machine and saves nothing at these sizes, so such modules run on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- order independence ------------------------------------------------------------------------
# Every test must pass whatever ran before it. `--shuffle SEED` runs each module's tests in an order
# drawn from SEED (modules keep their order, so module-scoped fixtures are still set up once);
# `--shuffle random` draws the seed and prints it in the header, so a failure can be replayed.

def pytest_addoption(parser):
    parser.addoption("--shuffle", metavar="SEED", default=None,
                     help="run each module's tests in a random order drawn from SEED ('random': any seed)")


def pytest_configure(config):
    if config.getoption("--shuffle") == "random":
        import secrets

        config.option.shuffle = str(secrets.randbelow(10**6))


def pytest_report_header(config):
    seed = config.getoption("--shuffle")
    return f"shuffled within modules: --shuffle {seed}" if seed is not None else None


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("--shuffle")
    if seed is None:
        return
    import random

    rng = random.Random(seed)
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    items[:] = []
    for group in modules.values():
        rng.shuffle(group)
        items.extend(group)


# -- no silent skips in CI -----------------------------------------------------------------------
# scripts/test.sh sets ALIGNLINGS_STRICT=1: there every dependency and tool is installed, so a test
# that skips (a missing TRL, bubblewrap, chromium, PostgreSQL, a sandbox layer the machine lacks)
# hides a broken set-up, and is reported as a failure instead. Only tests marked `needs_cuda` may
# skip there (this machine has no GPU). Locally, without the variable, skips stay skips.

def _strict() -> bool:
    import os

    return os.environ.get("ALIGNLINGS_STRICT", "") not in ("", "0")


def _strict_failure(report, where: str) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"{where} skipped under ALIGNLINGS_STRICT=1 (CI installs every dependency, so a "
                       f"skip means a broken set-up): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (_strict() and report.skipped) or item.get_closest_marker("needs_cuda"):
        return
    if hasattr(report, "wasxfail"):  # an expected failure is not a skip
        return
    _strict_failure(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _strict() and report.skipped:
        _strict_failure(report, collector.nodeid)


# -- the verdict contract ------------------------------------------------------------------------
# Every verdict ``Grader.check`` builds in any test is checked against docs/verdict.schema.json
# (tests/test_verdict_schema.py holds the golden verdicts and the schema's own tests).

_verdict_validator = None


def _check_verdict(verdict) -> None:
    global _verdict_validator
    import json

    if _verdict_validator is None:
        import jsonschema

        path = Path(__file__).resolve().parent.parent / "docs" / "verdict.schema.json"
        _verdict_validator = jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))
    errors = sorted(e.message for e in _verdict_validator.iter_errors(json.loads(json.dumps(verdict))))
    if errors:
        raise AssertionError(f"the grader built a verdict outside docs/verdict.schema.json: {errors}")


@pytest.fixture(autouse=True)
def _verdicts_keep_the_contract():
    """Wrap ``Grader.check`` (once, from the first test after the grader is loaded: a module importing
    it at the top, as most do, before its first test) so that what it returns is validated."""
    import functools

    grader = sys.modules.get("alignlings.grading.grader")
    cls = getattr(grader, "Grader", None)
    if cls is not None and not getattr(cls.check, "_checks_the_contract", False):
        original = cls.check

        @functools.wraps(original)
        def check(self, *args, **kwargs):
            verdict = original(self, *args, **kwargs)
            _check_verdict(verdict)
            return verdict

        check._checks_the_contract = True
        cls.check = check
    yield
