"""The trainers on a tiny random GPT-2: loss goes down, TRL's metric keys, bit-for-bit resume, configs.

Layer 4 of the house test layers: tiny runs that must reach a stated result. The model is a 2-layer,
32-wide GPT-2 over the toy character tokenizer; every run takes well under a second per step.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import (  # noqa: E402
    DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, RewardConfig, RewardTrainer,
)
from alignlings.trainers import toy  # noqa: E402
from alignlings.trainers.configs import load_config, parse_overrides  # noqa: E402
from alignlings.trainers.data import (  # noqa: E402
    collate_completions, collate_sequences, completion_mask_until_eos, tokenize_pair, truncate,
)


# tiny tensors: a second torch thread costs more than it saves (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tok():
    return toy.make_tokenizer()


def tiny(tok, seed=0):
    return toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=seed)


PAIRS = [
    {"prompt": "1+2=", "chosen": "3", "rejected": "4"},
    {"prompt": "10+5=", "chosen": "15", "rejected": "16"},
    {"prompt": "7+7=", "chosen": "14", "rejected": "41"},
    {"prompt": "9+90=", "chosen": "99", "rejected": "98"},
    {"prompt": "3+3=", "chosen": "6", "rejected": "7"},
    {"prompt": "25+25=", "chosen": "50", "rejected": "55"},
    {"prompt": "0+8=", "chosen": "8", "rejected": "0"},
    {"prompt": "12+21=", "chosen": "33", "rejected": "32"},
]
PROMPTS = [{"prompt": r["prompt"], "answer": r["chosen"]} for r in PAIRS]

DPO_KEYS = {"loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
            "logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected", "grad_norm", "learning_rate",
            "entropy", "num_tokens", "mean_token_accuracy"}
REWARD_KEYS = {"loss", "accuracy", "margin", "min_reward", "mean_reward", "max_reward", "grad_norm", "learning_rate",
               "num_tokens"}
GRPO_KEYS = {"loss", "reward", "reward_std", "frac_reward_zero_std", "kl", "entropy", "clip_ratio/low_mean",
             "clip_ratio/high_mean", "clip_ratio/region_mean", "completions/mean_length",
             "rewards/count_ones/mean", "rewards/count_ones/std", "grad_norm", "learning_rate"}


def count_ones(prompts, completions, **kwargs):
    """Reward: the number of "1" characters, so GRPO has something easy to learn."""
    return [float(c.count("1")) for c in completions]


def common(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path), logging_steps=1, save_steps=0, disable_tqdm=True,
                lr_scheduler_type="constant", save_final_model=False)
    base.update(kw)
    return base


# -- data and config -------------------------------------------------------------------------------


def test_tokenize_pair_masks_only_the_completion(tok):
    prompt, completion = tokenize_pair(tok, "12+34=", "46")
    assert tok.decode(prompt) == "12+34="
    assert tok.decode(completion) == "46<eos>"
    assert truncate(prompt, completion, 5, "keep_start") == (prompt[:5], [])
    assert truncate(prompt, completion, 4, "keep_end") == (prompt[-1:], completion)


def test_completion_mask_stops_after_first_eos():
    ids = torch.tensor([[5, 1, 7, 1], [5, 6, 7, 8]])
    mask, truncated = completion_mask_until_eos(ids, eos_id=1)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert truncated.tolist() == [False, True]


def test_configs_validate_and_take_overrides():
    cfg = load_config(GRPOConfig, {"num_generations": 4, "per_device_train_batch_size": 8},
                      parse_overrides(["beta=0.04", "max_steps=3", "epsilon_high=none", "plot=true"]))
    assert (cfg.beta, cfg.max_steps, cfg.epsilon_high, cfg.plot) == (0.04, 3, None, True)
    assert GRPOConfig().loss_type == "dapo" and GRPOConfig().beta == 0.0  # TRL 1.16's defaults
    with pytest.raises(ValueError, match="multiple of num_generations"):
        GRPOConfig(per_device_train_batch_size=6, num_generations=4)
    with pytest.raises(ValueError, match="loss_type"):
        DPOConfig(loss_type="nope")
    with pytest.raises(ValueError, match="unknown field"):
        load_config(DPOConfig, {"betta": 0.1})


# -- optimiser, schedule and data order as transformers' Trainer / TRL -------------------------------


def test_defaults_are_trls():
    for cls in (DPOConfig, RewardConfig, GRPOConfig):
        assert (cls().max_steps, cls().num_train_epochs) == (-1, 3.0)


def test_no_weight_decay_on_biases_and_layernorms(tok, tmp_path):
    from transformers import Trainer

    args = DPOConfig(**common(tmp_path, weight_decay=0.1, max_steps=1))
    trainer = DPOTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    names = {id(p): n for n, p in trainer.unwrapped_model.named_parameters()}
    decayed = {names[id(p)] for g in trainer.optimizer.param_groups if g["weight_decay"] == 0.1 for p in g["params"]}
    kept = {names[id(p)] for g in trainer.optimizer.param_groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert decayed == set(Trainer.get_decay_parameter_names(None, trainer.unwrapped_model)) & set(names.values())
    assert kept and all(n.endswith("bias") or ".ln_" in n for n in kept)
    assert decayed and not any(n.endswith("bias") for n in decayed)


@pytest.mark.parametrize("kind, warmup, expected", [
    ("linear", 2, [0.0, 0.5, 1.0, 0.5]),             # warm-up from 0, then linear decay to 0 at step 4
    ("linear", 0.5, [0.0, 0.5, 1.0, 0.5]),           # a fraction < 1 is a ratio of the run: 2 of 4 steps
    ("constant", 2, [1.0, 1.0, 1.0, 1.0]),           # transformers' "constant" ignores warm-up
    ("constant_with_warmup", 2, [0.0, 0.5, 1.0, 1.0]),
])
def test_learning_rate_schedules_are_transformers(tok, tmp_path, kind, warmup, expected):
    args = RewardConfig(**common(tmp_path, learning_rate=1e-3, per_device_train_batch_size=8, max_steps=4,
                                 lr_scheduler_type=kind, warmup_steps=warmup))
    history = RewardTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok).train()
    assert [r["learning_rate"] for r in history] == pytest.approx([1e-3 * e for e in expected])


def test_last_partial_batch_is_trained_and_small_datasets_accepted(tok, tmp_path):
    # 8 pairs in batches of 3: an epoch is 3 steps (3, 3, 2 rows) and sees every row once, as TRL's
    # dataloader (drop_last=False); a dataset smaller than one batch trains on all of it each step.
    args = DPOConfig(**common(tmp_path / "a", per_device_train_batch_size=3, num_train_epochs=1, max_steps=-1))
    trainer = DPOTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    assert trainer.max_steps == 3
    batches = [trainer.data.next() for _ in range(3)]
    assert [len(b) for b in batches] == [3, 3, 2] and sorted(sum(batches, [])) == list(range(8))
    args = RewardConfig(**common(tmp_path / "b", per_device_train_batch_size=16, max_steps=2))
    history = RewardTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok).train()
    assert len(history) == 2 and history[1]["num_tokens"] == 2 * history[0]["num_tokens"]
    # GRPO keeps TRL's RepeatSampler rule: whole batches of prompts only
    args = GRPOConfig(**common(tmp_path / "c", per_device_train_batch_size=12, num_generations=4, num_train_epochs=1,
                               max_steps=-1, max_completion_length=2))
    assert GRPOTrainer(tiny(tok), count_ones, args=args, train_dataset=PROMPTS, processing_class=tok).max_steps == 2


# -- each trainer reduces its loss and logs TRL's keys -------------------------------------------------


def test_dpo_reduces_loss_on_a_fixed_batch(tok, tmp_path):
    args = DPOConfig(**common(tmp_path, learning_rate=3e-3, per_device_train_batch_size=4,
                              gradient_accumulation_steps=2, max_steps=12, beta=0.5))
    trainer = DPOTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    history = trainer.train()
    assert DPO_KEYS <= set(history[0])
    assert history[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # policy == reference: log 2
    assert history[-1]["loss"] < 0.35 and history[-1]["rewards/accuracies"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 13))


def test_dpo_precomputed_reference_matches_per_batch_reference(tok, tmp_path):
    results = []
    for precompute in (False, True):
        args = DPOConfig(**common(tmp_path / str(precompute), learning_rate=1e-3, per_device_train_batch_size=4,
                                  max_steps=3, precompute_ref_log_probs=precompute))
        trainer = DPOTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok)
        results.append([r["loss"] for r in trainer.train()])
    assert results[0] == pytest.approx(results[1], abs=1e-6)


def test_reward_trainer_learns_the_pairs(tok, tmp_path):
    args = RewardConfig(**common(tmp_path, learning_rate=3e-3, per_device_train_batch_size=8, max_steps=30))
    trainer = RewardTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    history = trainer.train()
    assert REWARD_KEYS <= set(history[0])
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    scores = trainer.score([r["prompt"] for r in PAIRS] * 2, [r["chosen"] for r in PAIRS] + [r["rejected"] for r in PAIRS])
    assert (scores[:8] > scores[8:]).all()


def test_grpo_surrogate_falls_over_iterations_on_one_batch(tok, tmp_path):
    # num_iterations = 4: four optimiser steps on the same generated batch; the clipped surrogate
    # loss must fall from its ratio-1 value as the policy moves toward the high-advantage samples.
    args = GRPOConfig(**common(tmp_path, learning_rate=3e-3, per_device_train_batch_size=16, num_generations=4,
                               max_completion_length=4, max_steps=4, num_iterations=4, beta=0.04))
    trainer = GRPOTrainer(tiny(tok), count_ones, args=args, train_dataset=PROMPTS, processing_class=tok)
    history = trainer.train()
    assert GRPO_KEYS <= set(history[0])
    losses = [r["loss"] for r in history]
    assert losses[-1] < losses[0] - 0.05
    assert history[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference at step 1
    assert history[-1]["clip_ratio/region_mean"] > 0  # the ratio has left [1 - eps, 1 + eps]


def test_grpo_raises_an_easy_reward(tok, tmp_path):
    args = GRPOConfig(**common(tmp_path, learning_rate=1e-2, per_device_train_batch_size=32, num_generations=8,
                               max_completion_length=4, max_steps=25, logging_steps=5, temperature=1.0))
    trainer = GRPOTrainer(tiny(tok), count_ones, args=args, train_dataset=PROMPTS, processing_class=tok)
    history = trainer.train()
    assert history[0]["reward"] < 0.8
    assert history[-1]["reward"] > 2.0  # out of at most 4 characters


def test_grpo_reward_functions_get_columns_and_weights(tok, tmp_path):
    seen = {}

    def spy(prompts, completions, answer, completion_ids, **kwargs):
        seen.update(n=len(prompts), answer=answer[:4], ids=completion_ids[0])
        return [None] * len(prompts)  # "not scored": counts as 0

    args = GRPOConfig(**common(tmp_path, learning_rate=1e-3, per_device_train_batch_size=8, num_generations=4,
                               max_completion_length=3, max_steps=1, reward_weights=[2.0, 1.0]))
    trainer = GRPOTrainer(tiny(tok), [count_ones, spy], args=args, train_dataset=PROMPTS, processing_class=tok)
    row = trainer.train()[0]
    assert seen["n"] == 8 and len(set(seen["answer"])) == 1  # 2 prompts x G = 4, each prompt G times
    assert row["reward"] == pytest.approx(2.0 * row["rewards/count_ones/mean"])
    assert torch.isnan(torch.tensor(row["rewards/spy/mean"]))


# -- checkpoints -----------------------------------------------------------------------------------


def _params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _resume_equals_uninterrupted(make_trainer, tmp_path, steps=4, stop=3):
    """Train ``steps`` steps saving each one; then resume, from checkpoint ``stop``, a trainer whose
    policy starts from *different* weights (the reference, which checkpoints do not hold, is the same).
    Only a resume that restores the weights, the optimiser, the schedule, the data position and the
    RNG ends bit-for-bit equal to the full run; one that restored nothing fails."""
    full = make_trainer(tmp_path / "full", save_steps=1, max_steps=steps)
    full_history = full.train()
    resumed = make_trainer(tmp_path / "full", save_steps=0, max_steps=steps, model_seed=123)
    before = _params(resumed.unwrapped_model)
    ran, step = [], resumed.training_step
    resumed.training_step = lambda rows: ran.append(resumed.step) or step(rows)
    history = resumed.train(resume_from_checkpoint=str(tmp_path / "full" / f"checkpoint-{stop}"))
    assert ran == list(range(stop, steps))  # only the remaining steps ran
    a, b = _params(full.unwrapped_model), _params(resumed.unwrapped_model)
    assert a.keys() == b.keys()
    assert any(not torch.equal(a[k], before[k]) for k in a)  # the stand-in start really differed
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert history[-1]["loss"] == full_history[-1]["loss"]
    assert resumed.optimizer.state_dict()["state"].keys() == full.optimizer.state_dict()["state"].keys()


def test_dpo_resume_is_bit_for_bit(tok, tmp_path):
    def make(out, model_seed=0, **kw):
        args = DPOConfig(**common(out, learning_rate=1e-3, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                                  **kw))
        return DPOTrainer(tiny(tok, model_seed), ref_model=tiny(tok), args=args, train_dataset=PAIRS,
                          processing_class=tok)

    _resume_equals_uninterrupted(make, tmp_path)


def test_reward_resume_is_bit_for_bit(tok, tmp_path):
    def make(out, model_seed=0, **kw):
        args = RewardConfig(**common(out, learning_rate=1e-3, per_device_train_batch_size=4, **kw))
        return RewardTrainer(tiny(tok, model_seed), args=args, train_dataset=PAIRS, processing_class=tok)

    _resume_equals_uninterrupted(make, tmp_path)


def test_grpo_resume_is_bit_for_bit_mid_iteration(tok, tmp_path):
    # stop at step 3 of num_iterations = 2: the generated batch of step 3 must come back from the
    # checkpoint, and the sampling RNG must continue where it was.
    def make(out, model_seed=0, **kw):
        args = GRPOConfig(**common(out, learning_rate=1e-3, per_device_train_batch_size=8, num_generations=4,
                                   max_completion_length=4, num_iterations=2, beta=0.1, **kw))
        return GRPOTrainer(tiny(tok, model_seed), count_ones, args=args, train_dataset=PROMPTS, processing_class=tok,
                           ref_model=tiny(tok))

    _resume_equals_uninterrupted(make, tmp_path, steps=5, stop=3)


def test_final_model_plot_and_latest_checkpoint(tok, tmp_path):
    from transformers import AutoModelForCausalLM

    args = DPOConfig(output_dir=str(tmp_path), learning_rate=1e-3, per_device_train_batch_size=4, max_steps=2,
                     logging_steps=1, save_steps=1, save_total_limit=1, plot=True, disable_tqdm=True)
    DPOTrainer(tiny(tok), args=args, train_dataset=PAIRS, processing_class=tok).train()
    assert (tmp_path / "metrics.png").stat().st_size > 1000
    assert [p.name for p in tmp_path.glob("checkpoint-*")] == ["checkpoint-2"]
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert reloaded.config.n_embd == 32


def test_trainers_run_a_llama_model(tok, tmp_path):
    # Any transformers causal LM: a tiny Llama (rotary positions, untied head) through all three.
    from transformers import LlamaConfig, LlamaForCausalLM

    def llama():
        torch.manual_seed(0)
        return LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                            max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                                            eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id))

    history = DPOTrainer(llama(), args=DPOConfig(**common(tmp_path / "dpo", learning_rate=3e-3, max_steps=6,
                                                          per_device_train_batch_size=8)),
                         train_dataset=PAIRS, processing_class=tok).train()
    assert history[-1]["loss"] < history[0]["loss"]
    history = RewardTrainer(llama(), args=RewardConfig(**common(tmp_path / "rm", learning_rate=3e-3, max_steps=6,
                                                                per_device_train_batch_size=8)),
                            train_dataset=PAIRS, processing_class=tok).train()
    assert history[-1]["loss"] < history[0]["loss"]
    history = GRPOTrainer(llama(), count_ones, args=GRPOConfig(**common(
        tmp_path / "grpo", learning_rate=3e-3, max_steps=2, per_device_train_batch_size=8, num_generations=4,
        max_completion_length=4, num_iterations=2)), train_dataset=PROMPTS, processing_class=tok).train()
    # step 1 is on-policy: ratio exactly 1, so nothing is clipped (positions match generation)
    assert history[0]["clip_ratio/region_mean"] == 0.0


def test_grpo_ratio_starts_at_one_with_left_padding(tok, tmp_path):
    # Prompts of different lengths are left-padded for generate. Scoring must number positions from
    # the first real token, as generate does, or the log-probs would not be those of the sampling
    # policy. Check: the kept old log-probs equal a rescoring of each row without any padding.
    args = GRPOConfig(**common(tmp_path, learning_rate=1e-3, per_device_train_batch_size=16, num_generations=4,
                               max_completion_length=4, max_steps=1, num_iterations=2))
    trainer = GRPOTrainer(tiny(tok), count_ones, args=args, train_dataset=PROMPTS, processing_class=tok)
    batch = trainer.generate_and_score(trainer.data.next())
    assert batch["input_ids"][:, 0].eq(tok.pad_token_id).any()  # some rows are left-padded
    from alignlings.trainers.modeling import lm_logits

    # rescore row by row without padding: the same log-probs
    for row in range(0, 16, 5):
        keep = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][keep].unsqueeze(0)
        logits = lm_logits(trainer.model, ids, torch.ones_like(ids))
        n = int(batch["completion_mask"][row].sum())
        logp = torch.log_softmax(logits[0, -n - 1:-1], -1).gather(-1, ids[0, -n:].unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(batch["old_logps"][row][:n], logp, atol=1e-5, rtol=0)


def test_progress_bar_keeps_the_step_count_on_a_narrow_console():
    import io

    from rich.console import Console

    from alignlings.trainers.metrics import Progress

    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None)
    with Progress(200, "dpo", start=19, show=("loss", "rewards/accuracies", "rewards/margins"), console=console) as bar:
        bar.update({"loss": 0.6931, "rewards/accuracies": 0.875, "rewards/margins": 0.01234})
    last = buf.getvalue().split("\x1b[2K")[-1]
    assert "20/200" in last and "0:00:0" in last and "loss=0.6931" in last


def test_collation_pads_right_and_marks_completions_only():
    batch = collate_completions([[5, 6], [], [7]], [[8], [9, 10], [11, 12, 13]], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 8, 0], [9, 10, 0, 0], [7, 11, 12, 13]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["completion_mask"].tolist() == [[0, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 1]]
    assert all(v.dtype == torch.long for v in batch.values())
    # the DPO trainer's path: rows tokenized once into tensors, completion start per row
    seqs = [torch.tensor([5, 6, 8]), torch.tensor([9, 10]), torch.tensor([7, 11, 12, 13])]
    again = collate_sequences(seqs, [2, 0, 1], pad_id=0)
    assert all(torch.equal(again[k], batch[k]) for k in batch)


@pytest.mark.parametrize("dtype,temperature", [(torch.float32, 1.0), (torch.float32, 0.7), (torch.bfloat16, 1.0)])
def test_completion_logprobs_equal_the_shifted_sequence_logprobs(tok, dtype, temperature):
    # completion_logprobs shifts the labels itself (one log-softmax block instead of a loop over rows);
    # values, sums and gradients must stay exactly those of sequence_logprobs(shift=True)
    from alignlings.logprobs import sequence_logprobs
    from alignlings.trainers.modeling import completion_logprobs, lm_logits

    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2).to(dtype)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, len(tok), (5, 9), generator=g)
    attention = torch.ones_like(ids)
    completion = (torch.rand(5, 9, generator=g) > 0.4).long()
    grads = []
    for ours in (True, False):
        model.zero_grad()
        if ours:
            result, _ = completion_logprobs(model, ids, attention, completion, temperature=temperature)
        else:
            result = sequence_logprobs(lm_logits(model, ids, attention), ids, mask=completion, shift=True,
                                       temperature=temperature)
        (result.sum * torch.arange(1.0, 6.0)).sum().backward()
        grads.append((result.per_token.detach(), result.sum.detach(), result.mask,
                      [p.grad.clone() for p in model.parameters()]))
    (pt, s, m, gr), (pt2, s2, m2, gr2) = grads
    assert pt.shape == (5, 8) and torch.equal(pt, pt2) and torch.equal(s, s2) and torch.equal(m, m2)
    assert all(torch.equal(a, b) for a, b in zip(gr, gr2))
