"""Bilingual BM25 tokens: jieba words for Chinese, whole identifiers (plus parts) for English and code."""

from __future__ import annotations

import pytest

from assistant.retrieval.tokenize import tokenize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CUDA_VISIBLE_DEVICES=0,1", ["cuda_visible_devices", "cuda", "visible", "devices"]),
        ("find_unused_parameters=True", ["find_unused_parameters", "find", "unused", "parameters", "true"]),
        ("OutOfMemoryError", ["outofmemoryerror", "out", "memory", "error"]),
        ("torch.cuda.OutOfMemoryError", ["torch.cuda.outofmemoryerror", "torch", "cuda", "outofmemoryerror"]),
    ],
)
def test_identifiers_are_kept_whole_with_their_parts(text, expected):
    tokens = tokenize(text)
    assert tokens[0] == expected[0]
    for tok in expected:
        assert tok in tokens


def test_dotted_identifier_does_not_swallow_trailing_punctuation():
    assert "memory" in tokenize("CUDA out of memory.")
    assert "memory." not in tokenize("CUDA out of memory.")


def test_short_mixed_case_words_are_not_split():
    tokens = tokenize("loss is NaN with fp16, use 1e-4")
    assert "nan" in tokens and "na" not in tokens
    assert "fp16" in tokens and "1e-4" in tokens


def test_chinese_is_segmented_into_words():
    tokens = tokenize("显存不足怎么办")
    assert "显存" in tokens and "不足" in tokens
    assert "显存不足怎么办" not in tokens
    assert "怎么办" not in tokens  # stopword


def test_mixed_chinese_and_english():
    tokens = tokenize("训练时 Loss 变为 NaN，NCCL 超时")
    assert {"训练", "loss", "变为", "nan", "nccl", "超时"} <= set(tokens)
    assert "，" not in tokens


def test_english_stopwords_dropped_but_identifiers_kept():
    tokens = tokenize("what is the learning rate for the model")
    assert "the" not in tokens and "is" not in tokens
    assert {"learning", "rate", "model"} <= set(tokens)


def test_pathological_input_is_linear_and_bounded():
    # RE2 has no backtracking; a long run of near-identifier characters must still tokenise.
    text = "a." * 50_000 + "!"
    tokens = tokenize(text)
    assert tokens and all(t for t in tokens)


def test_empty_and_symbol_only():
    assert tokenize("") == []
    assert tokenize("!!! ??? ，。") == []
