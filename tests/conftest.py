"""Shared pytest setup: run the tests from a checkout without installing the package."""

from __future__ import annotations

import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parent.parent / "src"
if str(_SRC) not in sys.path:
    # `pip install -e .` makes this a no-op; without it, `pytest` still imports src/alignlings
    sys.path.insert(0, str(_SRC))
