"""The trainers against TRL 1.16 itself: tokenization of preference rows, and training side by side.

Tokenization: TRL's own ``DPOTrainer._prepare_dataset`` / ``RewardTrainer._prepare_dataset`` are
driven unbound (a stand-in ``self``) on the same rows and tokenizer as ours. The tokenizer is a tiny
BPE built in code whose one merge ``"=" + "1" -> "=1"`` joins the end of a prompt "a+b=" to a
completion starting with "1" but not to one starting with another digit: the case where splitting
one completion against the other's prompt corrupts a row ("3+4=" + "17" fed as "3+4==17").
"""

from __future__ import annotations

import types

import pytest

pytest.importorskip("transformers")
trl_dpo = pytest.importorskip("trl.trainer.dpo_trainer")
trl_reward = pytest.importorskip("trl.trainer.reward_trainer")
datasets = pytest.importorskip("datasets")

from alignlings.trainers import DPOConfig, DPOTrainer, RewardConfig, RewardTrainer, toy  # noqa: E402
from alignlings.trainers.data import tokenize_preference  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROWS = [
    {"prompt": "3+4=", "chosen": "17", "rejected": "8"},   # merge on the chosen side only
    {"prompt": "3+4=", "chosen": "8", "rejected": "17"},   # merge on the rejected side only
    {"prompt": "12+34=", "chosen": "46", "rejected": "1"},
    {"prompt": "5+5=", "chosen": "10", "rejected": "11"},  # merge on both sides
    {"prompt": "2+2=", "chosen": "4", "rejected": "5"},    # no merge
]


