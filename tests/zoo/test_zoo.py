"""The failure zoo against the diagnosis.

Fast path (default): every stored fixture — genuine output of a real failure — is diagnosed with
the expected failure mode first, with evidence on the real error lines. Live path (`-m zoo`):
every case script is rerun for real and its fresh output must be diagnosed the same way, so the
fixtures cannot silently drift from what PyTorch / Hugging Face actually print.
"""

from __future__ import annotations

import pytest

from .catalogue import CaseSpec, ExpectedEvidence, lines_of, load_cases, read_fixture
from .diagnosis import DiagnosisCheck, check_diagnosis
from .regenerate import reproduction_problems
from .runner import FIXED_PORT, CaseRun, normalise_output, recorded_tmp, run_case

CASES = load_cases()
IDS = [c.id for c in CASES]


def _assert_diagnosed(check: DiagnosisCheck, context: str = "") -> None:
    """Pass if the diagnosis is right; a case with a `known_gap` must still be wrong (xfail), and
    fails the moment it is diagnosed right so the stale `known_gap` gets removed."""
    if check.case.known_gap:
        if check.ok:
            pytest.fail(f"{check.case.id} is now diagnosed right: delete its known_gap in cases.yaml", pytrace=False)
        pytest.xfail(f"known gap: {check.case.known_gap} ({check.summary()})")
    if not check.ok:
        pytest.fail(check.summary() + context, pytrace=False)


def _triage_or_skip():
    try:
        from assistant.triage import triage
    except ModuleNotFoundError as err:
        if err.name not in ("assistant.triage", "assistant"):
            raise
        pytest.skip("assistant.triage is not available yet")
    return triage


# --- the fixtures themselves -------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fixture_is_a_recorded_failure(case: CaseSpec) -> None:
    """The stored log shows the failure and the sidecar agrees with cases.yaml (regenerate if not)."""
    text, sidecar = read_fixture(case)
    assert sidecar.case == case.id
    assert sidecar.failure_mode == case.failure_mode
    assert sidecar.acceptable_second == case.acceptable_second
    assert sidecar.expected_evidence == case.evidence
    assert sidecar.exit_code == case.exit_code
    assert sidecar.versions["torch"] and sidecar.command[0] == "python"
    lines = lines_of(text)
    for expected in case.evidence:
        assert any(expected.matches(line) for line in lines), f"{case.id}.log has no line that {expected.describe()}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fixture_is_normalised(case: CaseSpec) -> None:
    """Normalising a stored log again changes nothing (no temp dir, pid, port or time left raw)."""
    text, _ = read_fixture(case)
    again, _ = normalise_output(text, tmp="/tmp/zoo-never-present", stand_in=recorded_tmp(case), port=None)
    assert again == text
    assert "/tmp/zoo-" not in text  # the random part of a run's temp dir never reaches a fixture


