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
