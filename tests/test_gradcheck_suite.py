"""Every entry of the gradcheck/ suite, on NumPy and on array-api-strict (and CuPy when present)."""

import pytest

from minitorch_attn.gradcheck.suite import entries

ENTRIES = entries()


def test_the_suite_is_not_empty():
    assert len(ENTRIES) >= 30


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_entry_passes_in_float64(entry, device):
    report = entry.run(device=device, dtype="float64")
    assert report.passed, report.failure


@pytest.mark.task_1_5
def test_the_command_prints_a_row_per_entry_and_exits_zero(capsys):
    from minitorch_attn.gradcheck.command import main

    assert main(["--only", "matmul"]) == 0
    out = capsys.readouterr().out
    assert out.count("pass") >= 4 and "0 failed" in out


def test_the_command_fails_on_an_unknown_selection(capsys):
    from minitorch_attn.gradcheck.command import main

    assert main(["--only", "no such op"]) == 2


def test_an_unusable_device_is_one_message(capsys):
    from minitorch_attn.gradcheck.command import main

    assert main(["--device", "tpu"]) == 2
    assert "unknown device 'tpu'" in capsys.readouterr().err
