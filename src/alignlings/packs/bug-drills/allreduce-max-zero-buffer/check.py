from alignlings.content.checks import Case


def cases():
    import torch

    def shard(indices, chosen, rejected, world_size):
        # DistributedSampler-style: rank r takes every world_size-th index starting at r
        return [(indices[r::world_size], chosen[indices[r::world_size]], rejected[indices[r::world_size]])
                for r in range(world_size)]

    def symptom(m):
        chosen = torch.tensor([-12.5, -8.25, -30.0, -20.0])
        rejected = torch.tensor([-14.0, -9.5, -41.0, -22.0])
        return m.build_reference_cache(shard(torch.arange(4), chosen, rejected, 2), 4)

    def padded_sampler(m):
        g = torch.Generator().manual_seed(21)
        n, world = 10, 4
        chosen = -torch.rand(n, generator=g) * 300 - 1
        rejected = -torch.rand(n, generator=g) * 300 - 1
        order = torch.randperm(n, generator=g)
        order = torch.cat([order, order[:2]])  # padded to 12 = 3 per rank: two indices computed twice
        return m.build_reference_cache(shard(order, chosen, rejected, world), n)

    def long_answers(m):
        g = torch.Generator().manual_seed(22)
        n = 6
        # long answers: summed log-probs in the thousands
        chosen = -torch.rand(n, generator=g) * 20000 - 5000
        rejected = -torch.rand(n, generator=g) * 20000 - 5000
        return m.build_reference_cache(shard(torch.arange(n), chosen, rejected, 3), n)

    def one_rank(m):
        chosen = torch.tensor([-3.0, -7.5, -1.25])
        rejected = torch.tensor([-4.0, -9.0, -2.5])
        return m.build_reference_cache(shard(torch.arange(3), chosen, rejected, 1), 3)

    return [
        Case("2 ranks, 4 examples", "visible", symptom, label={"zh": "2 个 rank，4 条样本"},
             note={"en": "every reference log-prob comes back as 0.0: MAX(log p, 0) = 0 for any log p < 0",
                   "zh": "所有 reference log-prob 都变成了 0.0：对任何 log p < 0，MAX(log p, 0) = 0"}),
        Case("4 ranks, sampler padding repeats two examples", "hidden", padded_sampler,
             label={"zh": "4 个 rank，sampler 补齐时重复了两条样本"},
             note={"en": "an index computed on two ranks must keep its value, not double it",
                   "zh": "在两个 rank 上都算过的样本应保持原值，而不是翻倍"}),
        Case("3 ranks, long answers (log-probs in the thousands)", "hidden", long_answers,
             label={"zh": "3 个 rank，长回答（log-prob 上千）"}),
        Case("a single rank", "edge", one_rank, label={"zh": "只有一个 rank"},
             note={"en": "on one GPU the all-reduce is the identity: the bug only shows with two or more ranks",
                   "zh": "单卡时 all-reduce 什么也不做：这个 bug 只在两个及以上 rank 时出现"}),
    ]
