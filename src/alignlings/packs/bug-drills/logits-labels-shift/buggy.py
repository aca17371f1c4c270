"""The trainer's per-token log-probs in an RL loop with a separate inference engine (vLLM).

The inference engine returns, for each sampled token, the log-prob it had when it was sampled:
entry t is log p(token t | tokens before t). The loss mask and the advantages use the same layout,
one entry per token of `input_ids`. The trainer runs one forward pass over `input_ids`; its logits
at position t predict token t + 1. Before the importance ratio trainer / inference can be taken,
the trainer's log-probs must be put in the engine's layout.
"""

import torch


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """logits [b, T, V] of one forward pass over input_ids [b, T] -> log-probs [b, T] in the engine's
    layout: entry t is log p(input_ids[:, t] | input_ids[:, :t]); entry 0, which nothing predicts, is 0."""
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape:
        raise ValueError(f"logits: expected [b, T, V] matching input_ids {tuple(input_ids.shape)}, got {tuple(logits.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature: expected > 0, got {temperature}")
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    labels = torch.roll(input_ids, shifts=-1, dims=1)  # the next token of each position
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def importance_ratio(logits: torch.Tensor, input_ids: torch.Tensor, inference_logprobs: torch.Tensor,
                     loss_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """pi_trainer / pi_inference per token [b, T] on the completion tokens (loss_mask 1), 1 elsewhere."""
    log_ratio = token_logprobs(logits, input_ids, temperature) - inference_logprobs
    return torch.exp(log_ratio * loss_mask)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 6, 8, generator=g)
    input_ids = torch.tensor([[3, 1, 4, 1, 5, 2]])
    # what the engine reports for the same weights: log p(token t | tokens before t)
    logp = torch.log_softmax(logits, dim=-1)
    engine = torch.zeros(1, 6)
    engine[:, 1:] = logp[:, :-1].gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1]])
    print("ratio on the completion:", importance_ratio(logits, input_ids, engine, mask)[mask.bool()].tolist())
