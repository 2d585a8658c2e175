"""Numbers from the input, read as an expert would: what they say about this case.

A :class:`~assistant.models.Reading` is a sentence (English and Chinese) computed from numbers on
input lines — an OOM's requested / free / reserved-but-unallocated memory (a fragmentation or a
capacity verdict, and a micro-batch/accumulation pair that keeps the global batch), a token id
against the vocabulary size, the process the kernel's OOM killer chose and its resident memory, the
learning rate and warmup the user gave. A reading may point at one of its mode's causes, which the
decision tree then ranks higher. Only numbers found in the input are used; every reading names its line.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import re2

from assistant import fastre
from assistant.models import Reading
from assistant.tracebacks import KeptLine

_UNIT = {"b": 1 / 2**30, "kib": 1 / 2**20, "mib": 1 / 2**10, "gib": 1.0, "tib": 2**10,
         "kb": 1 / 2**20, "mb": 1 / 2**10, "gb": 1.0, "gi": 1.0, "g": 1.0, "mi": 1 / 2**10, "m": 1 / 2**10}
_SIZE = r"(\d+(?:\.\d+)?)\s*(GiB|MiB|KiB|TiB|GB|MB|KB|B)\b"
_REQUESTED = fastre.compile(r"(?i)Tried to allocate " + _SIZE)
_CAPACITY = fastre.compile(r"(?i)total capacity of " + _SIZE + r" of which " + _SIZE + r" is free")
_ALLOCATED = fastre.compile(r"(?i)" + _SIZE + r" is allocated by PyTorch")
_RESERVED_FREE = fastre.compile(r"(?i)" + _SIZE + r" is reserved by PyTorch but unallocated")
# The pre-2.1 message: "(79.15 GiB total capacity; 70.02 GiB already allocated; 1.21 GiB free; 76.00 GiB reserved in total by PyTorch)"
_OLD = fastre.compile(r"(?i)" + _SIZE + r" total capacity; " + _SIZE + r" already allocated; " + _SIZE + r" free; "
                      + _SIZE + r" reserved in total by PyTorch")
_MICRO = fastre.compile(r"(?i)\b(per_device_train_batch_size|train_micro_batch_size_per_gpu|micro_batch_size|"
                        r"micro-batch-size|batch_size)[\"']?\s*[:=]?\s*(\d{1,5})\b")
_ACCUM = fastre.compile(r"(?i)\b(gradient_accumulation_steps|grad_accum(?:_steps)?|accumulate_grad_batches|"
                        r"gradient-accumulation-steps)[\"']?\s*[:=]?\s*(\d{1,5})\b")
_INDEX = fastre.compile(r"(?i)index (-?\d+) is out of bounds for dimension \d+ with size (\d+)")
_VOCAB = fastre.compile(r"(?i)\b(?:vocab_size|num_embeddings|embedding size|vocab size|vocab)[\"']?\s*[:=]?\s*(\d{3,7})\b")
_TOKENIZER_LEN = fastre.compile(r"(?i)\blen\(tokenizer\)\s*[:=]?\s*(\d{3,7})\b|\btokenizer (?:has|size|length)\D{0,12}(\d{3,7})\b")
_MAX_ID = fastre.compile(r"(?i)\bmax(?:imum)?[ _](?:token[ _])?(?:input[ _])?id[s]?\W{0,6}(\d{3,7})\b")
_NUM_WORKERS = fastre.compile(r"(?i)\bnum_workers\s*[=:]\s*(\d+)\b")
_KILLED = fastre.compile(r"(?i)Killed process (\d+) \(([^)]{1,40})\)(?:.*?total-vm:(\d+)kB)?(?:.*?anon-rss:(\d+)kB)?")
_CGROUP = fastre.compile(r"(?i)(?:memory cgroup out of memory|oom-kill:constraint=CONSTRAINT_MEMCG|OOMKilled)")
_LIMIT = fastre.compile(r"(?i)(?:memory[._ ]?limit|memory\.max|limits?\.memory|mem_limit)\W{0,6}(\d+(?:\.\d+)?)\s*(GiB|Gi|GB|G|MiB|Mi|MB|M)\b")
_LR = fastre.compile(r"(?i)(?:\b(?:learning_rate|lr)[\"']?\s*[:=]\s*|--lr[ =])(\d+(?:\.\d+)?(?:e-?\d+)?)\b")
_WARMUP = fastre.compile(r"(?i)\bwarmup_(steps|ratio)[\"']?\s*[:=]\s*(\d+(?:\.\d+)?)\b|\b(?:no|without(?: any)?) (?:lr )?(warm-?up)\b()")
_WORKER = ("data_worker", "dataloader", "pt_data", "worker")

# `df -h` row: "/dev/nvme1n1  3.5T  3.5T  0  100% /data"; `du -sh` row: "263G  /data/out/checkpoint-12000"
_DF = fastre.compile(r"^\s*(\S+)\s+(\d+(?:\.\d+)?[KMGTP]i?)\s+(\d+(?:\.\d+)?[KMGTP]i?)\s+(\d+(?:\.\d+)?[KMGTP]?i?)\s+(\d{1,3})%\s+(/\S*)\s*$")
_DU = fastre.compile(r"^\s*(\d+(?:\.\d+)?[KMGTP])\s+(\S*(?:checkpoint|ckpt|global_step|iter_)[-_]?\d+)/?\s*$")
# `free -g` / `free -h` row: "Mem:  503  489  3  1  10  8"
_FREE = fastre.compile(r"^\s*Mem:\s+(\d+(?:\.\d+)?)([KMGT]i?)?\s+(\d+(?:\.\d+)?)([KMGT]i?)?\s+(\d+(?:\.\d+)?)")
_K8S_LIMIT = fastre.compile(r"^\s*memory:\s+(\d+(?:\.\d+)?)(Gi|Mi|G|M)\s*$")
FULL_PERCENT = 95

FRAGMENTED_SHARE = 1.0  # reserved-but-unallocated at least the request: the memory is there, but in pieces
FRAGMENTED_MIN = 0.03  # ... and at least 3 % of the GPU's capacity


def _gib(value: str, unit: str) -> float:
    return float(value) * _UNIT[unit.lower()]


def _fmt(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 1 else f"{gib * 1024:.0f} MiB"


PREFILTER_FROM = 64  # kept lines from which a pattern is first looked for in their joined text (_Lines)


def read_numbers(lines: Sequence[KeptLine], total_steps: float | None = None) -> list[Reading]:
    """Every reading the numbers on ``lines`` support (at most one of each kind)."""
    out: list[Reading] = []
    text = {k.number: k.body for k in lines}
    if len(lines) >= PREFILTER_FROM:
        lines = _Lines(lines)
    for fn in (_oom, _logits, _token, _killed, _lr, _disk, _host_memory, _straggler_gpu, _no_labels, _skipped,
               _short_file, _profiled_loader, _memcg, _shuffle_buffer, _busbw, _pad_token,
               _failed_share, _class_report, _generate_oom, _comm_timers, _nccl_hcas, _longer_chosen):
        reading = fn(lines, total_steps)
        if reading is not None:
            out.append(reading.model_copy(update={"text": text.get(reading.line, "")}))
    return out


class _Group:
    """A stand-in match whose groups are given (numbers read together from one line)."""

    def __init__(self, *groups: str | None) -> None:
        self._groups = groups

    def group(self, i: int) -> str | None:
        return self._groups[i - 1]


class _Lines(list):
    """The kept lines (up to a few thousand from a long log), with their text joined once: a pattern found nowhere
    in it is not tried line by line. Each of the readings' patterns looks for its first line; most never occur."""

    __slots__ = ("_joined",)

    def __init__(self, lines: Sequence[KeptLine]) -> None:
        super().__init__(lines)
        self._joined: str | None = None

    def may_match(self, pattern) -> bool:
        """False only when no line can match: the pattern, with ``^``/``$`` at every line, finds nothing in the joined
        text (a match inside one line is a match there too; one across lines is only a wasted line-by-line look)."""
        source = pattern.pattern
        if not isinstance(source, str) or "\\A" in source or "\\z" in source:
            return True  # anchored at the start or end of the text: only a line-by-line look says
        if self._joined is None:
            self._joined = "\n".join(k.body for k in self)
        options = tuple(getattr(pattern.options, name) for name in re2.Options.NAMES)
        return _multiline(source, options).search(self._joined) is not None


@lru_cache(maxsize=512)
def _multiline(source: str, options: tuple) -> fastre.Pattern:
    """``source`` with ``^``/``$`` at line boundaries, compiled with the same options."""
    compiled = re2.Options()
    for name, value in zip(re2.Options.NAMES, options):
        setattr(compiled, name, value)
    return fastre.compile("(?m)" + source, compiled)


def _first(lines: Sequence[KeptLine], pattern) -> tuple[KeptLine, object] | None:
    if isinstance(lines, _Lines) and not lines.may_match(pattern):
        return None
    for k in lines:
        m = pattern.search(k.body)
        if m:
            return k, m
    return None


