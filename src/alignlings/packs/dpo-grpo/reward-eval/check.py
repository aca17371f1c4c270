"""Cases for reward-eval: the spec's synthetic world (accuracy, best-of-N gains for several N), random
pairs, group layouts, the best-of-N KL, ties from a constant reward model."""

from alignlings.content.checks import Case


def cases():
    import torch

    def world(seed, M):
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(M, generator=g)
        h = (-torch.log(torch.rand(M, generator=g))) ** 2
        gold, proxy = q - 0.1 * h, q + 0.1 * h
        a, b = torch.randperm(M, generator=g)[: M // 4 * 2].view(2, -1)
        chosen = torch.where(gold[a] > gold[b], a, b)
        rejected = torch.where(gold[a] > gold[b], b, a)
        return proxy, gold, chosen, rejected

    def spec_accuracy(m):
        proxy, _, chosen, rejected = world(0, 1 << 12)
        return m.reward_accuracy(proxy[chosen], proxy[rejected])

    def spec_gains(m):
        proxy, gold, _, _ = world(0, 1 << 12)
        return [m.best_of_n_gains(proxy, gold, n) for n in (1, 2, 8, 64)]

    def random_pairs(seed, B):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            return m.reward_accuracy(torch.randn(B, generator=g), torch.randn(B, generator=g) + 0.3)
        return run

    def layout(m):
        rewards = torch.tensor([0.1, 0.9, 0.3, 5.0, 0.0, 0.2, -1.0, -3.0, -0.5])
        return m.best_of_n(rewards, 3)

    def selection(seed, P, N):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            return m.best_of_n(torch.randn(P * N, generator=g), N)
        return run

    def kl_values(m):
        return [float(m.best_of_n_kl(n)) for n in (1, 2, 3, 4, 16, 256)]

    def constant_model(m):
        # a reward model that outputs the same number for everything
        return m.reward_accuracy(torch.full((6,), 0.7), torch.full((6,), 0.7))

    return [
        Case("spec world: accuracy and margin of the proxy on held-out pairs", "visible", spec_accuracy,
             label={"zh": "题目中的设定：代理奖励模型在留出对上的准确率与 margin"}),
        Case("spec world: best-of-N gains (proxy, gold) for N = 1, 2, 8, 64", "visible", spec_gains,
             label={"zh": "题目中的设定：N = 1, 2, 8, 64 时 best-of-N 的增益（代理、真实）"}),
        Case("best-of-N KL for N = 1, 2, 3, 4, 16, 256", "visible", kl_values,
             label={"zh": "N = 1, 2, 3, 4, 16, 256 时 best-of-N 的 KL"}),
        Case("100 random pairs", "hidden", random_pairs(1, 100), label={"zh": "100 个随机对"}),
        Case("P = N = 3: which samples form a group", "hidden", layout, label={"zh": "P = N = 3：哪些样本属于同一组"}),
        Case("P=7, N=5: flat indices of the selected samples", "hidden", selection(2, 7, 5),
             label={"zh": "P=7, N=5：被选中样本的扁平下标"}),
        Case("a constant reward model (every pair tied)", "edge", constant_model,
             label={"zh": "一个输出恒定的奖励模型（每一对都打平）"}, note={
            "en": "A model that says nothing must not score 100%: a tie is not a correct preference.",
            "zh": "什么都没学到的模型不能得到 100%：打平不算正确的偏好。"}),
    ]
