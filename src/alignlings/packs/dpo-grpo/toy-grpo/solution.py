"""Toy GRPO end to end: teach a one-layer GPT-2 to answer the prompt <bos> with the token "a".

GRPO (Shao et al., DeepSeekMath, 2024) is PPO's clipped surrogate without a critic: each response's
advantage is its reward z-scored within the group sampled for the same prompt. The task is a
one-step bandit: the response is a single token, reward 1 for "a" and 0 for anything else.
"""
import copy

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = list("abcdefghi") + ["<bos>"]
V = len(VOCAB)
stoi = {s: i for i, s in enumerate(VOCAB)}
TARGET = stoi["a"]

torch.manual_seed(0)
config = GPT2Config(vocab_size=V, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                    bos_token_id=stoi["<bos>"], eos_token_id=stoi["<bos>"], use_cache=False)
# eval mode switches dropout off: policy and old must agree exactly when their weights do
policy = GPT2LMHeadModel(config).eval()
ref = copy.deepcopy(policy).requires_grad_(False)  # frozen reference for the KL penalty
old = copy.deepcopy(policy).requires_grad_(False)  # the sampler, pi_old
prompt_id = torch.tensor([[stoi["<bos>"]]])  # [1, 1]


def reward_fn(token_id):
    return 1.0 if token_id == TARGET else 0.0


def sample_group(model, G=32):
    """Sample G one-token answers from model; return the ids [G], their log-probs under model [G]
    and their rewards [G]."""
    with torch.no_grad():
        logits = model(prompt_id).logits[0, -1]  # BLANK
        probs = logits.softmax(-1)
        samples = torch.multinomial(probs, G, replacement=True)  # BLANK
        old_lp = F.log_softmax(logits, dim=-1)[samples]  # BLANK
    rewards = torch.tensor([reward_fn(t) for t in samples.tolist()])
    return samples, old_lp, rewards


def grpo_advantage(rewards):
    """Rewards z-scored within the group; eps keeps a group of equal rewards at 0 instead of NaN."""
    return (rewards - rewards.mean()) / (rewards.std() + 1e-8)  # BLANK


def grpo_step(samples, old_lp, advantages, clip=0.2, kl_coef=0.04):
    """The clipped surrogate with a k3 KL penalty on one group; returns the loss (no optimiser step)."""
    logits = policy(prompt_id).logits[0, -1]
    new_lp_full = F.log_softmax(logits, dim=-1)
    new_lp = new_lp_full[samples]  # [G], with gradient
    with torch.no_grad():
        ref_lp = F.log_softmax(ref(prompt_id).logits[0, -1], dim=-1)[samples]  # [G]
    ratio = torch.exp(new_lp - old_lp)  # BLANK
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * advantages
    pg = torch.min(unclipped, clipped)  # BLANK
    log_r = ref_lp - new_lp
    kl = torch.exp(log_r) - log_r - 1  # BLANK
    return -(pg - kl_coef * kl).mean()


def p_target():
    """P("a" | <bos>) under the policy."""
    with torch.no_grad():
        return policy(prompt_id).logits[0, -1].softmax(-1)[TARGET].item()


opt = torch.optim.Adam(policy.parameters(), lr=3e-3)


def train(iterations=40, inner_steps=2, G=32, log_every=0):
    """Run GRPO; return P("a") before training and after each iteration (printed every log_every)."""
    history = [p_target()]
    for it in range(iterations):
        samples, old_lp, rewards = sample_group(old, G=G)
        adv = grpo_advantage(rewards)
        # reuse the group for a few steps: the ratio and the clip keep them close to pi_old
        for _ in range(inner_steps):
            loss = grpo_step(samples, old_lp, adv)
            opt.zero_grad()
            loss.backward()
            opt.step()
        old.load_state_dict(policy.state_dict())  # BLANK: stmt
        history.append(p_target())
        if log_every and it % log_every == 0:
            print(f"iter {it:2d}  P(a) = {history[-1]:.3f}")
    return history


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)  # a 16-wide model runs faster on one thread
    start = time.perf_counter()
    history = train(log_every=10)
    seconds = time.perf_counter() - start
    print(f'P("a") went from {history[0]:.3f} to {history[-1]:.3f} in {seconds:.2f} s (target: above 0.70)')
