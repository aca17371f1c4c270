"""GRPO's clipped surrogate loss at the token level, with a k3 KL penalty to the reference policy.

GRPO: Shao et al., "DeepSeekMath", 2024; the clipped surrogate is PPO's (Schulman et al., 2017).
"""
import torch
import torch.nn.functional as F


def approx_kl(log_p, log_q):
    # Schulman's k3 estimator of KL(p || q) on tokens sampled from p, never negative
    # computed from the log difference: exp(log_q) / exp(log_p) underflows to 0 / 0 for very negative log-probs
    log_r = log_q - log_p
    return torch.exp(log_r) - log_r - 1


def grpo_loss(pi_logprob, pi_old_logprob, pi_ref_logprob, advantage, input_len):
    # per-token log-probs [G, T] under the current, sampling-time and reference policies; advantage [G]
    epsilon = 0.2
    beta = 0.01
    bs, seq_len = pi_logprob.shape
    advantage = advantage.unsqueeze(1)  # BLANK
    ratio = torch.exp(pi_logprob - pi_old_logprob)  # BLANK
    ratio_clip = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)  # BLANK
    # min is the pessimistic choice for either sign of the advantage
    policy_gradient = torch.min(ratio * advantage, ratio_clip * advantage)  # BLANK
    kl = approx_kl(pi_logprob, pi_ref_logprob)  # BLANK
    # only the response tokens count: the prompt occupies positions 0 .. input_len - 1
    response_loss = (policy_gradient - beta * kl)[:, input_len:]
    # one mean over every response token: with equal lengths, the same as the paper's per-response mean
    loss = -response_loss.mean()
    return loss


if __name__ == "__main__":
    torch.manual_seed(42)
    G, T, V = 4, 8, 50
    logits = torch.randn(G, T, V)
    old_logits = torch.randn(G, T, V)
    ref_logits = torch.randn(G, T, V)
    token_ids = torch.randint(0, V, (G, T))

    def token_logprobs(logits):
        # log-prob of each sampled token: [G, T, V] -> [G, T]
        return F.log_softmax(logits, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)

    # exercise 3's group advantage: rewards z-scored within the group
    rewards = torch.tensor([0.7, 0.2, 0.4, 0.85])
    advantage = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    pi_logprob = token_logprobs(logits)
    loss = grpo_loss(pi_logprob, token_logprobs(old_logits), token_logprobs(ref_logits), advantage, input_len=3)
    print(f"advantage: {[round(a, 4) for a in advantage.tolist()]}")
    print(f"GRPO loss: {loss.item():.6f}")
    # with pi == pi_old == pi_ref: ratio 1, KL 0, and the loss is minus the mean advantage, about 0
    same = grpo_loss(pi_logprob, pi_logprob, pi_logprob, advantage, input_len=3)
    print(f"GRPO loss when all three policies agree: {same.item():.6f}")
