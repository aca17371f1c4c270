"""Cases for gae: the spec's two completions, random padded batches with discounting, the gradient of
the advantages with respect to the values, lam = 0 and lam = 1, one-token completions."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_inputs():
        rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [-0.1, 0.5, 0.0, 0.0]])
        values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [0.2, 0.3, 9.0, 9.0]])
        mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
        return rewards, values, mask

    def spec(gamma, lam):
        def run(m):
            return m.gae(*spec_inputs(), gamma, lam)
        return run

    def batch(seed, B, T, *, left_pad=False, min_len=1):
        g = torch.Generator().manual_seed(seed)
        rewards = torch.randn(B, T, generator=g)
        values = torch.randn(B, T, generator=g)
        lengths = torch.randint(min_len, T + 1, (B,), generator=g)
        pos = torch.arange(T).expand(B, T)
        mask = ((pos >= T - lengths[:, None]) if left_pad else (pos < lengths[:, None])).float()
        values = values + (1 - mask) * 5.0  # garbage on padding
        return rewards, values, mask

    def random_case(seed, B, T, gamma, lam, left_pad=False):
        def run(m):
            return m.gae(*batch(seed, B, T, left_pad=left_pad), gamma, lam)
        return run

    def value_gradient(m):
        # the advantages are linear in the values: d sum(A) / d V shows each value's coefficient
        rewards, values, mask = batch(6, 3, 6)
        values = values.requires_grad_(True)
        advantages, returns = m.gae(rewards, values, mask, 0.9, 0.8)
        return torch.autograd.grad(advantages.sum(), values, retain_graph=True)[0], \
            torch.autograd.grad(returns.sum(), values)[0]

    def one_token(m):
        rewards = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
        values = torch.tensor([[0.5, 3.0, 3.0], [3.0, 3.0, 0.25]])
        mask = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        return m.gae(rewards, values, mask, 0.99, 0.95)

    return [
        Case("spec data, gamma 1, lam 0.95", "visible", spec(1.0, 0.95), label={"zh": "题目数据，gamma 1，lam 0.95"}),
        Case("spec data, gamma 1, lam 0.5", "visible", spec(1.0, 0.5), label={"zh": "题目数据，gamma 1，lam 0.5"}),
        Case("B=4, T=9, gamma 0.99, lam 0.95", "hidden", random_case(1, 4, 9, 0.99, 0.95),
             label={"zh": "B=4, T=9，gamma 0.99，lam 0.95"}),
        Case("B=5, T=6, left padding, gamma 0.9, lam 0.8", "hidden", random_case(2, 5, 6, 0.9, 0.8, left_pad=True),
             label={"zh": "B=5, T=6，左侧 padding，gamma 0.9，lam 0.8"}),
        Case("gradient of the advantages and returns w.r.t. the values", "hidden", value_gradient,
             label={"zh": "优势与回报对 values 的梯度"}),
        Case("lam = 1: returns are the rewards-to-go", "edge", random_case(3, 3, 7, 1.0, 1.0),
             label={"zh": "lam = 1：回报就是剩余奖励之和"}),
        Case("lam = 0: one-step TD errors", "edge", random_case(4, 3, 7, 0.95, 0.0),
             label={"zh": "lam = 0：一步 TD 误差"}),
        Case("one-token completions, left and right padded", "edge", one_token,
             label={"zh": "只有一个 token 的回答，左右两种 padding"}, note={
            "en": "After the last real token there is nothing to bootstrap from: V = 0 there, even if the "
                  "padding position holds a value.",
            "zh": "最后一个真实 token 之后没有可以自举（bootstrap）的状态：即使 padding 位置上有值，那里的 V 也是 0。"}),
    ]
