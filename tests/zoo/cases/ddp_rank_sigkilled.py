"""One DDP rank killed by SIGKILL mid-training — how a host OOM kill looks from torchrun.

Launched with `torchrun --nproc-per-node 2` on CPU (gloo, 127.0.0.1 only). Both ranks train a
small DDP model; at step 3 rank 1 receives SIGKILL (sent to itself here, standing in for the
kernel's OOM killer, which leaves no Python traceback). Rank 0's next gradient all-reduce loses
its peer and fails, and torchrun's summary reports rank 1 with `exitcode: -9` / `Signal 9
(SIGKILL)`.
"""

import os
import signal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 6):
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        x = torch.randn(32, 64)
        y = torch.randint(0, 8, (32,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"rank={rank} step={step} loss={loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
