"""The minitorch-attn command and the set-up commands of the README."""

import pathlib
import re

import pytest

from minitorch_attn.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_gradcheck_subcommand_runs_the_suite(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["gradcheck", "--only", "matmul"]) == 0
    assert "0 failed" in capsys.readouterr().out


def test_ci_runs_the_readme_test_command_word_for_word():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    test_command = next(c for c in commands if c.rstrip().endswith("pytest"))
    install_and_test = test_command.split("&& ", 2)[-1]  # after creating and activating the venv
    assert install_and_test in (ROOT / ".ci" / "run").read_text()


def _fails_with_status_2(argv, capsys):
    """Run the command; return its one stderr line after checking the status is 2."""
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse rejecting a flag's value
        status = stop.code
    assert status == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("flag, value", [
    ("--steps", "0"), ("--steps", "-3"), ("--time-budget", "-1"), ("--time-budget", "nan"),
    ("--eval-interval", "0"), ("--eval-windows", "0"), ("--batch-size", "0"), ("--block-size", "0"),
    ("--d-model", "0"), ("--num-layers", "0"), ("--num-heads", "0"), ("--dropout", "1"),
    ("--dropout", "-0.1"), ("--val-fraction", "0"), ("--val-fraction", "1"), ("--lr", "0"),
    ("--lr", "inf"), ("--grad-clip", "0"), ("--warmup-steps", "-1"), ("--weight-decay", "-1"),
    ("--sample-tokens", "-1"), ("--seed", "-1"), ("--steps", "two"), ("--threads", "0"), ("--threads", "1.5"),
])
def test_train_rejects_bad_numbers(flag, value, capsys):
    line = _fails_with_status_2(["train", "--text", "no-such-file.txt", flag, value], capsys)  # fails fast if let through
    assert line.startswith("minitorch-attn train: error: argument " + flag) and "expected" in line


@pytest.mark.parametrize("flag, value", [
    ("--top-k", "0"), ("--top-k", "-2"), ("--temperature", "-1"), ("--temperature", "nan"),
    ("--max-new-tokens", "-5"),
])
def test_sample_rejects_bad_numbers(flag, value, capsys):
    line = _fails_with_status_2(["sample", "--checkpoint", "c.npz", flag, value], capsys)
    assert line.startswith("minitorch-attn sample: error: argument " + flag)


def test_unusable_files_and_devices_are_one_line_errors(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("abc " * 100, encoding="utf-8")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    run = ["--steps", "1", "--out", str(tmp_path / "run"), "--quiet"]
    cases = [
        (["train", "--time-budget", "0"], "minitorch-attn train: --time-budget 0 means no time limit: give --steps"),
        (["train", "--text", str(tmp_path / "missing.txt"), *run], "minitorch-attn train: No such file or directory"),
        (["train", "--text", str(binary), *run], "minitorch-attn train: " + repr(str(binary)) + " is not UTF-8 text"),
        (["train", "--text", str(text), "--steps", "1", "--out", str(a_file)], "minitorch-attn train: error: argument --out"),
        (["train", "--text", str(text), "--resume", str(tmp_path / "missing.npz"), *run],
         "minitorch-attn train: no checkpoint at"),
        (["train", "--text", str(text), "--device", "gpu", *run],
         "minitorch-attn train: error: argument --device: unknown device 'gpu'"),
        (["sample", "--checkpoint", str(text), "--device", "gpu"],
         "minitorch-attn sample: error: argument --device: unknown device 'gpu'"),
        (["sample", "--checkpoint", str(text)], "minitorch-attn sample: " + repr(str(text)) + " is not a readable checkpoint"),
        (["homework", "make", "--out", str(a_file)], "minitorch-attn homework make: error: argument --out"),
    ]
    for argv, start in cases:
        assert _fails_with_status_2(argv, capsys).startswith(start), argv
    assert not (tmp_path / "run").exists()  # nothing is created for a run that could not start


def test_a_stub_or_a_bug_keeps_its_traceback(monkeypatch):
    import pytest

    from minitorch_attn import cli

    def stubbed(args):
        raise NotImplementedError("Task 4.3: ...")

    monkeypatch.setattr(cli, "_run_gradcheck", stubbed)
    with pytest.raises(NotImplementedError, match="Task 4.3"):
        cli.main(["gradcheck"])

