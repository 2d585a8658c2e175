"""Gradient explosion without clipping in a plain PyTorch training loop.

A small tanh MLP regressor trained with SGD at lr=0.5 and no `clip_grad_norm_`: the step size is
past the stable limit, so each update overshoots, the next gradient is larger, and the global
gradient norm grows by orders of magnitude (from below 1 to ~1e18 in 20 steps) while the loss
follows it up. The loop prints `step=… loss=… grad_norm=…` each step, the way a hand-written
trainer logs; the run exits 0 before anything turns into NaN — the log is the only evidence.

Deterministic on any x86 CPU: one thread, deterministic kernels and float64, so the 20 steps
never overflow to inf whatever SIMD width the CPU has (in float32 the last steps could reach inf
on some CPUs); the diagnosis is asserted on the growth, not on exact numbers.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float64)
    width = 64
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.Tanh()]
    model = nn.Sequential(*layers, nn.Linear(width, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.randn(256, width)
    y = torch.randn(256, 1) * 3
    for step in range(1, 21):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        # Measured only (no max_norm): this loop never clips.
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        print(f"step={step} loss={loss.item():.4g} grad_norm={grad_norm.item():.4g}", flush=True)
        optimizer.step()


if __name__ == "__main__":
    main()
