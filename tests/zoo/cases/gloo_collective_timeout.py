"""A gloo collective that times out because one rank never reaches it.

Launched with `torchrun --nproc-per-node 2` on CPU (127.0.0.1 only). Both ranks join the
process group with a 3-second collective timeout; rank 0 calls `all_reduce` while rank 1 is
stuck (here: sleeping, as a rank blocked on I/O or a hung data loader would be) and never
calls it. Rank 0's `all_reduce` fails with gloo's real timeout error and torchrun tears the job
down.
"""

import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    rank = dist.get_rank()
    grads = torch.ones(1024)
    if rank == 1:
        print(f"rank={rank} stuck before all_reduce", flush=True)
        time.sleep(30)
    print(f"rank={rank} all_reduce of {grads.numel()} values", flush=True)
    dist.all_reduce(grads)
    print(f"rank={rank} all_reduce done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
