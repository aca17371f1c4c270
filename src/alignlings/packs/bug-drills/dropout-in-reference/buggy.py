"""Preparing the policy and the reference model for DPO, and one DPO step's loss and rewards.

As in TRL's DPOTrainer: the reference model is frozen and in eval mode, the policy is in train mode
(it is being trained), and with disable_dropout=True (TRL's default) every dropout layer is switched
off, so that a model's log-probs of a sequence are the same each time it is scored. The implicit
rewards are beta * (log pi(y|x) - log pi_ref(y|x)); the loss is -log sigmoid(chosen - rejected reward).

Models map token ids [B, T] to logits [B, T, V]; a sequence's log-prob sums log p(token t | tokens < t)
over t = 1 .. T-1 (the first token is the prompt).
"""

import torch
import torch.nn.functional as F
from torch import nn


def disable_dropout_in_model(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def prepare_models(policy: nn.Module, ref_model: nn.Module, disable_dropout: bool = True):
    ref_model.eval()
    ref_model.requires_grad_(False)
    policy.train()
    if disable_dropout:
        disable_dropout_in_model(ref_model)
    return policy, ref_model


def sequence_logps(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids)[:, :-1]
    return torch.gather(F.log_softmax(logits, dim=-1), 2, input_ids[:, 1:, None]).squeeze(2).sum(-1)


def dpo_step(policy, ref_model, chosen_ids, rejected_ids, beta: float = 0.1):
    if chosen_ids.dim() != 2 or chosen_ids.shape[0] != rejected_ids.shape[0]:
        raise ValueError(f"chosen_ids, rejected_ids: expected [B, T] tensors with the same B, "
                         f"got {tuple(chosen_ids.shape)} and {tuple(rejected_ids.shape)}")
    policy_chosen = sequence_logps(policy, chosen_ids)
    policy_rejected = sequence_logps(policy, rejected_ids)
    with torch.no_grad():
        ref_chosen = sequence_logps(ref_model, chosen_ids)
        ref_rejected = sequence_logps(ref_model, rejected_ids)
    chosen_rewards = beta * (policy_chosen - ref_chosen)
    rejected_rewards = beta * (policy_rejected - ref_rejected)
    loss = -F.logsigmoid(chosen_rewards - rejected_rewards).mean()
    return loss, chosen_rewards.detach(), rejected_rewards.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    make = lambda: nn.Sequential(nn.Embedding(11, 16), nn.Dropout(0.3), nn.Linear(16, 11))
    policy = make()
    ref_model = make()
    ref_model.load_state_dict(policy.state_dict())
    prepare_models(policy, ref_model)
    ids = torch.randint(0, 11, (4, 6))
    print(dpo_step(policy, ref_model, ids, ids.flip(1)))  # at step 0: log 2 = 0.6931 and rewards 0
