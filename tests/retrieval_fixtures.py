"""Small, valid knowledge-base records for the retrieval tests (quotes are real guide lines).

Used while testing chunking, BM25, fusion, index building and recovery without depending on the
ingested ``kb/records`` (those are tested separately when present).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from kb.schema import Cause, Citation, CodeSnippet, Fix, Passage, Record, Step, Symptom, Text
from kb.taxonomy import MODE_IDS, mode

GUIDE = "000_416041118514696b.txt"


def cite(section: str, heading: str, start: int, end: int | None = None, quote: str = "x") -> Citation:
    return Citation(source=GUIDE, source_kind="guide", section=section, heading=heading,
                    start_line=start, end_line=end or start, quote=quote)


def sample_records() -> list[Record]:
    nan = cite("2", "NaN Loss", 36, 70)
    oom = cite("4", "CUDA OOM (Out of Memory)", 124, 153)
    dist = cite("5", "分布式训练问题", 155, 181)
    ckpt = cite("7", "Checkpoint 问题", 212, 237)
    return [
        Record(
            id="nan-loss", failure_mode="nan-loss", category="numeric",
            title=Text(zh="Loss 变为 NaN", en="Loss becomes NaN"),
            summary=Text(zh="Loss 突然变为 NaN", en="The loss suddenly becomes NaN"),
            keywords=Text(zh="NaN 溢出 学习率", en="nan inf overflow fp16 bf16 learning rate"),
            symptoms=[Symptom(text=Text(zh="Loss 突然变为 NaN", en="Loss suddenly becomes NaN"), citation=cite("2", "NaN Loss", 40)),
                      Symptom(text=Text(zh="模型权重变为 inf/NaN", en="Model weights become inf/NaN"), citation=cite("2", "NaN Loss", 42))],
            causes=[Cause(id="fp16-overflow", text=Text(zh="FP16 溢出", en="FP16 overflow"), likelihood="high",
                          detection=Text(zh="检查是否使用 FP16 而非 BF16", en="Check whether FP16 is used instead of BF16"),
                          citation=cite("2", "NaN Loss", 49)),
                    Cause(id="lr-too-high", text=Text(zh="学习率过高", en="Learning rate too high"), likelihood="high",
                          detection=Text(zh="降低 LR 10 倍后重试", en="Retry with the LR reduced 10x"),
                          citation=cite("2", "NaN Loss", 48))],
            diagnosis=[Step(code=CodeSnippet(language="python", code='if torch.isnan(loss):\n    print("NaN detected!")',
                                             citation=cite("2", "NaN Loss", 57, 59)), citation=cite("2", "NaN Loss", 57, 59))],
            fixes=[Fix(priority=1, text=Text(zh="切换到 BF16：BF16 动态范围更大，不易溢出", en="Switch to BF16: wider dynamic range"),
                       citation=cite("2", "NaN Loss", 74)),
                   Fix(priority=2, text=Text(zh="启用梯度裁剪：max_grad_norm=1.0", en="Enable gradient clipping: max_grad_norm=1.0"),
                       citation=cite("2", "NaN Loss", 76))],
            citations=[nan],
        ),
        Record(
            id="cuda-oom", failure_mode="cuda-oom", category="memory",
            title=Text(zh="CUDA OOM (Out of Memory)", en="CUDA out of memory"),
            keywords=Text(zh="显存 不足 显存溢出", en="gpu memory oom torch.cuda.OutOfMemoryError allocate"),
            symptoms=[Symptom(text=Text(zh="torch.cuda.OutOfMemoryError: CUDA out of memory."), citation=cite("4", "CUDA OOM (Out of Memory)", 128))],
            causes=[Cause(id="batch-too-large", text=Text(zh="模型/批次太大，基本配置不合理", en="Model or batch too large"),
                          citation=cite("4", "CUDA OOM (Out of Memory)", 134))],
            fixes=[Fix(priority=1, text=Text(zh="减小 micro_batch_size", en="Reduce micro_batch_size"), citation=cite("4", "CUDA OOM (Out of Memory)", 141)),
                   Fix(priority=2, text=Text(zh="启用梯度检查点：gradient_checkpointing=True", en="Enable gradient checkpointing"),
                       citation=cite("4", "CUDA OOM (Out of Memory)", 142))],
            citations=[oom],
        ),
        Record(
            id="distributed-sync-failure", failure_mode="distributed-sync-failure", category="infrastructure",
            title=Text(zh="分布式同步失败", en="Distributed synchronisation failure"),
            keywords=Text(zh="分布式 挂起 超时", en="nccl ddp hang timeout rank all_reduce"),
            symptoms=[Symptom(text=Text(zh="训练挂起（Hang）", en="Training hangs"), citation=cite("5", "分布式训练问题", 160)),
                      Symptom(text=Text(zh="NCCL 超时错误", en="NCCL timeout error"), citation=cite("5", "分布式训练问题", 161))],
            fixes=[Fix(priority=1, text=Text(zh="确保 DDP 中 find_unused_parameters 正确设置", en="Set find_unused_parameters correctly in DDP"),
                       code=CodeSnippet(language="python", code="model = DDP(model, find_unused_parameters=True)",
                                        citation=cite("5", "分布式训练问题", 174)),
                       citation=cite("5", "分布式训练问题", 172, 174))],
            citations=[dist],
        ),
        Record(
            id="checkpoint-corruption", failure_mode="checkpoint-corruption", category="infrastructure",
            title=Text(zh="Checkpoint 损坏", en="Checkpoint corruption"),
            keywords=Text(zh="加载 报错 恢复", en="checkpoint load resume save corrupted"),
            symptoms=[Symptom(text=Text(zh="加载 Checkpoint 报错", en="Loading the checkpoint fails"), citation=cite("7", "Checkpoint 问题", 217))],
            fixes=[Fix(priority=1, code=CodeSnippet(language="python", code='trainer.train(resume_from_checkpoint="checkpoint-5000")',
                                                    citation=cite("7", "Checkpoint 问题", 237)),
                       citation=cite("7", "Checkpoint 问题", 236, 237))],
            citations=[ckpt],
        ),
    ]


def sample_passages() -> list[Passage]:
    return [
        Passage(
            id="guide-8-checklist", title=Text(zh="排障检查清单", en="Troubleshooting checklist"),
            text="训练启动前：\n\n数据格式正确（Token ID 在词汇表范围内）\nLabel Masking 正确（-100 设置正确）\n混合精度设为 BF16",
            text_en="Before training: data format correct (token ids within the vocabulary); label masking (-100) correct; "
                    "mixed precision set to BF16",
            failure_modes=["token-out-of-range"], citation=cite("8", "排障检查清单", 239, 247),
        ),
    ]


def refusing_port():
    """A context manager yielding a loopback port that refuses connections: bound, never listening, and held
    (no other process can take it) until the block ends."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def held():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            yield s.getsockname()[1]

    return held()


