"""A Trainer fed variable-length token sequences without padding.

The data set yields `input_ids` / `labels` lists of different lengths (tokenized without
`padding`), and the Trainer uses its default collator, which can only stack equal-length
rows. The first batch fails inside the collator with the real error from building a tensor
out of ragged lists. Tiny GPT-2 from a config, nothing downloaded.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed


def main() -> None:
    set_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    generator = torch.Generator().manual_seed(0)
    samples = []
    for i in range(16):
        ids = torch.randint(1, 128, (8 + i % 5,), generator=generator).tolist()
        samples.append({"input_ids": ids, "labels": ids})
    args = TrainingArguments(
        output_dir="out", max_steps=4, per_device_train_batch_size=4, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0,
    )
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=samples)
    trainer.train()


if __name__ == "__main__":
    main()
