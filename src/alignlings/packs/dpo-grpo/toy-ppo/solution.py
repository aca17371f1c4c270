"""Toy PPO end to end: teach a one-layer GPT-2 to answer the prompt <bos> with "aaaa", with a critic.

PPO for language models (Schulman et al., 2017; the RLHF form of Ziegler et al., 2019 and Ouyang et
al., 2022; the details of Huang et al., "The N+ Implementation Details of RLHF with PPO", 2024), with
the pieces of the earlier exercises wired together: token log-probs, KL-shaped rewards, GAE, the
clipped policy loss and the clipped value loss. The task: vocabulary a..i and <bos>, which also ends
a response (EOS); a response has at most 4 tokens and scores the number of "a" in it over 4.
alignlings.toy_ppo is the same run as a library function.
"""
import copy

import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

VOCAB = list("abcdefghi") + ["<bos>"]
V = len(VOCAB)
TARGET = VOCAB.index("a")
BOS = EOS = VOCAB.index("<bos>")
L = 4  # the longest response


def token_logprobs(logits, input_ids):
    """[B, T+1, V] logits of the whole sequence and [B, T+1] ids -> [B, T] log-probs of the tokens ids[:, 1:]."""
    logps = torch.log_softmax(logits[:, :-1], dim=-1)  # BLANK
    return logps.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def kl_shaped_rewards(scores, logps, ref_logps, mask, kl_coef=0.05):
    """[B, T] per-token rewards: a KL penalty on every response token, the score on the last real one."""
    rewards = -kl_coef * (logps - ref_logps) * mask  # BLANK
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values  # [B] index of the last real token
    rewards[torch.arange(len(scores)), last] += scores  # BLANK: stmt
    return rewards


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    """Advantages and returns [B, T] for right-padded rows: nothing is bootstrapped past the last real token."""
    values = values * mask  # a padding position is not a state: its value must not be bootstrapped
    next_value = torch.zeros_like(values[:, 0])
    last_gae = torch.zeros_like(values[:, 0])
    reversed_advantages = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # BLANK
        last_gae = (delta + gamma * lam * last_gae) * mask[:, t]  # BLANK
        next_value = values[:, t]
        reversed_advantages.append(last_gae)
    advantages = torch.stack(reversed_advantages[::-1], dim=1)  # [B, T]
    returns = (advantages + values) * mask  # BLANK
    return advantages, returns


def clipped_policy_loss(logps, old_logps, advantages, mask, clip_range=0.2):
    """PPO's clipped surrogate, a mean over the real tokens of the batch."""
    ratio = torch.exp(logps - old_logps)  # BLANK
    pg_losses = -advantages * ratio
    pg_losses_clipped = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    return (torch.max(pg_losses, pg_losses_clipped) * mask).sum() / mask.sum()  # BLANK


def clipped_value_loss(values, old_values, returns, mask, clip_range_value=0.2):
    """0.5 * the worse of the unclipped and the clipped squared error, a mean over the real tokens."""
    values_clipped = torch.clamp(values, old_values - clip_range_value, old_values + clip_range_value)  # BLANK
    loss = torch.max((values - returns) ** 2, (values_clipped - returns) ** 2)  # BLANK
    return 0.5 * (loss * mask).sum() / mask.sum()


# -- the models, the rollout and the loop (given) ------------------------------------------------------
config = GPT2Config(vocab_size=V, n_positions=1 + L, n_embd=16, n_layer=1, n_head=2, bos_token_id=BOS,
                    eos_token_id=EOS)


class Critic(torch.nn.Module):
    """A GPT-2 body with a scalar head: V(s_t) for the prefix that ends at each position."""

    def __init__(self):
        super().__init__()
        self.body = GPT2Model(config)
        self.head = torch.nn.Linear(config.n_embd, 1)

    def forward(self, input_ids):
        return self.head(self.body(input_ids=input_ids).last_hidden_state).squeeze(-1)  # [B, T+1]


