"""Cases for the grpo-loss exercise: the spec's data, gradients, other shapes, log-probs near -200."""

from alignlings.content.checks import Case, fresh


def cases():
    import torch
    import torch.nn.functional as F

    def spec_inputs():
        torch.manual_seed(42)
        G, T, V = 4, 8, 50
        logits = torch.randn(G, T, V)
        old_logits = torch.randn(G, T, V)
        ref_logits = torch.randn(G, T, V)
        token_ids = torch.randint(0, V, (G, T))

        def token_logprobs(x):
            return F.log_softmax(x, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)

        rewards = torch.tensor([0.7, 0.2, 0.4, 0.85])
        advantage = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        return token_logprobs(logits), token_logprobs(old_logits), token_logprobs(ref_logits), advantage

    def spec(m):
        pi, old, ref, adv = spec_inputs()
        return m.grpo_loss(pi, old, ref, adv, 3)

    def spec_gradient(m):
        pi, old, ref, adv = spec_inputs()
        pi = pi.clone().requires_grad_(True)
        m.grpo_loss(pi, old, ref, adv, 3).backward()
        return pi.grad

    def random_inputs(seed, G, T, spread):
        g = torch.Generator().manual_seed(fresh(seed))
        base = -(torch.rand(G, T, generator=g) * 4 + 0.1)  # log-probs in (-4.1, -0.1)
        pi = base + torch.randn(G, T, generator=g) * spread
        old = base + torch.randn(G, T, generator=g) * spread
        ref = base + torch.randn(G, T, generator=g) * spread
        adv = torch.randn(G, generator=g)
        return pi, old, ref, adv

    def random_case(seed, G, T, input_len, spread=0.3):
        def run(m):
            pi, old, ref, adv = random_inputs(seed, G, T, spread)
            pi = pi.requires_grad_(True)
            loss = m.grpo_loss(pi, old, ref, adv, input_len)
            loss.backward()
            return loss, pi.grad
        return run

    def deep_logprobs(m):
        # log-probs of rare tokens: exp(-200) underflows to 0 in float32
        g = torch.Generator().manual_seed(5)
        pi = (-200 + torch.randn(3, 6, generator=g) * 0.2).requires_grad_(True)
        old = -200 + torch.randn(3, 6, generator=g) * 0.2
        ref = -200 + torch.randn(3, 6, generator=g) * 0.2
        adv = torch.tensor([1.0, -0.5, -0.5])
        loss = m.grpo_loss(pi, old, ref, adv, 2)
        loss.backward()
        return loss, pi.grad

    def unequal_lengths(m):
        # The template slices one input_len for the whole batch, so the responses of one call all have
        # the same length and every aggregation agrees. Responses of 2, 9 and 5 tokens are graded one
        # call each (G = 1 per call): each call returns that response's token mean, from which both
        # aggregations follow, and they differ.
        T, lengths = 12, [2, 9, 5]
        advantages = torch.tensor([1.2, -0.7, 0.4])
        per_response = []
        for i, length in enumerate(lengths):
            pi, old, ref, _ = random_inputs(20 + i, 1, T, 0.3)
            per_response.append(m.grpo_loss(pi, old, ref, advantages[i:i + 1], T - length))
        per_response = torch.stack(per_response)
        n = torch.tensor(lengths, dtype=per_response.dtype)
        return {"paper (DeepSeekMath): mean over responses of each response's token mean": per_response.mean(),
                "DAPO / TRL default: one mean over all tokens": (per_response * n).sum() / n.sum()}

    def all_equal(m):
        pi, _, _, adv = random_inputs(9, 5, 7, 0.0)
        return m.grpo_loss(pi, pi.clone(), pi.clone(), adv, 2)

    return [
        Case("spec data (seed 42, G=4, T=8, input_len 3)", "visible", spec, label={"zh": "题目数据（种子 42，G=4，T=8，input_len 3）"}),
        Case("gradient on the spec data", "hidden", spec_gradient, label={"zh": "题目数据上的梯度"}),
        Case("G=8, T=12, input_len 5: loss and gradient", "hidden", random_case(1, 8, 12, 5), label={"zh": "G=8，T=12，input_len 5：损失与梯度"}),
        Case("G=6, T=6 (as many responses as tokens)", "hidden", random_case(2, 6, 6, 1), label={"zh": "G=6，T=6（回答数与 token 数相同）"}, note={
            "en": "With G == T a [G] advantage broadcasts against [G, T] without an error, but along the wrong "
                  "axis: token t of every response gets the advantage of response t. Make it [G, 1].",
            "zh": "当 G == T 时，形状为 [G] 的优势与 [G, T] 广播不会报错，但沿着错误的维度：每个回答的第 t 个 "
                  "token 都拿到了第 t 个回答的优势。请把它变成 [G, 1]。",
        }),
        Case("ratios far outside the trust region", "hidden", random_case(3, 4, 10, 3, spread=1.5), label={"zh": "远在信赖域之外的比率"}),
        Case("input_len 0 (every position counts)", "hidden", random_case(4, 3, 5, 0), label={"zh": "input_len 0（每个位置都计入）"}),
        Case("responses of unequal lengths (2, 9, 5 tokens), one call each", "hidden", unequal_lengths,
             label={"zh": "长度不同的回答（2、9、5 个 token），每个回答单独调用一次"}, note={
                 "en": "Each response's own token mean must be right; the case then averages them two ways "
                       "(the paper's per-response mean, and DAPO's flat token mean, TRL's default), which "
                       "differ when lengths differ.",
                 "zh": "每个回答自身的 token 平均必须正确；这个用例再用两种方式汇总（论文的先按回答平均，"
                       "以及 DAPO 的所有 token 统一平均，也是 TRL 的默认做法），长度不同时两者不相等。"}),
        Case("all three policies equal: loss = -mean(A)", "edge", all_equal, label={"zh": "三个策略相同：损失 = -mean(A)"}),
        Case("log-probs near -200", "edge", deep_logprobs, label={"zh": "接近 -200 的对数概率"}, note={
            "en": "exp(-200) underflows to 0 in float32, so exp(logp) / exp(logp_old) is 0 / 0 = NaN. "
                  "Subtract the log-probs first, then exponentiate: exp(logp - logp_old).",
            "zh": "float32 中 exp(-200) 下溢为 0，所以 exp(logp) / exp(logp_old) 是 0 / 0 = NaN。"
                  "先把对数概率相减，再取指数：exp(logp - logp_old)。",
        }),
    ]
