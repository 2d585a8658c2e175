"""DDP with a parameter that never receives a gradient and `find_unused_parameters=False`.

Launched with `torchrun --nproc-per-node 2` on CPU (gloo backend, 127.0.0.1 only). The model has
an auxiliary head that `forward` never uses, so its parameters get no gradient and DDP's reducer
never finishes the first iteration's reduction. On the second iteration every rank raises the
real `Expected to have finished reduction in the prior iteration before starting a new one`
error, and torchrun reports the failed ranks (`ChildFailedError`).
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Module):
    """A body with a main head and an auxiliary head that this training step forgets to use."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.aux_head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TwoHeads(), find_unused_parameters=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 4):
        x = torch.randn(8, 16)
        y = torch.randint(0, 4, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"rank={rank} step={step} loss={loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
