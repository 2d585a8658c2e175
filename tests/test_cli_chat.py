"""`trainfix chat` from a pipe: messages separated by `---`; a follow-up reply narrows the diagnosis."""

from __future__ import annotations

import subprocess
import sys

NAN_LOG = "\n".join(
    [f"{{'loss': {2.1 - i * 0.001:.4f}, 'learning_rate': 4e-05, 'epoch': {i / 100:.2f}}}" for i in range(60)]
    + ["{'loss': nan, 'learning_rate': 4e-05, 'epoch': 0.60}"] * 3
)


def test_chat_follow_up_reply_narrows_the_previous_diagnosis():
    stdin = f"{NAN_LOG}\n---\n就是bf16\n"
    out = subprocess.run([sys.executable, "-m", "app.cli", "chat", "--plain"], input=stdin,
                         capture_output=True, text=True, timeout=180, check=True).stdout
    first, _, second = out.partition("**Sources**")
    assert "`nan-loss`" in first and "Are you training in FP16 or BF16" in first
    answer = second.split("\n## ", 1)[1]  # the reply to "就是bf16": Chinese, same diagnosis, re-ranked
    assert answer.startswith("Loss 变为 NaN (`nan-loss`)")
    causes = answer.split("**本例中可能的原因**", 1)[1]
    assert not causes.lstrip().startswith("1. FP16 溢出")


def test_chat_ends_cleanly_at_end_of_input():
    out = subprocess.run([sys.executable, "-m", "app.cli", "chat"], input="", capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr
