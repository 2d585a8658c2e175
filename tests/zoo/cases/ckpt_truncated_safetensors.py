"""A truncated safetensors checkpoint loaded with `safetensors.torch.load_file`.

A state dict is written with `safetensors.torch.save_file`, then the file is cut to half its size
(an interrupted copy or write). Loading it fails with the real `SafetensorError` raised by the
Rust deserializer because the header promises more bytes than the file holds.
"""

import os

import torch
from safetensors.torch import load_file, save_file
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    path = os.path.join("checkpoint-1000", "model.safetensors")
    os.makedirs(os.path.dirname(path))
    save_file(model.state_dict(), path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    print(f"saved {path} ({size} bytes), truncated to {size // 2} bytes; resuming...", flush=True)
    model.load_state_dict(load_file(path))


if __name__ == "__main__":
    main()
