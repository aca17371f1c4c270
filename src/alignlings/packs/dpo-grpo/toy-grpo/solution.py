"""Toy GRPO end to end: teach a one-layer GPT-2 to answer the prompt <bos> with the token "a".

GRPO (Shao et al., DeepSeekMath, 2024) is PPO's clipped surrogate without a critic: each response's
advantage is its reward z-scored within the group sampled for the same prompt. The task is a
one-step bandit: the response is a single token, reward 1 for "a" and 0 for anything else.
"""
import copy

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

# vocabulary: the letters a..i are ids 0..8, <bos> is id 9
TARGET = 0  # "a"
BOS = 9

torch.manual_seed(0)
config = GPT2Config(vocab_size=10, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                    bos_token_id=BOS, eos_token_id=BOS, use_cache=False)
# eval mode switches dropout off: policy and old must agree exactly when their weights do
policy = GPT2LMHeadModel(config).eval()
ref = copy.deepcopy(policy).requires_grad_(False)  # frozen reference for the KL penalty
old = copy.deepcopy(policy).requires_grad_(False)  # the sampler, pi_old
prompt_id = torch.tensor([[BOS]])  # [1, 1]
opt = torch.optim.Adam(policy.parameters(), lr=3e-3)


def p_target():
    """P("a" | <bos>) under the policy."""
    with torch.no_grad():
        logits = policy(prompt_id).logits[0, -1]
        return F.softmax(logits, dim=-1)[TARGET].item()


def sample_group(model, G=32):
    """Sample G one-token answers from model; return them [G] and their log-probs under model [G]."""
    with torch.no_grad():
        logits = model(prompt_id).logits[0, -1]  # BLANK
        samples = torch.multinomial(F.softmax(logits, dim=-1), G, replacement=True)  # BLANK
        old_lp = F.log_softmax(logits, dim=-1)[samples]  # BLANK
    return samples, old_lp


def grpo_advantage(rewards):
    """Rewards z-scored within the group; eps keeps a group of equal rewards at 0 instead of NaN."""
    return (rewards - rewards.mean()) / (rewards.std() + 1e-8)  # BLANK


def grpo_step(samples, old_lp, advantages, clip=0.2, kl_coef=0.04):
    """One Adam step on the clipped surrogate with a k3 KL penalty; returns the loss."""
    logp = F.log_softmax(policy(prompt_id).logits[0, -1], dim=-1)[samples]  # [G], with gradient
    with torch.no_grad():
        ref_lp = F.log_softmax(ref(prompt_id).logits[0, -1], dim=-1)[samples]  # [G]
    ratio = torch.exp(logp - old_lp)  # BLANK
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * advantages
    pg = torch.min(unclipped, clipped)  # BLANK
    log_r = ref_lp - logp
    kl = torch.exp(log_r) - log_r - 1  # BLANK
    loss = -(pg - kl_coef * kl).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def train(iterations=40, inner_steps=2):
    """Run GRPO; return P("a") before training and after each iteration."""
    history = [p_target()]
    for _ in range(iterations):
        samples, old_lp = sample_group(old)
        rewards = (samples == TARGET).float()  # 1 for "a", 0 otherwise
        advantages = grpo_advantage(rewards)
        # reuse the group for a few steps: the ratio and the clip keep them close to pi_old
        for _ in range(inner_steps):
            grpo_step(samples, old_lp, advantages)
        old.load_state_dict(policy.state_dict())  # BLANK: stmt
        history.append(p_target())
    return history


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)  # a 16-wide model runs faster on one thread
    start = time.perf_counter()
    history = train()
    seconds = time.perf_counter() - start
    for i in range(0, len(history), 10):
        print(f'iteration {i:2d}: P("a") = {history[i]:.3f}')
    print(f'P("a") went from {history[0]:.3f} to {history[-1]:.3f} in {seconds:.2f} s (target: above 0.70)')
