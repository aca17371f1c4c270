"""The library versions the trainers' fast paths were tested on, in one place, and the notice given
once when a run falls outside them.

Two fast paths depend on other libraries' internals:

* the lean decoder (``decode.py``) re-implements a transformers model's forward from its modules,
  so its parity tests (``tests/test_trainers_decode.py``, ``test_trainers_sampler.py``,
  ``test_trainers_settings.py``) hold only for the transformers versions they ran on. Outside
  ``TESTED_TRANSFORMERS`` every pass goes through the model's own ``forward`` (and the sampler
  through ``forward`` with its cache);
* the optimiser step (``optim.py``) calls torch's private kernels (``torch._fused_adamw_``,
  ``torch._foreach_norm``), tested bitwise against ``torch.optim.AdamW`` (``test_trainers_optim.py``)
  on ``TESTED_TORCH`` only. Outside it the step is ``torch.optim.AdamW.step()`` and torch's
  ``clip_grad_norm_``.

Each range is [first, end): the first version tested and the first not yet tested. Widen a range
only after running those tests on the new version.
"""

from __future__ import annotations

import warnings

#: transformers versions the lean decoder's parity tests ran on: 5.24.x and 5.25.x
TESTED_TRANSFORMERS = ("5.24", "5.26")
#: torch versions the optimiser's bitwise tests ran on: 2.13.x
TESTED_TORCH = ("2.13", "2.14")

_NOTICES: set[str] = set()
_CACHE: dict[tuple[str, str], bool] = {}


def _release(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return Version(version).release


def in_range(version: str, tested: tuple[str, str]) -> bool:
    """True when ``version`` (its release numbers; "2.13.0+cpu" is 2.13.0) lies in [first, end)."""
    key = (version, "/".join(tested))
    hit = _CACHE.get(key)
    if hit is None:
        release = _release(version)
        hit = _CACHE[key] = _release(tested[0]) <= release < _release(tested[1])
    return hit


def notice(key: str, text: str) -> None:
    """``text`` as a warning, once per process for each ``key``."""
    if key not in _NOTICES:
        _NOTICES.add(key)
        warnings.warn(text, UserWarning, stacklevel=3)


def lean_path_tested() -> bool:
    """The installed transformers is one the lean decoder was tested on; otherwise a notice (once)
    and False: callers use the model's ``forward``."""
    import transformers

    version = transformers.__version__
    if in_range(version, TESTED_TRANSFORMERS):
        return True
    notice("transformers", f"alignlings.trainers: the lean decoder was tested on transformers "
           f">={TESTED_TRANSFORMERS[0]},<{TESTED_TRANSFORMERS[1]}; {version} is installed, so scoring and sampling "
           "go through the model's own forward (same results, slower on small models)")
    return False


def fast_optimizer_tested() -> bool:
    """The installed torch is one ``optim.py``'s direct kernel calls were tested on; otherwise a
    notice (once) and False: callers use ``torch.optim.AdamW.step()`` and ``clip_grad_norm_``."""
    import torch

    version = torch.__version__
    if in_range(str(version), TESTED_TORCH):
        return True
    notice("torch", f"alignlings.trainers: the direct AdamW step was tested on torch >={TESTED_TORCH[0]},"
           f"<{TESTED_TORCH[1]}; {version} is installed, so each step is torch.optim.AdamW.step()")
    return False
