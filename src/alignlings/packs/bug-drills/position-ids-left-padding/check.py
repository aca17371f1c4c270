from alignlings.content.checks import Case


def cases():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    PAD = 0

    def tiny_gpt2():
        # GPT-2 adds a learned absolute position embedding (wpe) to every token
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                            bos_token_id=1, eos_token_id=1, attn_implementation="eager")
        return GPT2LMHeadModel(config).eval()

    def left_pad(rows):
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), PAD, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, T - len(r):] = torch.tensor(r)
        return ids, (ids != PAD).long()

    def random_rows(seed, n, num_actions):
        g = torch.Generator().manual_seed(seed)
        return [torch.randint(2, 50, (int(torch.randint(1, 9, (1,), generator=g)) + num_actions,),
                              generator=g).tolist() for _ in range(n)]

    def step0_ratio(m):
        model = tiny_gpt2()
        short, long = [5, 6, 7, 8, 9], [11, 12, 13, 14, 15, 16, 17]
        with torch.no_grad():
            ids, mask = left_pad([short, long])               # the rollout batch
            old = m.action_log_probs(model, ids, mask, 3)[0]
            ids, mask = left_pad([short])                     # a training micro-batch
            new = m.action_log_probs(model, ids, mask, 3)[0]
        return torch.exp(new - old)

    def padded_vs_alone(m):
        model = tiny_gpt2()
        rows = random_rows(1, 5, 4)
        with torch.no_grad():
            batch = m.action_log_probs(model, *left_pad(rows), 4)
            alone = torch.stack([m.action_log_probs(model, *left_pad([r]), 4)[0] for r in rows])
        return {"batch": batch, "alone": alone}

    def repadded_ratio(m):
        model = tiny_gpt2()
        rows = random_rows(2, 6, 3)
        with torch.no_grad():
            old = m.action_log_probs(model, *left_pad(rows), 3)
            new = torch.cat([m.action_log_probs(model, *left_pad(rows[i:i + 2]), 3) for i in (0, 2, 4)])
        return torch.exp(new - old)

    def no_padding(m):
        model = tiny_gpt2()
        g = torch.Generator().manual_seed(3)
        ids = torch.randint(2, 50, (3, 7), generator=g)
        with torch.no_grad():
            return m.action_log_probs(model, ids, torch.ones_like(ids), 4)

    return [
        Case("step-0 ratio: rollout batch vs training micro-batch", "visible", step0_ratio,
             label={"zh": "第 0 步的比率：rollout 批次对比训练 micro-batch"},
             note={"en": "before any update the policy is unchanged: the ratio must be 1 on every token",
                   "zh": "还没有任何更新时 policy 没变：每个 token 的 ratio 都应为 1"}),
        Case("left-padded batch vs each sequence alone", "hidden", padded_vs_alone,
             label={"zh": "左侧 padding 的批次对比逐条单独计算"}),
        Case("micro-batches re-padded to other lengths", "hidden", repadded_ratio,
             label={"zh": "重新 padding 成不同长度的 micro-batch"}),
        Case("a batch with no padding", "edge", no_padding, label={"zh": "没有 padding 的批次"},
             note={"en": "without padding the positions are 0, 1, 2, ... as before",
                   "zh": "没有 padding 时，位置仍是 0, 1, 2, ..."}),
    ]
