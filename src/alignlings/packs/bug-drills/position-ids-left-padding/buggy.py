"""The actor's forward pass in PPO: log-probs of the generated tokens (OpenRLHF's `Actor.forward`).

Prompts are left-padded so that generation can run in a batch: each row of `sequences` is
[pad ... pad, prompt, response], with `attention_mask` 0 on the pads. The same sequence is scored
twice: once when the experience is made (old and reference log-probs, in the rollout batch) and once
per PPO update (new log-probs, in a training micro-batch, padded to another length). Before the first
update the policy has not changed, so the two must agree and the ratio must be exactly 1.
"""

import torch


def action_log_probs(model, sequences: torch.Tensor, attention_mask: torch.Tensor, num_actions: int) -> torch.Tensor:
    """Log-probs [b, num_actions] of the last num_actions tokens of left-padded sequences [b, T]
    under a causal LM `model` (a transformers model returning `.logits`)."""
    if sequences.shape != attention_mask.shape:
        raise ValueError(f"attention_mask: expected shape {tuple(sequences.shape)}, got {tuple(attention_mask.shape)}")
    if not 0 < num_actions < sequences.shape[1]:
        raise ValueError(f"num_actions: expected 1..{sequences.shape[1] - 1}, got {num_actions}")
    output = model(sequences, attention_mask=attention_mask)
    logits = output.logits[:, :-1].float()
    log_probs = torch.log_softmax(logits, dim=-1)
    log_probs = log_probs.gather(-1, sequences[:, 1:].unsqueeze(-1)).squeeze(-1)
    return log_probs[:, -num_actions:]


if __name__ == "__main__":
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=1,
                                       attn_implementation="eager")).eval()
    PAD = 0
    short = torch.tensor([[5, 6, 7, 8, 9]])                 # prompt of 2 + response of 3
    rollout = torch.tensor([[PAD, PAD, 5, 6, 7, 8, 9],      # the same sequence in the rollout batch,
                            [11, 12, 13, 14, 15, 16, 17]])  # left-padded beside a longer prompt
    with torch.no_grad():
        new = action_log_probs(model, short, torch.ones_like(short), 3)
        old = action_log_probs(model, rollout, (rollout != PAD).long(), 3)[:1]
    print("ratio at step 0:", torch.exp(new - old))
