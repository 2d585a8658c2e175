"""Token id >= vocabulary size fed to an embedding: `IndexError: index out of range in self`.

A tiny GPT-2 built for a 128-token vocabulary (from a config, nothing downloaded) receives ids
produced by a different, larger tokenizer (ids up to 50256, GPT-2's `<|endoftext|>`). The token
embedding lookup (`nn.Embedding` → `torch.embedding`) fails on CPU with the real traceback
through `transformers`' GPT-2 forward.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    # Ids from a tokenizer whose vocabulary is larger than the model's embedding table.
    input_ids = torch.tensor([[15496, 11, 995, 0, 50256]])
    print(f"vocab_size={config.vocab_size} max_input_id={int(input_ids.max())}", flush=True)
    model(input_ids=input_ids, labels=input_ids)


if __name__ == "__main__":
    main()
