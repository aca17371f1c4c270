"""Issue 35: the settings TRL 1.16's users change behave as in TRL, a stock path on request, no
silent drift (the lean decoder's tested transformers range, the optimiser's tested torch range,
an opt-in check of the lean path against ``forward``)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import GRPOConfig, GRPOTrainer, toy  # noqa: E402
from alignlings.trainers.data import completion_mask_until_eos  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trl_truncated(completion_ids: torch.Tensor, mask: torch.Tensor, eos_ids: list[int], pad_id: int) -> list[bool]:
    """TRL 1.16's GRPOTrainer rule, written as it is there: the kept ids' last is not EOS or pad."""
    eos_and_pad = [*eos_ids, pad_id]
    kept = [c[m.bool()].tolist() for c, m in zip(completion_ids, mask)]
    return [ids[-1] not in eos_and_pad for ids in kept]


def test_truncated_follows_trls_rule_when_the_pad_id_is_an_ordinary_token():
    PAD, EOS = 0, 1
    torch.manual_seed(0)
    ids = torch.randint(0, 6, (200, 5))
    ids[:4] = torch.tensor([[3, 4, 5, 2, PAD], [3, PAD, 4, 5, 2], [3, EOS, PAD, PAD, PAD], [PAD] * 5])
    mask, truncated = completion_mask_until_eos(ids, [EOS], pad_id=PAD)
    assert truncated.tolist() == _trl_truncated(ids, mask, [EOS], PAD)
    assert truncated[:4].tolist() == [False, True, False, False]


def _forced_pad_trainer(tmp_path, **kw):
    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    pad = tok.pad_token_id
    assert pad != tok.eos_token_id

    def hook(module, inputs, output):  # rows 0-3 always draw the pad token: never an EOS
        output = output.clone()
        output[:4, :, pad] = 1e4
        return output

    model.lm_head.register_forward_hook(hook)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=4, max_steps=1, disable_tqdm=True, save_steps=0,
                      save_final_model=False, **kw)
    rows = [{"prompt": f"{a}+{a}="} for a in range(4)]
    return GRPOTrainer(model, lambda prompts, **k: [0.0] * len(prompts), args=args, train_dataset=rows,
                       processing_class=tok), tok


@pytest.mark.parametrize("backend", ["cache", "generate"])
def test_grpo_does_not_call_a_completion_ending_in_the_pad_token_truncated(tmp_path, backend):
    trainer, tok = _forced_pad_trainer(tmp_path, mask_truncated_completions=True, generation_backend=backend)
    torch.manual_seed(0)
    batch = trainer.generate([0, 1])
    C = batch["completion_ids"].shape[1]
    assert (batch["completion_ids"][:4] == tok.pad_token_id).all() and C == 4
    expected = _trl_truncated(batch["completion_ids"], batch["attention_mask"][:, -C:], trainer.eos_ids,
                              tok.pad_token_id)
    assert batch["truncated"].tolist() == expected
    assert not batch["truncated"][:4].any()
    assert (batch["completion_mask"][:4, -C:] == 1).all()  # kept in the loss, as TRL keeps them
