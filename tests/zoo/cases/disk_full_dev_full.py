"""Saving a checkpoint onto a full device: `torch.save(state, "/dev/full")`.

Every write to `/dev/full` fails with ENOSPC, as on a filesystem with no space left. Given a
path, `torch.save` writes through its C++ zip writer, and what really surfaces is not an
`Errno 28` but two cryptic `RuntimeError`s: `basic_ios::clear: iostream error` and, while
closing the archive, `[enforce fail at inline_container.cc:…] . unexpected pos …` — the error
users actually see when a checkpoint save hits a full disk.
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
    torch.save(model.state_dict(), FULL)


if __name__ == "__main__":
    main()
