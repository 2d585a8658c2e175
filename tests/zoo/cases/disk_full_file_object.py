"""Saving a checkpoint through an open file on a full device: `OSError: [Errno 28]`.

Same full disk as `disk_full_dev_full`, but the checkpoint goes through a Python file object
(`with open(path, "wb") as f: torch.save(state, f)`, as many training loops do). The real
output is a three-link chain: `OSError: [Errno 28] No space left on device` from the record
write, the zip writer's `unexpected pos` error while closing the archive, and the `OSError:
[Errno 28]` again when the `with` block closes the file.
"""

import os
import stat
import sys

import torch
from torch import nn

FULL = "/dev/full"


def main() -> None:
    # Only ever write to the real character device: if /dev/full were a regular file the
    # write would succeed (and fill that file) instead of reproducing a full disk.
    if not stat.S_ISCHR(os.stat(FULL).st_mode):
        sys.exit(f"{FULL} is not a character device; refusing to write to it")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    print(f"step 1000: saving checkpoint to {FULL}", flush=True)
    with open(FULL, "wb") as f:
        torch.save(model.state_dict(), f)


if __name__ == "__main__":
    main()
