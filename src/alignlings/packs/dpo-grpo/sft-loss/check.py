"""Cases for sft-loss: the spec's labels and loss, random batches with gradients, gradient
accumulation over micro-batches of unequal lengths, pad == eos, an empty prompt, confident logits."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_labels(m):
        input_ids = torch.tensor([[5, 6, 7, 3, 2, 2], [4, 5, 3, 6, 7, 2]])
        attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
        return m.completion_labels(input_ids, attention_mask, torch.tensor([2, 3]), 2)

    def spec_loss(m):
        labels = torch.tensor([[-100, -100, 7, 3, 2, -100], [-100, -100, -100, 6, 7, 2]])
        torch.manual_seed(0)
        logits = torch.randn(2, 6, 8).requires_grad_(True)
        loss = m.sft_loss(logits, labels)
        return loss.detach(), torch.autograd.grad(loss, logits)[0]

    def random_batch(seed, B, T, V, pad_token_id):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(2, T + 1, (B,), generator=g)
        prompt_lengths = torch.minimum(torch.randint(0, T, (B,), generator=g), lengths - 1)
        input_ids = torch.randint(0, V, (B, T), generator=g)
        attention_mask = (torch.arange(T).expand(B, T) < lengths[:, None]).long()
        eos_at = (lengths - 1)[:, None]
        input_ids = torch.where(torch.arange(T).expand(B, T) == eos_at, pad_token_id, input_ids)  # EOS
        input_ids = torch.where(attention_mask == 1, input_ids, pad_token_id)  # padding
        logits = torch.randn(B, T, V, generator=g) * 2
        return input_ids, attention_mask, prompt_lengths, logits

    def labels_and_loss(seed, B, T, V, pad_token_id=0):
        def run(m):
            input_ids, attention_mask, prompt_lengths, logits = random_batch(seed, B, T, V, pad_token_id)
            labels = m.completion_labels(input_ids, attention_mask, prompt_lengths, pad_token_id)
            logits.requires_grad_(True)
            loss = m.sft_loss(logits, labels)
            return labels, loss.detach(), torch.autograd.grad(loss, logits)[0]
        return run

    def accumulation(m):
        # three micro-batches with 2, 9 and 5 label tokens: their summed losses must be the big batch's
        g = torch.Generator().manual_seed(7)
        weight = torch.randn(11, 6, generator=g).requires_grad_(True)
        hidden = torch.randn(3, 10, 6, generator=g)
        labels = torch.randint(0, 11, (3, 10), generator=g)
        labels[0, :8] = -100
        labels[2, :5] = -100
        n_items = int((labels[:, 1:] != -100).sum())
        total = sum(m.sft_loss(hidden[i:i + 1] @ weight.T, labels[i:i + 1], num_items_in_batch=n_items)
                    for i in range(3))
        return total.detach(), torch.autograd.grad(total, weight)[0]

    def empty_prompt(m):
        input_ids = torch.tensor([[3, 4, 5, 1], [6, 1, 0, 0]])
        attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
        labels = m.completion_labels(input_ids, attention_mask, torch.tensor([0, 0]), 0)
        torch.manual_seed(3)
        return labels, m.sft_loss(torch.randn(2, 4, 7), labels)

    def confident(m):
        labels = torch.tensor([[-100, 2, 3, 1]])
        logits = torch.full((1, 4, 5), -60.0)
        logits[0, 0, 2] = logits[0, 1, 3] = logits[0, 2, 1] = 60.0
        logits[0, 2, 1] = -60.0  # one confident mistake
        logits[0, 2, 4] = 60.0
        return m.sft_loss(logits, labels)

    return [
        Case("spec labels (pad == eos == 2)", "visible", spec_labels, label={"zh": "题目中的标签（pad == eos == 2）"},
             note={"en": "Row 0 ends with EOS (2) followed by padding (also 2): the EOS is a label, the padding is not.",
                   "zh": "第 0 行以 EOS（2）结尾，后面是同样为 2 的 padding：EOS 是标签，padding 不是。"}),
        Case("spec loss and its gradient", "visible", spec_loss, label={"zh": "题目中的损失及其梯度"}),
        Case("B=4, T=9, V=13: labels, loss, gradient", "hidden", labels_and_loss(1, 4, 9, 13),
             label={"zh": "B=4, T=9, V=13：标签、损失与梯度"}),
        Case("B=3, T=12, V=50, pad == eos == 7", "hidden", labels_and_loss(2, 3, 12, 50, pad_token_id=7),
             label={"zh": "B=3, T=12, V=50，pad == eos == 7"}),
        Case("gradient accumulation: 3 micro-batches of 2, 9 and 5 label tokens", "hidden", accumulation,
             label={"zh": "梯度累积：3 个 micro-batch，分别有 2、9、5 个标签 token"}, note={
            "en": "The sum of the micro-batch losses must equal the loss of the whole batch, so each divides its "
                  "summed NLL by num_items_in_batch, the label tokens of all micro-batches.",
            "zh": "各 micro-batch 损失之和必须等于整个批次的损失，所以每个 micro-batch 都要用 num_items_in_batch"
                  "（所有 micro-batch 的标签 token 总数）去除它的 NLL 之和。"}),
        Case("empty prompt: the first token is never a target", "edge", empty_prompt,
             label={"zh": "prompt 为空：第一个 token 永远不是预测目标"}),
        Case("confident logits (+-60)", "edge", confident, label={"zh": "非常确定的 logits（±60）"}),
    ]
