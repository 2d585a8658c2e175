"""Every secret pattern's inline examples, plus redaction behaviour on realistic pastes."""

from __future__ import annotations

import pytest

from assistant.redact import patterns, redact

CASES = [(p.id, kind, ex) for p in patterns() for kind in ("match", "no_match") for ex in p.examples.get(kind, [])]


def test_every_pattern_has_both_kinds_of_example():
    for p in patterns():
        assert p.examples.get("match") and p.examples.get("no_match"), p.id


@pytest.mark.parametrize(("pid", "kind", "example"), CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_pattern_examples(pid, kind, example):
    result = redact(example)
    if kind == "match":
        assert pid in result.kinds, result
        assert result.text != example
    else:
        assert result.text == example, result


def test_secret_value_disappears_but_context_stays():
    r = redact("export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\nloss=nan")
    assert "0123456789abcdef" not in r.text
    assert "WANDB_API_KEY=" in r.text
    assert r.text.endswith("loss=nan")


def test_private_key_block_keeps_line_count():
    text = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAB3NzaC1yc2E\nmore\n-----END OPENSSH PRIVATE KEY-----\nafter"
    r = redact(text)
    assert r.text.count("\n") == text.count("\n")
    assert "AAAAB3NzaC1yc2E" not in r.text
    assert r.text.startswith("before\n") and r.text.endswith("\nafter")
    assert r.kinds == ["private-key-block"]


def test_clean_training_log_is_untouched():
    log = "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}\n" * 3
    assert redact(log).text == log
    assert redact(log).count == 0


def test_specific_pattern_wins_and_is_not_redacted_twice():
    r = redact("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789")
    assert r.text == "HF_TOKEN=[REDACTED:huggingface-token]"
    assert r.count == 1


def test_the_one_pass_prefilter_redacts_exactly_what_trying_every_pattern_does():
    """``_redact_line`` runs only the patterns an RE2 set finds in the line; on lines mixing several secrets,
    clean text and partial matches it must give what running every pattern in file order gives."""
    import random

    from assistant import redact as r

    def every_pattern(line: str, found: list[str]) -> str:
        for pid, rx, min_length in r._compiled():
            parts, pos = [], 0
            gi = rx.groupindex["secret"] if "secret" in rx.groupindex else 0
            for m in rx.finditer(line):
                start, end = m.span(gi) if m.group(gi) is not None else m.span()
                if line.startswith("[REDACTED:", start) or end - start < min_length:
                    continue
                parts += [line[pos:start], f"[REDACTED:{pid}]"]
                pos = end
                found.append(pid)
            if parts:
                line = "".join(parts) + line[pos:]
        return line

    pieces = [e for p in patterns() for e in (*p.examples.get("match", []), *p.examples.get("no_match", []))]
    pieces += ["step 3 loss 0.51", "export", "=", "token:", "训练 loss", "Authorization: Bearer", "'", "url="]
    rng = random.Random(7)
    with_secret = 0
    for _ in range(3000):
        line = rng.choice([" ", "", " | "]).join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))
        line = line.replace("\n", " ")
        want_found, got_found = [], []
        assert r._redact_line(line, got_found) == every_pattern(line, want_found), line
        assert got_found == want_found
        with_secret += bool(want_found)
    assert with_secret > 1000
