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
