"""GRPO's group-relative advantage (Shao et al., DeepSeekMath, 2024): rewards z-scored within a group."""
import torch


def compute_grpo_advantages(group_rewards, eps=1e-4):
    # the rewards of the G responses sampled for one prompt: a list or a 1-D tensor
    group_rewards = torch.as_tensor(group_rewards, dtype=torch.float)  # [G]
    # torch.std is unbiased (divides by G - 1); numpy's np.std divides by G
    advantages = (group_rewards - group_rewards.mean()) / (group_rewards.std() + eps)  # BLANK
    return advantages


if __name__ == "__main__":
    groups = {
        "continuous": [0.83, 0.41, 0.95, 0.27, 0.62, 0.09, 0.51, 0.78],
        "all equal": [0.5] * 8,
        "one outlier": [0.10, 0.12, 0.85, 0.08, 0.15, 0.11, 0.09, 0.13],
    }
    for name, rewards in groups.items():
        advantages = compute_grpo_advantages(rewards)
        print(f"{name:>12}: " + " ".join(f"{a:+.3f}" for a in advantages.tolist()))

    # sparse pass/fail rewards: 3 successes among 128 responses
    sparse = torch.zeros(128)
    sparse[[7, 53, 91]] = 1.0
    A = compute_grpo_advantages(sparse)
    print(f"sparse G=128: each success {A[7].item():+.3f}, each failure {A[0].item():+.3f}")
    print(f"A[7] = {A[7].item():.2f}, A[0] = {A[0].item():.2f}")
