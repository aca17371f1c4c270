"""Time and peak memory of per-token log-probs: naive, TRL, ours from logits, ours fused from hidden states.

    python benchmarks/bench_logprobs.py            # B=8 T=512 V=32000 and B=4 T=1024 V=151936, float32
    python benchmarks/bench_logprobs.py --small    # a quick run at small sizes
    python benchmarks/bench_logprobs.py --sizes 8x512x32000 --hidden 1024 --rounds 3 --threads 1

Methods (each computes per-token log-probs of B*T labels and sums them per sequence; the loss is the
total, so fwd+bwd produces the gradient with respect to the inputs):

    naive        logits.log_softmax(-1).gather(-1, labels)          input: logits [B, T, V]
    trl          trl.trainer.utils.selective_log_softmax            input: logits
    ours         alignlings.sequence_logprobs(logits, labels)       input: logits
    naive_fused  (hidden @ W.T).log_softmax(-1).gather(-1, labels)  input: hidden [B, T, H], W [V, H]
    ours_fused   alignlings.fused_sequence_logprobs(hidden_states=..., lm_head_weight=W, labels=...)

Peak memory on CPU: every method runs once in a fresh subprocess. After the inputs are allocated the
process resets its peak resident set size (writing 5 to /proc/self/clear_refs) and reads its current
RSS; "peak extra" is VmHWM minus that RSS, measured separately for one forward and for one
forward+backward (freed heap is handed back with malloc_trim in between). It includes the
outputs, and for fwd+bwd the gradients: grad_logits [B, T, V] for the logits methods (the same
size as the logits), grad_hidden and grad_W [V, H] for the fused ones. The last column subtracts
those gradients and divides by the size of the [B, T, V] logits: what a method needs beyond what
any method must return.

Time: the fastest of the memory run and of ``--rounds`` further runs made in one more subprocess
that holds all inputs and visits the methods in turn each round, so a change in the machine's load
hits every method alike. Timing goals are reported here and never asserted in tests (STYLE.md). On a
shared machine the times move with the load; the memory numbers do not.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_SIZES = "8x512x32000,4x1024x151936"
SMALL_SIZES = "2x128x32000,1x256x151936"
METHODS = ("naive", "trl", "ours", "naive_fused", "ours_fused")
FUSED = ("naive_fused", "ours_fused")
MB = 2**20


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    """'8x512x32000,4x1024x151936' -> [(8, 512, 32000), (4, 1024, 151936)]."""
    sizes = []
    for item in text.split(","):
        parts = item.lower().strip().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"--sizes: expected BxTxV items like 8x512x32000, got {item!r}")
        sizes.append(tuple(int(p) for p in parts))
    return sizes


# ---------------------------------------------------------------- worker (runs in its own process)


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> int:
    """Hand freed heap back to the OS, reset VmHWM to the current RSS and return that RSS in bytes."""
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: the baseline may include some freed heap
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _rss_kib("VmRSS") * 1024


def _peak_extra(base: int) -> int:
    return _rss_kib("VmHWM") * 1024 - base


def _inputs(B: int, T: int, V: int, H: int, methods) -> dict:
    """The inputs the given methods read: logits, and/or hidden states and LM head weight; all leaves."""
    import torch

    torch.manual_seed(0)
    inputs = {"labels": torch.randint(0, V, (B, T))}
    if any(m not in FUSED for m in methods):
        inputs["logits"] = (2 * torch.randn(B, T, V)).requires_grad_()
    if any(m in FUSED for m in methods):
        inputs["hidden"] = torch.randn(B, T, H).requires_grad_()
        inputs["weight"] = (torch.randn(V, H) / H**0.5).requires_grad_()  # logits ~ N(0, 1)
    return inputs


def _loss_fn(method: str, inputs: dict):
    """(leaves the method differentiates, closure returning the summed sequence log-probs)."""
    labels = inputs["labels"]
    if method == "naive":
        logits = inputs["logits"]
        return [logits], lambda: logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(-1).sum()
    if method == "trl":
        from trl.trainer.utils import selective_log_softmax as trl_selective_log_softmax

        logits = inputs["logits"]
        return [logits], lambda: trl_selective_log_softmax(logits, labels).sum(-1).sum()
    from alignlings.logprobs import fused_sequence_logprobs, sequence_logprobs

    if method == "ours":
        logits = inputs["logits"]
        return [logits], lambda: sequence_logprobs(logits, labels).sum.sum()
    hidden, weight = inputs["hidden"], inputs["weight"]
    if method == "naive_fused":
        return [hidden, weight], lambda: (hidden @ weight.T).log_softmax(-1).gather(-1, labels.unsqueeze(-1)).sum()
    return [hidden, weight], lambda: fused_sequence_logprobs(hidden_states=hidden, lm_head_weight=weight,
                                                       labels=labels).sum.sum()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _fwd_bwd(leaves, loss):
    for t in leaves:
        t.grad = None
    loss().backward()


def memory_worker(method: str, B: int, T: int, V: int, H: int, threads: int = 0) -> dict:
    """Peak extra RSS of one forward, then of one forward+backward (run it in a fresh process)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    leaves, loss = _loss_fn(method, _inputs(B, T, V, H, [method]))
    base = _reset_peak()
    fwd_s = _timed(loss)  # the result is dropped at once, freeing the graph and what it saved
    fwd_peak = _peak_extra(base)
    base = _reset_peak()
    fwd_bwd_s = _timed(lambda: _fwd_bwd(leaves, loss))
    fwd_bwd_peak = _peak_extra(base)
    return {
        "method": method, "threads": torch.get_num_threads(), "fwd_s": [fwd_s], "fwd_bwd_s": [fwd_bwd_s],
        "fwd_peak": fwd_peak, "fwd_bwd_peak": fwd_bwd_peak,
        "grad_bytes": sum(t.numel() * t.element_size() for t in leaves), "logits_bytes": B * T * V * 4,
    }


