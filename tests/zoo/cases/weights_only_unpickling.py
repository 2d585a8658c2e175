"""A checkpoint holding a custom Python object, loaded with `torch.load`'s default `weights_only=True`.

The training script saved its own `TrainState` object inside the checkpoint (pickled class),
which worked with older PyTorch. Since PyTorch 2.6 `torch.load` defaults to `weights_only=True`
and refuses to unpickle arbitrary classes: the real `_pickle.UnpicklingError: Weights only load
failed…` with its explanation of `add_safe_globals`.
"""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TrainState:
    step: int
    best_loss: float


def main() -> None:
    model = nn.Linear(8, 8)
    torch.save({"model": model.state_dict(), "state": TrainState(1000, 1.93)}, "last.ckpt")
    print("resuming from last.ckpt", flush=True)
    checkpoint = torch.load("last.ckpt", map_location="cpu")
    model.load_state_dict(checkpoint["model"])


if __name__ == "__main__":
    main()