@torch.no_grad()
def sample_responses(policy, batch_size):
    """[B, 1 + L] ids (<bos>, then the response) and the [B, L] response mask: 1 up to the first EOS."""
    ids = torch.full((batch_size, 1), BOS)
    for _ in range(L):
        probs = policy(input_ids=ids).logits[:, -1].softmax(-1)
        ids = torch.cat([ids, torch.multinomial(probs, 1)], dim=1)
    is_eos = (ids[:, 1:] == EOS).long()
    mask = ((is_eos.cumsum(-1) - is_eos) == 0).float()  # no EOS strictly before this token
    return ids, mask


@torch.no_grad()
def p_aaaa(policy):
    """P("aaaa" | <bos>) under the policy."""
    ids = torch.tensor([[BOS] + [TARGET] * L])
    return token_logprobs(policy(input_ids=ids).logits, ids).sum().exp().item()


def train(iterations=40, batch_size=64, ppo_epochs=4, seed=0, lr=1e-2, vf_coef=0.5, log_every=0):
    """Run PPO; return {"p_aaaa": P("aaaa") before and after each iteration, "score": each batch's mean score,
    "value" and "lambda_return": the critic's mean prediction and what it should predict, per iteration}."""
    torch.manual_seed(seed)
    policy = GPT2LMHeadModel(config).eval()  # eval: no dropout, so the ratio is exactly 1 before an update
    ref = copy.deepcopy(policy).requires_grad_(False)
    critic = Critic().eval()
    opt = torch.optim.Adam(list(policy.parameters()) + list(critic.parameters()), lr=lr)
    history = {"p_aaaa": [p_aaaa(policy)], "score": [], "value": [], "lambda_return": []}
    for it in range(iterations):
        ids, mask = sample_responses(policy, batch_size)
        with torch.no_grad():  # the rollout: everything the updates compare against, computed once
            old_logps = token_logprobs(policy(input_ids=ids).logits, ids)
            ref_logps = token_logprobs(ref(input_ids=ids).logits, ids)
            old_values = critic(ids)[:, :-1] * mask
            scores = ((ids[:, 1:] == TARGET).float() * mask).sum(-1) / L
            rewards = kl_shaped_rewards(scores, old_logps, ref_logps, mask)
            advantages, returns = gae(rewards, old_values, mask)
            lambda_return = ((advantages + old_values) * mask).sum() / mask.sum()  # what the critic should learn
            mean = (advantages * mask).sum() / mask.sum()  # whiten over the batch's real tokens
            std = (((advantages - mean) * mask) ** 2).sum().div(mask.sum()).sqrt()
            advantages = (advantages - mean) / (std + 1e-8) * mask
        for _ in range(ppo_epochs):
            logps = token_logprobs(policy(input_ids=ids).logits, ids)
            values = critic(ids)[:, :-1]
            loss = (clipped_policy_loss(logps, old_logps, advantages, mask)
                    + vf_coef * clipped_value_loss(values, old_values, returns, mask))
            opt.zero_grad()
            loss.backward()
            opt.step()
        history["p_aaaa"].append(p_aaaa(policy))
        history["score"].append(scores.mean().item())
        history["value"].append((old_values.sum() / mask.sum()).item())  # what the critic predicted
        history["lambda_return"].append(lambda_return.item())
        if log_every and it % log_every == 0:
            print(f"iter {it:2d}  score = {history['score'][-1]:.3f}  P(aaaa) = {history['p_aaaa'][-1]:.3f}  "
                  f"critic {history['value'][-1]:.3f} vs lambda-return {history['lambda_return'][-1]:.3f}")
    return history


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)  # a 16-wide model runs faster on one thread
    start = time.perf_counter()
    history = train(log_every=10)
    seconds = time.perf_counter() - start
    final_score = sum(history["score"][-5:]) / 5
    print(f'P("aaaa") went from {history["p_aaaa"][0]:.4f} to {history["p_aaaa"][-1]:.3f}, mean score of the '
          f"last 5 batches {final_score:.3f}, in {seconds:.2f} s (targets: above 0.75 and above 0.90)")
