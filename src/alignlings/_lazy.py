"""Lazy attribute exports for packages whose public names live in heavy modules (torch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` that import ``exports[name]`` on first use and
    cache the value in the package's ``namespace``."""
    names = sorted(exports)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return [*names, *(n for n in namespace if n.startswith("__") and n.endswith("__"))]

    return __getattr__, __dir__
