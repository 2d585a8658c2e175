"""The failure zoo: real training failures reproduced with PyTorch / Hugging Face, kept as fixtures.

`python -m tests.zoo.regenerate [CASE ...]` reruns the case scripts and rewrites the fixtures.
"""
