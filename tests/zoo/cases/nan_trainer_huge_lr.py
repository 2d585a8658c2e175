"""NaN loss in a Hugging Face Trainer run: learning rate 1e6 and no gradient clipping.

A tiny randomly initialised GPT-2 (built from a config, nothing downloaded) is trained with
`transformers.Trainer` on a few synthetic token sequences. With `learning_rate=1e6` and
`max_grad_norm=0` the first AdamW step throws every weight to ~1e6, the activations overflow
and from the second step on the Trainer logs `'loss': 'nan'` and `'grad_norm': 'nan'`. The run itself exits 0 — as real
runs do — leaving only the log lines as evidence.
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
        # The default (True) replaces a nan/inf step loss by the running mean before logging,
        # so the log would show `'loss': '0'` next to `'grad_norm': 'nan'`; show the raw value.
        logging_nan_inf_filter=False,
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
