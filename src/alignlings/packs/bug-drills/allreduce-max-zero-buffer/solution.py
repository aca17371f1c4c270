"""Caching the reference model's log-probs for DPO across data-parallel ranks.

Before training, every rank runs the reference model over its shard of the dataset and writes the
summed log-probs of each example's chosen and rejected answers at the example's dataset index. The
ranks then all-reduce the two buffers with MAX so that every rank holds the full cache.

`all_reduce_max` stands in for `torch.distributed.all_reduce(t, op=ReduceOp.MAX)`: it takes one
tensor per rank and returns one reduced copy per rank. Like a DistributedSampler without drop_last,
a shard may repeat an index that another rank also computed (same value on both ranks).

rank_shards: one (indices, chosen_logps, rejected_logps) triple per rank; indices [n_r] (long),
logps [n_r] (float, <= 0). Returns the (chosen, rejected) caches [dataset_size] that rank 0 holds.
"""

import torch


def all_reduce_max(per_rank: list[torch.Tensor]) -> list[torch.Tensor]:
    reduced = torch.stack(per_rank).amax(dim=0)
    return [reduced.clone() for _ in per_rank]


def build_reference_cache(rank_shards, dataset_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not rank_shards or dataset_size < 1:
        raise ValueError(f"rank_shards: expected at least one rank and dataset_size >= 1, "
                         f"got {len(rank_shards)} ranks and dataset_size={dataset_size}")
    chosen_per_rank, rejected_per_rank = [], []
    for indices, chosen_logps, rejected_logps in rank_shards:
        if indices.numel() and (indices.min() < 0 or indices.max() >= dataset_size):
            raise ValueError(f"rank_shards: indices must lie in [0, {dataset_size}), got {indices.tolist()}")
        # this rank's buffers: filled at its own indices, left as they are elsewhere
        chosen = torch.full((dataset_size,), float("-inf"), dtype=chosen_logps.dtype)
        rejected = torch.full((dataset_size,), float("-inf"), dtype=rejected_logps.dtype)
        chosen[indices] = chosen_logps
        rejected[indices] = rejected_logps
        chosen_per_rank.append(chosen)
        rejected_per_rank.append(rejected)
    chosen_cache = all_reduce_max(chosen_per_rank)[0]
    rejected_cache = all_reduce_max(rejected_per_rank)[0]
    return chosen_cache, rejected_cache


if __name__ == "__main__":
    shards = [(torch.tensor([0, 2]), torch.tensor([-12.5, -30.0]), torch.tensor([-14.0, -41.0])),
              (torch.tensor([1, 3]), torch.tensor([-8.25, -20.0]), torch.tensor([-9.5, -22.0]))]
    print(build_reference_cache(shards, 4))
    print(build_reference_cache(shards[:1] + [(torch.tensor([1, 3, 0]), torch.tensor([-8.25, -20.0, -12.5]),
                                               torch.tensor([-9.5, -22.0, -14.0]))], 4))
