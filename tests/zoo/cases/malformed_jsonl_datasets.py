"""A malformed JSONL training file loaded with `datasets.load_dataset("json", ...)`.

Writes a small JSON Lines file of instruction-tuning records in which one line was cut off
mid-record (a truncated write or a bad concatenation), then loads it the usual way. The real
`datasets` failure chain is printed: the JSON parser's error, the Arrow fallback's error, and
`DatasetGenerationError: An error occurred while generating the dataset`. The dataset cache
lives in the run's temp dir (`HF_HOME`/`HF_DATASETS_CACHE` set by the zoo runner) and
everything is offline.
"""

import json
import os

from datasets import load_dataset


def main() -> None:
    os.makedirs("data")
    path = os.path.join("data", "train.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(200):
            record = {"instruction": f"Add {i} and {i + 1}.", "output": str(2 * i + 1)}
            line = json.dumps(record)
            if i == 137:
                line = line[: len(line) // 2]  # truncated mid-record
            f.write(line + "\n")
    print(f"loading {path}", flush=True)
    dataset = load_dataset("json", data_files={"train": path}, split="train")
    print(dataset, flush=True)


if __name__ == "__main__":
    main()
