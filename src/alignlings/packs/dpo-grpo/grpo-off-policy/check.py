"""Cases for the grpo-off-policy exercise: updates on one batch with num_iterations 1 and 4 (the ratio must move
away from 1 and the clip must act), the two-sided cap delta on ratios from 0.1 to 10, TRL's generation buffer
schedule, and when TRL records pi_old's log-probs."""

from alignlings.content.checks import Case


def cases():
    import torch

    def batch(seed, B, T, V, D, padded):
        g = torch.Generator().manual_seed(seed)
        features = torch.randn(B, T, D, generator=g)
        weight = torch.randn(D, V, generator=g) * 0.1
        tokens = torch.randint(0, V, (B, T), generator=g)
        advantages = torch.randn(B, generator=g)
        if padded:
            mask = (torch.arange(T) < torch.randint(1, T + 1, (B,), generator=g)[:, None]).float()
        else:
            mask = torch.ones(B, T)
        return weight, features, tokens, advantages, mask

    def spec_batch():
        g = torch.Generator().manual_seed(0)
        B, T, V, D = 4, 6, 8, 5
        features = torch.randn(B, T, D, generator=g)
        weight = torch.randn(D, V, generator=g) * 0.1
        tokens = torch.randint(0, V, (B, T), generator=g)
        return weight, features, tokens, torch.tensor([1.2, -0.4, 0.7, -1.5]), torch.ones(B, T)

    def spec(mu):
        def run(m):
            weight, features, tokens, adv, mask = spec_batch()
            return m.grpo_updates(weight, features, tokens, adv, mask, num_iterations=mu, lr=0.3)
        return run

    def random_updates(seed, mu, lr, delta=None):
        def run(m):
            weight, features, tokens, adv, mask = batch(seed, 6, 7, 10, 4, padded=True)
            return m.grpo_updates(weight, features, tokens, adv, mask, num_iterations=mu, lr=lr, delta=delta)
        return run

    def surrogate(delta):
        def run(m):
            ratio = torch.tensor([[0.1, 0.5, 0.79, 0.9, 1.0, 1.1, 1.21, 1.5, 3.0, 3.9, 4.5, 10.0]] * 2).requires_grad_()
            adv = torch.tensor([[1.5], [-0.8]])
            loss = m.two_sided_surrogate(ratio, adv, 0.2, delta)
            return loss, torch.autograd.grad(loss.sum(), ratio)[0]
        return run

    def schedules(m):
        out = {}
        for spg, mu in ((2, 2), (3, 1), (1, 3), (4, 2)):
            out[f"steps_per_generation={spg}, num_iterations={mu}"] = [list(m.buffer_schedule(s, spg, mu)) for s in range(12)]
        return out

    def old_logps_needed(m):
        table = [(1, 1, 1), (4, 4, 1), (2, 4, 1), (8, 4, 2), (4, 4, 2), (1, 1, 3), (3, 1, 1), (4, 2, 1)]
        return {f"gas={a}, spg={b}, mu={c}": bool(m.needs_old_logps(a, b, c)) for a, b, c in table}

    def old_logps_long_accumulation(m):
        table = [(6, 4, 1), (5, 2, 1), (9, 2, 2), (7, 3, 2), (12, 4, 3), (16, 4, 2)]
        return {f"gas={a}, spg={b}, mu={c}": bool(m.needs_old_logps(a, b, c)) for a, b, c in table}

    return [
        Case("the statement's batch, num_iterations = 1: weights and history", "visible", spec(1),
             label={"zh": "题目中的批次，num_iterations = 1：权重与历史记录"}),
        Case("the statement's batch, num_iterations = 4: weights and history", "visible", spec(4),
             label={"zh": "题目中的批次，num_iterations = 4：权重与历史记录"},
             note={"en": "After the first update the ratio against pi_old moves away from 1 and more and more tokens "
                         "are clipped. A ratio against a detached copy of the current log-probs stays 1 at every "
                         "update, so the clip never acts.",
                   "zh": "第一次更新之后，相对 π_old 的比率离开 1，被裁剪的 token 越来越多。如果比率是相对当前对数概率的 "
                         "detach 副本计算的，每次更新它都等于 1，裁剪永远不会生效。"}),
        Case("TRL's buffer schedule over 12 micro-steps", "visible", schedules, label={"zh": "TRL 在 12 个 micro-step 上的缓冲调度"}),
        Case("when TRL records pi_old's log-probs", "visible", old_logps_needed, label={"zh": "TRL 何时记录 π_old 的对数概率"},
             note={"en": "Only when an optimizer step falls inside the reuse of one generation batch: "
                         "gradient_accumulation_steps is not a multiple of steps_per_generation * num_iterations.",
                   "zh": "只有当一次生成批次的复用过程中发生了优化器更新时才需要：即 gradient_accumulation_steps "
                         "不是 steps_per_generation * num_iterations 的倍数。"}),
        Case("when TRL records pi_old's log-probs: accumulation longer than one generation", "visible",
             old_logps_long_accumulation, label={"zh": "TRL 何时记录 π_old 的对数概率：梯度累积长于一次生成"},
             note={"en": "With gradient_accumulation_steps = 6 and generate_every = 4, the second generation batch "
                         "is sampled at micro-step 4 and trained on at micro-steps 4-7, across the optimizer step "
                         "after micro-step 5: its last two slices meet a policy that did not sample them. A longer "
                         "accumulation is not enough; it must be a multiple of generate_every.",
                   "zh": "gradient_accumulation_steps = 6、generate_every = 4 时，第二个生成批次在第 4 个 micro-step 采样，"
                         "在第 4-7 个 micro-step 上训练，中间跨过了第 5 个 micro-step 之后的优化器更新：它的后两个切片"
                         "遇到的已经不是采样它们的策略。梯度累积更长还不够，必须是 generate_every 的倍数。"}),
        Case("the two-sided surrogate on ratios 0.1 .. 10 with delta = 4: loss and gradient", "visible", surrogate(4.0),
             label={"zh": "delta = 4 时比率 0.1 到 10 上的双侧代理目标：损失与梯度"},
             note={"en": "For A < 0 the unclipped ratio is capped at delta: -min(rho A, clip(rho) A) stops at -delta A, "
                         "with no gradient above it. Below delta and for A > 0 nothing changes.",
                   "zh": "A < 0 时未裁剪的比率被限制在 delta：-min(ρA, clip(ρ)A) 停在 -δA，超过 delta 后没有梯度。"
                         "在 delta 以下以及 A > 0 时都不变。"}),
        Case("random padded batch, num_iterations = 3", "hidden", random_updates(31, 3, 0.8),
             label={"zh": "随机带 padding 的批次，num_iterations = 3"}),
        Case("random padded batch, num_iterations = 6, large steps", "hidden", random_updates(32, 6, 3.0),
             label={"zh": "随机带 padding 的批次，num_iterations = 6，大步长"}),
        Case("random padded batch, num_iterations = 5 with delta = 1.5", "hidden", random_updates(33, 5, 4.0, 1.5),
             label={"zh": "随机带 padding 的批次，num_iterations = 5，delta = 1.5"}),
        Case("without delta: the plain clip", "edge", surrogate(None), label={"zh": "没有 delta：普通的裁剪"}),
        Case("num_iterations = 1 on a random batch: on-policy, ratio 1", "edge", random_updates(34, 1, 0.8),
             label={"zh": "随机批次上 num_iterations = 1：同策略，比率为 1"}),
    ]
