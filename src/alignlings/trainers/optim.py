"""The optimiser step without torch.optim's per-call Python work: gradient clipping and fused AdamW.

A small model's step is a few milliseconds, and ``clip_grad_norm_`` + ``AdamW.step`` (fused, TRL's
default ``adamw_torch_fused``) spend a good part of theirs outside the kernels: grouping tensors by
device and dtype, building the per-group lists from the optimiser state, profiler records, and a
multiply of every gradient by a clip coefficient that is 1 when the norm is under ``max_norm``.
These functions run the same kernels in the same order on the same values, so parameters, moments,
step counts and the returned norm are bitwise those of torch's own calls
(``tests/test_trainers_optim.py``):

* ``clip_grad_norm``: ``torch._foreach_norm`` per tensor, the 2-norm of those norms, then
  ``grad *= min(max_norm / (norm + 1e-6), 1)``; on the CPU the multiply is skipped when the factor
  is exactly 1 (x * 1.0 == x), which needs no device sync there.
* ``fused_adamw_step``: per parameter group, ``torch._foreach_add_(steps, 1)`` and
  ``torch._fused_adamw_``, as ``torch.optim.adam._fused_adam`` calls them (on the CPU the 1 is one
  tensor, as torch's foreach Adam passes it: the same sums without wrapping it again for every step
  count). It handles only what the trainers build (a fused ``AdamW``, float learning rates, no
  amsgrad / maximize / capturable / differentiable, no step hooks, every parameter's state already
  created, all on one device) and returns False otherwise, and the caller then uses
  ``optimizer.step()`` (so the first step, which creates the state, always goes through torch).

Both call private torch functions, so they act only on the torch versions they were tested on
(``versions.TESTED_TORCH``); on any other, ``clip_grad_norm`` is torch's ``clip_grad_norm_`` and
``fused_adamw_step`` returns False (the caller's ``optimizer.step()``), after one notice.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim import optimizer as optimizer_mod

from alignlings.trainers.versions import fast_optimizer_tested


@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` (2-norm, foreach) for parameters on one
    device of one dtype: the same total norm, the same scaled gradients."""
    if not fast_optimizer_tested():
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    if len({(g.device, g.dtype) for g in grads}) > 1:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
    if grads[0].device.type != "cpu" or float(coef) != 1.0:  # on the CPU reading coef costs no sync
        torch._foreach_mul_(grads, coef)
    return total


def _hooks(optimizer: torch.optim.Optimizer) -> bool:
    return bool(optimizer._optimizer_step_pre_hooks or optimizer._optimizer_step_post_hooks
                or optimizer_mod._global_optimizer_pre_hooks or optimizer_mod._global_optimizer_post_hooks)


@torch.no_grad()
def fused_adamw_step(optimizer: torch.optim.Optimizer) -> bool:
    """One step of a fused ``torch.optim.AdamW`` through its kernels directly; False (nothing done)
    where it does not apply (see the module docstring)."""
    if type(optimizer) is not torch.optim.AdamW or _hooks(optimizer) or not hasattr(torch, "_fused_adamw_") \
            or not fast_optimizer_tested():
        return False
    work = []
    for group in optimizer.param_groups:
        if not group.get("fused") or group["amsgrad"] or group["maximize"] or group.get("capturable") \
                or group.get("differentiable") or isinstance(group["lr"], torch.Tensor) \
                or not group.get("decoupled_weight_decay", True):
            return False
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            continue
        states: list[dict[str, Any]] = []
        for p in params:
            state = optimizer.state.get(p)
            if not state or "exp_avg" not in state:
                return False  # the first step creates the state: torch's own step does that
            states.append(state)
        if len({(p.device, p.dtype) for p in params}) > 1:
            return False
        work.append((group, params, states))
    for group, params, states in work:
        steps = [s["step"] for s in states]
        if steps[0].is_cpu:  # a loop of adds on the CPU: 1 as one tensor, not wrapped again for each
            torch._foreach_add_(steps, torch.ones((), dtype=steps[0].dtype), alpha=1.0)  # (torch's foreach Adam)
        else:
            torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        torch._fused_adamw_(
            params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
            [], steps, amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2,
            weight_decay=group["weight_decay"], eps=group["eps"], maximize=False, grad_scale=None, found_inf=None,
        )
    optimizer._opt_called = True  # type: ignore[attr-defined]  # what the LR scheduler's step wrapper records
    return True
