"""Cases for the kto exercise: the mismatched KL pairs, z_0 (detached, clamped), the statement's
batch, random unbalanced batches with weights, gradients, and the recommended weight ratio."""

from alignlings.content.checks import Case


def cases():
    import torch

    LABELS = torch.tensor([True, True, True, True, False, False])
    POLICY = torch.tensor([-10.0, -12.0, -8.0, -15.0, -11.0, -9.0])
    REF = torch.tensor([-11.0, -12.5, -9.0, -14.0, -10.0, -9.5])
    POLICY_KL = torch.tensor([-20.0, -18.0, -25.0, -22.0, -19.0, -21.0])
    REF_KL = torch.tensor([-20.5, -18.2, -25.1, -22.4, -19.0, -21.6])

    def batch(seed, N, p_desirable=0.7, kl_shift=0.3):
        g = torch.Generator().manual_seed(seed)
        labels = torch.rand(N, generator=g) < p_desirable
        labels[0], labels[-1] = True, False  # both kinds present
        ref = -torch.rand(N, generator=g) * 30 - 5
        policy = ref + torch.randn(N, generator=g) * 3
        ref_kl = -torch.rand(N, generator=g) * 30 - 5
        policy_kl = ref_kl + torch.randn(N, generator=g) + kl_shift
        return policy, ref, labels, policy_kl, ref_kl

    def rotations(m):
        return (m.mismatched(["y1", "y2", "y3", "y4", "y5"]), m.mismatched([3, 1, 4]), m.mismatched(["a", "b"]))

    def spec(m):
        return (m.kl_baseline(POLICY_KL, REF_KL), m.kto_loss(POLICY, REF, LABELS, POLICY_KL, REF_KL),
                m.kto_loss(POLICY, REF, LABELS, POLICY_KL, REF_KL, beta=0.5, undesirable_weight=2.0))

    def random_batch(seed, N, beta, w_d, w_u):
        def run(m):
            policy, ref, labels, policy_kl, ref_kl = batch(seed, N)
            return m.kto_loss(policy, ref, labels, policy_kl, ref_kl, beta=beta, desirable_weight=w_d,
                              undesirable_weight=w_u)
        return run

    def defaults(m):
        return m.kto_loss(*batch(3, 7))

    def negative_kl(m):
        # the mismatched pairs are *less* likely under the policy than under the reference: the estimate is negative
        policy, ref, labels, policy_kl, ref_kl = batch(4, 6, kl_shift=-2.0)
        return m.kl_baseline(policy_kl, ref_kl), m.kto_loss(policy, ref, labels, policy_kl, ref_kl, beta=0.3)

    def gradient(m):
        # the KL pairs come from the same policy as the examples: theta holds both sets of log-probs
        policy, ref, labels, policy_kl, ref_kl = batch(5, 8)
        theta = torch.cat([policy, policy_kl]).requires_grad_()
        loss = m.kto_loss(theta[:8], ref, labels, theta[8:], ref_kl, beta=0.4, undesirable_weight=1.5)
        return torch.autograd.grad(loss, theta)[0]

    def ratios(m):
        return [m.weight_ratio(LABELS, 1.0, w) for w in (1.0, 1.5, 2.0)] + [m.weight_ratio(~LABELS, 1.33, 0.5)]

    return [
        Case("mismatched completions for 5, 3 and 2 examples", "visible", rotations,
             label={"zh": "5、3、2 个样本的错配回答"},
             note={"en": "Every prompt must meet another example's completion: TRL rotates the batch by one, "
                         "(x_1, y_n), (x_2, y_1), ..., (x_n, y_{n-1}).",
                   "zh": "每个 prompt 都要配上另一个样本的回答：TRL 把批次轮转一位，(x_1, y_n)、(x_2, y_1)、...、(x_n, y_{n-1})。"}),
        Case("the statement's batch: z_0 and the loss (beta 0.1; beta 0.5 with undesirable_weight 2)", "visible", spec,
             label={"zh": "题目的批次：z_0 与损失（beta 0.1；beta 0.5 且 undesirable_weight 为 2）"}),
        Case("lambda_D n_D / (lambda_U n_U) for the statement's labels", "visible", ratios,
             label={"zh": "题目标签下的 lambda_D n_D / (lambda_U n_U)"}),
        Case("random batch of 10, beta 0.1, weights 1 and 1", "hidden", random_batch(1, 10, 0.1, 1.0, 1.0),
             label={"zh": "10 个随机样本，beta 0.1，权重 1 和 1"}),
        Case("random batch of 9, beta 0.5, undesirable_weight 2.5", "hidden", random_batch(2, 9, 0.5, 1.0, 2.5),
             label={"zh": "9 个随机样本，beta 0.5，undesirable_weight 2.5"}),
        Case("defaults: beta 0.1, weights 1.0", "hidden", defaults, label={"zh": "默认值：beta 0.1，权重 1.0"}),
        Case("gradient: none through z_0", "hidden", gradient, label={"zh": "梯度：不经过 z_0"},
             note={"en": "z_0 is a reference point: the gradient w.r.t. the mismatched pairs' log-probs must be 0 "
                         "(the paper does not back-propagate through the KL term; TRL detaches it).",
                   "zh": "z_0 是参考点：对错配样本对数概率的梯度必须为 0（论文不对 KL 项反向传播；TRL 对它 detach）。"}),
        Case("a negative KL estimate", "edge", negative_kl, label={"zh": "KL 估计为负"},
             note={"en": "The Monte-Carlo estimate can come out negative; a KL divergence cannot, so z_0 is clamped at 0.",
                   "zh": "蒙特卡洛估计可能为负，而 KL 散度不可能为负，所以 z_0 要 clamp 到 0。"}),
    ]
