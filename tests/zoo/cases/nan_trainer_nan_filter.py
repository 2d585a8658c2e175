"""NaN in a Hugging Face Trainer run as the default logging shows it: `'loss': '0'`, `'grad_norm': 'nan'`.

The same run as `nan_trainer_huge_lr` (tiny GPT-2 from a config, learning rate 1e6, no gradient
clipping), but with the Trainer's default `logging_nan_inf_filter=True`. The filter drops the
non-finite step losses from the logged average, so from step 2 the log shows `'loss': '0'` — a
suspiciously perfect loss — next to `'grad_norm': 'nan'`. The model weights are NaN all the same.
"""

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed


class RandomTokens(Dataset):
    """Synthetic causal-LM samples: random token ids, labels equal to the inputs."""

    def __init__(self, n: int, seq_len: int, vocab_size: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab_size, (n, seq_len), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    set_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=64)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir="out",
        learning_rate=1e6,
        max_grad_norm=0.0,
        max_steps=8,
        per_device_train_batch_size=4,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(32, 16, config.vocab_size))
    trainer.train()


if __name__ == "__main__":
    main()
