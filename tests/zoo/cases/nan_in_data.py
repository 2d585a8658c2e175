"""NaN loss caused by NaN values in the input data.

A small regression MLP trains normally on synthetic features; one sample of the data set
contains a NaN feature (a missing value parsed as NaN). When its batch arrives (step 13) the
loss is `nan`, the NaN gradients poison every weight, and every later step logs `loss=nan`.
The loop prints `step=… loss=… grad_norm=…` and exits 0.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(640, 16)
    y = x @ torch.randn(16, 1)
    x[12 * 32 + 5, 3] = float("nan")  # one bad value in the 13th batch
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, i in enumerate(range(0, len(x), 32), start=1):
        loss = nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        print(f"step={step} loss={loss.item():.4f} grad_norm={grad_norm.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
