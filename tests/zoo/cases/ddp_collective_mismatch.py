"""Ranks that call different collectives (divergent control flow), caught by `TORCH_DISTRIBUTED_DEBUG=DETAIL`.

Launched with `torchrun --nproc-per-node 2` on CPU (gloo, 127.0.0.1 only) and
`TORCH_DISTRIBUTED_DEBUG=DETAIL`. After a normal step, rank 0 alone all-reduces a metric for
logging ("only rank 0 logs") while rank 1 moves on to broadcast the next batch's seed. The debug
wrapper compares collective fingerprints across ranks and raises the real `Detected mismatch
between collectives on ranks` error, naming both collectives.
"""

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    grads = torch.ones(16)
    dist.all_reduce(grads)
    print(f"rank={rank} step=1 all_reduce ok", flush=True)
    if rank == 0:
        metric = torch.tensor([0.5])
        dist.all_reduce(metric)  # only rank 0 reaches this: divergent control flow
    seed = torch.tensor([1234])
    dist.broadcast(seed, src=0)
    print(f"rank={rank} step=2 done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
