"""A process group that never forms because one rank never calls `init_process_group`.

Launched with `torchrun --nproc-per-node 2` on CPU (127.0.0.1 only). Rank 0 joins the gloo
process group with a 3-second timeout; rank 1 is stuck before it (sleeping here, as a rank
hung in data preparation or on a slow filesystem would be). Rank 0's join fails with the real
store timeout (`DistStoreError: Timed out after … seconds waiting for clients. 1/2 clients
joined.`) and torchrun tears the job down.
"""

import os
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    rank = int(os.environ["RANK"])
    if rank == 1:
        print(f"rank={rank} preparing data (stuck)", flush=True)
        time.sleep(30)
    print(f"rank={rank} init_process_group", flush=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
