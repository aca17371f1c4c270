from alignlings.content.checks import Case


def cases():
    import torch

    def loss_and_grad(m, logp, old, ref, adv, mask, beta):
        logp = logp.clone().requires_grad_()
        loss = m.grpo_loss(logp, old, ref, adv, mask, beta=beta)
        (grad,) = torch.autograd.grad(loss, logp)
        return [loss.detach(), grad]

    def symptom(m):
        # pi_theta = 0.01, pi_old = 0.02, pi_ref = 0.5; advantage 0 so only the KL term acts
        t = lambda p: torch.tensor([[p]]).log()
        return loss_and_grad(m, t(0.01), t(0.02), t(0.5), torch.zeros(1), torch.ones(1, 1), 1.0)

    def random_off_policy(m):
        g = torch.Generator().manual_seed(41)
        old = -torch.rand(3, 5, generator=g) * 3
        logp = old + 0.5 * torch.randn(3, 5, generator=g)  # a few updates away from pi_old
        ref = old + 0.5 * torch.randn(3, 5, generator=g)
        adv = torch.randn(3, generator=g)
        mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
        return loss_and_grad(m, logp, old, ref, adv, mask, 0.04)

    def on_policy(m):
        g = torch.Generator().manual_seed(42)
        logp = -torch.rand(2, 4, generator=g) * 3
        ref = logp + 0.3 * torch.randn(2, 4, generator=g)
        return loss_and_grad(m, logp, logp.clone(), ref, torch.tensor([1.0, -1.0]), torch.ones(2, 4), 0.1)

    def no_kl(m):
        g = torch.Generator().manual_seed(43)
        old = -torch.rand(2, 6, generator=g) * 2
        logp = old + 0.3 * torch.randn(2, 6, generator=g)
        return loss_and_grad(m, logp, old, old.clone(), torch.tensor([0.5, -1.5]), torch.ones(2, 6), 0.0)

    return [
        Case("a token the policy made unlikely (pi 0.01, pi_old 0.02, pi_ref 0.5)", "visible", symptom,
             label={"zh": "策略已把概率压低的 token（pi 0.01, pi_old 0.02, pi_ref 0.5）"},
             note={"en": "loss and d loss / d log pi: the gradient of the reverse KL, KL(pi || pi_ref), is r * (log pi - log pi_ref) = 0.5 * ln(0.02) = -1.96; "
                         "un-weighted k3 gives 1 - pi_ref / pi = -49",
                   "zh": "损失与 d loss / d log pi：反向 KL（KL(pi || pi_ref)）的梯度是 r * (log pi - log pi_ref) = 0.5 * ln(0.02) = -1.96；"
                         "不加权的 k3 给出 1 - pi_ref / pi = -49"}),
        Case("off-policy batch, 3 x 5 with padding", "hidden", random_off_policy, label={"zh": "off-policy 批次，3 × 5，带 padding"}),
        Case("on-policy (first update: pi_old = pi_theta)", "edge", on_policy, label={"zh": "on-policy（第一次更新：pi_old = pi_theta）"},
             note={"en": "the ratio's value is 1 here, but its gradient is not 0: the weight changes the KL gradient even on-policy",
                   "zh": "这里 ratio 的值是 1，但它的梯度不为 0：即使 on-policy，这个权重也会改变 KL 的梯度"}),
        Case("beta = 0 (no KL term)", "edge", no_kl, label={"zh": "beta = 0（没有 KL 项）"}),
    ]