def _oom(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    found = _first(lines, _REQUESTED)
    if found is None:
        return None
    line, m = found
    requested = _gib(m.group(1), m.group(2))
    free = slack = capacity = None
    cap = _CAPACITY.search(line.body)
    if cap:
        capacity, free = _gib(cap.group(1), cap.group(2)), _gib(cap.group(3), cap.group(4))
    r = _RESERVED_FREE.search(line.body)
    if r:
        slack = _gib(r.group(1), r.group(2))
    old = _OLD.search(line.body)
    if old:
        capacity, allocated = _gib(old.group(1), old.group(2)), _gib(old.group(3), old.group(4))
        free, reserved = _gib(old.group(5), old.group(6)), _gib(old.group(7), old.group(8))
        slack = max(reserved - allocated, 0.0)
    if slack is None or free is None:
        return None
    where = f"line {line.number}"
    # a few hundred MiB of slack on a large GPU is normal allocator overhead, not fragmentation
    if slack >= FRAGMENTED_SHARE * requested and slack > free and (capacity is None or slack >= FRAGMENTED_MIN * capacity):
        en = (f"Fragmentation, not capacity: {_fmt(slack)} is reserved by PyTorch but unallocated — more than the "
              f"{_fmt(requested)} requested — yet no free block is big enough ({_fmt(free)} free) ({where}). "
              "Let the allocator use expandable segments before cutting the batch.")
        zh = (f"是碎片化，不是容量不够：有 {_fmt(slack)} 显存被 PyTorch 预留但未分配，比申请的 {_fmt(requested)} 还多，"
              f"却没有足够大的连续块（空闲 {_fmt(free)}）（第 {line.number} 行）。先让分配器使用 expandable segments，再考虑减小 batch。")
        return Reading(modes=["cuda-oom"], kind="oom-fragmentation", line=line.number, en=en, zh=zh,
                       causes={"cuda-oom": "memory-fragmentation"}, against={"cuda-oom": "model-or-batch-too-large"},
                       delta=0.45, why_en=f"{_fmt(slack)} reserved-but-unallocated ≥ {_fmt(requested)} requested (line {line.number})",
                       why_zh=f"预留未分配 {_fmt(slack)} ≥ 申请的 {_fmt(requested)}（第 {line.number} 行）")
    short = requested - free - slack
    en = (f"Capacity: the step needs {_fmt(requested)} more but only {_fmt(free)} is free and {_fmt(slack)} is "
          f"reserved-but-unallocated"
          + (f" on a {_fmt(capacity)} GPU" if capacity else "")
          + f" ({where}): about {_fmt(max(short, 0.0))} short, so the job does not fit as configured.")
    zh = (f"是容量不够：这一步还需要 {_fmt(requested)}，但只有 {_fmt(free)} 空闲、{_fmt(slack)} 预留未分配"
          + (f"（显卡总容量 {_fmt(capacity)}）" if capacity else "")
          + f"（第 {line.number} 行）：大约缺 {_fmt(max(short, 0.0))}，按当前配置放不下。")
    micro, accum = _first(lines, _MICRO), _first(lines, _ACCUM)
    if any(_IN_GENERATE.search(k.body) for k in lines if k.number < line.number):
        micro = None  # an OOM inside generate(): the training micro-batch is not what to cut (see _generate_oom)
    if micro is not None:
        name, n = micro[1].group(1), int(micro[1].group(2))
        a_name, a = (accum[1].group(1), int(accum[1].group(2))) if accum else ("gradient_accumulation_steps", 1)
        if n >= 2:
            half, double = n // 2, a * (n // (n // 2))
            en += (f" Halve the micro-batch and double accumulation to keep the global batch: {name}={half}, "
                   f"{a_name}={double} ({n}×{a} = {half}×{double} = {n * a} per GPU; from line {micro[0].number}).")
            zh += (f"把 micro-batch 减半、梯度累积加倍，全局 batch 不变：{name}={half}，{a_name}={double}"
                   f"（{n}×{a} = {half}×{double} = 每卡 {n * a}；见第 {micro[0].number} 行）。")
        else:
            en += f" The micro-batch is already {n} ({name}, line {micro[0].number}): reduce memory per sample instead (gradient checkpointing, shorter sequences, sharding)."
            zh += f"micro-batch 已经是 {n}（{name}，第 {micro[0].number} 行）：应减少每个样本的显存（梯度检查点、更短的序列、切分）。"
    return Reading(modes=["cuda-oom"], kind="oom-capacity", line=line.number, en=en, zh=zh,
                   causes={"cuda-oom": "model-or-batch-too-large"}, against={"cuda-oom": "memory-fragmentation"},
                   delta=0.35, why_en=f"{_fmt(requested)} requested, {_fmt(free)} free, only {_fmt(slack)} reserved-but-unallocated (line {line.number})",
                   why_zh=f"申请 {_fmt(requested)}，空闲 {_fmt(free)}，预留未分配只有 {_fmt(slack)}（第 {line.number} 行）")


_PRINT = fastre.compile(r"print\((.{1,300})\)\s*(?:(?:->|→|=>|#)\s*(.{1,200}))?$")
_NUMBER = fastre.compile(r"^-?\d+(?:\.\d+)?$")


def _split_args(args: str) -> list[str]:
    """Top-level comma-separated arguments of a call (brackets nest)."""
    out, depth, cur = [], 0, []
    for ch in args:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def printed_values(lines: Sequence[KeptLine]) -> list[tuple[str, int, KeptLine]]:
    """``(expression, integer value, line)`` from a pasted ``print(a, b)`` and the output line after it
    (or after ``->`` on the same line): how people show numbers in a REPL or a debugging session."""
    out = []
    for i, k in enumerate(lines):
        m = _PRINT.search(k.body) if "print(" in k.body else None
        if m is None:
            continue
        args = _split_args(m.group(1))
        shown = m.group(2) if m.group(2) else (lines[i + 1].body if i + 1 < len(lines) else "")
        where = k if m.group(2) else (lines[i + 1] if i + 1 < len(lines) else k)
        values = shown.replace("torch.Size([", "[").replace(",", " ").replace("(", " ").replace(")", " ").split()
        nums = [v.strip("[]") for v in values]
        j = 0
        for arg in args:
            while j < len(nums) and not _NUMBER.match(nums[j]):
                j += 1
            if j >= len(nums):
                break
            if "." not in nums[j]:
                out.append((arg, int(nums[j]), where))
            j += 1
    return out


def _token(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    found = _first(lines, _INDEX)
    vocab = _first(lines, _VOCAB)
    tok = _first(lines, _TOKENIZER_LEN)
    max_id = _first(lines, _MAX_ID)
    named = printed_values(lines)
    p_vocab = next(((v, k) for e, v, k in named if re2.search(r"vocab_size|num_embeddings|embed", e)), None)
    p_tok = next(((v, k) for e, v, k in named if re2.search(r"len\(\s*tok", e)), None)
    p_max = next(((v, k) for e, v, k in named if re2.search(r"max", e) and re2.search(r"id", e)), None)
    if found is None and p_vocab is not None and (p_tok or p_max):
        n_vocab, where = p_vocab
        if p_tok is not None and p_tok[0] > n_vocab:
            n = p_tok[0]
            en = (f"The tokenizer has {n} tokens but the embedding has {n_vocab} rows (line {where.number}): "
                  f"{n - n_vocab} added token(s) have no embedding — call model.resize_token_embeddings(len(tokenizer)).")
            zh = (f"tokenizer 有 {n} 个 token，但 embedding 只有 {n_vocab} 行（第 {where.number} 行）：新增的 {n - n_vocab} 个 "
                  "token 没有 embedding——调用 model.resize_token_embeddings(len(tokenizer))。")
            return Reading(modes=["token-out-of-range"], kind="token-id", line=where.number, en=en, zh=zh,
                           causes={"token-out-of-range": "vocab-mismatch-added-tokens"}, delta=0.35)
        if p_max is not None and p_max[0] >= n_vocab:
            top = p_max[0]
            far = top >= 2 * n_vocab
            en = (f"The largest token id is {top} but the vocabulary has {n_vocab} entries (line {where.number})"
                  + (": far beyond a few added tokens — the data was tokenized with another model's tokenizer; "
                     "re-tokenize it (clamping ids or resizing the embeddings would train on garbage)." if far else "."))
            zh = (f"最大的 token id 是 {top}，但词表只有 {n_vocab} 个（第 {where.number} 行）"
                  + ("：远超新增几个 token 的范围——数据是用别的模型的 tokenizer 分词的；应重新分词"
                     "（截断 id 或扩大 embedding 都是在垃圾数据上训练）。" if far else "。"))
            return Reading(modes=["token-out-of-range"], kind="token-id", line=where.number, en=en, zh=zh,
                           causes={"token-out-of-range": "wrong-tokenizer-for-data" if far else "vocab-mismatch-added-tokens"},
                           delta=0.4)
    if found is not None:
        line, m = found
        idx, size = int(m.group(1)), int(m.group(2))
        if size < 100:
            return None  # a small dimension: a class index or a position, not a vocabulary
        if idx < 0:
            en = f"Token id {idx} is negative (line {line.number}): a padding or label value (-100?) reached the embedding."
            zh = f"token id {idx} 是负数（第 {line.number} 行）：padding 或 label 的取值（-100？）被送进了 embedding。"
            return Reading(modes=["token-out-of-range"], kind="token-id", line=line.number, en=en, zh=zh,
                           causes={"token-out-of-range": "invalid-special-token-id"}, delta=0.3)
        extra = idx - size + 1
        far = idx >= 2 * size
        en = (f"Token id {idx} ≥ vocabulary size {size} (line {line.number}): ids must be below {size}; "
              + ("that is far beyond a few added tokens — the data was tokenized with another model's tokenizer."
                 if far else f"at least {extra} id(s) have no embedding row."))
        zh = (f"token id {idx} ≥ 词表大小 {size}（第 {line.number} 行）：id 必须小于 {size}；"
              + ("远超新增几个 token 的范围——数据是用别的模型的 tokenizer 分词的。" if far
                 else f"至少有 {extra} 个 id 没有对应的 embedding 行。"))
        return Reading(modes=["token-out-of-range"], kind="token-id", line=line.number, en=en, zh=zh,
                       causes={"token-out-of-range": "wrong-tokenizer-for-data" if far else "vocab-mismatch-added-tokens"},
                       delta=0.3 if far else 0.2)
    if tok is not None and vocab is not None:
        n_tok = int(tok[1].group(1) or tok[1].group(2))
        n_vocab = int(vocab[1].group(1))
        if n_tok > n_vocab:
            first = min(tok[0].number, vocab[0].number)
            en = (f"The tokenizer has {n_tok} tokens but the embedding has {n_vocab} rows (lines {tok[0].number} and "
                  f"{vocab[0].number}): {n_tok - n_vocab} added token(s) have no embedding — call "
                  f"model.resize_token_embeddings(len(tokenizer)).")
            zh = (f"tokenizer 有 {n_tok} 个 token，但 embedding 只有 {n_vocab} 行（第 {tok[0].number} 和 {vocab[0].number} 行）："
                  f"新增的 {n_tok - n_vocab} 个 token 没有 embedding——调用 model.resize_token_embeddings(len(tokenizer))。")
            return Reading(modes=["token-out-of-range"], kind="token-id", line=first, en=en, zh=zh,
                           causes={"token-out-of-range": "vocab-mismatch-added-tokens"}, delta=0.35)
    if max_id is not None and vocab is not None:
        top, n_vocab = int(max_id[1].group(1)), int(vocab[1].group(1))
        if top >= n_vocab:
            en = f"The largest token id is {top} but the vocabulary has {n_vocab} entries (lines {max_id[0].number}, {vocab[0].number})."
            zh = f"最大的 token id 是 {top}，但词表只有 {n_vocab} 个（第 {max_id[0].number}、{vocab[0].number} 行）。"
            return Reading(modes=["token-out-of-range"], kind="token-id", line=max_id[0].number, en=en, zh=zh,
                           causes={"token-out-of-range": "vocab-mismatch-added-tokens"}, delta=0.2)
    return None


def _killed(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    found = _first(lines, _KILLED)
    if found is None:
        return None
    line, m = found
    pid, name = m.group(1), m.group(2)
    rss = int(m.group(4)) / 2**20 if m.group(4) else None
    cgroup = _first(lines, _CGROUP)
    limit = _first(lines, _LIMIT)
    worker = any(w in name.lower() for w in _WORKER)
    # the launcher names the rank of the killed pid: "failed (exitcode: -9) local_rank: 5 (pid: 90817)"
    owner = _first(lines, fastre.compile(r"(?i)\b(local_rank|rank)\s*:?\s*(\d+)\b.{0,60}\bpid:?\s*" + pid + r"\b"))
    who = f", {owner[1].group(1)} {owner[1].group(2)} (line {owner[0].number})" if owner else ""
    who_zh = f"，即 {owner[1].group(1)} {owner[1].group(2)}（第 {owner[0].number} 行）" if owner else ""
    kb = f"{m.group(4)} kB = " if m.group(4) else ""
    en = (f"The kernel's OOM killer chose {name} (pid {pid}{who})"
          + (f" at {kb}{_fmt(rss)} resident (anon-rss)" if rss else "") + f" (line {line.number})")
    zh = (f"内核 OOM killer 杀掉的是 {name}（pid {pid}{who_zh}）"
          + (f"，常驻内存 {kb}{_fmt(rss)}（anon-rss）" if rss else "") + f"（第 {line.number} 行）")
    if limit is not None:
        lim = _gib(limit[1].group(1), limit[1].group(2))
        en += f", against a memory limit of {_fmt(lim)} (line {limit[0].number})"
        zh += f"，内存上限为 {_fmt(lim)}（第 {limit[0].number} 行）"
    elif cgroup is not None:
        en += f"; the kill was a container/cgroup limit, not the whole host (line {cgroup[0].number})"
        zh += f"；这是容器 / cgroup 的内存上限触发的，不是整台机器的内存耗尽（第 {cgroup[0].number} 行）"
    en += "."
    zh += "。"
    cause = None
    if worker:
        shuffle = _large_shuffle(lines)
        if shuffle is not None:
            # the worker's memory is its shuffle buffer (see _shuffle_buffer)
            cause = "shuffle-buffer-per-worker"
            en += f" It is a DataLoader worker, and each worker holds the shuffle buffer of line {shuffle[0][0].number}."
            zh += f" 这是 DataLoader worker，而每个 worker 都持有第 {shuffle[0][0].number} 行的 shuffle buffer。"
        else:
            cause = "dataloader-workers-memory"
            en += " It is a DataLoader worker: fewer workers or a dataset that is not copied into each worker comes first."
            zh += " 这是 DataLoader worker：先减少 worker 数，或让数据集不被复制进每个 worker。"
    return Reading(modes=["cpu-oom"], kind="oom-killer", line=line.number, en=en, zh=zh,
                   causes={"cpu-oom": cause} if cause else {}, delta=0.4)


def _lr(lines: Sequence[KeptLine], total: float | None) -> Reading | None:
    lr, warm = _first(lines, _LR), _first(lines, _WARMUP)
    if lr is None or warm is None:
        return None
    value = float(lr[1].group(1))
    if warm[1].group(1):
        kind, given, amount = warm[1].group(1).lower(), warm[1].group(2), float(warm[1].group(2))
    else:
        kind, given, amount = "steps", "0", 0.0  # "no warmup" in words
    if amount > 0:
        return None
    steps = f" ({max(int(total * 0.02), 1)} of {total:g} steps)" if total else ""
    raw = lr[1].group(1)  # as the user wrote it ("1e-3", not "0.001")
    where = f"line {lr[0].number}" if lr[0].number == warm[0].number else f"lines {lr[0].number} and {warm[0].number}"
    where_zh = f"第 {lr[0].number} 行" if lr[0].number == warm[0].number else f"第 {lr[0].number} 和 {warm[0].number} 行"
    said = f"warmup_{kind}={given}, " if warm[1].group(1) else ""
    en = (f"Learning rate {raw} with no warmup ({said}{where}): Adam's first updates run at the full rate; "
          f"warm up over 1–3 % of training{steps} "
          f"and, if it still diverges, try {value / 3:.1e}.")
    zh = (f"学习率 {raw} 且没有 warmup（{said}{where_zh}）："
          f"Adam 最初的更新就用了满学习率；用训练总步数的 1–3 % 做 warmup{steps.replace(' of ', ' / ')}，若仍发散再试 {value / 3:.1e}。")
    return Reading(modes=["gradient-explosion", "nan-loss", "loss-spike"], kind="lr-warmup", line=lr[0].number,
                   en=en, zh=zh, causes={"gradient-explosion": "missing-warmup", "nan-loss": "lr-too-high",
                                         "loss-spike": "lr-schedule"}, delta=0.3)


def _disk(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    full = next(((k, m) for k in lines if (m := _DF.match(k.body)) and int(m.group(5)) >= FULL_PERCENT), None)
    if full is None:
        return None
    k, m = full
    en = f"{m.group(6)} is {m.group(5)}% full ({m.group(3)} of {m.group(2)} used, {m.group(4)} left; line {k.number})"
    zh = f"{m.group(6)} 已用 {m.group(5)}%（{m.group(2)} 中已用 {m.group(3)}，剩余 {m.group(4)}；第 {k.number} 行）"
    ckpts = [(d, x) for d in lines if (x := _DU.match(d.body))]
    if len(ckpts) >= 2:
        sizes = [x.group(1) for _, x in ckpts]
        common = max(set(sizes), key=sizes.count)
        en += (f"; {len(ckpts)} checkpoints are listed, most of them {common} each (lines {ckpts[0][0].number}–"
               f"{ckpts[-1][0].number}): keep fewer (`save_total_limit`), and delete a partial last one before resuming")
        zh += (f"；列出了 {len(ckpts)} 个 checkpoint，大多每个 {common}（第 {ckpts[0][0].number}–{ckpts[-1][0].number} 行）："
               "少保留一些（`save_total_limit`），恢复训练前删掉最后那个不完整的")
    return Reading(modes=["disk-full", "checkpoint-corruption"], kind="disk", line=k.number, en=en + ".", zh=zh + "。")


def _host_memory(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    for k in lines:
        m = _FREE.match(k.body)
        if m:
            total, used = float(m.group(1)), float(m.group(3))
            unit = m.group(2) or "G"
            if total > 0 and used / total >= 0.9:
                en = f"The host has used {used:g} of {total:g} {unit} of memory (line {k.number}): it is nearly exhausted."
                zh = f"主机内存已用 {used:g} / {total:g} {unit}（第 {k.number} 行）：几乎耗尽。"
                return Reading(modes=["cpu-oom"], kind="host-memory", line=k.number, en=en, zh=zh)
    limit = next(((k, m) for k in lines if (m := _K8S_LIMIT.match(k.body))), None)
    if limit is not None and any("OOMKilled" in k.body or "137" in k.body for k in lines):
        k, m = limit
        en = (f"The container's memory limit is {m.group(1)}{m.group(2)} (line {k.number}) and it was OOMKilled: the pod "
              "limit, not the host, is what ran out.")
        zh = f"容器的内存上限是 {m.group(1)}{m.group(2)}（第 {k.number} 行），并且被 OOMKilled：用完的是 pod 的上限，而不是主机内存。"
        return Reading(modes=["cpu-oom"], kind="host-memory", line=k.number, en=en, zh=zh,
                       causes={"cpu-oom": "container-memory-limit"}, delta=0.35)
    return None


_SMI_HEADER = fastre.compile(r"(?i)^\s*index\s*,.*(?:temperature\.gpu|clocks\.(?:sm|current\.sm))")
HOT_C = 85  # °C: data-centre GPUs start to throttle around here
SLOW_CLOCK = 0.7  # a GPU whose SM clock is below 70 % of the fastest one is a straggler


def _straggler_gpu(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """One GPU slower than the rest in `nvidia-smi --query-gpu=... --format=csv` output: every synchronous
    step waits for it."""
    for i, k in enumerate(lines):
        if not _SMI_HEADER.match(k.body):
            continue
        cols = [c.strip().lower() for c in k.body.split(",")]
        rows = []
        for r in lines[i + 1 : i + 65]:
            cells = [c.strip() for c in r.body.split(",")]
            if len(cells) != len(cols) or not cells[0].isdigit():
                break
            rows.append((r, dict(zip(cols, cells))))
        temp = next((c for c in cols if c.startswith("temperature.gpu")), None)
        clock = next((c for c in cols if c.startswith("clocks.sm") or c.startswith("clocks.current.sm")), None)
        thermal = next((c for c in cols if "thermal" in c), None)
        if len(rows) < 2 or clock is None:
            return None

        def mhz(cell: str) -> float:
            try:
                return float(cell.split()[0])
            except (ValueError, IndexError):
                return 0.0

        fastest = max(mhz(v[clock]) for _, v in rows)
        for r, v in rows:
            hot = temp is not None and mhz(v[temp]) >= HOT_C
            slow = fastest > 0 and mhz(v[clock]) < SLOW_CLOCK * fastest
            throttled = thermal is not None and v[thermal].lower() == "active"
            if slow and (hot or throttled):
                t = f"{v[temp]} C, " if temp else ""
                en = (f"GPU {v[cols[0]]} is throttled ({t}SM clock {v[clock]} vs {fastest:g} MHz on the others"
                      + (", thermal slowdown Active" if throttled else "") + f"; line {r.number}): every synchronous "
                      "step waits for this one GPU, so the whole job runs at its speed.")
                zh = (f"GPU {v[cols[0]]} 在降频（{t}SM 频率 {v[clock]}，其他卡为 {fastest:g} MHz"
                      + ("，thermal slowdown 为 Active" if throttled else "") + f"；第 {r.number} 行）：每个同步 step 都要等这一张卡，"
                      "整个任务只能跑到它的速度。")
                return Reading(modes=["slow-training", "low-gpu-utilization", "communication-bottleneck"], kind="straggler",
                               line=r.number, en=en, zh=zh,
                               causes={"slow-training": "straggler-gpu", "low-gpu-utilization": "straggler-gpu"},
                               delta=0.6, why_en=f"GPU {v[cols[0]]} throttled (line {r.number})",
                               why_zh=f"GPU {v[cols[0]]} 降频（第 {r.number} 行）")
        return None
    return None


# ``seq_len 8192`` / ``max_length=4096`` / ``--seq-length 8192``; a vocabulary from ``vocab_size=128256`` (see _VOCAB)
_SEQ = fastre.compile(r"(?i)(?:\b|--)(?:max_?seq(?:uence)?_?len(?:gth)?|seq(?:uence)?[_-]?len(?:gth)?|max_length|"
                      r"model_max_length|block_size|context_length|max_position_embeddings)[\"']?\s*[:= ]\s*(\d{3,6})\b")
LOGITS_TOLERANCE = 0.03  # the request matches batch x sequence x vocabulary x bytes within 3 %


# "batch 2 x 256 tokens", "batch size 8×2048"
_BATCH_BY_SEQ = fastre.compile(r"(?i)\bbatch(?:[ _]size)?\s*[:=]?\s*(\d{1,4})\s*[x×]\s*(\d{2,6})\b")


def _logits(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """An OOM whose failing allocation is exactly the logits tensor: batch x sequence x vocabulary x 2 or 4 bytes."""
    req, vocab, seq = _first(lines, _REQUESTED), _first(lines, _VOCAB), _first(lines, _SEQ)
    both = _first(lines, _BATCH_BY_SEQ)
    if req is None or vocab is None or (seq is None and both is None):
        return None
    requested = _gib(req[1].group(1), req[1].group(2)) * 2**30
    micro = _first(lines, _MICRO)
    if seq is None:  # "batch 2 x 256": the batch and the sequence on one line
        seq = (both[0], _Group(both[1].group(2)))
        micro = (both[0], _Group(None, both[1].group(1)))
    v, n = int(vocab[1].group(1)), int(seq[1].group(1))
    batches = [int(micro[1].group(2))] if micro is not None else [1]
    for b in batches:
        for width, dtype in ((4, "fp32"), (2, "bf16/fp16")):
            size = b * n * v * width
            if abs(size - requested) <= LOGITS_TOLERANCE * requested:
                nums = sorted({req[0].number, seq[0].number, vocab[0].number})
                where = ("line " if len(nums) == 1 else "lines ") + ", ".join(map(str, nums))
                where_zh = "第 " + "、".join(map(str, nums)) + " 行"
                product = f"{b} × {n} × {v} × {width} B" if micro is not None else f"{n} × {v} × {width} B"
                what = "micro-batch × sequence × vocabulary" if micro is not None else "sequence × vocabulary"
                en = (f"The failing {_fmt(requested / 2**30)} allocation is the {dtype} logits: {product} = "
                      f"{_fmt(size / 2**30)} ({what}; {where}). "
                      "If memory was steady until this step, the logits are what does not fit: shrink them — a smaller "
                      "micro-batch or shorter sequences, or a loss computed in chunks over the sequence; if memory grew "
                      "step after step, something keeps earlier steps' tensors alive.")
                zh = (f"失败的这次 {_fmt(requested / 2**30)} 申请正是 {dtype} logits：{product} = {_fmt(size / 2**30)}"
                      f"（{'micro-batch × ' if micro is not None else ''}序列长度 × 词表大小；{where_zh}）。如果显存在这一步之前一直平稳，放不下的就是 logits：缩小它——减小 micro-batch 或序列长度，"
                      "或按序列分块计算 loss；如果显存一步步增长，则是有东西一直持有之前各步的张量。")
                return Reading(modes=["cuda-oom"], kind="oom-logits", line=req[0].number, en=en, zh=zh,
                               causes={"cuda-oom": "model-or-batch-too-large"}, against={"cuda-oom": "memory-fragmentation"},
                               delta=0.2, why_en=f"the failing allocation is the logits ({product}, line {req[0].number})",
                               why_zh=f"失败的申请就是 logits（{product}，第 {req[0].number} 行）")
    return None


# a debug print of how many tokens a batch supervises: "n_label_tokens=0", "num_items_in_batch: 0"
_NO_LABELS = fastre.compile(r"(?i)\b((?:n_?|num_?)?(?:label|target|supervised|valid|loss)_?tok(?:en)?s?|num_items_in_batch)"
                            r"\s*[=:]\s*(?:tensor\()?0\b(?:[^.]|$)")


def _no_labels(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """A batch that supervises no token: the mean cross-entropy is 0/0."""
    found = _first(lines, _NO_LABELS)
    if found is None:
        return None
    k, m = found
    en = (f"A batch with no supervised token ({m.group(1)}=0, line {k.number}): the mean cross-entropy over zero "
          "tokens is 0/0 = NaN, in any precision. Every label of that sample is -100 (often the prompt fills "
          "max_length and truncation removes the whole answer): drop such samples rather than tuning the optimiser.")
    zh = (f"有一个 batch 没有任何需要监督的 token（{m.group(1)}=0，第 {k.number} 行）：对 0 个 token 求平均的交叉熵是 0/0 = NaN，"
          "与精度无关。这个样本的 label 全是 -100（常见原因是 prompt 占满了 max_length，截断把回答整个去掉了）：应当过滤掉这类样本，而不是去调优化器。")
    return Reading(modes=["nan-loss"], kind="no-label-tokens", line=k.number, en=en, zh=zh,
                   causes={"nan-loss": "no-label-tokens"}, delta=0.6,
                   why_en=f"{m.group(1)}=0 at line {k.number}", why_zh=f"第 {k.number} 行 {m.group(1)}=0")


# "skipped so far: 403/1000", "skipped 41 of 310 steps", "Skipping step ... (12/50 skipped)"
_SKIPPED = fastre.compile(r"(?i)skip\w*[^0-9\n]{0,30}?(\d+)\s*(?:/|of|out of)\s*(\d+)|(\d+)\s*/\s*(\d+)\s*(?:steps?\s*)?skipped")


def _skipped(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """Skipped-step counters: when many steps are skipped, the NaN is systematic, not one bad batch."""
    last = None
    for k in lines:
        m = _SKIPPED.search(k.body)
        if m:
            last = (k, m)
    if last is None:
        return None
    k, m = last
    done, total = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    n, of = int(done), int(total)
    if of <= 0 or n > of or n < 2:
        return None
    share = n / of
    en = (f"{n}/{of} steps were skipped ({share:.0%}, line {k.number})"
          + (": the non-finite values are systematic, not a rare bad batch; skipping hides their cause and trains on a "
             "fraction of the data." if share >= 0.05 else "."))
    zh = (f"{n}/{of} 个 step 被跳过（{share:.0%}，第 {k.number} 行）"
          + ("：非有限值是系统性的，而不是偶尔一个坏 batch；跳过只是掩盖原因，而且只在一部分数据上训练。" if share >= 0.05 else "。"))
    return Reading(modes=["nan-loss", "gradient-explosion", "loss-spike"], kind="skipped-steps", line=k.number, en=en, zh=zh)


# `ls -l` rows: "-rw-r--r-- 1 user group 5368709120 Nov 15 23:43 zero_pp_rank_3_mp_rank_00_optim_states.pt"
_LS = fastre.compile(r"^\s*[-l][rwxsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+(\d+)\s+\w{3}\s+\d{1,2}\s+[\d:]{4,5}\s+(\S+)\s*$")
_DIGITS = fastre.compile(r"\d+")
SHORT_SHARE = 0.5  # a file below half the size of its like-named siblings is truncated


def _short_file(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """A checkpoint file in an `ls -l` listing that is empty, smaller than the same file in another checkpoint,
    or far smaller than its like-named siblings (rank shards); and the earlier checkpoint to fall back to."""
    rows = [(k, int(m.group(1)), m.group(2)) for k in lines if (m := _LS.match(k.body))]
    if len(rows) < 2:
        return None
    bad: list[tuple[KeptLine, int, str, int]] = []  # line, size, name, the size it should have
    by_name: dict[str, list[int]] = {}
    for _, size, name in rows:
        by_name.setdefault(name, []).append(size)
    groups: dict[str, list[int]] = {}
    for _, size, name in rows:
        if "-of-" not in name:  # "model-00004-of-00004": the last shard is legitimately smaller
            groups.setdefault(_DIGITS.sub("#", name), []).append(size)
    for k, size, name in rows:
        same = max(by_name[name])
        sib = groups.get(_DIGITS.sub("#", name), [])
        if size == 0:
            bad.append((k, size, name, same))
        elif size < same:
            bad.append((k, size, name, same))
        elif len(sib) >= 2 and size < SHORT_SHARE * max(sib) and sum(x < SHORT_SHARE * max(sib) for x in sib) < len(sib):
            bad.append((k, size, name, max(sib)))
    if not bad:
        return None
    k, size, name, want = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    more_zh = f"（另有 {len(bad) - 1} 个）" if len(bad) > 1 else ""
    whole = f" while the same kind of file is {want} bytes" if want else ""
    whole_zh = f"，而同类文件为 {want} 字节" if want else ""
    en = f"{name} is {size} bytes{whole} (line {k.number}){more}: the file was cut off while being written; the checkpoint is incomplete."
    zh = f"{name} 只有 {size} 字节{whole_zh}（第 {k.number} 行）{more_zh}：文件在写入时被截断，这个 checkpoint 不完整。"
    back = _fallback(lines)
    if back is not None:
        broken, good, line = back
        en += f" {broken} is the one being resumed; fall back to {good} (named at line {line}) once its files load."
        zh += f" 正在恢复的是 {broken}；回退到 {good}（第 {line} 行提到），先确认它的文件都能加载。"
        act_en = (f"resume from {good} (line {line}) once all its files load; move {broken} aside, it is incomplete "
                  f"({name} is {size} bytes, line {k.number}).")
        act_zh = f"确认 {good}（第 {line} 行）的文件都能加载后从它恢复；把 {broken} 移到一边，它不完整（{name} 只有 {size} 字节，第 {k.number} 行）。"
    else:
        act_en = act_zh = ""
    return Reading(modes=["checkpoint-corruption"], kind="short-file", line=k.number, en=en, zh=zh,
                   causes={"checkpoint-corruption": "incomplete-write"}, delta=0.3, act_en=act_en, act_zh=act_zh)


# checkpoint directory names with their step: checkpoint-14000, global_step12000, step_2000, iter_0004000
_CKPT_NAME = fastre.compile(r"\b((?:checkpoint|global_step|step|iter|ckpt)[-_]?(\d{2,9}))\b")
_RESUME = fastre.compile(r"(?i)resum\w*|load_checkpoint|load_state|from_pretrained|续训|恢复")


def _fallback(lines: Sequence[KeptLine]) -> tuple[str, str, int] | None:
    """The checkpoint being resumed (named on a resume line) and the newest earlier checkpoint named in the input."""
    named: dict[str, tuple[int, int]] = {}
    resumed: str | None = None
    for k in lines:
        for m in _CKPT_NAME.finditer(k.body):
            named.setdefault(m.group(1), (int(m.group(2)), k.number))
            if resumed is None and _RESUME.search(k.body):
                resumed = m.group(1)
    if resumed is None:
        return None
    step = named[resumed][0]
    kind = _DIGITS.sub("#", resumed)
    earlier = [(st, name, ln) for name, (st, ln) in named.items() if st < step and _DIGITS.sub("#", name) == kind]
    if not earlier:
        return None
    _, good, line = max(earlier)
    return resumed, good, line


# torch.profiler table row: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__...   61.84%   7.412s   63.10%   7.563s"
_PROFILED_LOADER = fastre.compile(r"enumerate\(DataLoader\)\S*\s+(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?\s*m?s)\b")
LOADER_SHARE = 20.0  # % of profiled time spent waiting for the next batch that makes the loader the bottleneck


def _profiled_loader(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """A profiler table where fetching the next batch takes a large share of the step."""
    found = _first(lines, _PROFILED_LOADER)
    if found is None or float(found[1].group(1)) < LOADER_SHARE:
        return None
    k, m = found
    workers = _first(lines, _NUM_WORKERS)
    none = workers is not None and workers[1].group(1) == "0"
    en = (f"The profiler puts {m.group(1)}% of the step ({m.group(2)}) in fetching the next batch "
          f"(`enumerate(DataLoader)`, line {k.number}): the input pipeline, not the model, sets the pace")
    zh = (f"profiler 显示 {m.group(1)}% 的时间（{m.group(2)}）花在取下一个 batch 上"
          f"（`enumerate(DataLoader)`，第 {k.number} 行）：决定速度的是数据管道，而不是模型")
    if none:
        en += (f"; with num_workers=0 (line {workers[0].number}) decoding and augmentation run in the training process "
               "itself, so start with worker processes before any model-side speed-up.")
        zh += f"；num_workers=0（第 {workers[0].number} 行）时解码和数据增强都在训练进程里做，先开多个 worker 进程，再考虑模型侧的加速。"
    else:
        en += "; speed up loading before any model-side optimisation."
        zh += "；先加速数据加载，再考虑模型侧的优化。"
    return Reading(modes=["slow-training", "low-gpu-utilization"], kind="profiled-loader", line=k.number, en=en, zh=zh,
                   causes={"slow-training": "dataloader-bottleneck", "low-gpu-utilization": "dataloader-bottleneck"},
                   delta=0.4, why_en=f"DataLoader {m.group(1)}% of profiled time (line {k.number})",
                   why_zh=f"DataLoader 占 profiler 时间的 {m.group(1)}%（第 {k.number} 行）")


# the kernel's memcg report: "memory: usage 67108864kB, limit 67108864kB, failcnt 31877"
_MEMCG = fastre.compile(r"(?i)\bmemory: usage (\d+)kB, limit (\d+)kB")


def _memcg(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """The cgroup's own usage and limit at the kill: the container ran out, not the host."""
    found = _first(lines, _MEMCG)
    if found is None:
        return None
    k, m = found
    used, limit = int(m.group(1)) / 2**20, int(m.group(2)) / 2**20
    if limit <= 0 or used < 0.95 * limit:
        return None
    en = (f"The container's memory cgroup was at its limit: usage {m.group(1)} kB of {m.group(2)} kB "
          f"({_fmt(used)} of {_fmt(limit)}; line {k.number}). The pod's limit ran out, not the host's RAM: find what "
          "fills it before raising it.")
    zh = (f"容器的内存 cgroup 已到上限：用量 {m.group(1)} kB / 上限 {m.group(2)} kB（{_fmt(used)} / {_fmt(limit)}；第 {k.number} 行）。"
          "用完的是 pod 的上限而不是主机内存：先找出是什么占满了它，再考虑提高上限。")
    return Reading(modes=["cpu-oom"], kind="memcg", line=k.number, en=en, zh=zh,
                   causes={"cpu-oom": "container-memory-limit"}, delta=0.2)


# a streaming dataset's shuffle buffer: ".shuffle(500000)", "shuffle(buffer_size=100_000)", "shuffle_buffer_size: 200000"
_SHUFFLE = fastre.compile(r"(?i)(?:\.shuffle\(\s*(?:buffer_size\s*=\s*)?|shuffle_buffer(?:_size)?\W{0,3}[=:]\s*)([\d_]{4,9})\b")
_PER_SAMPLE = fastre.compile(r"(?i)(\d+(?:\.\d+)?)\s*(KB|KiB|MB|MiB)\s*(?:per|/|each)\s*(?:sample|image|example|record)")


LARGE_SHUFFLE = 10000  # samples: a buffer this large per worker is a memory budget of its own


def _large_shuffle(lines: Sequence[KeptLine]) -> tuple[tuple[KeptLine, object], int] | None:
    """The first shuffle buffer of at least LARGE_SHUFFLE samples, and its size."""
    found = _first(lines, _SHUFFLE)
    if found is None:
        return None
    n = int(found[1].group(1).replace("_", ""))
    return (found, n) if n >= LARGE_SHUFFLE else None


def _shuffle_buffer(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """A large shuffle buffer of a streaming dataset: every DataLoader worker holds its own copy."""
    found = _large_shuffle(lines)
    if found is None:
        return None
    (k, _), n = found
    workers = _first(lines, _NUM_WORKERS)
    w = int(workers[1].group(1)) if workers else None
    size = _first(lines, _PER_SAMPLE)
    each = ""
    each_zh = ""
    if size is not None:
        per = _gib(size[1].group(1), size[1].group(2).replace("KB", "KiB").replace("MB", "MiB"))
        each = f" at about {size[1].group(1)} {size[1].group(2)} per sample that is {_fmt(n * per)} per worker"
        each_zh = f"，按每个样本约 {size[1].group(1)} {size[1].group(2)} 算，每个 worker 约 {_fmt(n * per)}"
        if w:
            each += f", {_fmt(n * per * w)} for {w} workers"
            each_zh += f"，{w} 个 worker 共约 {_fmt(n * per * w)}"
    en = (f"The shuffle buffer holds {n} decoded samples (line {k.number}) in every DataLoader worker"
          + (f" ({w} workers)" if w and not each else "") + f"{each}: shrink the buffer (and shuffle shard order "
          "instead) before touching memory limits.")
    zh = (f"shuffle buffer 在每个 DataLoader worker 里都存着 {n} 个解码后的样本（第 {k.number} 行）"
          + (f"（{w} 个 worker）" if w and not each_zh else "") + f"{each_zh}：先缩小 buffer（改为打乱分片顺序），再考虑内存上限。")
    return Reading(modes=["cpu-oom"], kind="shuffle-buffer", line=k.number, en=en, zh=zh,
                   causes={"cpu-oom": "shuffle-buffer-per-worker"}, delta=0.5,
                   against={"cpu-oom": "dataloader-workers-memory"},  # the buffer, not copied dataset objects
                   why_en=f"a shuffle buffer of {n} samples per worker (line {k.number})",
                   why_zh=f"每个 worker 的 shuffle buffer 有 {n} 个样本（第 {k.number} 行）")


_BUSBW = fastre.compile(r"(?i)#\s*Avg bus bandwidth\s*:\s*(\d+(?:\.\d+)?)")
_SOCKET = fastre.compile(r"(?i)NET/IB\s*:\s*No device found|Using network Socket|via NET/Socket")
_NO_IB_DEV = fastre.compile(r"(?i)/dev/infiniband\W{0,3}:?\s*No such file")


def _busbw(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """nccl-tests' average bus bandwidth, and whether NCCL fell back to TCP sockets."""
    bw, sock, nodev = _first(lines, _BUSBW), _first(lines, _SOCKET), _first(lines, _NO_IB_DEV)
    if bw is None and sock is None:
        return None
    parts, parts_zh = [], []
    first = min(x[0].number for x in (bw, sock, nodev) if x is not None)
    if bw is not None:
        parts.append(f"nccl-tests measured an average bus bandwidth of {bw[1].group(1)} GB/s (line {bw[0].number})")
        parts_zh.append(f"nccl-tests 测得平均 bus bandwidth 为 {bw[1].group(1)} GB/s（第 {bw[0].number} 行）")
    if sock is not None:
        parts.append(f"NCCL found no InfiniBand device and uses TCP sockets (line {sock[0].number})")
        parts_zh.append(f"NCCL 没有找到 InfiniBand 设备，改用 TCP socket（第 {sock[0].number} 行）")
    if nodev is not None:
        parts.append(f"/dev/infiniband does not exist where the job runs (line {nodev[0].number}): the IB devices are "
                     "not passed into the container")
        parts_zh.append(f"任务运行的环境里没有 /dev/infiniband（第 {nodev[0].number} 行）：IB 设备没有传进容器")
    if sock is None and nodev is None:
        return Reading(modes=["communication-bottleneck"], kind="busbw", line=first,
                       en=parts[0] + ".", zh=parts_zh[0] + "。")
    en = "; ".join(parts) + ". Collectives run over Ethernet at a fraction of the IB bandwidth."
    zh = "；".join(parts_zh) + "。集合通信走以太网，只有 IB 带宽的一小部分。"
    return Reading(modes=["communication-bottleneck", "slow-training"], kind="busbw", line=first, en=en, zh=zh,
                   causes={"communication-bottleneck": "ib-unavailable", "slow-training": "slow-interconnect"},
                   delta=0.5, why_en=f"NCCL on TCP sockets, no IB device (line {first})",
                   why_zh=f"NCCL 使用 TCP socket，没有 IB 设备（第 {first} 行）")


# a REPL line ">>> tokenizer.pad_token, tokenizer.eos_token, len(tokenizer)" and its output on the next line
_REPL = fastre.compile(r"^\s*>>>\s*(.{1,300})$")


def repl_values(lines: Sequence[KeptLine]) -> list[tuple[str, str, KeptLine]]:
    """``(expression, shown value, output line)`` for each expression of a pasted ``>>> a, b`` and its output."""
    out = []
    for i, k in enumerate(lines[:-1]):
        m = _REPL.match(k.body)
        if m is None:
            continue
        exprs = _split_args(m.group(1))
        shown = lines[i + 1].body.strip()
        if shown.startswith("(") and shown.endswith(")") and len(exprs) > 1:
            shown = shown[1:-1]
        values = _split_args(shown)
        if len(values) == len(exprs):
            out.extend((e, v, lines[i + 1]) for e, v in zip(exprs, values))
    return out


def _pad_token(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """``tokenizer.pad_token`` shown as None: set it to an existing token rather than adding one."""
    shown = repl_values(lines)
    pad = next(((v, k) for e, v, k in shown if e.endswith("pad_token") and v == "None"), None)
    if pad is None:
        return None
    eos = next((v for e, v, _ in shown if e.endswith("eos_token")), None)
    size = next((v for e, v, _ in shown if re2.search(r"len\(\s*tok", e) and v.isdigit()), None)
    line = pad[1].number
    en = (f"tokenizer.pad_token is None (line {line}): the tokenizer has no padding token, so padding a batch fails"
          + (f"; reuse an existing token as pad (eos is {eos}, or a reserved special token) so the vocabulary stays "
             f"at {size} and no embedding must be resized" if size else
             f"; reuse an existing token as pad (eos is {eos}, or a reserved special token)" if eos else "")
          + ", and mask pad positions in the labels with -100.")
    zh = (f"tokenizer.pad_token 是 None（第 {line} 行）：tokenizer 没有 padding token，所以对 batch 做 padding 会失败"
          + (f"；复用一个已有的 token 作为 pad（eos 是 {eos}，或某个保留的特殊 token），词表保持 {size} 个，不需要调整 embedding 大小"
             if size else f"；复用一个已有的 token 作为 pad（eos 是 {eos}，或某个保留的特殊 token）" if eos else "")
          + "，并在 labels 里把 pad 位置设为 -100。")
    return Reading(modes=["data-format-error"], kind="pad-token", line=line, en=en, zh=zh,
                   causes={"data-format-error": "missing-pad-token"}, delta=0.3)


# "47 of 4096 shard fetches failed", "12/800 requests timed out"; "crashed at step 88410"
_FAILED_SHARE = fastre.compile(r"(?i)\b(\d+)\s*(?:of|/|out of)\s*(\d+)\s+((?:[a-z-]+\s+){0,2}?)(?:failed|timed out|errored|were lost)")
_DIED_AT = fastre.compile(r"(?i)\b(?:crash\w*|died|failed|stopped|killed)\s+(?:at|on)\s+(?:step|iteration|iter)\s+(\d+)")
SMALL_SHARE = 0.05


def _failed_share(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """"47 of 4096 fetches failed": a small share means a transient fault to ride out, not a broken setup."""
    found = _first(lines, _FAILED_SHARE)
    if found is None:
        return None
    k, m = found
    n, of = int(m.group(1)), int(m.group(2))
    if of <= 0 or n > of:
        return None
    what = m.group(3).strip() or "attempts"
    share = n / of
    died = _first(lines, _DIED_AT)
    at = f"; the run died at step {died[1].group(1)} (line {died[0].number})" if died else ""
    at_zh = f"；训练在第 {died[1].group(1)} 步中断（第 {died[0].number} 行）" if died else ""
    if share <= SMALL_SHARE:
        en = (f"Only {n} of {of} {what} failed ({share:.1%}, line {k.number}){at}: a transient fault; the job should "
              "retry and ride it out instead of dying, and nothing about the setup is broken.")
        zh = f"{of} 次{what}中只有 {n} 次失败（{share:.1%}，第 {k.number} 行）{at_zh}：这是暂时性故障；任务应当重试并扛过去，而不是直接退出，配置本身没有问题。"
    else:
        en = f"{n} of {of} {what} failed ({share:.0%}, line {k.number}){at}: too many for a transient fault; something systematic is broken."
        zh = f"{of} 次{what}中有 {n} 次失败（{share:.0%}，第 {k.number} 行）{at_zh}：比例太高，不是暂时性故障，有系统性的问题。"
    return Reading(modes=["network-timeout", "data-format-error", "checkpoint-corruption"], kind="failed-share",
                   line=k.number, en=en, zh=zh)


# sklearn's classification_report: "   label   0.92   1.00   0.96   18340", "macro avg  0.31  0.33  0.32  20000"
_REPORT_ROW = fastre.compile(r"^\s*(\S+)\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d+)\s*$")
_MACRO = fastre.compile(r"^\s*macro avg\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d\.\d+)\s+(\d+)")
_ACCURACY = fastre.compile(r"^\s*accuracy\s+(\d\.\d+)\s+(\d+)\s*$")
# a label count: "Counter({'a': 91712, 'b': 5903})", "{'pos': 120, 'neg': 9880}"
_COUNTS = fastre.compile(r"\{\s*((?:['\"]?[^'\",:{}]{1,40}['\"]?\s*:\s*\d+\s*,?\s*)+)\}")
_COUNT_ITEM = fastre.compile(r"['\"]?([^'\",:{}]{1,40}?)['\"]?\s*:\s*(\d+)")
DEAD_RECALL = 0.05  # a class recalled at most this often is never predicted


def _class_report(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """A classifier that predicts only the majority class: its per-class recall, the majority share behind its
    accuracy, and the training label counts."""
    rows = [(k, m) for k in lines if (m := _REPORT_ROW.match(k.body))]
    if len(rows) < 2:
        return None
    dead = [(k, m) for k, m in rows if float(m.group(3)) <= DEAD_RECALL]
    alive = [(k, m) for k, m in rows if float(m.group(3)) > DEAD_RECALL]
    if not dead or not alive:
        return None
    major = max(rows, key=lambda r: int(r[1].group(5)))[1]
    total = sum(int(m.group(5)) for _, m in rows)
    names = ", ".join(m.group(1) for _, m in dead)
    where = f"lines {rows[0][0].number}–{rows[-1][0].number}"
    en = (f"The classifier never predicts {names} (recall {float(dead[0][1].group(3)):.2f}; {where})"
          + (f", only {major.group(1)} ({major.group(5)} of {total} validation samples, {int(major.group(5)) / total:.0%})"
             if len(alive) == 1 else ""))
    zh = (f"分类器从不预测 {names}（召回率 {float(dead[0][1].group(3)):.2f}；第 {rows[0][0].number}–{rows[-1][0].number} 行）"
          + (f"，只预测 {major.group(1)}（验证集 {total} 个样本中占 {major.group(5)} 个，{int(major.group(5)) / total:.0%}）"
             if len(alive) == 1 else ""))
    acc, macro = _first(lines, _ACCURACY), _first(lines, _MACRO)
    if acc is not None:
        en += f"; accuracy {acc[1].group(1)} is about the majority share, so it says nothing"
        zh += f"；准确率 {acc[1].group(1)} 约等于多数类占比，说明不了什么"
    if macro is not None:
        en += f"; macro-averaged F1 is {macro[1].group(3)} (line {macro[0].number})"
        zh += f"；macro F1 只有 {macro[1].group(3)}（第 {macro[0].number} 行）"
    counts = None
    for k in lines:
        m = _COUNTS.search(k.body) if ":" in k.body and "{" in k.body else None
        if m:
            items = [(a.strip(), int(b)) for a, b in (x.groups() for x in _COUNT_ITEM.finditer(m.group(1)))]
            if len(items) >= 2:
                counts = (k, items)
                break
    if counts is not None:
        k, items = counts
        n = sum(v for _, v in items)
        shown = ", ".join(f"{a} {v}" for a, v in items[:6])
        top = max(items, key=lambda x: x[1])
        en += f". The training labels are {top[1] / n:.1%} {top[0]} ({shown}; line {k.number})"
        zh += f"。训练集标签中 {top[0]} 占 {top[1] / n:.1%}（{shown}；第 {k.number} 行）"
    en += ": weight the loss by class or resample the minority classes, and judge by per-class recall or macro F1."
    zh += "：按类别给 loss 加权或对少数类重采样，并用各类召回率或 macro F1 来评估。"
    return Reading(modes=["data-imbalance"], kind="class-report", line=dead[0][0].number, en=en, zh=zh,
                   causes={"data-imbalance": "classifier-class-imbalance"}, delta=0.5,
                   why_en=f"{names} never predicted ({where})", why_zh=f"{names} 从未被预测（第 {rows[0][0].number}–{rows[-1][0].number} 行）")



_IN_GENERATE = fastre.compile(r"\b(?:generate|_beam_search|_sample|greedy_search|beam_search|prediction_step)\b")
_EVAL_BATCH = fastre.compile(r"(?i)\b(per_device_eval_batch_size|eval_batch_size)[\"']?\s*[:=]\s*(\d+)")
_BEAMS = fastre.compile(r"(?i)\b(generation_num_beams|num_beams)[\"']?\s*[:=]\s*(\d+)")
_GEN_LEN = fastre.compile(r"(?i)\b(generation_max_length|max_new_tokens|max_length)[\"']?\s*[:=]\s*(\d+)")


def _generate_oom(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """An OOM inside generate() (evaluation with generation): batch x beams sequences, each growing to the maximum
    length, hold their KV cache — the training step's memory is not the question."""
    req = _first(lines, _REQUESTED)
    if req is None or not any(_IN_GENERATE.search(k.body) for k in lines if k.number < req[0].number):
        return None
    batch, beams, length = _first(lines, _EVAL_BATCH), _first(lines, _BEAMS), _first(lines, _GEN_LEN)
    parts = [f"{m.group(1)}={m.group(2)}" for _, m in (x for x in (batch, beams, length) if x is not None)]
    if not parts:
        return None
    seqs = (int(batch[1].group(2)) * (int(beams[1].group(2)) if beams else 1)) if batch else None
    n = f": {seqs} sequences at once" if seqs and beams else ""
    n_zh = f"：同时有 {seqs} 条序列" if seqs and beams else ""
    en = (f"The OOM is inside generate() during evaluation (line {req[0].number}), not in the training step: "
          + ", ".join(parts) + n + ", each with a KV cache that grows to the full length. Lower the eval batch, "
          "the beams or the generation length; training-memory fixes do not touch this.")
    zh = (f"OOM 发生在评估阶段的 generate() 里（第 {req[0].number} 行），而不是训练 step："
          + "、".join(parts) + n_zh + "，每条序列的 KV cache 都会增长到最大长度。应减小评估 batch、beam 数或生成长度；"
          "针对训练显存的修复对这里没有作用。")
    return Reading(modes=["cuda-oom"], kind="generate-oom", line=req[0].number, en=en, zh=zh,
                   causes={"cuda-oom": "kv-cache-growth"}, delta=0.6,
                   why_en=f"the OOM is in generate() (line {req[0].number})", why_zh=f"OOM 发生在 generate() 中（第 {req[0].number} 行）")


# Megatron's per-phase timers: "(min, max) time across ranks (ms):" then "    all-grads-sync .....: (301.55, 318.20)"
_TIMER_HEAD = fastre.compile(r"(?i)\(min, max\) time across ranks")
_TIMER_ROW = fastre.compile(r"^\s*([a-z][a-z0-9_-]*(?:[ -][a-z0-9_-]+)*)\s*\.{2,}\s*:\s*\((\d+(?:\.\d+)?),\s*(\d+(?:\.\d+)?)\)")
_COMM = fastre.compile(r"(?i)sync|all-?gather|all-?reduce|reduce-?scatter|comm|send|recv|broadcast|p2p")
GREW = 2.0  # a timer at least this many times its earlier value grew; within 25 % it stayed


def _timer_blocks(lines: Sequence[KeptLine]) -> list[tuple[KeptLine, dict[str, float], dict[str, int]]]:
    """Each timer table: its header line, the max time per phase, and the line of each phase."""
    blocks: list[tuple[KeptLine, dict[str, float], dict[str, int]]] = []
    for i, k in enumerate(lines):
        if not _TIMER_HEAD.search(k.body):
            continue
        rows: dict[str, float] = {}
        where: dict[str, int] = {}
        for r in lines[i + 1 : i + 40]:
            m = _TIMER_ROW.match(r.body)
            if m is None:
                break
            rows[m.group(1).strip()] = float(m.group(3))
            where[m.group(1).strip()] = r.number
        if rows:
            blocks.append((k, rows, where))
    return blocks


def _comm_timers(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """Two timer tables where the communication phases grew while the compute phases stayed: the network (or
    how NCCL uses it) got slower, not the model."""
    blocks = _timer_blocks(lines)
    if len(blocks) < 2:
        return None
    (k0, before, _), (k1, after, rows_at) = blocks[0], blocks[-1]
    common = [n for n in before if n in after and before[n] > 0]
    grew = [(n, before[n], after[n]) for n in common if after[n] >= GREW * before[n]]
    same = [n for n in common if 0.8 <= after[n] / before[n] <= 1.25]
    if not grew or not all(_COMM.search(n) for n, _, _ in grew) or not any(not _COMM.search(n) for n in same):
        return None
    shown = ", ".join(f"{n} {a:g} → {b:g} ms" for n, a, b in grew[:3])
    steady = ", ".join(n for n in same if not _COMM.search(n))[:120]
    en = (f"Megatron's timers (max across ranks; lines {k0.number} and {k1.number}): {shown}, while {steady} stayed "
          "the same. Communication, not compute, got slower.")
    zh = (f"Megatron 的计时（各 rank 的最大值；第 {k0.number} 和 {k1.number} 行）：{shown}，而 {steady} 没有变化。"
          "变慢的是通信，不是计算。")
    return Reading(modes=["communication-bottleneck", "slow-training"], kind="comm-timers", line=rows_at[grew[0][0]],
                   en=en, zh=zh,
                   causes={"communication-bottleneck": "slow-interconnect"}, delta=0.3, confidence=0.9,
                   why_en=f"communication timers grew ({shown})", why_zh=f"通信计时增长（{shown}）")


# "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ...; OOB ..."
_NET_IB = fastre.compile(r"NET/IB\s*:\s*Using\s+(.*?)(?:;|$)")
_HCA = fastre.compile(r"\[\d+\](\w+):\d+/(?:IB|RoCE)")
_IB_HCA_VAR = fastre.compile(r"\bNCCL_IB_HCA\s*=\s*(\S+)")


def _nccl_hcas(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """NCCL using fewer InfiniBand HCAs than it did before (or than the node has), e.g. after NCCL_IB_HCA changed."""
    seen = [(k, [m.group(1) for m in _HCA.finditer(n.group(1))]) for k in lines if (n := _NET_IB.search(k.body))]
    seen = [(k, h) for k, h in seen if h]
    if len(seen) < 2:
        return None
    most = max(seen, key=lambda x: len(x[1]))
    last = seen[-1]
    if len(last[1]) >= len(most[1]):
        return None
    var = _first(lines, _IB_HCA_VAR)
    why = f"; NCCL_IB_HCA={var[1].group(1)} is set (line {var[0].number})" if var else ""
    why_zh = f"；设置了 NCCL_IB_HCA={var[1].group(1)}（第 {var[0].number} 行）" if var else ""
    en = (f"NCCL now uses {len(last[1])} InfiniBand HCA(s) ({', '.join(last[1][:4])}; line {last[0].number}) where it "
          f"used {len(most[1])} before (line {most[0].number}){why}: every collective shares {len(last[1])} "
          f"link(s) instead of {len(most[1])}.")
    zh = (f"NCCL 现在只用 {len(last[1])} 块 InfiniBand 网卡（{', '.join(last[1][:4])}；第 {last[0].number} 行），之前用的是 "
          f"{len(most[1])} 块（第 {most[0].number} 行）{why_zh}：所有集合通信只能挤在 {len(last[1])} 条链路上。")
    return Reading(modes=["communication-bottleneck", "slow-training"], kind="nccl-hcas", line=last[0].number, en=en,
                   zh=zh, causes={"communication-bottleneck": "ib-unavailable"}, delta=0.6, confidence=0.9,
                   why_en=f"NCCL uses {len(last[1])} of {len(most[1])} HCAs (line {last[0].number})",
                   why_zh=f"NCCL 只用了 {len(most[1])} 块网卡中的 {len(last[1])} 块（第 {last[0].number} 行）")


# The share of preference pairs whose chosen response is the longer one (the runbook's diagnosis step prints it):
# "chosen is longer in 89% of 412008 pairs", "pairs where chosen is longer than rejected: 365,117 / 412,008 (88.6%)"
_LONGER_CHOSEN = fastre.compile(r"(?i)(?:chosen\b.{0,40}\blonger|longer\b.{0,40}\bchosen|chosen.{0,20}更长|更长.{0,20}chosen)"
                                r".{0,80}?(\d{1,3}(?:\.\d+)?)\s*%")
# what the length bias did to the reward model: a correlation with length, near-chance accuracy on length-matched pairs
_LENGTH_CORR = fastre.compile(r"(?i)(?:corr\w*|pearson|spearman)\W.{0,40}length.{0,40}?[:=]\s*(-?0?\.\d+)|"
                              r"(?:corr\w*|pearson|spearman)\W.{0,40}length\W.{0,40}?\b(?:is|of)\s+(-?0?\.\d+)")
_LENGTH_MATCHED = fastre.compile(r"(?i)(?:length[- ](?:controlled|matched|balanced)|长度(?:平衡|相近|匹配)).{0,80}?[:=]\s*(0?\.\d+|\d{1,2}(?:\.\d+)?\s*%)")
LENGTH_SKEW = 15.0  # percentage points from an even split that make length a shortcut the reward model can learn


def _longer_chosen(lines: Sequence[KeptLine], _total: float | None) -> Reading | None:
    """Preference pairs whose chosen response is nearly always the longer one: the reward model learns length."""
    found = _first(lines, _LONGER_CHOSEN)
    if found is None:
        return None
    k, m = found
    share = float(m.group(1))
    if abs(share - 50.0) < LENGTH_SKEW or share > 100:
        return None
    side, side_zh = ("longer", "更长") if share > 50 else ("shorter", "更短")
    en = (f"In {m.group(1)}% of the preference pairs the chosen response is the longer one (line {k.number}), "
          "so response length alone predicts the preference")
    zh = f"{m.group(1)}% 的偏好样本对里 chosen 回答是更长的那个（第 {k.number} 行），只看长度就能猜中偏好"
    corr, matched = _first(lines, _LENGTH_CORR), _first(lines, _LENGTH_MATCHED)
    if corr is not None:
        r = corr[1].group(1) or corr[1].group(2)
        en += f"; the reward correlates with length ({r}, line {corr[0].number})"
        zh += f"；奖励分数与长度相关（{r}，第 {corr[0].number} 行）"
    if matched is not None:
        en += f"; on pairs of similar length it scores {matched[1].group(1)} (line {matched[0].number}), about chance"
        zh += f"；在长度相近的样本对上只有 {matched[1].group(1)}（第 {matched[0].number} 行），约等于随机"
    en += (f": the reward model learned to prefer {side} answers, and a policy trained on it will exploit that. "
           "Balance the pairs by length (or add a length penalty) and evaluate on length-matched pairs; "
           "more epochs or a bigger base model learn the same shortcut.")
    zh += (f"：奖励模型学会了偏好{side_zh}的回答，用它训练的策略会利用这一点。按长度平衡样本对（或加长度惩罚），"
           "并在长度相近的样本对上评估；多训几个 epoch 或换更大的基座只会学到同样的捷径。")
    return Reading(modes=["data-imbalance"], kind="length-preference", line=k.number, en=en, zh=zh,
                   causes={"data-imbalance": "reward-pair-skew"}, delta=0.5, confidence=0.6,
                   why_en=f"chosen is {side} in {m.group(1)}% of pairs (line {k.number})",
                   why_zh=f"{m.group(1)}% 的样本对 chosen 更{side_zh[-1]}（第 {k.number} 行）")
