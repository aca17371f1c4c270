"""Cases for kl-estimators: the spec's vocabulary, exact expectations and their gradients, random
batches, samples from pi_old, log-probs near -200 and the on-policy ratio's gradient."""

from alignlings.content.checks import Case


def cases():
    import torch

    def vocab():
        theta = torch.tensor([1.0, 0.5, 0.0, -0.5, -1.0], requires_grad=True)
        ref_logp = torch.log_softmax(torch.tensor([0.2, 0.4, 0.0, -0.1, -0.6]), dim=-1)
        old_logp = torch.log_softmax(torch.tensor([0.6, 0.6, 0.1, -0.3, -0.8]), dim=-1)
        return theta, ref_logp, old_logp

    def spec(m):
        theta, ref_logp, _ = vocab()
        k1, k2, k3 = m.kl_estimators(torch.log_softmax(theta, dim=-1).detach(), ref_logp)
        return k1, k2, k3

    def exact_gradients(m):
        # E_{x ~ pi_theta}[k(x)] as an exact sum; the sampling weights are not differentiated
        theta, ref_logp, _ = vocab()
        logp = torch.log_softmax(theta, dim=-1)
        p = logp.exp().detach()
        out = []
        for k in m.kl_estimators(logp, ref_logp):
            expectation = (p * k).sum()
            out += [expectation, torch.autograd.grad(expectation, theta, retain_graph=True)[0]]
        return out

    def exact_off_policy(m):
        theta, ref_logp, old_logp = vocab()
        logp = torch.log_softmax(theta, dim=-1)
        expectation = (old_logp.exp() * m.k3_from_old_samples(logp, old_logp, ref_logp)).sum()
        return expectation, torch.autograd.grad(expectation, theta)[0]

    def random_logps(seed, B, T, spread):
        g = torch.Generator().manual_seed(seed)
        base = -(torch.rand(B, T, generator=g) * 5 + 0.05)
        logp = base + torch.randn(B, T, generator=g) * spread
        old = base + torch.randn(B, T, generator=g) * spread
        ref = base + torch.randn(B, T, generator=g) * spread
        return logp, old, ref

    def random_estimators(seed, B, T, spread=0.5):
        def run(m):
            logp, _, ref = random_logps(seed, B, T, spread)
            logp.requires_grad_(True)
            ks = m.kl_estimators(logp, ref)
            grads = [torch.autograd.grad(k.sum(), logp, retain_graph=True)[0] for k in ks]
            return list(ks) + grads
        return run

    def random_off_policy(seed, B, T, spread=0.5):
        def run(m):
            logp, old, ref = random_logps(seed, B, T, spread)
            logp.requires_grad_(True)
            out = m.k3_from_old_samples(logp, old, ref)
            return out, torch.autograd.grad(out.sum(), logp)[0]
        return run

    def deep(m):
        logp, old, ref = random_logps(7, 3, 6, 0.3)
        logp, old, ref = logp - 200, old - 200, ref - 200
        logp.requires_grad_(True)
        k1, k2, k3 = m.kl_estimators(logp, ref)
        weighted = m.k3_from_old_samples(logp, old, ref)
        return k1, k2, k3, weighted, torch.autograd.grad(weighted.sum(), logp)[0]

    def on_policy_gradient(m):
        # old == current: the ratio is exactly 1, but d ratio / d logp = 1 still shapes the gradient
        logp, _, ref = random_logps(11, 2, 5, 0.5)
        logp.requires_grad_(True)
        out = m.k3_from_old_samples(logp, logp.detach(), ref)
        return out, torch.autograd.grad(out.sum(), logp)[0]

    def equal_policies(m):
        logp, _, _ = random_logps(3, 2, 4, 0.0)
        return list(m.kl_estimators(logp, logp.clone()))

    return [
        Case("spec data: k1, k2, k3 on the 5-token vocabulary", "visible", spec,
             label={"zh": "题目数据：5 个 token 的词表上的 k1、k2、k3"}),
        Case("exact E[k] and d E[k] / d theta on the 5-token vocabulary", "visible", exact_gradients,
             label={"zh": "5 个 token 的词表上精确的 E[k] 与 d E[k] / d theta"},
             note={"en": "The gradient of E[k2] equals that of KL(pi || ref), the gradient of E[k3] that of "
                         "KL(ref || pi), and the gradient of E[k1] is 0: see the explanation.",
                   "zh": "E[k2] 的梯度等于 KL(pi || ref) 的梯度，E[k3] 的梯度等于 KL(ref || pi) 的梯度，"
                         "E[k1] 的梯度为 0，详见讲解。"}),
        Case("samples from pi_old: exact E_old[ratio * k3] and its gradient", "visible", exact_off_policy,
             label={"zh": "从 pi_old 采样：精确的 E_old[ratio * k3] 及其梯度"}),
        Case("B=4, T=9: values and per-token gradients", "hidden", random_estimators(1, 4, 9),
             label={"zh": "B=4, T=9：取值与逐 token 梯度"}),
        Case("B=3, T=3, far-apart policies", "hidden", random_estimators(2, 3, 3, spread=2.0),
             label={"zh": "B=3, T=3，两个策略相差很远"}),
        Case("B=5, T=7 from pi_old: ratio * k3 and its gradient", "hidden", random_off_policy(4, 5, 7),
             label={"zh": "B=5, T=7，从 pi_old 采样：ratio * k3 及其梯度"}),
        Case("log-probs near -200", "edge", deep, label={"zh": "对数概率接近 -200"}, note={
            "en": "exp(-200) underflows to 0 in float32, so a quotient of probabilities is 0 / 0 = NaN. "
                  "Work with the difference of log-probs.",
            "zh": "float32 中 exp(-200) 下溢为 0，概率相除就成了 0 / 0 = NaN。请用对数概率之差计算。"}),
        Case("on-policy (old == current): ratio 1, gradient through it", "edge", on_policy_gradient,
             label={"zh": "on-policy（old 与当前策略相同）：比率为 1，但梯度要穿过它"}, note={
            "en": "The ratio's value is 1 here, but its gradient is not 0: it adds k3 * d log pi to the "
                  "gradient, which is what makes the gradient follow KL(pi || ref). Do not detach it.",
            "zh": "这里比率的值是 1，但它的梯度不是 0：它给梯度加上 k3 * d log pi，正是这一项让梯度对应 "
                  "KL(pi || ref)。不要 detach 它。"}),
        Case("pi == ref: every estimator is 0", "edge", equal_policies,
             label={"zh": "pi == ref：所有估计量都为 0"}),
    ]
