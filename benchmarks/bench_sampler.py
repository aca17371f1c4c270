"""The lean decoder against transformers' own paths, side by side in one process.

    python benchmarks/bench_sampler.py                       # the trainers benchmark's tiny GPT-2
    python benchmarks/bench_sampler.py --arch llama --rows 16 --new-tokens 32

Sampling (GRPO's step 1): ``generate``, the KV-cache loop calling the model's ``forward``
(``sample_with_cache(lean=False)``) and the loop through the lean decoder (``lean=True``), all
from the same left-padded prompts and the same seed, the loops drawing as ``generate`` does
(``draw="multinomial"``): the three must draw the same tokens (checked here, asserted in
tests/test_trainers_sampler.py). A fourth row times the lean loop with the trainer's default
inverse-CDF draws (``draw="cdf"``: the same distribution, other tokens). Scoring (a DPO reference pass): the model's
``forward`` against ``decode.lean_logits`` on right-padded rows, under inference mode. Each timing
is the median of ``--repeats`` interleaved rounds of ``--calls`` calls after a warm-up; the ratios
are forward-path time over lean time. Tiny models measure the per-call overhead regime: the
saving shrinks as the arithmetic grows.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _model(arch: str):
    from alignlings.trainers import toy

    tok = toy.make_tokenizer()
    if arch == "gpt2":
        return toy.make_model(tok, n_layer=2, n_embd=64, n_head=4, n_positions=64, seed=0).eval(), tok
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    return LlamaForCausalLM(cfg).eval(), tok


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1000  # ms per call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--rows", type=int, default=8, help="sampled rows (GRPO's G; default 8)")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens per sample (default 16)")
    parser.add_argument("--calls", type=int, default=20, help="calls per round (default 20)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds; the median is shown (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as bench_trainers)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import GenerationConfig

    from alignlings.trainers.data import left_pad_prompts
    from alignlings.trainers.decode import lean_logits
    from alignlings.trainers.modeling import position_ids, sample_with_cache
    from alignlings.trainers.toy import addition_rows

    model, tok = _model(args.arch)
    rows, _ = addition_rows(0)
    prompts = [tok(r["prompt"])["input_ids"] for r in rows[: args.rows]]
    ids, mask = left_pad_prompts(prompts, tok.pad_token_id)
    n = args.new_tokens
    eos = [tok.eos_token_id]
    gen = GenerationConfig(do_sample=True, max_new_tokens=n, top_k=None, pad_token_id=tok.pad_token_id,
                           eos_token_id=eos, bos_token_id=tok.eos_token_id)

    def generate():
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=mask, generation_config=gen)[:, ids.shape[1]:]

    def loop(lean: bool, draw: str = "multinomial"):
        return lambda: sample_with_cache(model, ids, mask, max_new_tokens=n, eos_ids=eos, pad_id=tok.pad_token_id,
                                         lean=lean, draw=draw)

    draws = []
    for fn in (generate, loop(False), loop(True)):
        torch.manual_seed(0)
        draws.append(fn())
    same = all(torch.equal(draws[0], d) for d in draws[1:])

    # scoring: 2 x rows prompt+completion rows, right-padded as DPO's batches
    seqs = [p + tok(r["answer"])["input_ids"] for p, r in zip(prompts, rows)] * 2
    T = max(map(len, seqs))
    score_ids = torch.tensor([s + [tok.pad_token_id] * (T - len(s)) for s in seqs])
    score_mask = torch.tensor([[1] * len(s) + [0] * (T - len(s)) for s in seqs])

    def forward_score():
        with torch.inference_mode():
            return model(input_ids=score_ids, attention_mask=score_mask, position_ids=position_ids(score_mask)).logits

    def lean_score():
        with torch.inference_mode():
            return lean_logits(model, score_ids, score_mask)

    real = score_mask.bool()
    score_diff = (forward_score()[real] - lean_score()[real]).abs().max().item()

    cases = {"generate": generate, "cache loop, forward": loop(False), "cache loop, lean": loop(True),
             "cache loop, lean, cdf draws": loop(True, "cdf"), "score, forward": forward_score,
             "score, lean": lean_score}
    for fn in cases.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():
            times[name].append(_time(fn, args.calls))
    med = {k: statistics.median(v) for k, v in times.items()}

    print(f"{args.arch}, {args.rows} rows x {args.new_tokens} new tokens, {args.threads} thread(s), torch "
          f"{torch.__version__}; medians of {args.repeats} rounds x {args.calls} calls")
    print("| path | ms per call | lean is faster by |")
    print("|---|---|---|")
    for name in ("generate", "cache loop, forward"):
        print(f"| sample: {name} | {med[name]:.2f} | {med[name] / med['cache loop, lean']:.2f}x |")
    print(f"| sample: cache loop, lean | {med['cache loop, lean']:.2f} | - |")
    print(f"| sample: cache loop, lean, inverse-CDF draws (the default) | {med['cache loop, lean, cdf draws']:.2f} | "
          f"{med['cache loop, lean'] / med['cache loop, lean, cdf draws']:.2f}x faster than multinomial draws |")
    print(f"| score {2 * args.rows} rows: forward | {med['score, forward']:.2f} | "
          f"{med['score, forward'] / med['score, lean']:.2f}x |")
    print(f"| score {2 * args.rows} rows: lean | {med['score, lean']:.2f} | - |")
    print(f"same tokens from all three samplers: {same}; largest logit difference when scoring: {score_diff:.1e}")


if __name__ == "__main__":
    main()