def test_normalise_output_replaces_only_volatile_parts() -> None:
    raw = (
        "W1202 14:32:12.337000 5539 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 5542 closing signal SIGTERM\n"
        "E1202 14:32:12.371000 5539 torch/distributed/elastic/multiprocessing/api.py:1002] "
        "failed (exitcode: 1) local_rank: 0 (pid: 5541) of binary: /usr/bin/python\n"
        "  time      : 2026-12-02_14:32:12\n"
        "[W1202 14:40:21.864093137 socket.cpp:494] [c10d] waitForInput: socket SocketImpl(fd=3, "
        "addr=[::ffff:127.0.0.1]:38270, remote=[::ffff:127.0.0.1]:41234) timed out after 3000ms\n"
        "RuntimeError: DataLoader worker (pid(s) 5541, 5542) exited unexpectedly\n"
        "[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:28360.\n"
        "connect to 127.0.0.1:41234 failed; line 5541 of /tmp/zoo-x-abc/data/train.jsonl\n"
        "{'train_runtime': '0.0855', 'train_samples_per_second': '374.1', 'train_loss': 'nan'}\n"
    )
    text, kinds = normalise_output(raw, tmp="/tmp/zoo-x-abc", stand_in="/tmp/zoo/x", port=41234)
    assert text == (
        "W0101 00:00:00.000000 1001 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 1002 closing signal SIGTERM\n"
        "E0101 00:00:00.000000 1001 torch/distributed/elastic/multiprocessing/api.py:1002] "
        "failed (exitcode: 1) local_rank: 0 (pid: 1003) of binary: /usr/bin/python\n"
        "  time      : 2000-01-01_00:00:00\n"
        "[W0101 00:00:00.000000000 socket.cpp:494] [c10d] waitForInput: socket SocketImpl(fd=3, "
        f"addr=[::ffff:127.0.0.1]:50000, remote=[::ffff:127.0.0.1]:{FIXED_PORT}) timed out after 3000ms\n"
        "RuntimeError: DataLoader worker (pid(s) 1003, 1002) exited unexpectedly\n"
        "[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:50000.\n"
        f"connect to 127.0.0.1:{FIXED_PORT} failed; line 5541 of /tmp/zoo/x/data/train.jsonl\n"
        "{'train_runtime': '<measured>', 'train_samples_per_second': '<measured>', 'train_loss': 'nan'}\n"
    )
    assert kinds == ["temp-dir", "pids", "port", "timestamps", "trainer-timings"]


def test_expected_evidence_needs_exactly_one_matcher() -> None:
    with pytest.raises(ValueError):
        ExpectedEvidence()
    with pytest.raises(ValueError):
        ExpectedEvidence(contains="x", regex="x")
    assert ExpectedEvidence(regex=r"grad_norm=[0-9.]+e\+").matches("step=9 grad_norm=1.24e+05")
    assert not ExpectedEvidence(regex=r"grad_norm=[0-9.]+e\+").matches("step=8 grad_norm=1412")


# --- diagnosis of the stored fixtures (fast) ---------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fixture_diagnosis(case: CaseSpec) -> None:
    """The expected failure mode comes first, and its evidence sits on the real error lines."""
    _triage_or_skip()
    text, _ = read_fixture(case)
    _assert_diagnosed(check_diagnosis(text, case))


# --- live: rerun the real failure ----------------------------------------------------------------


@pytest.mark.zoo
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_live_run_is_diagnosed_like_its_fixture(case: CaseSpec) -> None:
    """Reproduce the failure for real now; the fresh output must be diagnosed as the fixture is."""
    _triage_or_skip()
    run = run_case(case)
    problems = reproduction_problems(run)
    if problems:
        # Not a diagnosis problem: the failure itself did not reproduce (even for a known gap).
        pytest.fail("; ".join(problems) + "\n--- live output (tail) ---\n" + run.text[-3000:], pytrace=False)
    _assert_diagnosed(check_diagnosis(run.text, case), "\n--- live output (tail) ---\n" + run.text[-3000:])


# --- the checks themselves can fail ------------------------------------------------------------


def test_check_diagnosis_rejects_a_wrong_mode_and_wrong_evidence() -> None:
    """A log checked against another case's expectations is reported wrong, with reasons."""
    _triage_or_skip()
    by_id = {c.id: c for c in CASES}
    text, _ = read_fixture(by_id["ckpt_truncated_torch"])
    check = check_diagnosis(text, by_id["token_out_of_range"])
    assert not check.ok
    assert any("not token-out-of-range" in p for p in check.problems)
    assert any("index out of range in self" in p for p in check.problems)


def test_reproduction_problems_catch_a_run_that_did_not_fail() -> None:
    case = next(c for c in CASES if c.id == "token_out_of_range")
    run = CaseRun(case, raw="ok\n", text="ok\n", exit_code=0, timed_out=False, seconds=0.1,
                  command=["python"], env={}, normalised=[])
    problems = reproduction_problems(run)
    assert "exit code 0, expected 1" in problems
    assert any("index out of range in self" in p for p in problems)
