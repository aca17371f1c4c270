"""Cases for the ipo exercise: the statement's pairs, the gradient along the margin (IPO stops at
1/(2 beta), DPO never does), random batches of unequal lengths, invariance to length, gradients, and
an empty completion."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec(m):
        return m.ipo_loss(torch.tensor([-6.0, -60.0]), torch.tensor([-9.0, -90.0]), torch.tensor([-8.0, -80.0]),
                          torch.tensor([-8.0, -80.0]), torch.tensor([4, 40]), torch.tensor([4, 40]))

    def random_batch(seed, B, beta=None):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            chosen_len = torch.randint(1, 60, (B,), generator=g)
            rejected_len = torch.randint(1, 60, (B,), generator=g)
            pc = -torch.rand(B, generator=g) * 3 * chosen_len  # per-token log-probs in [-3, 0], summed
            rc = -torch.rand(B, generator=g) * 3 * chosen_len
            pr = -torch.rand(B, generator=g) * 3 * rejected_len
            rr = -torch.rand(B, generator=g) * 3 * rejected_len
            if beta is None:
                return m.ipo_loss(pc, pr, rc, rr, chosen_len, rejected_len)
            return m.ipo_loss(pc, pr, rc, rr, chosen_len, rejected_len, beta=beta)
        return run

    def margin_gradients(m):
        # one pair of 1-token answers with margin h: the gradient of the loss along h, beta 0.1 (target 5)
        out = []
        for h in (0.0, 2.5, 5.0, 20.0, 100.0):
            x = torch.tensor([h], requires_grad=True)
            zero, one = torch.zeros(1), torch.ones(1)
            out.append(torch.autograd.grad(m.ipo_loss(x, zero, zero, zero, one, one, beta=0.1), x)[0])
        return torch.cat(out)

    def length_invariance(m):
        # the same per-token log-ratios on answers 10 times longer: IPO's loss must not change
        pc, pr, rc, rr = torch.tensor([-5.0, -2.0]), torch.tensor([-6.0, -4.0]), torch.tensor([-5.5, -2.5]), torch.tensor([-5.0, -3.0])
        cl, rl = torch.tensor([5, 2]), torch.tensor([3, 4])
        return (m.ipo_loss(pc, pr, rc, rr, cl, rl, beta=0.2),
                m.ipo_loss(10 * pc, 10 * pr, 10 * rc, 10 * rr, 10 * cl, 10 * rl, beta=0.2))

    def gradient(m):
        g = torch.Generator().manual_seed(11)
        cl, rl = torch.randint(1, 30, (5,), generator=g), torch.randint(1, 30, (5,), generator=g)
        pc = (-torch.rand(5, generator=g) * 2 * cl).requires_grad_()
        pr = (-torch.rand(5, generator=g) * 2 * rl).requires_grad_()
        rc, rr = -torch.rand(5, generator=g) * 2 * cl, -torch.rand(5, generator=g) * 2 * rl
        return torch.autograd.grad(m.ipo_loss(pc, pr, rc, rr, cl, rl, beta=0.3), (pc, pr))

    def empty_completion(m):
        # pair 0 has an empty chosen answer, pair 2 an empty rejected one: their log-probs sum to 0
        pc, pr = torch.tensor([0.0, -12.0, -7.0]), torch.tensor([-5.0, -15.0, 0.0])
        rc, rr = torch.tensor([0.0, -13.0, -8.0]), torch.tensor([-4.0, -14.0, 0.0])
        return m.ipo_loss(pc, pr, rc, rr, torch.tensor([0, 6, 3]), torch.tensor([2, 5, 0]), beta=0.25)

    return [
        Case("the statement's two pairs (beta 0.1)", "visible", spec, label={"zh": "题目中的两对样本（beta 0.1）"}),
        Case("gradient along the margin h = 0, 2.5, 5, 20, 100", "visible", margin_gradients,
             label={"zh": "沿 margin h = 0、2.5、5、20、100 的梯度"},
             note={"en": "IPO's gradient is 2 (h - 1/(2 beta)): zero at the target 5 and positive beyond it, so a "
                         "margin that overshoots is pulled back. DPO's gradient only shrinks toward 0 and never changes sign.",
                   "zh": "IPO 的梯度是 2 (h - 1/(2 beta))：在目标值 5 处为 0，超过后变为正，margin 过头会被拉回来。"
                         "DPO 的梯度只会趋近 0，永远不会变号。"}),
        Case("random batch of 8, unequal lengths, beta 0.1", "hidden", random_batch(1, 8, 0.1),
             label={"zh": "8 对随机样本，长度不等，beta 0.1"}),
        Case("random batch of 3, beta 0.5", "hidden", random_batch(2, 3, 0.5), label={"zh": "3 对随机样本，beta 0.5"}),
        Case("default beta is 0.1", "hidden", random_batch(3, 4), label={"zh": "beta 默认为 0.1"}),
        Case("same per-token log-ratios, answers 10 times longer", "hidden", length_invariance,
             label={"zh": "每个 token 的对数比相同，回答长 10 倍"},
             note={"en": "With summed log-ratios the margin grows with the length, so the same beta means a different "
                         "regularisation for long answers (huggingface/trl PR #1265). Averaged per token, the loss is the same.",
                   "zh": "用求和的 log-ratio 时 margin 随长度增长，同一个 beta 对长回答意味着不同的正则强度"
                         "（huggingface/trl PR #1265）。按 token 平均后，损失不变。"}),
        Case("gradient w.r.t. the policy log-probs", "hidden", gradient, label={"zh": "对策略对数概率的梯度"}),
        Case("an empty completion (0 tokens)", "edge", empty_completion, label={"zh": "空回答（0 个 token）"},
             note={"en": "A completion truncated to 0 tokens has a summed log-ratio of 0; dividing by 0 gives NaN. "
                         "Clamp the token count to at least 1, as TRL does.",
                   "zh": "被截断到 0 个 token 的回答，其 log-ratio 之和为 0；除以 0 得到 NaN。像 TRL 那样把 token 数 clamp 到至少 1。"}),
    ]
