"""A loss spike caused by one bad batch in an otherwise stable run.

A small MLP classifier learns a fixed synthetic task with Adam (lr=1e-3) and its loss falls
smoothly. At step 30 the data pipeline yields one corrupted batch — inputs scaled by 1000 (as if
a shard had unnormalised features) — and the logged loss jumps by orders of magnitude for that
step, then returns near its previous level. The loop prints `step=… loss=…` each step and exits 0.
"""

import torch
from torch import nn

BAD_STEP = 30


def main() -> None:
    torch.manual_seed(0)
    features, classes = 32, 8
    teacher = torch.randn(features, classes)
    model = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(1, 51):
        x = torch.randn(64, features)
        y = (x @ teacher).argmax(dim=1)
        if step == BAD_STEP:
            x = x * 1000.0
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step={step} loss={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
