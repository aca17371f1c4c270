"""A reward model's score at the last real token, under left or right padding and with pad == eos,
and the Bradley-Terry loss with TRL's margin and reward-centring terms.

Pooling as transformers' *ForSequenceClassification (but from the attention mask, see pad == eos);
the loss as TRL 1.16 RewardTrainer.compute_loss. Bradley & Terry (1952); Llama 2's margin (Touvron et
al., 2023); centring: Eisenstein et al., "Helping or Herding?" (2023).
"""
import torch
import torch.nn.functional as F


def pool_last_token(rewards_per_position, input_ids, attention_mask, pad_token_id):
    # rewards_per_position: [B, T] the reward head at every position; input_ids, attention_mask: [B, T]
    # (left or right padding; the tokenizer may pad with its EOS token)
    B, T = attention_mask.shape
    positions = torch.arange(T).expand(B, T)
    # the rightmost position the attention mask calls real (EOS included, even when pad == eos)
    last = (positions * attention_mask).argmax(dim=-1)  # BLANK
    return rewards_per_position[torch.arange(B), last]  # BLANK


def bradley_terry_loss(chosen_rewards, rejected_rewards, margin=None, center_rewards_coefficient=None):
    # chosen_rewards, rejected_rewards: [B]; margin: [B] or None; center_rewards_coefficient: float or None
    logits = chosen_rewards - rejected_rewards  # BLANK
    if margin is not None:
        logits = logits - margin  # BLANK
    # -log sigmoid(x), computed stably
    loss = -F.logsigmoid(logits).mean()  # BLANK
    if center_rewards_coefficient is not None:
        loss = loss + center_rewards_coefficient * torch.mean((chosen_rewards + rejected_rewards) ** 2)  # BLANK
    return loss


if __name__ == "__main__":
    eos = pad = 2
    input_ids = torch.tensor([[5, 6, 7, 2, 2, 2], [2, 2, 4, 5, 6, 2], [3, 4, 5, 6, 7, 2]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    rewards_per_position = torch.tensor([[0.1, 0.2, 0.3, 0.4, 9.0, 9.0],
                                         [9.0, 9.0, -0.1, -0.2, -0.3, -0.4],
                                         [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]])
    print(f"pooled rewards: {pool_last_token(rewards_per_position, input_ids, attention_mask, pad).tolist()}")
    chosen = torch.tensor([1.2, 0.3, -0.5, 2.0])
    rejected = torch.tensor([0.2, 0.8, -1.5, 1.9])
    print(f"BT loss: {bradley_terry_loss(chosen, rejected).item():.6f}")
    margin = torch.tensor([1.0, 0.0, 0.5, 0.0])
    print(f"with margin: {bradley_terry_loss(chosen, rejected, margin).item():.6f}")
    print(f"with margin and centring 0.01: {bradley_terry_loss(chosen, rejected, margin, 0.01).item():.6f}")
