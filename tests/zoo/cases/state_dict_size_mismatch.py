"""Resuming from a checkpoint saved by a differently shaped model: `size mismatch` in `load_state_dict`.

A tiny GPT-2 (vocab 128) is saved; the resumed run builds the model with a vocabulary of 160
(tokens were added after the checkpoint) and loads the saved state dict. `load_state_dict`
fails with the real `Error(s) in loading state_dict for GPT2LMHeadModel: size mismatch for …`.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def tiny(vocab_size: int) -> GPT2LMHeadModel:
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=vocab_size, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def main() -> None:
    torch.manual_seed(0)
    torch.save(tiny(128).state_dict(), "checkpoint.pt")
    print("resuming from checkpoint.pt", flush=True)
    model = tiny(160)
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu", weights_only=True))


if __name__ == "__main__":
    main()
