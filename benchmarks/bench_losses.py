"""Our dpo_loss / grpo_loss against TRL 1.16's own code path on the same tensors, side by side.

TRL has no standalone loss functions: its losses live inside ``DPOTrainer._compute_loss`` and
``GRPOTrainer._compute_loss`` together with metric logging. We drive those methods with the same
minimal stand-ins as the parity tests (tests/test_parity_trl.py) and compare with our loss plus
our metrics function (what a trainer calls per step). Reported: wall time (median) forward and
forward+backward, and the bytes autograd saves for backward (memory the step keeps alive).

    python benchmarks/bench_losses.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_parity_trl as parity  # noqa: E402  (the parity tests' stand-ins for TRL's trainers)

from alignlings import dpo_loss, dpo_metrics, grpo_loss, grpo_metrics  # noqa: E402

parity.DTYPE = torch.float32


def saved_bytes(fn) -> int:
    """Bytes of the tensors autograd saves for backward while fn runs."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total


def timed(fn, repeats: int, backward: bool) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        loss = fn()
        if backward:
            loss.backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def dpo_pair(B: int):
    pc, pr, rc, rr, mask = parity._dpo_case(0, B, T=64)

    def ours():
        loss = dpo_loss(pc, pr, rc, rr, beta=0.1, loss_type="sigmoid")
        dpo_metrics(pc, pr, rc, rr, beta=0.1)
        return loss

    def trl():
        return parity._trl_dpo(pc, pr, rc, rr, mask, beta=0.1, loss_types=["sigmoid"], loss_weights=[1.0],
                               label_smoothing=0.0)[0]

    return ours, trl, (pc, pr)


def grpo_pair(B: int, T: int):
    logps, old, ref, adv, mask = parity._grpo_case(0, B, T, with_old=True)
    kw = dict(loss_type="dapo", beta=0.04, epsilon=0.2, epsilon_high=None, delta=None,
              importance_sampling_level="token", use_bias_correction_kl=True, max_completion_length=T)
    n = int(mask.sum())

    def ours():
        loss = grpo_loss(logps, old, ref, adv, mask, num_items_in_batch=n,
                         **{k: v for k, v in kw.items() if k != "max_completion_length"})
        grpo_metrics(logps, old, ref, adv, mask)
        return loss

    def trl():
        return parity._trl_grpo(logps, old, ref, adv, mask, num_items_in_batch=n, **kw)[0]

    return ours, trl, (logps,)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name, (ours, trl, leaves) in {
        "dpo sigmoid B=256": dpo_pair(256),
        "grpo dapo B=64 T=1024": grpo_pair(64, 1024),
    }.items():
        def clear():
            for leaf in leaves:
                leaf.grad = None
        result = {}
        for who, fn in (("ours", ours), ("trl", trl)):
            fwd = timed(lambda: (clear(), fn())[1], args.repeats, backward=False)
            fb = timed(lambda: (clear(), fn())[1], args.repeats, backward=True)
            result[who] = (fwd, fb, saved_bytes(fn))
        rows.append((name, result))
    print(f"{'case':24} {'who':5} {'fwd ms':>9} {'fwd+bwd ms':>11} {'saved KB':>9}")
    for name, result in rows:
        for who, (fwd, fb, mem) in result.items():
            print(f"{name:24} {who:5} {fwd * 1e3:9.3f} {fb * 1e3:11.3f} {mem / 2**10:9.1f}")
        o, t = result["ours"], result["trl"]
        print(f"{name:24} ratio ours/trl: fwd {o[0] / t[0]:.2f}x  fwd+bwd {o[1] / t[1]:.2f}x  "
              f"saved memory {o[2] / max(t[2], 1):.2f}x")


if __name__ == "__main__":
    main()