def listening_ports(pid: int) -> list[int]:
    """TCP ports process ``pid`` listens on (psutil; else Linux /proc: its socket inodes in /proc/net/tcp*)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        conns = psutil.Process(pid).net_connections(kind="tcp")
        return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN})
    import os

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


class ChromaServer:
    """A real ``chroma run`` server in a subprocess, stopped on exit (use as a context manager).

    It binds port 0 and the port is read from the sockets the process listens on: no free port is picked
    beforehand, so no other process can take it in between (``chroma run`` reports ``:0``, not the port).
    """

    def __init__(self, path, startup_timeout: float = 90.0) -> None:
        self.path = path
        self.port: int | None = None
        self.url: str | None = None
        self.timeout = startup_timeout
        self.proc = None
        self._bind = 0  # port 0 on the first start; restart() binds the port the server had

    def restart(self) -> ChromaServer:
        """Start the stopped server again on its old port and data directory (as a restarted service comes back).

        The port was this server's own a moment ago; binding it is retried while the old socket is released."""
        import time

        assert self.port is not None, "restart() needs a server that was started"
        self._bind = self.port
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.__enter__()
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def __enter__(self) -> ChromaServer:
        import subprocess
        import sys
        import time
        import urllib.request
        from pathlib import Path

        chroma = Path(sys.executable).with_name("chroma")
        Path(self.path).mkdir(parents=True, exist_ok=True)
        self.log = open(Path(self.path) / "server.log", "ab")
        self.proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(Path(self.path) / "db"), "--host", "127.0.0.1", "--port", str(self._bind)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"chroma run exited with {self.proc.returncode}; see {self.log.name}")
                for port in listening_ports(self.proc.pid):
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2) as resp:
                            if resp.status == 200:
                                self.port, self.url = port, f"http://127.0.0.1:{port}"
                                return self
                    except OSError:
                        pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not answer its heartbeat within {self.timeout:.0f} s")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log.close()

    def __exit__(self, *exc) -> None:
        self.stop()


EN_WORDS = ("loss gradient memory cuda nccl timeout checkpoint disk token batch learning rate warmup "
            "overflow fp16 bf16 dataloader worker rank hang allreduce shard vocab embedding optimizer "
            "scheduler throughput utilization bandwidth latency resume save corrupt").split()
ZH_WORDS = ("显存 不足 梯度 爆炸 学习率 过高 分布式 同步 失败 超时 加载 报错 磁盘 空间 数据 格式 "
            "分布 不均 训练 速度 利用率 通信 瓶颈 检查点 损坏 网络 内存 溢出").split()


class SyntheticEmbedder:
    """Deterministic unit vectors seeded by the text's sha256 (stands in for the model at 10k scale)."""

    model_dir = Path("synthetic-sha256-normal-384")
    fingerprint = hashlib.sha256(b"synthetic-sha256-normal-384-v1").hexdigest()

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype("float32")
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def synthetic_records(n: int, seed: int = 0) -> list[Record]:
    rng = np.random.default_rng(seed)
    cite = Citation(source="000_416041118514696b.txt", source_kind="guide", section="1", heading="常见失败模式分类",
                    start_line=12, end_line=35, quote="训练失败")
    records = []
    for i in range(n):
        fm = MODE_IDS[i % len(MODE_IDS)]
        m = mode(fm)
        en = " ".join(rng.choice(EN_WORDS, 12))
        zh = "".join(rng.choice(ZH_WORDS, 8))
        records.append(Record(
            id=f"syn-{i:05d}", failure_mode=fm, category=m.category,
            title=Text(zh=f"{m.zh} 案例 {i}", en=f"{m.en} case {i}"),
            summary=Text(zh=zh, en=en), keywords=Text(zh=" ".join(rng.choice(ZH_WORDS, 4)), en=" ".join(rng.choice(EN_WORDS, 4))),
            symptoms=[Symptom(text=Text(zh="".join(rng.choice(ZH_WORDS, 6)), en=" ".join(rng.choice(EN_WORDS, 10))),
                              citation=cite)],
            citations=[cite],
        ))
    return records
