from alignlings.content.checks import Case


def cases():
    import torch

    def engine_logprobs(logits, input_ids, temperature=1.0):
        # what vLLM reports when it samples with the same weights: log p(token t | tokens before t)
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        out = torch.zeros(input_ids.shape)
        out[:, 1:] = logp[:, :-1].gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        return out

    def rollout(seed, b, T, V, prompt_len):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(b, T, V, generator=g) * 2
        input_ids = torch.randint(0, V, (b, T), generator=g)
        loss_mask = (torch.arange(T) >= prompt_len).long().expand(b, T).clone()
        return logits, input_ids, loss_mask

    def symptom(m):
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(1, 6, 8, generator=g)
        input_ids = torch.tensor([[3, 1, 4, 1, 5, 2]])
        mask = torch.tensor([[0, 0, 0, 1, 1, 1]])
        return m.importance_ratio(logits, input_ids, engine_logprobs(logits, input_ids), mask)

    def random_ratio(m):
        logits, ids, mask = rollout(1, 4, 9, 11, 3)
        return m.importance_ratio(logits, ids, engine_logprobs(logits, ids), mask)

    def random_logprobs(m):
        logits, ids, _ = rollout(2, 3, 7, 13, 2)
        return m.token_logprobs(logits, ids)

    def temperature(m):
        logits, ids, mask = rollout(3, 3, 8, 10, 4)
        return m.importance_ratio(logits, ids, engine_logprobs(logits, ids, 0.7), mask, temperature=0.7)

    def last_token_only(m):
        logits, ids, _ = rollout(4, 3, 5, 9, 4)
        mask = torch.zeros(3, 5, dtype=torch.long)
        mask[:, -1] = 1
        return m.importance_ratio(logits, ids, engine_logprobs(logits, ids), mask)

    return [
        Case("same weights: trainer vs engine ratio", "visible", symptom,
             label={"zh": "权重相同：trainer 与推理引擎的 ratio"},
             note={"en": "trainer and engine hold the same weights, so the ratio is 1 on every completion token",
                   "zh": "trainer 和推理引擎的权重相同，所以每个 completion token 上 ratio 都是 1"}),
        Case("random rollouts: ratio", "hidden", random_ratio, label={"zh": "随机 rollout：ratio"}),
        Case("random rollouts: log-probs", "hidden", random_logprobs, label={"zh": "随机 rollout：log-prob"}),
        Case("sampling temperature 0.7", "hidden", temperature, label={"zh": "采样温度 0.7"}),
        Case("a completion of one token", "edge", last_token_only, label={"zh": "只有一个 token 的回答"},
             note={"en": "the last token of the sequence is predicted by the logits one position before it",
                   "zh": "序列最后一个 token 由它前一个位置的 logits 预测"}),
    ]
