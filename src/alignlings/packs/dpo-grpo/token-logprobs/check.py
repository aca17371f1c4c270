"""Cases for token-logprobs: the spec's batch, random batches with gradients, a left-padded batch
through a toy causal LM with absolute position embeddings, confident logits, prompts of length 1."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_inputs():
        input_ids = torch.tensor([[0, 0, 4, 2, 5, 1], [0, 3, 3, 2, 6, 1]])
        attention_mask = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
        loss_mask = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]])
        torch.manual_seed(0)
        return input_ids, attention_mask, loss_mask, torch.randn(2, 6, 8)

    def spec_positions(m):
        return m.position_ids_from_mask(spec_inputs()[1])

    def spec_logprobs(m):
        input_ids, _, loss_mask, logits = spec_inputs()
        return m.token_logprobs(logits, input_ids, loss_mask)

    def random_case(seed, B, T, V, scale=2.0):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            logits = (torch.randn(B, T, V, generator=g) * scale).requires_grad_(True)
            input_ids = torch.randint(0, V, (B, T), generator=g)
            starts = torch.randint(1, T - 1, (B,), generator=g)
            ends = torch.maximum(starts + 1, torch.randint(2, T + 1, (B,), generator=g))
            pos = torch.arange(T).expand(B, T)
            loss_mask = ((pos >= starts[:, None]) & (pos < ends[:, None])).float()
            per_token, seq_sum, seq_mean = m.token_logprobs(logits, input_ids, loss_mask)
            grad = torch.autograd.grad(seq_sum.sum() + seq_mean.sum(), logits)[0]
            return per_token.detach(), seq_sum.detach(), seq_mean.detach(), grad
        return run

    def toy_lm_left_padded(m):
        # a causal "LM" with absolute position embeddings: masked mean over the real tokens so far
        g = torch.Generator().manual_seed(3)
        V, D, P = 9, 8, 16
        tok_emb, pos_emb, head = torch.randn(V, D, generator=g), torch.randn(P, D, generator=g), torch.randn(D, V, generator=g)

        def lm(input_ids, attention_mask, position_ids):
            T = input_ids.shape[1]
            h = tok_emb[input_ids] + pos_emb[position_ids]  # [B, T, D]
            weights = torch.tril(torch.ones(T, T)) * attention_mask[:, None, :].float()  # [B, T, T]
            context = weights @ h / weights.sum(-1, keepdim=True).clamp(min=1.0)
            return context @ head  # [B, T, V]

        input_ids = torch.tensor([[0, 0, 0, 5, 2, 7, 1], [0, 4, 4, 3, 8, 6, 1], [2, 3, 6, 6, 5, 4, 1]])
        attention_mask = (torch.arange(7).expand(3, 7) >= torch.tensor([[3], [1], [0]])).long()
        loss_mask = (torch.arange(7).expand(3, 7) >= torch.tensor([[5], [4], [3]])).float()
        position_ids = m.position_ids_from_mask(attention_mask)
        logits = lm(input_ids, attention_mask, position_ids)
        return position_ids, m.token_logprobs(logits, input_ids, loss_mask)

    def confident(m):
        logits = torch.full((1, 4, 6), -80.0)
        logits[0, 0, 2] = logits[0, 1, 3] = 80.0
        logits[0, 2, 5] = 80.0  # the chosen token 1 sits at -80: log-prob -160
        input_ids = torch.tensor([[0, 2, 3, 1]])
        return m.token_logprobs(logits, input_ids, torch.ones(1, 4))  # the whole row is a completion

    def no_padding_positions(m):
        return m.position_ids_from_mask(torch.ones(2, 5, dtype=torch.long))

    return [
        Case("spec position ids", "visible", spec_positions, label={"zh": "题目中的 position ids"}),
        Case("spec log-probs: per token, sum, mean", "visible", spec_logprobs,
             label={"zh": "题目中的对数概率：逐 token、求和、平均"}),
        Case("B=4, T=10, V=17: values and gradient", "hidden", random_case(1, 4, 10, 17),
             label={"zh": "B=4, T=10, V=17：取值与梯度"}),
        Case("B=3, T=5, V=50", "hidden", random_case(2, 3, 5, 50), label={"zh": "B=3, T=5, V=50"}),
        Case("left-padded batch through a toy LM with absolute positions", "hidden", toy_lm_left_padded,
             label={"zh": "左侧 padding 的批次经过一个使用绝对位置的玩具 LM"}, note={
            "en": "With left padding a row's first real token must still be at position 0, or the model sees "
                  "a different input than it would for the same sequence alone (absolute positions, as in GPT-2 and OPT).",
            "zh": "左侧 padding 时，每行第一个真实 token 的位置仍然必须是 0，否则模型看到的输入就和同一序列单独输入时"
                  "不一样（绝对位置编码，如 GPT-2 和 OPT）。"}),
        Case("confident logits (+-80): log-probs near -160 stay finite", "edge", confident,
             label={"zh": "非常确定的 logits（±80）：接近 -160 的对数概率要保持有限"}, note={
            "en": "softmax underflows to exactly 0 for a token 160 nats below the best, and log(0) = -inf; "
                  "log_softmax computes it as logit - logsumexp and stays finite.",
            "zh": "比最优 token 低 160 nats 的 token，softmax 会下溢为 0，log(0) = -inf；"
                  "log_softmax 按 logit - logsumexp 计算，结果保持有限。"}),
        Case("no padding: positions 0 .. T-1", "edge", no_padding_positions,
             label={"zh": "没有 padding：位置是 0 .. T-1"}),
    ]
