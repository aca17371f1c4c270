"""Cases for the dpo-loss exercise: the spec's batch, random batches and betas, an underflow edge case."""

from alignlings.content.checks import Case, fresh


def cases():
    import torch

    def spec(m):
        return m.dpo_loss(
            torch.tensor([-23.41, -9.85, -17.62, -12.07]),
            torch.tensor([-25.30, -8.71, -16.94, -13.85]),
            torch.tensor([-22.96, -10.12, -17.40, -12.45]),
            torch.tensor([-23.88, -9.04, -16.71, -12.30]),
            beta=0.1,
        )

    def random_batch(seed, batch, beta):
        def run(m):
            g = torch.Generator().manual_seed(fresh(seed))
            logps = [-(torch.rand(batch, generator=g) * 40 + 1) for _ in range(4)]
            return m.dpo_loss(*logps, beta=beta)
        return run

    def default_beta(m):
        g = torch.Generator().manual_seed(7)
        logps = [-(torch.rand(6, generator=g) * 30) for _ in range(4)]
        return m.dpo_loss(*logps)

    def gradient(m):
        g = torch.Generator().manual_seed(11)
        pc, pr = (-(torch.rand(5, generator=g) * 20)).requires_grad_(), (-(torch.rand(5, generator=g) * 20)).requires_grad_()
        rc, rr = -(torch.rand(5, generator=g) * 20), -(torch.rand(5, generator=g) * 20)
        m.dpo_loss(pc, pr, rc, rr, beta=0.5).backward()
        return pc.grad, pr.grad

    def underflow(m):
        # the policy strongly prefers the rejected answer: margin = 0.1 * (-1e4) = -1000
        pc = torch.tensor([-1e4, -5e3, -20.0])
        pr = torch.tensor([-1.0, -2.0, -25.0])
        ref = torch.tensor([-3.0, -3.0, -22.0])
        return m.dpo_loss(pc, pr, ref, ref, beta=0.1)

    return [
        Case("spec batch (beta 0.1)", "visible", spec, label={"zh": "题目批次（beta 0.1）"}),
        Case("default beta is 0.1", "hidden", default_beta, label={"zh": "beta 默认为 0.1"}),
        Case("random batch of 8, beta 0.1", "hidden", random_batch(1, 8, 0.1), label={"zh": "8 对的随机批次，beta 0.1"}),
        Case("random batch of 3, beta 0.5", "hidden", random_batch(2, 3, 0.5), label={"zh": "3 对的随机批次，beta 0.5"}),
        Case("batch of 1, beta 2.0", "hidden", random_batch(3, 1, 2.0), label={"zh": "1 对的批次，beta 2.0"}),
        Case("gradient w.r.t. the policy log-probs", "hidden", gradient, label={"zh": "对策略对数概率的梯度"}),
        Case("very negative margins", "edge", underflow, label={"zh": "极负的 margin"}, note={
            "en": "With margins near -1000, sigmoid(margin) underflows to 0 in float32 and log(0) = -inf; "
                  "F.logsigmoid (or -F.softplus(-margin)) computes the same quantity stably.",
            "zh": "当 margin 接近 -1000 时，float32 中 sigmoid(margin) 下溢为 0，log(0) = -inf；"
                  "F.logsigmoid（或 -F.softplus(-margin)）以数值稳定的方式计算同一个量。",
        }),
    ]
