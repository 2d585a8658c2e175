"""Loading a model by hub id when the hub cannot be reached (offline, empty cache).

`AutoModelForCausalLM.from_pretrained("gpt2")` on a machine that cannot reach huggingface.co
and has nothing cached — here forced with `HF_HUB_OFFLINE=1` and an empty `HF_HOME` (set by the
zoo runner), so no connection is ever attempted. The real `OSError` from `transformers` says it
could not connect to / find the files in the cache.
"""

from transformers import AutoModelForCausalLM


def main() -> None:
    print("loading gpt2", flush=True)
    AutoModelForCausalLM.from_pretrained("gpt2")


if __name__ == "__main__":
    main()
