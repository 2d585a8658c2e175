"""A truncated `torch.save` checkpoint loaded with `torch.load`.

A model's state dict is saved with `torch.save` (zip format), then the file is cut to half its
size — what a killed job or a full disk leaves behind when the write is interrupted. `torch.load`
fails with the real `PytorchStreamReader failed reading zip archive` error.
"""

import os

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    path = os.path.join("checkpoints", "step_1000", "model.pt")
    os.makedirs(os.path.dirname(path))
    torch.save(model.state_dict(), path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    print(f"saved {path} ({size} bytes), truncated to {size // 2} bytes; resuming...", flush=True)
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)


if __name__ == "__main__":
    main()
