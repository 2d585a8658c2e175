"""Every secret kind of issue #14 in a realistic sample is redacted wherever text goes (answer, Slack blocks,
feedback store, LLM prompt), and a seeded corpus of 1,200 benign log lines (hex hashes, git SHAs, CUDA
addresses, UUIDs, base64 tensors, tokenizer settings) comes out untouched: 0 false redactions."""

from __future__ import annotations

import base64
import hashlib
import random
import struct
import uuid

import pytest

from assistant.redact import redact

# (kind, a realistic line holding it, the secret that must disappear). Values are made up; shapes are real.
SAMPLES = [
    ("huggingface-token", "HF_TOKEN=hf_xQzLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoP huggingface-cli login", "hf_xQzLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoP"),
    ("assignment", "export WANDB_API_KEY=9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
    ("wandb-key", "$ wandb login 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
    ("openai-key", "openai.AuthenticationError: Incorrect API key provided: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("openai-key", "ANTHROPIC_API_KEY=sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa-AAAA", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"),
    ("aws-access-key-id", "botocore: Credentials found, access key AKIAZ7XQ2M4N6P8R0T2V", "AKIAZ7XQ2M4N6P8R0T2V"),
    ("assignment", "aws_secret_access_key = Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa9A8b", "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa9A8b"),
    ("github-token", "remote: Invalid username or token ghp_4aB7cD0eF3gH6iJ9kL2mN5oP8qR1sT4uV7wX", "ghp_4aB7cD0eF3gH6iJ9kL2mN5oP8qR1sT4uV7wX"),
    ("github-token", "GITHUB_TOKEN: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ", "github_pat_11ABCDEFG0123456789"),
    ("slack-token", "slack_sdk.errors.SlackApiError: invalid_auth (token xoxb-2048-4096-Zq8Wx7Ec6Rv5Tb4Yn3Um)", "xoxb-2048-4096-Zq8Wx7Ec6Rv5Tb4Yn3Um"),
    ("slack-app-token", "TRAINFIX_SLACK_APP_TOKEN=xapp-1-A0B1C2D3E4F-5566778899001-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", "xapp-1-A0B1C2D3E4F-5566778899001"),
    ("slack-webhook", "posting to https://hooks.slack.com/services/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", "Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2"),
    ("gcp-private-key-id", '  "private_key_id": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",', "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"),
    ("private-key-block", '  "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n",', "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    ("jwt", "token=eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0cmFpbmZpeCIsImV4cCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLWJ5dGVz", "eyJzdWIiOiJ0cmFpbmZpeCIsImV4cCI6MTcwMDAwMDAwMH0"),
    ("url-credentials", "sqlalchemy.exc.OperationalError: (psycopg2) postgresql://mlops:Tr4in-F1x-pw@10.1.2.3:5432/runs", "Tr4in-F1x-pw"),
    ("url-credentials", "fatal: unable to access 'https://bot:glpat-Zy9Xw8Vu7Ts6@gitlab.example.com/ml/train.git/'", "glpat-Zy9Xw8Vu7Ts6"),
    ("assignment-password", "psycopg2: host=db.internal port=5432 user=app password=Tr0ub4dor&3 dbname=runs", "Tr0ub4dor&3"),
    ("assignment-password", "jdbc:mysql://db:3306/runs?user=ml&password=s3cr3tPass!", "s3cr3tPass!"),
    ("authorization-header", "> Authorization: Basic bWxvcHM6aHVudGVyMjAyNA==", "bWxvcHM6aHVudGVyMjAyNA=="),
    ("bearer-token", "curl -H 'Authorization: Bearer ya29.a0AfB_byC3d4E5f6G7h8I9j0K' https://storage.googleapis.com", "ya29.a0AfB_byC3d4E5f6G7h8I9j0K"),
    ("api-key-header", "x-api-key: 4f3e2d1c0b9a88776655", "4f3e2d1c0b9a88776655"),
]
KINDS = {k for k, _, _ in SAMPLES}


@pytest.mark.parametrize(("kind", "line", "secret"), SAMPLES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SAMPLES)])
def test_realistic_secret_is_redacted(kind, line, secret):
    r = redact(line)
    assert secret not in r.text, r.text
    assert r.count >= 1


def test_every_kind_of_the_issue_is_covered():
    wanted = {"huggingface-token", "wandb-key", "openai-key", "aws-access-key-id", "github-token", "slack-token",
              "gcp-private-key-id", "private-key-block", "jwt", "url-credentials", "assignment-password",
              "authorization-header"}
    assert wanted <= KINDS


def benign_corpus(n: int = 1200, seed: int = 14) -> list[str]:
    """Log lines full of things that look random but are not secrets (seeded: the same corpus every run)."""
    rnd = random.Random(seed)

    def hexs(k: int) -> str:
        return "".join(rnd.choice("0123456789abcdef") for _ in range(k))

    def tensor_b64() -> str:
        floats = [rnd.uniform(-3, 3) for _ in range(rnd.randint(4, 24))]
        return base64.b64encode(struct.pack(f"<{len(floats)}f", *floats)).decode()

    makers = [
        lambda: f"Saving model checkpoint to /ckpt/run-{hexs(8)}/checkpoint-{rnd.randint(1, 9999)} sha256={hexs(64)}",
        lambda: f"commit {hexs(40)}\nMerge: {hexs(7)} {hexs(7)}".split("\n")[rnd.randint(0, 1)],
        lambda: f"wandb: commit {hexs(40)} (run {hexs(8)})",
        lambda: f"HEAD is now at {hexs(12)} Fix the loss scaler",
        lambda: f"CUDA error: an illegal memory access was encountered at 0x{hexs(12)} (device pointer 0x7f{hexs(10)})",
        lambda: f"[rank{rnd.randint(0, 63)}]: ptr=0x{hexs(16)} size={rnd.randint(1, 1 << 30)} stream=0x{hexs(8)}",
        lambda: f"run_id: {uuid.UUID(int=rnd.getrandbits(128))} trial {uuid.UUID(int=rnd.getrandbits(128)).hex}",
        lambda: f"tensor(b64)={tensor_b64()}",
        lambda: f"weights.{rnd.randint(0, 31)}.bin md5 {hashlib.md5(str(rnd.random()).encode()).hexdigest()}",
        lambda: f"{{'loss': {rnd.uniform(0, 5):.4f}, 'grad_norm': {rnd.uniform(0, 9):.3f}, 'learning_rate': {rnd.uniform(0, 1e-4):.2e}, 'epoch': {rnd.uniform(0, 3):.2f}}}",
        lambda: f"max_tokens={rnd.randint(1, 8192)} max_new_tokens: {rnd.randint(1, 4096)} pad_token_id: {rnd.randint(0, 50000)}",
        lambda: rnd.choice(["tokenizer.pad_token = tokenizer.eos_token", "unk_token: <|endoftext|>",
                            "special_tokens_map: {'bos_token': '<s>', 'eos_token': '</s>'}",
                            "password authentication failed for user \"postgres\"", "authorization failed: 403 Forbidden",
                            "Token indices sequence length is longer than the specified maximum sequence length",
                            "huggingface_hub.errors.GatedRepoError: 401 Client Error", "hf_hub_download failed; retrying",
                            "Authorization: none", "the bearer of bad news", "sk-learn version 1.5.2"]),
        lambda: f"NCCL INFO comm 0x{hexs(12)} rank {rnd.randint(0, 7)} nRanks 8 busId {hexs(4)}0 commId 0x{hexs(16)}",
        lambda: f"docker: sha256:{hexs(64)} pulled; image id {hexs(12)}",
        lambda: f"  File \"/opt/conda/lib/python3.11/site-packages/torch/{rnd.choice(['nn', 'cuda', 'distributed'])}/module.py\", line {rnd.randint(1, 3000)}, in forward",
        lambda: f"http://10.0.{rnd.randint(0, 255)}.{rnd.randint(0, 255)}:{rnd.randint(1024, 65535)}/metrics MASTER_ADDR=10.0.0.1:29500",
        lambda: f"step {rnd.randint(1, 100000)} | loss {rnd.uniform(0, 5):.3f} | tokens/s {rnd.randint(1000, 90000)} | mem {rnd.uniform(1, 80):.2f} GiB",
    ]
    return [rnd.choice(makers)() for _ in range(n)]


def test_benign_corpus_is_never_redacted():
    corpus = benign_corpus()
    assert len(corpus) >= 1000 and len(set(corpus)) > 900
    redacted = [(line, r.text) for line in corpus if (r := redact(line)).count]
    assert redacted == [], f"{len(redacted)} false redaction(s), first: {redacted[0]}"


def test_the_corpus_is_the_same_every_run():
    assert benign_corpus()[:50] == benign_corpus()[:50]


def test_secret_in_a_paste_reaches_no_front_end_or_store(tmp_path):
    from app.feedback import FeedbackStore
    from app.render import markdown
    from app.slack_blocks import answer_messages
    from assistant import Assistant

    paste = "\n".join(line for _, line, _ in SAMPLES) + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    d = Assistant(retrieval="never").diagnose(paste)
    store = FeedbackStore(tmp_path)
    row = store.get(store.record(d, paste))
    from assistant.llm import build_messages

    prompt = str(build_messages(d, paste))
    shown = [markdown(d), d.model_dump_json(), str(answer_messages(d)), row.input, prompt]
    for _, _, secret in SAMPLES:
        for where, text in zip(("markdown", "json", "slack", "feedback", "llm prompt"), shown):
            assert secret not in text, (where, secret)