def bpe_tokenizer():
    """Characters 0-9 + =, <pad>, </s>, and one BPE merge across the prompt/completion boundary."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "</s>", *"0123456789+=", "=1"])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("=", "1")]))
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>")


@pytest.fixture(scope="module")
def tok():
    return bpe_tokenizer()


def trl_config(cls, **kw):
    return cls(output_dir="/tmp/unused", report_to=[], use_cpu=True, bf16=False, **kw)


def trl_dpo_rows(tok, rows, **kw):
    stand_in = types.SimpleNamespace(_tokenizer=tok)
    args = trl_config(trl_dpo.DPOConfig, **kw)
    return trl_dpo.DPOTrainer._prepare_dataset(stand_in, datasets.Dataset.from_list(rows), tok, args, "train").to_list()


def trl_reward_rows(tok, rows, **kw):
    args = trl_config(trl_reward.RewardConfig, **kw)
    out = trl_reward.RewardTrainer._prepare_dataset(types.SimpleNamespace(), datasets.Dataset.from_list(rows), tok,
                                                    args, "train")
    return out.to_list()


def test_the_tokenizer_merges_across_the_boundary(tok):
    assert tok.convert_ids_to_tokens(tok("3+4=17")["input_ids"]) == ["3", "+", "4", "=1", "7"]
    assert tok.convert_ids_to_tokens(tok("3+4=8")["input_ids"]) == ["3", "+", "4", "=", "8"]


def test_each_sequence_is_its_own_text_tokenized(tok):
    for row in ROWS:
        prompt, chosen, rejected = tokenize_preference(tok, row["prompt"], row["chosen"], row["rejected"])
        assert tok.decode(prompt + chosen) == row["prompt"] + row["chosen"] + "</s>"
        assert tok.decode(prompt + rejected) == row["prompt"] + row["rejected"] + "</s>"
        assert prompt + chosen == tok(row["prompt"] + row["chosen"] + "</s>")["input_ids"]


@pytest.mark.parametrize("max_length", [None, 6, 4])
def test_dpo_rows_are_trls(tok, max_length, tmp_path):
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    args = DPOConfig(output_dir=str(tmp_path), max_length=max_length, per_device_train_batch_size=1,
                     disable_tqdm=True, save_steps=0, save_final_model=False)
    ours = DPOTrainer(model, args=args, train_dataset=ROWS, processing_class=tok).rows
    theirs = trl_dpo_rows(tok, ROWS, max_length=max_length)
    assert len(ours) == len(theirs)  # the same rows dropped (a prompt of max_length tokens or more)
    if max_length == 4:
        assert len(theirs) < len(ROWS)
    for o, t in zip(ours, theirs):
        # before truncation the rows are TRL's exactly; TRL's collator cuts prompt+completion the way ours does
        full_c, full_r = t["prompt_ids"] + t["chosen_ids"], t["prompt_ids"] + t["rejected_ids"]
        cut = slice(None, max_length)
        assert (o["prompt_chosen"] + o["chosen"]) == full_c[cut]
        assert (o["prompt_rejected"] + o["rejected"]) == full_r[cut]
        assert len(o["prompt_chosen"]) == min(len(t["prompt_ids"]), max_length or 10**9)
        assert len(o["prompt_rejected"]) == len(o["prompt_chosen"])


def test_dpo_refuses_a_dataset_whose_prompts_all_fill_max_length(tok, tmp_path):
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    args = DPOConfig(output_dir=str(tmp_path), max_length=2, per_device_train_batch_size=1)
    with pytest.raises(ValueError, match="train_dataset"):
        DPOTrainer(model, args=args, train_dataset=ROWS, processing_class=tok)


@pytest.mark.parametrize("max_length", [None, 6])
def test_reward_rows_are_trls(tok, max_length, tmp_path):
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    args = RewardConfig(output_dir=str(tmp_path), max_length=max_length, per_device_train_batch_size=1,
                        disable_tqdm=True, save_steps=0, save_final_model=False)
    ours = RewardTrainer(model, args=args, train_dataset=ROWS, processing_class=tok).rows
    theirs = trl_reward_rows(tok, ROWS, max_length=max_length)
    assert len(ours) == len(theirs)
    if max_length == 6:
        assert len(theirs) < len(ROWS)  # over-long pairs are dropped, not cut
    for o, t in zip(ours, theirs):
        assert o["prompt_chosen"] + o["chosen"] == t["chosen_ids"]
        assert o["prompt_rejected"] + o["rejected"] == t["rejected_ids"]


# -- training side by side: the same weights, data and settings through both libraries ---------------

STEPS = 5


def _trl_history(trainer) -> list[float]:
    trainer.train()
    return [r["loss"] for r in trainer.state.log_history if "loss" in r]


def _assert_same_run(ours_losses, theirs_losses, ours_model, theirs_model, loss_tol=2e-6, param_tol=1e-5):
    """Losses to 2e-6 and parameters to 1e-5 after 5 AdamW steps at lr 3e-3: float32 noise (Adam divides
    by sqrt(v), so a last-bit difference in a near-zero gradient moves a weight by up to ~lr * 1e-3)."""
    assert len(ours_losses) == len(theirs_losses) == STEPS
    assert ours_losses == pytest.approx(theirs_losses, abs=loss_tol)
    theirs = dict(theirs_model.named_parameters())
    moved = 0.0
    for name, p in ours_model.named_parameters():
        q = theirs[name]
        diff = float((p.detach() - q.detach()).abs().max())
        assert diff <= param_tol, (name, diff)
        moved = max(moved, float((p.detach() - SNAPSHOT[name]).abs().max())) if name in SNAPSHOT else moved
    assert moved > 100 * param_tol  # the runs trained: agreement is not just two unmoved copies


SNAPSHOT: dict = {}

PAIRS8 = [
    {"prompt": "3+4=", "chosen": "7", "rejected": "17"},
    {"prompt": "12+34=", "chosen": "46", "rejected": "1"},
    {"prompt": "5+5=", "chosen": "10", "rejected": "11"},
    {"prompt": "2+2=", "chosen": "4", "rejected": "5"},
    {"prompt": "19+1=", "chosen": "20", "rejected": "10"},
    {"prompt": "7+8=", "chosen": "15", "rejected": "51"},
    {"prompt": "40+2=", "chosen": "42", "rejected": "24"},
    {"prompt": "9+9=", "chosen": "18", "rejected": "81"},
]
# one batch = the whole dataset, so both libraries' (different) shuffles see the same rows each step;
# warm-up, linear decay, weight decay and clipping all active
SHARED = dict(learning_rate=3e-3, per_device_train_batch_size=8, max_steps=STEPS, warmup_steps=2,
              weight_decay=0.1, max_grad_norm=1.0, logging_steps=1, seed=0)


def test_dpo_trains_as_trl(tok, tmp_path):
    import copy

    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    SNAPSHOT.clear()
    SNAPSHOT.update({n: p.detach().clone() for n, p in model.named_parameters()})
    theirs = copy.deepcopy(model)
    args = DPOConfig(output_dir=str(tmp_path / "ours"), beta=0.1, disable_tqdm=True, save_steps=0,
                     save_final_model=False, **SHARED)
    ours = DPOTrainer(model, args=args, train_dataset=PAIRS8, processing_class=tok)
    history = ours.train()

    cfg = trl_config(trl_dpo.DPOConfig, beta=0.1, save_strategy="no", disable_tqdm=True, **SHARED)
    cfg.output_dir = str(tmp_path / "trl")
    trainer = trl_dpo.DPOTrainer(model=theirs, ref_model=copy.deepcopy(theirs), args=cfg,
                                 train_dataset=datasets.Dataset.from_list(PAIRS8), processing_class=tok)
    _assert_same_run([r["loss"] for r in history], _trl_history(trainer), ours.unwrapped_model, theirs)
    logged = [r for r in trainer.state.log_history if "loss" in r]
    for key in ("entropy", "mean_token_accuracy", "num_tokens", "logits/chosen", "logits/rejected",
                "rewards/margins", "logps/chosen", "logps/rejected", "learning_rate", "grad_norm"):
        assert [r[key] for r in history] == pytest.approx([r[key] for r in logged], abs=1e-5), key


def test_reward_model_trains_as_trl(tok, tmp_path):
    import copy

    from transformers import GPT2ForSequenceClassification

    lm = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    model = GPT2ForSequenceClassification(lm.config.__class__(**{**lm.config.to_dict(), "num_labels": 1}))
    model.transformer.load_state_dict(lm.transformer.state_dict())
    SNAPSHOT.clear()
    SNAPSHOT.update({n: p.detach().clone() for n, p in model.named_parameters()})
    theirs = copy.deepcopy(model)
    args = RewardConfig(output_dir=str(tmp_path / "ours"), disable_tqdm=True, save_steps=0, save_final_model=False,
                        **SHARED)
    ours = RewardTrainer(model, args=args, train_dataset=PAIRS8, processing_class=tok)
    ours_losses = [r["loss"] for r in ours.train()]

    cfg = trl_config(trl_reward.RewardConfig, save_strategy="no", disable_tqdm=True, **SHARED)
    cfg.output_dir = str(tmp_path / "trl")
    trainer = trl_reward.RewardTrainer(model=theirs, args=cfg, train_dataset=datasets.Dataset.from_list(PAIRS8),
                                       processing_class=tok)
    _assert_same_run(ours_losses, _trl_history(trainer), ours.unwrapped_model, theirs)


def test_causal_lm_reward_head_is_trls(tok):
    # a causal LM given to RewardTrainer gets TRL's score head: no bias, N(0, initializer_range)
    from alignlings.trainers.reward import as_reward_model

    lm = toy.make_model(tok, n_layer=1, n_embd=64, n_head=2)
    head = as_reward_model(lm).value_head
    assert head.bias is None and head.weight.shape == (1, 64)
    assert 0.5 * lm.config.initializer_range < float(head.weight.std()) < 1.5 * lm.config.initializer_range


def test_grpo_trains_as_trl_on_fixed_completions(tmp_path, monkeypatch):
    # Sampling replaced in both libraries by the same fixed completions (j-th completion of a prompt
    # = COMPLETIONS[j]), prompts of equal length (TRL scores without position_ids, see docs), every
    # step on the whole 2-prompt dataset: the loss, advantages, aggregation ("dapo") and optimiser
    # step must agree.
    import copy

    import torch

    import alignlings.trainers.grpo as our_grpo
    from alignlings.trainers import GRPOConfig, GRPOTrainer

    trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")
    tok = toy.make_tokenizer()
    G, C = 4, 4
    # two end in EOS, two run to max_completion_length without one (as a sampler returns them)
    completions = [tok(t, add_special_tokens=False)["input_ids"] for t in ("1", "1191", "2+", "9=19")]
    completions = [ids + [tok.eos_token_id] if j % 2 == 0 else ids for j, ids in enumerate(completions)]
    prompts = [{"prompt": "12+34="}, {"prompt": "56+78="}]

    def ones(prompts, completions, **kw):
        return [float(c.count("1")) for c in completions]

    def fixed_ids(num_rows):
        return [completions[j % G] for j in range(num_rows)]

    def our_sampler(model, prompt_ids, prompt_mask, **kw):
        rows = fixed_ids(prompt_ids.shape[0])
        out = torch.full((len(rows), C), tok.pad_token_id, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r)
        return out

    def trl_sampler(self, prompt_ids, images, multimodal_fields, num_generations, **kw):
        return fixed_ids(len(prompt_ids)), None

    monkeypatch.setattr(our_grpo, "sample_with_cache", our_sampler)
    monkeypatch.setattr(trl_grpo.GRPOTrainer, "_generate_single_turn", trl_sampler)

    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    SNAPSHOT.clear()
    SNAPSHOT.update({n: p.detach().clone() for n, p in model.named_parameters()})
    theirs = copy.deepcopy(model)
    shared = dict(SHARED, num_generations=G, max_completion_length=C)
    args = GRPOConfig(output_dir=str(tmp_path / "ours"), disable_tqdm=True, save_steps=0, save_final_model=False,
                      **shared)
    ours = GRPOTrainer(model, ones, args=args, train_dataset=prompts, processing_class=tok)
    history = ours.train()

    cfg = trl_config(trl_grpo.GRPOConfig, save_strategy="no", disable_tqdm=True, **shared)
    cfg.output_dir = str(tmp_path / "trl")
    trainer = trl_grpo.GRPOTrainer(model=theirs, reward_funcs=ones, args=cfg,
                                   train_dataset=datasets.Dataset.from_list(prompts), processing_class=tok)
    _assert_same_run([r["loss"] for r in history], _trl_history(trainer), ours.unwrapped_model, theirs)
    logged = [r for r in trainer.state.log_history if "loss" in r]
    for key in ("reward", "reward_std", "completions/mean_length", "learning_rate"):
        assert [r[key] for r in history] == pytest.approx([r[key] for r in logged], abs=1e-5), key


@pytest.mark.parametrize("backend", ["cache_exact", "generate"])
def test_grpo_samples_in_training_mode_with_dropout_as_trl(tmp_path, backend):
    # TRL 1.16's GRPO samples with ``generate`` on the model in training mode (its training loop calls
    # ``model.train()``; ``disable_dropout`` defaults to False), so the model's dropout acts while
    # sampling. The same model with dropout, the same prompts and seed: our GRPOTrainer draws the
    # completions TRL's ``_generate_single_turn`` draws (``cache_exact`` and ``generate``: the very
    # tokens; the default ``cache`` draws by inverse CDF from the same distribution).
    import copy

    import torch

    from alignlings.trainers import GRPOConfig, GRPOTrainer

    trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")
    tok = toy.make_tokenizer()
    G, C = 4, 6
    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.3
    theirs = copy.deepcopy(model)
    prompts = [{"prompt": "12+34="}, {"prompt": "5+7="}]
    shared = dict(per_device_train_batch_size=8, num_generations=G, max_completion_length=C, temperature=1.3,
                  max_steps=1, seed=0)
    args = GRPOConfig(output_dir=str(tmp_path / "ours"), disable_tqdm=True, save_steps=0, save_final_model=False,
                      generation_backend=backend, **shared)
    assert not args.disable_dropout  # TRL's GRPO default
    ours = GRPOTrainer(model, lambda prompts, **kw: [0.0] * len(prompts), args=args, train_dataset=prompts,
                       processing_class=tok)
    cfg = trl_config(trl_grpo.GRPOConfig, save_strategy="no", disable_tqdm=True, **shared)
    cfg.output_dir = str(tmp_path / "trl")
    trainer = trl_grpo.GRPOTrainer(model=theirs, reward_funcs=lambda prompts, **kw: [0.0] * len(prompts), args=cfg,
                                   train_dataset=datasets.Dataset.from_list(prompts), processing_class=tok)
    trainer.model.train()  # as TRL's training loop leaves it before each step
    assert ours.model.training and any(m.p > 0 for m in ours.model.modules() if isinstance(m, torch.nn.Dropout))
    prompt_ids = [ours.prompt_ids[i] for i in (0, 1) for _ in range(G)]
    torch.manual_seed(11)
    batch = ours.generate([0, 1])
    torch.manual_seed(11)
    trl_ids, _ = trainer._generate_single_turn(prompt_ids, None, {}, G)
    got = [row[:n] for row, n in zip(batch["completion_ids"].tolist(), batch["lengths"].tolist())]
    assert got == trl_ids
    torch.manual_seed(11)
    model.eval()
    assert ours.generate([0, 1])["completion_ids"].tolist() != batch["completion_ids"].tolist()  # dropout acted
