"""Special tokens added to the tokenizer without resizing the model's embeddings.

A word-level tokenizer (built in memory with `tokenizers`, wrapped in `PreTrainedTokenizerFast`)
matches a tiny GPT-2's 128-row embedding table. Chat-format fine-tuning then adds
`<|im_start|>` / `<|im_end|>` as special tokens (ids 128 and 129) but forgets
`model.resize_token_embeddings(len(tokenizer))`. The first forward pass on a chat-formatted
sample fails with the real `IndexError: index out of range in self` from the embedding lookup.
"""

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast


def main() -> None:
    torch.manual_seed(0)
    words = ["<unk>", "<pad>"] + [f"w{i}" for i in range(126)]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>")
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tokenizer), n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    added = tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    print(f"added {added} special tokens; len(tokenizer)={len(tokenizer)}, "
          f"model embedding rows={model.get_input_embeddings().num_embeddings}", flush=True)
    batch = tokenizer(["<|im_start|> w1 w2 w3 <|im_end|>"], return_tensors="pt")
    print(f"input_ids={batch['input_ids'].tolist()}", flush=True)
    model(input_ids=batch["input_ids"], labels=batch["input_ids"])


if __name__ == "__main__":
    main()
