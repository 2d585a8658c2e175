"""A DataLoader worker killed by SIGKILL — what the kernel's OOM killer does to a worker.

The dataset's `__getitem__` sends SIGKILL to its own process when it runs inside a DataLoader
worker, standing in for the host OOM killer choosing a worker that holds too much memory (a
common CPU-OOM symptom with many workers each holding a dataset copy). The main process notices
the dead worker and raises PyTorch's real `DataLoader worker (pid N) is killed by signal` error.
"""

import os
import signal
import time

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class SelfKillingDataset(Dataset):
    """Serves samples normally; the worker that fetches item 12 (the fourth batch) is SIGKILLed."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if get_worker_info() is not None and i == 12:
            # Die while the main process is blocked waiting for this batch (as an OOM kill
            # usually lands), not while it is unpickling another worker's batch: that race
            # adds a second, interleaved traceback and makes the log differ run to run.
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.full((16,), float(i))


def main() -> None:
    loader = DataLoader(SelfKillingDataset(), batch_size=4, num_workers=2)
    for step, batch in enumerate(loader, start=1):
        print(f"step={step} batch_mean={batch.mean().item():.2f}", flush=True)


if __name__ == "__main__":
    main()
