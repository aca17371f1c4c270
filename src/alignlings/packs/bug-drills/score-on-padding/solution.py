"""PPO's per-token rewards (the TRL PPOTrainer / RLOOTrainer layout).

Each response token gets the KL penalty `-kl_coef * (logprob - ref_logprob)`; the reward model's
score, one number per response, is added on the response's last token, its EOS. Responses are
right-padded with `pad_token_id` after the EOS (truncated at the stop token), and every position
after the EOS is padding: its reward is zero.
"""

import torch


def first_true_indices(bools: torch.Tensor) -> torch.Tensor:
    """The index of the first True in each row, or the row length if there is none."""
    row_len = bools.size(-1)
    zero_or_index = row_len * (~bools).long() + torch.arange(row_len)
    return zero_or_index.min(dim=-1).values


def per_token_rewards(scores: torch.Tensor, logprobs: torch.Tensor, ref_logprobs: torch.Tensor,
                      responses: torch.Tensor, pad_token_id: int, kl_coef: float = 0.05) -> torch.Tensor:
    """scores [b], logprobs and ref_logprobs [b, T], responses [b, T] -> rewards [b, T]."""
    if scores.shape != responses.shape[:1]:
        raise ValueError(f"scores: expected shape [{responses.shape[0]}], got {tuple(scores.shape)}")
    # index of the last real token (the EOS) of each response
    sequence_lengths = first_true_indices(responses == pad_token_id) - 1
    response_idxs = torch.arange(responses.shape[1]).repeat(responses.shape[0], 1)
    padding_mask = response_idxs > sequence_lengths.unsqueeze(1)

    rewards = -kl_coef * (logprobs - ref_logprobs)
    actual_start = torch.arange(rewards.size(0))
    actual_end = sequence_lengths  # the EOS, or the last token of a response with no padding
    rewards[actual_start, actual_end] += scores
    return rewards.masked_fill(padding_mask, 0.0)


if __name__ == "__main__":
    PAD, EOS = 0, 1
    responses = torch.tensor([[7, 8, EOS, PAD, PAD],   # stopped early
                              [7, 8, 9, 10, 11]])      # hit max_new_tokens
    zeros = torch.zeros(2, 5)
    rewards = per_token_rewards(torch.tensor([1.0, 1.0]), zeros, zeros, responses, PAD)
    print(rewards)
    print("return of each response:", rewards.sum(-1).tolist())
