from alignlings.content.checks import Case


def cases():
    import torch

    def pairs(seed, b, T, min_len=1):
        g = torch.Generator().manual_seed(seed)
        logps = [-torch.rand(b, T, generator=g) * 4 for _ in range(4)]
        masks = []
        for _ in range(2):
            lengths = torch.randint(min_len, T + 1, (b, 1), generator=g)
            masks.append((torch.arange(T)[None] < lengths).float())
        return logps, masks

    def symptom(m):
        out = []
        for T in (4, 40):
            # the same preference per token: +0.05 nats on each chosen token, -0.05 on each rejected one
            ref = torch.full((1, T), -2.0)
            mask = torch.ones(1, T)
            out.append(m.preference_loss(ref + 0.05, ref - 0.05, ref, ref, mask, mask, beta=0.1, loss_type="ipo"))
        return torch.stack(out)

    def ipo_random(m):
        (pc, pr, rc, rr), (cm, rm) = pairs(1, 6, 12)
        return m.preference_loss(pc, pr, rc, rr, cm, rm, beta=0.5, loss_type="ipo")

    def ipo_gradient(m):
        (pc, pr, rc, rr), (cm, rm) = pairs(2, 4, 9)
        pc = pc.clone().requires_grad_(True)
        loss = m.preference_loss(pc, pr, rc, rr, cm, rm, beta=0.1, loss_type="ipo")
        (grad,) = torch.autograd.grad(loss, pc)
        return grad

    def dpo_unchanged(m):
        (pc, pr, rc, rr), (cm, rm) = pairs(3, 5, 10)
        return m.preference_loss(pc, pr, rc, rr, cm, rm, beta=0.1, loss_type="sigmoid")

    def empty_completion(m):
        (pc, pr, rc, rr), (cm, rm) = pairs(4, 3, 6)
        rm[0] = 0.0  # a rejected completion truncated away by max_length
        return m.preference_loss(pc, pr, rc, rr, cm, rm, beta=0.1, loss_type="ipo")

    return [
        Case("IPO, same per-token preference at 4 and 40 tokens", "visible", symptom,
             label={"zh": "IPO：4 个 token 和 40 个 token，逐 token 偏好相同"},
             note={"en": "the same per-token preference must give the same IPO loss at any length",
                   "zh": "逐 token 的偏好相同时，无论多长，IPO 损失都应相同"}),
        Case("IPO on random pairs of unequal lengths", "hidden", ipo_random, label={"zh": "长度不等的随机偏好对上的 IPO"}),
        Case("IPO gradient per chosen token", "hidden", ipo_gradient, label={"zh": "IPO 对每个 chosen token 的梯度"}),
        Case("DPO (sigmoid) is unchanged", "hidden", dpo_unchanged, label={"zh": "DPO（sigmoid）保持不变"},
             note={"en": "DPO is defined on sequence log-probs: its sums stay sums",
                   "zh": "DPO 是在序列 log-prob 上定义的：求和仍是求和"}),
        Case("a rejected completion truncated to nothing", "edge", empty_completion,
             label={"zh": "被截断成空的 rejected completion"},
             note={"en": "an empty completion must not divide by zero (TRL clamps the count at 1)",
                   "zh": "空的 completion 不能除以 0（TRL 把 token 数 clamp 到至少 1）"}),
    ]
