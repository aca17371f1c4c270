"""Toy DPO end to end: teach a one-layer GPT-2 to answer the prompt <bos> with "a", from preferences.

DPO (Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a Reward
Model", 2023) trains on pairs (prompt, chosen, rejected) against a frozen reference model; there is
no reward model and nothing is sampled. The task is the toy GRPO's: vocabulary a..i and <bos>, the
prompt is <bos>; here a completion is one token followed by <eos>, and "a" is preferred over every
other token.
"""
import copy

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = list("abcdefghi") + ["<bos>"]
V = len(VOCAB)
stoi = {s: i for i, s in enumerate(VOCAB)}
TARGET = stoi["a"]
BOS = EOS = stoi["<bos>"]  # <bos> also ends every completion

torch.manual_seed(0)
config = GPT2Config(vocab_size=V, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                    bos_token_id=BOS, eos_token_id=EOS, use_cache=False)
# eval mode switches dropout off: before the first step policy and ref must agree exactly
policy = GPT2LMHeadModel(config).eval()
ref = copy.deepcopy(policy).requires_grad_(False)  # the frozen reference pi_ref


def make_pairs():
    """The dataset: chosen and rejected sequences [9, 3] = <bos> token <eos>; "a" beats every other token."""
    others = torch.tensor([t for t in range(V) if t != TARGET])  # [9], <eos> included
    n = others.shape[0]
    bos, eos = torch.full((n,), BOS), torch.full((n,), EOS)
    chosen = torch.stack([bos, torch.full((n,), TARGET), eos], dim=1)  # [9, 3]
    rejected = torch.stack([bos, others, eos], dim=1)  # [9, 3]
    return chosen, rejected


def sequence_logps(model, input_ids, prompt_length=1):
    """[B] log pi(completion | prompt): the sum over completion tokens of log pi(y_t | y_<t)."""
    logits = model(input_ids).logits  # [B, T, V]
    logprobs = F.log_softmax(logits[:, :-1], dim=-1)  # BLANK
    per_token = logprobs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # BLANK
    # target t (token t + 1 of input_ids) belongs to the completion when t + 1 >= prompt_length
    mask = (torch.arange(1, input_ids.shape[1]) >= prompt_length).float()  # [T-1]
    return (per_token * mask).sum(-1)  # BLANK


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """-log sigma(beta * (chosen log-ratio - rejected log-ratio)), averaged over the pairs."""
    chosen_logratios = policy_chosen - ref_chosen  # BLANK
    rejected_logratios = policy_rejected - ref_rejected
    logits = beta * (chosen_logratios - rejected_logratios)
    return -F.logsigmoid(logits).mean()  # BLANK


def p_target():
    """P("a" | <bos>) under the policy."""
    with torch.no_grad():
        return policy(torch.tensor([[BOS]])).logits[0, -1].softmax(-1)[TARGET].item()


opt = torch.optim.Adam(policy.parameters(), lr=3e-2)


def train(steps=40, beta=0.1, log_every=0):
    """Run DPO on the 9 pairs (full batch); return P("a") before training and after each step."""
    chosen, rejected = make_pairs()
    history = [p_target()]
    for step in range(steps):
        policy_chosen = sequence_logps(policy, chosen)  # [9], with gradient
        policy_rejected = sequence_logps(policy, rejected)
        with torch.no_grad():  # the reference is frozen: no graph through it
            ref_chosen = sequence_logps(ref, chosen)  # BLANK
            ref_rejected = sequence_logps(ref, rejected)
        loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta)  # BLANK
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(p_target())
        if log_every and step % log_every == 0:
            print(f"step {step:2d}  loss = {loss.item():.3f}  P(a) = {history[-1]:.3f}")
    return history


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)  # a 16-wide model runs faster on one thread
    start = time.perf_counter()
    history = train(log_every=10)
    seconds = time.perf_counter() - start
    print(f'P("a") went from {history[0]:.3f} to {history[-1]:.3f} in {seconds:.2f} s (target: above 0.90)')
