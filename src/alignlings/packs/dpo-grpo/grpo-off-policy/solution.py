"""Several GRPO updates per sampled batch (num_iterations, the mu of DeepSeekMath's Algorithm 1) and the two-sided clip.

DeepSeekMath (Shao et al., 2024), Algorithm 1: sample a batch with pi_old, then run mu updates of pi_theta on it.
The ratio pi_theta / pi_old must be recomputed at every update against the log-probs recorded when the batch was
sampled: those stay fixed, the current ones move, and the clip keeps the policy near the sampler across all mu
updates. With one update per batch the two coincide and TRL uses the shortcut old = logps.detach() (ratio 1, the
gradient kept); with mu > 1 that shortcut makes the ratio 1 at every update and the clip never acts.

INTELLECT-2 (Prime Intellect, 2025, arXiv 2505.07291) adds a cap delta on the unclipped ratio: for a token with A < 0
whose ratio has grown far above 1, -min(rho * A, clip(rho) * A) = -rho * A grows without bound; capping rho at delta
bounds it. TRL 1.16: GRPOConfig(num_iterations=1, epsilon=0.2, delta=None, steps_per_generation=None) and
grpo_trainer.py (_prepare_inputs, _generate_and_score_completions, _compute_loss).

Shapes: B completions, T tokens, V vocabulary, D features; mask [B, T] is 1 on completion tokens.
"""
import torch


def token_logps(logits, tokens):
    """[B, T, V] logits and [B, T] token ids -> [B, T] log-probs of those tokens."""
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def two_sided_surrogate(ratio, advantages, epsilon=0.2, delta=None):
    """[B, T] per-token loss -min(rho * A, clip(rho, 1 - eps, 1 + eps) * A), the unclipped rho capped at delta if given."""
    if delta is not None and delta <= 1:
        raise ValueError(f"delta: expected a cap above 1 (TRL recommends more than 1 + epsilon), got {delta!r}")
    ratio_clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    if delta is not None:
        ratio = torch.clamp(ratio, max=delta)  # BLANK
    return -torch.min(ratio * advantages, ratio_clipped * advantages)


def grpo_updates(weight, features, tokens, advantages, mask, num_iterations, lr=0.5, epsilon=0.2, delta=None):
    """num_iterations SGD updates of a linear policy (logits = features @ weight) on one sampled batch.

    weight: [D, V] the policy's parameters when the batch was sampled (pi_old); features: [B, T, D];
    tokens: [B, T] the sampled tokens; advantages: [B]. Returns the final weight and a [num_iterations, 3]
    history of (loss, mean ratio, clipped fraction) over the completion tokens, before each update.
    """
    if not isinstance(num_iterations, int) or num_iterations < 1:
        raise ValueError(f"num_iterations: expected an int >= 1, got {num_iterations!r}")
    weight = weight.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([weight], lr=lr)
    advantages = advantages.unsqueeze(1)  # [B, 1]
    # pi_old's log-probs: recorded once, before the first update, and never differentiated
    old_logps = token_logps(features @ weight, tokens).detach()  # BLANK
    history = []
    for _ in range(num_iterations):
        logps = token_logps(features @ weight, tokens)  # [B, T], with the current weights
        ratio = torch.exp(logps - old_logps)  # BLANK
        per_token_loss = two_sided_surrogate(ratio, advantages, epsilon, delta)
        loss = (per_token_loss * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            clipped = ((ratio > 1 + epsilon) & (advantages > 0)) | ((ratio < 1 - epsilon) & (advantages < 0))
            history.append(torch.stack([loss, (ratio * mask).sum() / mask.sum(), (clipped * mask).sum() / mask.sum()]))
    return weight.detach(), torch.stack(history)


def buffer_schedule(step, steps_per_generation, num_iterations):
    """TRL's _prepare_inputs at micro-step `step`: (whether a new generation batch is sampled now, which of its
    steps_per_generation slices this micro-step trains on)."""
    if steps_per_generation < 1 or num_iterations < 1:
        raise ValueError(f"steps_per_generation, num_iterations: expected ints >= 1, got "
                         f"{steps_per_generation!r}, {num_iterations!r}")
    generate = step % (steps_per_generation * num_iterations) == 0  # BLANK
    index = step % steps_per_generation  # BLANK
    return generate, index


def needs_old_logps(gradient_accumulation_steps, steps_per_generation, num_iterations):
    """Whether TRL must record pi_old's log-probs at generation time (_generate_and_score_completions): True when
    some micro-step trains on the batch after an optimizer step has already changed the policy."""
    return gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0  # BLANK


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    B, T, V, D = 4, 6, 8, 5
    features = torch.randn(B, T, D, generator=g)
    weight = torch.randn(D, V, generator=g) * 0.1
    tokens = torch.randint(0, V, (B, T), generator=g)
    advantages = torch.tensor([1.2, -0.4, 0.7, -1.5])
    mask = torch.ones(B, T)
    for mu in (1, 4):
        _, history = grpo_updates(weight, features, tokens, advantages, mask, num_iterations=mu, lr=0.3)
        rows = [f"({loss:.4f}, {ratio:.4f}, {clipped:.4f})" for loss, ratio, clipped in history.tolist()]
        print(f"num_iterations={mu}, (loss, mean ratio, clipped fraction) before each update: {', '.join(rows)}")
    print("TRL schedule, steps_per_generation=2, num_iterations=2:",
          [buffer_schedule(step, 2, 2) for step in range(6)])
