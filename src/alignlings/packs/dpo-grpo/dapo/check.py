"""Cases for the dapo exercise: the soft overlong penalty, which groups dynamic sampling keeps (exact float
equality included), the decoupled clip on ratios in both clip bands, the token-level mean on unequal lengths,
TRL's clip fractions, and a batch with groups dropped (group-major rows)."""

from alignlings.content.checks import Case


def cases():
    import torch

    SPEC_LENGTHS = torch.tensor([12, 16, 17, 18, 20, 23])
    # all right, all wrong, mixed, all right with the same penalty (0.7 eight times)
    SPEC_REWARDS = torch.tensor([[1.0] * 8, [-1.0] * 8, [1.0, -1, -1, 1, -1, -1, -1, 1], [0.7] * 8])

    def penalties(m):
        return {
            "L_max 20, L_cache 4": m.overlong_penalty(SPEC_LENGTHS, 20, 4),
            "TRL's docstring example: 90 tokens, L_max 100, L_cache 20": m.overlong_penalty(torch.tensor([90]), 100, 20),
            "the paper's 20480 / 4096": m.overlong_penalty(torch.tensor([1000, 16384, 16385, 18432, 20480, 20481]),
                                                          20480, 4096),
            "rewards": m.dapo_rewards(torch.tensor([True, True, True, False, True, False]), SPEC_LENGTHS, 20, 4),
        }

    def random_penalties(m):
        g = torch.Generator().manual_seed(11)
        lengths = torch.randint(0, 70, (40,), generator=g)
        return m.overlong_penalty(lengths, 60, 15), m.overlong_penalty(lengths, 64, 1)

    def spec_groups(m):
        return m.informative_groups(SPEC_REWARDS)

    def one_group_of_equal_rewards(m):
        # eight right answers at the same penalized length: 1.0 + (-0.3) each. In a [1, 8] tensor float32's std
        # of these equal values is 6.4e-8, not 0 (in the [4, 8] statement tensor it happens to round to 0)
        rewards = m.dapo_rewards(torch.ones(8, dtype=torch.bool), torch.full((8,), 13), 20, 10).reshape(1, 8)
        return rewards, m.informative_groups(rewards)

    def random_groups(m):
        g = torch.Generator().manual_seed(12)
        correct = torch.rand(10, 6, generator=g) < torch.rand(10, 1, generator=g) * 1.4 - 0.2  # many all-0/all-1 groups
        lengths = torch.randint(80, 128, (10, 6), generator=g)
        lengths[::3] = 120  # some groups all the same length inside the soft interval
        rewards = m.dapo_rewards(correct.flatten(), lengths.flatten(), 128, 32).reshape(10, 6)
        return rewards, m.informative_groups(rewards)

    def clip_batch():
        # ratios spread over both clip bands; completions of 3, 7 and 5 tokens, padding holds garbage
        g = torch.Generator().manual_seed(13)
        B, T = 6, 7
        lengths = torch.tensor([3, 7, 5, 7, 1, 4])
        mask = (torch.arange(T) < lengths[:, None]).float()
        old = -torch.rand(B, T, generator=g) * 3 - 0.1
        ratio = torch.rand(B, T, generator=g) * 0.8 + 0.6  # in (0.6, 1.4)
        logps = old + torch.log(ratio) + 30 * (1 - mask)
        advantages = torch.tensor([1.0, -1.0, 0.6, -0.4, 2.0, -1.5])
        return logps, old, advantages, mask

    def spec_clip(m):
        old = torch.log(torch.tensor([[0.10, 0.10, 0.50], [0.10, 0.10, 0.50]]))
        new = torch.log(torch.tensor([[0.125, 0.13, 0.50], [0.075, 0.07, 0.50]])).requires_grad_()
        adv, mask = torch.tensor([1.0, -1.0]), torch.ones(2, 3)
        loss = m.dapo_loss(new, old, adv, mask)
        return loss, torch.autograd.grad(loss, new)[0], m.clip_fractions(new.detach(), old, adv, mask)

    def clip_bands(m):
        logps, old, adv, mask = clip_batch()
        logps.requires_grad_()
        loss = m.dapo_loss(logps, old, adv, mask)
        return loss, torch.autograd.grad(loss, logps)[0]

    def other_epsilons(m):
        logps, old, adv, mask = clip_batch()
        return (m.dapo_loss(logps, old, adv, mask, epsilon_low=0.1, epsilon_high=0.35),
                m.clip_fractions(logps, old, adv, mask, epsilon_low=0.1, epsilon_high=0.35))

    def fractions(m):
        logps, old, adv, mask = clip_batch()
        return m.clip_fractions(logps, old, adv, mask)

    def unequal_lengths(m):
        # every token of a long wrong answer and of a short right answer has the same ratio
        mask = (torch.arange(12) < torch.tensor([2, 12])[:, None]).float()
        old = torch.full((2, 12), -1.0)
        logps = (old + 0.05).requires_grad_()
        loss = m.dapo_loss(logps, old, torch.tensor([1.0, -1.0]), mask)
        return loss, torch.autograd.grad(loss, logps)[0]

    def batch(seed, P, G, T, constant_rows):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            rewards = torch.randn(P, G, generator=g)
            for p, value in constant_rows:
                rewards[p] = value
            lengths = torch.randint(1, T + 1, (P * G,), generator=g)
            mask = (torch.arange(T) < lengths[:, None]).float()
            old = -torch.rand(P * G, T, generator=g) * 2 - 0.1
            logps = (old + torch.randn(P * G, T, generator=g) * 0.3).requires_grad_()
            loss = m.dapo_batch_loss(rewards, logps, old, mask)
            return loss, torch.autograd.grad(loss, logps)[0]
        return run

    def empty_completion(m):
        logps, old, adv, mask = clip_batch()
        mask[2] = 0
        return m.dapo_loss(logps, old, adv, mask), m.clip_fractions(logps, old, adv, mask)

    return [
        Case("overlong penalty and rewards on the statement's lengths", "visible", penalties,
             label={"zh": "题目长度上的超长惩罚与奖励"}),
        Case("which of the statement's four groups are kept", "visible", spec_groups,
             label={"zh": "题目中的四组里哪些被保留"},
             note={"en": "Eight right answers with the same length penalty all get 0.7: their advantages are all 0, "
                         "so the group is dropped like the all-right and the all-wrong ones.",
                   "zh": "8 个受同样长度惩罚的正确回答都得到 0.7：它们的优势全是 0，所以这组和全对、全错的组一样被丢掉。"}),
        Case("one group of eight equal rewards, 1.0 + (-0.3)", "edge", one_group_of_equal_rewards,
             label={"zh": "一组 8 个相等的奖励：1.0 + (-0.3)"},
             note={"en": "Eight rewards of 0.7 are equal, yet float32's std of this [1, 8] row is 6.4e-8, not 0: "
                         "a test std > 0 keeps the group, and z-scoring turns that rounding noise into advantages "
                         "of order 1e-4. Compare the largest and the smallest reward.",
                   "zh": "8 个 0.7 的奖励完全相等，但这个 [1, 8] 行在 float32 下的 std 是 6.4e-8，不是 0：用 std > 0 "
                         "判断会保留这一组，标准化又把舍入误差变成 1e-4 量级的优势。应比较最大和最小的奖励。"}),
        Case("decoupled clip on the statement's two completions: loss, gradient, clip fractions", "visible",
             spec_clip, label={"zh": "题目中两个回答上的解耦裁剪：损失、梯度与裁剪比例"},
             note={"en": "With A > 0 a ratio of 1.25 is inside [0.8, 1.28] and keeps its gradient; 1.3 is clipped. "
                         "With A < 0 the lower bound stays at 0.8: ratios 0.75 and 0.7 are clipped.",
                   "zh": "A > 0 时比率 1.25 仍在 [0.8, 1.28] 内，保留梯度；1.3 被裁剪。A < 0 时下界仍是 0.8："
                         "比率 0.75 和 0.7 都被裁剪。"}),
        Case("overlong penalty on random lengths (L_cache 15, and 1)", "hidden", random_penalties,
             label={"zh": "随机长度上的超长惩罚（L_cache 为 15 和 1）"}),
        Case("rewards and kept groups on a random batch", "hidden", random_groups,
             label={"zh": "随机批次上的奖励与保留的组"}),
        Case("loss and gradient with ratios in both clip bands, unequal lengths", "hidden", clip_bands,
             label={"zh": "比率落在两个裁剪区间内、长度不等时的损失与梯度"}),
        Case("other clip ranges (0.1, 0.35)", "hidden", other_epsilons, label={"zh": "其他裁剪范围（0.1、0.35）"}),
        Case("clip fractions on a random batch", "hidden", fractions, label={"zh": "随机批次上的裁剪比例"}),
        Case("a 2-token right answer and a 12-token wrong one: loss and gradient", "hidden", unequal_lengths,
             label={"zh": "2 个 token 的正确回答与 12 个 token 的错误回答：损失与梯度"},
             note={"en": "DAPO's token-level mean weighs every token alike; a per-sequence mean gives each of the "
                         "2 tokens 6 times the weight of one of the 12.",
                   "zh": "DAPO 的 token 级平均对每个 token 一视同仁；按序列平均时，2 个 token 的回答里每个 token 的权重"
                         "是 12 个 token 的回答里的 6 倍。"}),
        Case("a batch of 5 groups, 2 with equal rewards: loss and gradient", "hidden",
             batch(14, 5, 4, 6, [(1, 0.5), (3, -1.0)]), label={"zh": "5 组中 2 组奖励全相等的批次：损失与梯度"},
             note={"en": "Rows are group-major: group p owns rows p*G .. p*G+G-1, so a kept-group mask [P] becomes a "
                         "row mask by repeating each entry G times in place (repeat_interleave), not by tiling it.",
                   "zh": "行按组排列：第 p 组占第 p*G 到 p*G+G-1 行，所以 [P] 的保留掩码要把每个元素原地重复 G 次"
                         "（repeat_interleave）才变成行掩码，而不是整体平铺。"}),
        Case("a batch where only the last group is informative", "edge", batch(15, 3, 3, 5, [(0, 1.0), (1, -1.0)]),
             label={"zh": "只有最后一组有信息的批次"}),
        Case("a completion with no tokens", "edge", empty_completion, label={"zh": "一个没有 token 的回答"},
             note={"en": "Its tokens are all padding: they count neither in the sum nor in the token count.",
                   "zh": "它的位置全是 padding：既不计入求和，也不计入 token 数。"}),
    ]
