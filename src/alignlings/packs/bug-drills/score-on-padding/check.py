from alignlings.content.checks import Case


def cases():
    import torch

    PAD, EOS = 0, 1

    def batch(seed, n, T, full_rows=1):
        g = torch.Generator().manual_seed(seed)
        responses = torch.randint(2, 40, (n, T), generator=g)
        for i in range(n - full_rows):  # these rows stop early: EOS, then padding
            end = int(torch.randint(0, T - 1, (1,), generator=g))
            responses[i, end] = EOS
            responses[i, end + 1:] = PAD
        logprobs = -torch.rand(n, T, generator=g) * 3
        ref_logprobs = logprobs + 0.3 * torch.randn(n, T, generator=g)
        scores = torch.randn(n, generator=g) * 2
        return scores, logprobs, ref_logprobs, responses

    def symptom(m):
        responses = torch.tensor([[7, 8, EOS, PAD, PAD],   # stopped early
                                  [7, 8, 9, 10, 11]])      # hit max_new_tokens
        zeros = torch.zeros(2, 5)
        return m.per_token_rewards(torch.tensor([1.0, 1.0]), zeros, zeros, responses, PAD)

    def random_batch(m):
        return m.per_token_rewards(*batch(1, 6, 8), PAD, kl_coef=0.1)

    def returns(m):
        # the undiscounted return of every position: what the score contributes to each token's advantage
        rewards = m.per_token_rewards(*batch(2, 5, 7, full_rows=0), PAD)
        return rewards.flip(-1).cumsum(-1).flip(-1)

    def no_padding(m):
        return m.per_token_rewards(*batch(3, 3, 6, full_rows=3), PAD)

    def eos_first(m):
        responses = torch.tensor([[EOS, PAD, PAD], [5, EOS, PAD]])
        g = torch.Generator().manual_seed(4)
        lp = -torch.rand(2, 3, generator=g)
        return m.per_token_rewards(torch.tensor([0.5, -2.0]), lp, lp - 0.2, responses, PAD)

    return [
        Case("score 1 on a stopped and a max-length response", "visible", symptom,
             label={"zh": "分数为 1：一条提前停下、一条写满长度的回答"},
             note={"en": "both responses scored 1, so both must carry a reward of 1 on their last real token",
                   "zh": "两条回答得分都是 1，所以两者最后一个真实 token 上都应有 1 的奖励"}),
        Case("random batch with KL penalty", "hidden", random_batch, label={"zh": "带 KL 惩罚的随机批次"}),
        Case("returns of every token", "hidden", returns, label={"zh": "每个 token 的回报"},
             note={"en": "the score must reach every response token's return",
                   "zh": "分数必须进入每个回答 token 的回报"}),
        Case("responses with no padding", "edge", no_padding, label={"zh": "没有 padding 的回答"}),
        Case("a response that is only EOS", "edge", eos_first, label={"zh": "只有一个 EOS 的回答"}),
    ]
