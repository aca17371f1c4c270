from alignlings.content.checks import Case


def cases():
    import torch

    EOS = 2

    def chat_batch(seed, n, T, pad, side, eos_in_prompt=True, end_with_eos=True):
        """n rows of prompt (+ EOS closing the user turn) + answer (+ EOS), padded to T with pad."""
        g = torch.Generator().manual_seed(seed)
        rows = []
        for _ in range(n):
            prompt = torch.randint(3, 50, (int(torch.randint(2, 4, (1,), generator=g)),), generator=g).tolist()
            answer = torch.randint(3, 50, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g).tolist()
            row = prompt + ([EOS] if eos_in_prompt else []) + answer + ([EOS] if end_with_eos else [])
            rows.append(row[:T])
        out = torch.full((n, T), pad, dtype=torch.long)
        for i, row in enumerate(rows):
            if side == "right":
                out[i, :len(row)] = torch.tensor(row)
            else:
                out[i, T - len(row):] = torch.tensor(row)
        logits = torch.randn(n, T, 1, generator=g)
        return logits, out

    def pool(m, logits, ids, pad):
        return {"index": m.last_token_index(ids, pad), "reward": m.pooled_reward(logits, ids, pad)}

    def symptom(m):
        # pad_token = eos_token; two answers to the same prompt, whose template closes the turn with EOS
        ids = torch.tensor([[5, 6, EOS, 7, 8, 9, EOS, EOS],
                            [5, 6, EOS, 3, 4, EOS, EOS, EOS]])
        logits = torch.arange(16, dtype=torch.float).reshape(2, 8, 1)
        return pool(m, logits, ids, EOS)

    def right_pad_eq_eos(m):
        return pool(m, *chat_batch(1, 6, 10, EOS, "right"), EOS)

    def left_pad_eq_eos(m):
        return pool(m, *chat_batch(2, 6, 10, EOS, "left"), EOS)

    def distinct_pad(m):
        logits_r, ids_r = chat_batch(3, 4, 9, 0, "right", eos_in_prompt=False)
        logits_l, ids_l = chat_batch(4, 4, 9, 0, "left", eos_in_prompt=False)
        return [pool(m, logits_r, ids_r, 0), pool(m, logits_l, ids_l, 0)]

    def no_padding(m):
        g = torch.Generator().manual_seed(5)
        ids = torch.randint(3, 50, (3, 6), generator=g)
        return pool(m, torch.randn(3, 6, 2, generator=g), ids, 0)

    return [
        Case("two answers to one chat prompt, pad == eos", "visible", symptom,
             label={"zh": "同一个 chat prompt 的两条回答，pad == eos"},
             note={"en": "the rewards must come from the answers (positions 5 and 4), not from the prompt: "
                         "two different answers may not get the same score",
                   "zh": "奖励应取自回答（第 5 和第 4 个位置），而不是 prompt：两条不同的回答不该拿到同一个分数"}),
        Case("right padding, pad == eos, EOS closing the prompt", "hidden", right_pad_eq_eos,
             label={"zh": "右 padding，pad == eos，prompt 以 EOS 结尾"}),
        Case("left padding, pad == eos", "hidden", left_pad_eq_eos, label={"zh": "左侧 padding，pad == eos"},
             note={"en": "rows without left padding still contain the pad id inside the prompt",
                   "zh": "没有左侧 padding 的行，prompt 里照样有 pad id"}),
        Case("a distinct pad id, right and left padding", "edge", distinct_pad,
             label={"zh": "独立的 pad id，左右 padding 各一批"},
             note={"en": "with a pad id of its own, both padding sides must read the last real token",
                   "zh": "pad id 独立时，两种 padding 方向都要读到最后一个真实 token"}),
        Case("no padding at all", "edge", no_padding, label={"zh": "完全没有 padding"}),
    ]
