"""A host (CPU) allocation that cannot be satisfied: PyTorch's DefaultCPUAllocator fails.

Asks for a 10 TiB float32 tensor with `torch.empty`. With the kernel's default heuristic
overcommit the request is refused up front, and PyTorch raises its real
`DefaultCPUAllocator: can't allocate memory` error — the CPU-OOM a job sees when, for example,
it materialises a whole dataset or a full checkpoint per rank in host memory. `torch.empty` never
touches the pages, so if a machine did grant the request nothing would be filled.
"""

import torch


def main() -> None:
    n = 10 * 2**40 // 4  # 10 TiB of float32
    print(f"allocating a host buffer of {n} float32 values", flush=True)
    buffer = torch.empty(n, dtype=torch.float32)
    print(f"allocation unexpectedly succeeded: {buffer.numel()} elements", flush=True)


if __name__ == "__main__":
    main()