def timing_worker(methods: list[str], B: int, T: int, V: int, H: int, rounds: int, threads: int = 0) -> dict:
    """Times of every method, in rounds that visit each method in turn, so that a change in the
    machine's load hits all methods alike instead of whichever happened to run then."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    inputs = _inputs(B, T, V, H, methods)
    fns = {m: _loss_fn(m, inputs) for m in methods}
    times = {m: {"fwd_s": [], "fwd_bwd_s": []} for m in methods}
    for _ in range(rounds):
        for m, (leaves, loss) in fns.items():
            times[m]["fwd_s"].append(_timed(loss))
            times[m]["fwd_bwd_s"].append(_timed(lambda: _fwd_bwd(leaves, loss)))
            for t in leaves:
                t.grad = None
    return times


# ---------------------------------------------------------------- driver


def run_in_subprocess(kind: str, *args) -> dict:
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, __file__, "--worker", json.dumps([kind, *args])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(B: int, T: int, V: int, H: int, methods: list[str], rounds: int | None, threads: int) -> list[dict]:
    """Memory (one fresh process per method) and time (fastest of every run, interleaved rounds) for one size."""
    big = B * T * V > 2**27
    results = []
    for m in methods:
        t0 = time.perf_counter()
        r = run_in_subprocess("memory", m, B, T, V, H, threads)
        r.update(method=m, size=(B, T, V, H))
        results.append(r)
        print(f"  {B}x{T}x{V} {m} memory: {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    # default: one round, except for the fused methods at large sizes, which keep their memory-run times
    timed = [m for m in methods if rounds is not None or not (big and m in FUSED)]
    n = 1 if rounds is None else rounds
    if timed and n:
        t0 = time.perf_counter()
        times = run_in_subprocess("timing", timed, B, T, V, H, n, threads)
        print(f"  {B}x{T}x{V} timing x{n}: {time.perf_counter() - t0:.0f}s {times.get('error', '')}",
              file=sys.stderr, flush=True)
        for r in results:
            for key in ("fwd_s", "fwd_bwd_s"):
                if "error" not in r and r["method"] in times:
                    r[key] = r[key] + times[r["method"]][key]
    for r in results:
        if "error" not in r:
            # the fastest run: on a shared machine the slower ones mostly measure the neighbours
            r["runs"] = len(r["fwd_s"])
            r["fwd_s"], r["fwd_bwd_s"] = min(r["fwd_s"]), min(r["fwd_bwd_s"])
    return results


def format_table(results: list[dict]) -> str:
    """One block per size; ratios against naive (logits rows) or naive_fused (hidden-state rows)."""
    lines = []
    by_size: dict[tuple, list[dict]] = {}
    for r in results:
        by_size.setdefault(r["size"], []).append(r)
    for (B, T, V, H), rows in by_size.items():
        logits_mb = B * T * V * 4 / MB
        lines.append(
            f"\nB={B} T={T} V={V} H={H} float32: logits [B, T, V] = {logits_mb:.0f} MB, "
            f"W [V, H] = {V * H * 4 / MB:.0f} MB; threads={rows[0].get('threads', '?')}"
        )
        head = (f"{'method':<12} {'runs':>4} {'fwd s':>8} {'x':>6} {'fwd+bwd s':>10} {'x':>6} {'fwd MB':>9} {'x':>6} "
                f"{'fwd+bwd MB':>11} {'x':>6} {'(fb-grads)/logits':>18}")
        lines += [head, "-" * len(head)]
        ok = {r["method"]: r for r in rows if "error" not in r}
        for r in rows:
            if "error" in r:
                lines.append(f"{r['method']:<12} failed: {r['error']}")
                continue
            ref = ok.get("naive_fused" if r["method"] in FUSED else "naive")

            def ratio(key, r=r, ref=ref):
                return f"{r[key] / ref[key]:6.2f}" if ref and ref[key] > 0 else f"{'-':>6}"

            beyond = (r["fwd_bwd_peak"] - r["grad_bytes"]) / r["logits_bytes"]
            lines.append(
                f"{r['method']:<12} {r['runs']:4d} {r['fwd_s']:8.3f} {ratio('fwd_s')} "
                f"{r['fwd_bwd_s']:10.3f} {ratio('fwd_bwd_s')} "
                f"{r['fwd_peak'] / MB:9.0f} {ratio('fwd_peak')} {r['fwd_bwd_peak'] / MB:11.0f} "
                f"{ratio('fwd_bwd_peak')} {beyond:18.3f}"
            )
    lines.append(
        "\nx: ratio to naive (logits rows) or to naive_fused (hidden-state rows). runs: timed runs, fastest shown.\n"
        "MB: peak RSS beyond the inputs (one run in a fresh process).\n"
        "(fb-grads)/logits: fwd+bwd peak minus the gradients returned, over the size of the [B, T, V] logits."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help=f"quick run at {SMALL_SIZES}")
    parser.add_argument("--sizes", type=parse_sizes, default=None, help=f"BxTxV list (default {DEFAULT_SIZES})")
    parser.add_argument("--hidden", type=int, default=1024, help="H for the fused methods (default 1024)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved timing rounds after the memory runs (default 1, and none for the fused "
                             "methods when B*T*V > 2**27: their memory run is their only timed run)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in the workers (default: torch's)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        kind, *rest = json.loads(args.worker)
        print(json.dumps(memory_worker(*rest) if kind == "memory" else timing_worker(*rest)))
        return 0

    sizes = args.sizes or parse_sizes(SMALL_SIZES if args.small else DEFAULT_SIZES)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; expected some of {', '.join(METHODS)}")
    start = time.perf_counter()
    results = [r for B, T, V in sizes for r in measure(B, T, V, args.hidden, methods, args.rounds, args.threads)]
    print(format_table(results))
    print(f"\ntotal {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
