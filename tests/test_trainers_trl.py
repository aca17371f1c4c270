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
