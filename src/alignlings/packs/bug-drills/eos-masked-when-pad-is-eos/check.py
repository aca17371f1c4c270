from alignlings.content.checks import Case


def cases():
    import torch
    import torch.nn.functional as F

    EOS = 2

    def random_examples(seed, n, turns=1):
        g = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(n):
            ids = []
            for _ in range(turns):  # each turn: a few tokens closed by EOS
                ids += torch.randint(3, 30, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g).tolist() + [EOS]
            out.append(ids)
        return out

    def symptom(m):
        batch = m.collate([[5, 6, 7, EOS], [5, 8, EOS]], EOS)  # pad_token = eos_token
        return {"labels": batch["labels"], "trained_eos": int((batch["labels"] == EOS).sum())}

    def stop_gradient(m):
        # the gradient of the SFT loss on the EOS logit where each answer should end
        batch = m.collate(random_examples(1, 4), EOS)
        logits = torch.zeros(4, batch["input_ids"].shape[1], 30, requires_grad=True)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 30), batch["labels"][:, 1:].reshape(-1), ignore_index=-100)
        (grad,) = torch.autograd.grad(loss, logits)
        return grad[..., EOS]

    def multi_turn(m):
        return m.collate(random_examples(2, 3, turns=3), EOS)

    def random_batch(m):
        return m.collate(random_examples(3, 6), EOS)

    def distinct_pad(m):
        return m.collate(random_examples(4, 5), 0)

    return [
        Case("two answers ending in EOS, pad == eos", "visible", symptom,
             label={"zh": "两条以 EOS 结尾的回答，pad == eos"},
             note={"en": "each answer's closing EOS must be a label (2 in all), or the model never learns to stop",
                   "zh": "每条回答结尾的 EOS 都必须是 label（共 2 个），否则模型永远学不会停下"}),
        Case("gradient on the EOS logit", "hidden", stop_gradient, label={"zh": "EOS logit 上的梯度"},
             note={"en": "the loss must push up P(EOS) at the end of every answer",
                   "zh": "损失必须在每条回答的结尾把 P(EOS) 往上推"}),
        Case("multi-turn chats, EOS closing every turn", "hidden", multi_turn,
             label={"zh": "多轮对话，每轮以 EOS 结束"}),
        Case("random batch, pad == eos", "hidden", random_batch, label={"zh": "随机批次，pad == eos"}),
        Case("a pad id of its own", "edge", distinct_pad, label={"zh": "独立的 pad id"},
             note={"en": "with a distinct pad id nothing changes: padding gets -100, every real token is a label",
                   "zh": "pad id 独立时结果不变：padding 标为 -100，每个真实 token 都是 label"}),
    ]
