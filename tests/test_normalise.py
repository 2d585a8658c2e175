"""Input cleanup: NUL / invalid UTF-8, ANSI, carriage-return redraws, CRLF, long lines, rank prefixes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.normalise import Chunker, CleanStats, clean_bytes, iter_chunk_lines, language, split_prefix


def _lines(raw: bytes, max_chunk: int = 1 << 20, pieces: int = 1) -> tuple[list[tuple[int, str]], CleanStats]:
    ch = Chunker(max_chunk=max_chunk)
    chunks = []
    step = max(1, len(raw) // pieces)
    for i in range(0, len(raw), step):
        chunks += ch.feed(raw[i : i + step])
    chunks += ch.finish()
    out = [(n, line.decode()) for c in chunks for n, line in iter_chunk_lines(c)]
    return out, ch.stats


def test_ansi_codes_are_stripped_and_counted():
    stats = CleanStats()
    assert clean_bytes(b"\x1b[31mERROR\x1b[0m: boom\n", stats) == b"ERROR: boom\n"
    assert stats.ansi_codes == 2


def test_carriage_return_redraws_keep_the_last_one():
    raw = b"  0%|          | 0/10 [00:00<?, ?it/s]\r 50%|#####     | 5/10\r100%|##########| 10/10\nnext\n"
    lines, stats = _lines(raw)
    assert lines == [(1, "100%|##########| 10/10"), (2, "next")]
    assert stats.redraws == 2


def test_crlf_is_one_line_break_and_numbers_are_kept():
    lines, stats = _lines(b"a\r\nb\r\n\r\nc")
    assert lines == [(1, "a"), (2, "b"), (3, ""), (4, "c")]
    assert stats.lines == 4


def test_nul_and_invalid_utf8_are_dropped_with_notices():
    lines, stats = _lines(b"lo\x00ss\xff\xfe=1\n\xe6\x98\xbe\xe5\xad\x98\n")
    assert lines == [(1, "loss=1"), (2, "显存")]
    assert stats.nul_bytes == 1 and stats.invalid_utf8 == 2
    assert any("NUL" in n for n in stats.notices()) and any("UTF-8" in n for n in stats.notices())


def test_line_numbers_survive_chunking_in_small_pieces():
    raw = "".join(f"line {i}\n" for i in range(1, 501)).encode()
    lines, stats = _lines(raw, max_chunk=64, pieces=37)
    assert lines == [(i, f"line {i}") for i in range(1, 501)]
    assert stats.lines == 500


def test_a_line_longer_than_a_chunk_keeps_its_number_and_utf8():
    raw = ("显" * 100 + "\nnext\n").encode()
    lines, stats = _lines(raw, max_chunk=64)
    assert {n for n, _ in lines} == {1, 2}
    assert "".join(t for n, t in lines if n == 1) == "显" * 100
    assert stats.long_line_cuts >= 1


def test_rank_prefixes_are_split_off():
    assert split_prefix("[rank3]: RuntimeError: boom") == ("3", "RuntimeError: boom")
    assert split_prefix("[default0]:Traceback (most recent call last):") == ("0", "Traceback (most recent call last):")
    assert split_prefix("[rank0]:[W ProcessGroupNCCL.cpp:1] warn") == ("0", "[W ProcessGroupNCCL.cpp:1] warn")
    assert split_prefix("node-2: [rank5]: x") == ("5", "x")
    assert split_prefix("10.0.0.2: loss=1") == ("10.0.0.2", "loss=1")
    assert split_prefix("[Rank 1] step=10, skipped=0") == ("1", "step=10, skipped=0")


def test_things_that_are_not_rank_prefixes_stay():
    assert split_prefix("RuntimeError: CUDA error") == (None, "RuntimeError: CUDA error")
    assert split_prefix("train.py:12: UserWarning: x") == (None, "train.py:12: UserWarning: x")


def test_language_heuristic():
    zh = CleanStats()
    clean_bytes("训练到一半 loss 变成 nan 了\nTraceback (most recent call last):\n  File \"x.py\"".encode(), zh)
    assert language(zh) == "zh"
    en = CleanStats()
    clean_bytes(b"loss becomes nan after 2000 steps", en)
    assert language(en) == "en"


def test_binary_noise_is_answered_in_english_though_its_bytes_decode_partly_as_cjk():
    import random

    noise = random.Random(14).randbytes(200_000)
    stats = CleanStats()
    clean_bytes(noise, stats)
    assert stats.binary and stats.cjk_chars >= 8  # without the binary check this reads as Chinese
    assert language(stats) == "en"
    text = "显存不够了 CUDA out of memory".encode()
    stats = CleanStats()
    clean_bytes(text, stats)
    assert not stats.binary and language(stats) == "zh"


def test_empty_input_has_no_lines():
    lines, stats = _lines(b"")
    assert lines == [] and stats.lines == 0


def _strip_reference(data: bytes) -> bytes:
    """ANSI stripping as it was before repeated codes were removed with bytes.replace: piece by piece."""
    from assistant.normalise import _escape_length

    pieces = data.split(b"\x1b")
    return b"".join([pieces[0]] + [p[_escape_length(p):] for p in pieces[1:]])


_ESCAPE_PARTS = [b"\x1b", b"[", b"]", b"32", b";", b"1", b"m", b"K", b"0", b"\x07", b"\n", b"\r", b"M", b"\\", b"a",
                 b"loss 1.5", b"\x1b[32m", b"\x1b[0m", b"\x1b]0;title\x07", b"\x1b[12", b"\xe8\xae\xad"]


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_ESCAPE_PARTS), max_size=40))
def test_ansi_stripping_is_the_piece_by_piece_cut(parts):
    from assistant.normalise import CleanStats, _strip_ansi

    data = b"".join(parts)
    for text in (data, data * 3, b"\x1b[32mINFO\x1b[0m x\n" * 5 + data):  # repeated codes first, then anything
        stats = CleanStats()
        assert _strip_ansi(text, stats) == _strip_reference(text), text
        assert stats.ansi_codes == text.count(b"\x1b")
