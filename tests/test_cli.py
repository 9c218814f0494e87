"""The minitorch-attn command and the set-up commands of the README."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import minitorch_attn
from minitorch_attn import optim
from minitorch_attn.app import checkpoint as ckpt
from minitorch_attn.app.cli import main
from minitorch_attn.app.data import load_corpus

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_gradcheck_subcommand_runs_the_suite(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["gradcheck", "--only", "matmul"]) == 0
    assert "0 failed" in capsys.readouterr().out


def test_ci_runs_every_readme_command_word_for_word():
    """.ci/run reads its commands from README.md's bash blocks (and runs each in a fresh copy)."""
    readme = (ROOT / "README.md").read_text()
    commands = [c.strip() for c in re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)]
    listed = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--list"], capture_output=True, text=True, check=True)
    assert listed.stdout.splitlines() == commands
    assert any(c.endswith("minitorch-attn train") for c in commands)  # the main job
    assert any(c.endswith("&& pytest") for c in commands)  # the tests
    assert any("sphinx-build -W" in c for c in commands)  # the site
    ci = (ROOT / ".ci" / "run").read_text()
    assert "minitorch-attn homework selftest" in ci and "pytest tests/test_docs_site.py" in ci
    assert 'pip install --quiet -e ".[lint]"' in ci and "ruff check . && ruff format --check . && mypy" in ci


def _fails_with_status_2(argv, capsys):
    """Run the command; return its one stderr line after checking the status is 2 and that
    the line, a refused flag's or an error raised while running, says "error:" and is
    followed only by the pointer to --help (not argparse's usage block)."""
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse rejecting a flag's value
        status = stop.code
    assert status == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert ": error: " in lines[0], lines
    command = lines[0].split(": error: ")[0]
    assert lines == [lines[0], f"see '{command} --help' for every flag"], lines
    return lines[0]


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--steps", "0"),
        ("--steps", "-3"),
        ("--time-budget", "-1"),
        ("--time-budget", "nan"),
        ("--eval-interval", "0"),
        ("--eval-windows", "0"),
        ("--batch-size", "0"),
        ("--block-size", "0"),
        ("--d-model", "0"),
        ("--num-layers", "0"),
        ("--num-heads", "0"),
        ("--dropout", "1.5"),
        ("--dropout", "-0.1"),
        ("--val-fraction", "0"),
        ("--val-fraction", "1"),
        ("--lr", "0"),
        ("--lr", "inf"),
        ("--grad-clip", "-1"),
        ("--warmup-steps", "-1"),
        ("--weight-decay", "-1"),
        ("--sample-tokens", "-1"),
        ("--seed", "-1"),
        ("--steps", "two"),
        ("--top-p", "0"),
        ("--top-p", "1.5"),
        ("--threads", "0"),
        ("--threads", "1.5"),
        ("--min-lr-ratio", "-0.1"),
        ("--min-lr-ratio", "1.5"),
        ("--min-lr-ratio", "nan"),
    ],
)
def test_train_rejects_bad_numbers(flag, value, capsys):
    line = _fails_with_status_2(
        ["train", "--text", "no-such-file.txt", flag, value], capsys
    )  # fails fast if let through
    assert line.startswith("minitorch-attn train: error: argument " + flag) and "expected" in line


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--top-k", "0"),
        ("--top-k", "-2"),
        ("--temperature", "-1"),
        ("--temperature", "nan"),
        ("--max-new-tokens", "-5"),
        ("--top-p", "0"),
        ("--top-p", "1.01"),
        ("--top-p", "nan"),
    ],
)
def test_sample_rejects_bad_numbers(flag, value, capsys):
    line = _fails_with_status_2(["sample", "--checkpoint", "c.npz", flag, value], capsys)
    assert line.startswith("minitorch-attn sample: error: argument " + flag)


def test_unusable_files_and_devices_are_one_line_errors(tmp_path, capsys):
    # every error, a flag's or one raised while running, says "error:" and points to --help
    text = tmp_path / "corpus.txt"
    text.write_text("abc " * 100, encoding="utf-8")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    run = ["--steps", "1", "--out", str(tmp_path / "run"), "--quiet"]
    cases = [
        (
            ["train", "--time-budget", "0"],
            "minitorch-attn train: error: --time-budget 0 means no time limit: give --steps",
        ),
        (
            ["train", "--text", str(tmp_path / "missing.txt"), *run],
            "minitorch-attn train: error: No such file or directory",
        ),
        (
            ["train", "--text", str(binary), *run],
            "minitorch-attn train: error: " + repr(str(binary)) + " is not UTF-8 text",
        ),
        (
            ["train", "--text", str(tmp_path), *run],
            "minitorch-attn train: error: Is a directory: " + repr(str(tmp_path)),
        ),
        (["train", "--text", str(a_file), *run], "minitorch-attn train: error: the text has 0 characters, too few"),
        (
            ["train", "--text", str(text), "--steps", "1", "--out", str(a_file)],
            "minitorch-attn train: error: argument --out",
        ),
        (
            ["train", "--text", str(text), "--resume", str(tmp_path / "missing.npz"), *run],
            "minitorch-attn train: error: no checkpoint at",
        ),
        (
            ["train", "--text", str(text), "--device", "gpu", *run],
            "minitorch-attn train: error: argument --device: unknown device 'gpu'",
        ),
        (
            ["sample", "--checkpoint", str(text), "--device", "gpu"],
            "minitorch-attn sample: error: argument --device: unknown device 'gpu'",
        ),
        (
            ["sample", "--checkpoint", str(text)],
            "minitorch-attn sample: error: " + repr(str(text)) + " is not a readable checkpoint",
        ),
        (["homework", "make", "--out", str(a_file)], "minitorch-attn homework make: error: argument --out"),
    ]
    for argv, start in cases:
        assert _fails_with_status_2(argv, capsys).startswith(start), argv
    assert not (tmp_path / "run").exists()  # nothing is created for a run that could not start


def test_a_stub_or_a_bug_keeps_its_traceback(monkeypatch):
    import pytest

    from minitorch_attn.app import cli

    def stubbed(args):
        raise NotImplementedError("Task 4.3: ...")

    monkeypatch.setattr(cli, "_run_gradcheck", stubbed)
    with pytest.raises(NotImplementedError, match="Task 4.3"):
        cli.main(["gradcheck"])


def test_train_in_a_tree_before_assignment_6_says_which_flags_train_gpt2s_block(monkeypatch, tmp_path):
    # the default block is assignment 6's (SiLU, SwiGLU, rotary attention): a student of an
    # earlier assignment, whose tree has its stubs, learns the flags that need none of them
    import pytest

    from minitorch_attn.app import cli
    from minitorch_attn.functional import activations

    def stub(*args, **kwargs):
        raise NotImplementedError("Task 6.1: SiLU forward and backward (function silu)")

    monkeypatch.setattr(activations, "silu", stub)
    monkeypatch.setattr("minitorch_attn.functional.silu", stub)
    argv = ["train", "--steps", "2", "--quiet", "--out", str(tmp_path / "run"), *TINY]
    with pytest.raises(NotImplementedError, match="Task 6.1(.|\n)*--norm layernorm --mlp gelu --pos-encoding learned"):
        cli.main(argv)
    gpt2 = ["--norm", "layernorm", "--mlp", "gelu", "--pos-encoding", "learned", "--overwrite"]
    assert cli.main([*argv, *gpt2]) == 0  # GPT-2's block uses none of assignment 6's code


# ---- the train and sample commands as a new user meets them ----------------------------------------
TINY = [
    "--d-model",
    "16",
    "--num-layers",
    "1",
    "--num-heads",
    "2",
    "--block-size",
    "16",
    "--batch-size",
    "4",
    "--warmup-steps",
    "2",
    "--eval-interval",
    "5",
    "--eval-windows",
    "2",
    "--sample-tokens",
    "10",
]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(load_corpus()[:3000], encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(text, tmp_path_factory):
    """A run folder of a few steps (its checkpoint is at step 5)."""
    out = tmp_path_factory.mktemp("run") / "run"
    assert (
        main(["train", "--text", str(text), "--steps", "5", "--time-budget", "0", "--out", str(out), "--quiet", *TINY])
        == 0
    )
    return out


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"minitorch-attn {minitorch_attn.__version__}"


def test_gradcheck_help_and_errors_name_the_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["gradcheck", "--help"])
    assert capsys.readouterr().out.startswith("usage: minitorch-attn gradcheck")
    line = _fails_with_status_2(["gradcheck", "--dtype", "float16"], capsys)
    assert line.startswith("minitorch-attn gradcheck: error: argument --dtype: invalid choice: 'float16'")


def test_every_size_requirement_is_checked_before_training(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("abc def " * 30, encoding="utf-8")  # 240 characters: training would fit, validation not
    line = _fails_with_status_2(["train", "--text", str(short), "--steps", "3", "--out", str(tmp_path / "run")], capsys)
    assert "the text has 240 characters" in line and "this text gives them 216 and 24" in line
    assert "at least 641 characters" in line  # for --block-size 64 and --val-fraction 0.1, the defaults
    assert not (tmp_path / "run").exists()
    line = _fails_with_status_2(
        [
            "train",
            "--text",
            str(short),
            "--steps",
            "3",
            "--block-size",
            "8",
            "--val-fraction",
            "0.01",
            "--out",
            str(tmp_path / "run"),
        ],
        capsys,
    )
    assert "at least 801 characters" in line


def test_out_refuses_a_folder_with_files_unless_asked(trained, text, tmp_path, capsys):
    before = (trained / "checkpoint.npz").read_bytes()
    line = _fails_with_status_2(["train", "--text", str(text), "--steps", "1", "--out", str(trained), *TINY], capsys)
    assert line.startswith(
        f"minitorch-attn train: error: --out {trained} already holds files (attention.png, "
        "checkpoint.npz, loss.png, metrics.json)"
    )
    assert "--resume" in line and "--overwrite" in line
    assert (trained / "checkpoint.npz").read_bytes() == before
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "notes.txt").write_text("mine")
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "1",
                "--time-budget",
                "0",
                "--out",
                str(copy),
                "--overwrite",
                "--quiet",
                *TINY,
            ]
        )
        == 0
    )
    assert (copy / "checkpoint.npz").exists() and (copy / "notes.txt").read_text() == "mine"


def _as_terminal(monkeypatch):
    """The captured stderr says it is a terminal, so that tqdm draws its bar there (call it
    in the test's body, where capsys's stream is the one in sys.stderr)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_resume_says_where_it_starts_counts_on_and_warns_about_ignored_model_flags(
    trained, text, tmp_path, capsys, monkeypatch
):
    _as_terminal(monkeypatch)
    shutil.copytree(trained, tmp_path / "run")
    run = tmp_path / "run"
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "3",
                "--time-budget",
                "0",
                "--out",
                str(run),
                "--resume",
                str(run / "checkpoint.npz"),
                *TINY,
                "--d-model",
                "32",
                "--norm",
                "rmsnorm",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert f"resuming from step 5 of {run / 'checkpoint.npz'}" in out
    assert "warning: --d-model 32 is ignored: the checkpoint's model has d_model 16" in err
    assert "--norm" not in err  # given, but the same as the checkpoint's
    assert "--num-layers" not in err  # in TINY, equal to the checkpoint's
    assert "8/8" in err  # the bar counts on from step 5
    assert json.loads((run / "metrics.json").read_text())["steps"] == 8


def test_quiet_still_prints_the_results(text, tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "2",
                "--time-budget",
                "0",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                *TINY,
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert err == ""  # no progress bar
    assert "corpus:" not in out and "model:" not in out  # no log lines
    lines = out.splitlines()
    assert lines[0] == f"checkpoint: {tmp_path / 'run' / 'checkpoint.npz'} (step 2)"
    assert lines[1].startswith("step 2: validation ") and "bits/char on the whole split" in lines[1]
    assert lines[2] == "sample:" and lines[3].startswith("The ")  # no estimate at step 2: nothing to explain
    assert lines[-1].startswith("2 steps, ") and lines[-1].endswith(f"outputs in {tmp_path / 'run'}")


def test_the_final_validation_says_why_it_differs_from_the_last_estimate(text, tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "5",
                "--time-budget",
                "0",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                *TINY,
            ]
        )
        == 0
    )  # an estimate at step 5 (--eval-interval 5) on 2 windows
    lines = capsys.readouterr().out.splitlines()
    final = float(re.search(r"step 5: validation ([0-9.]+) bits/char on the whole split", lines[1]).group(1))
    history = ckpt.load(tmp_path / "run" / "checkpoint.npz")["extra"]["history"]
    gap = abs(history["val_bpc"][-1] - final)
    assert lines[2].startswith(
        "  (the periodic estimates above score 2 windows, about 16 of the split's 299 characters, "
        "at the same places each time; the last, "
    ), lines[2]
    assert f"at step 5, is {gap:.3f} " in lines[2]
    easier = history["val_bpc"][-1] < final
    assert lines[2].endswith(
        f"the whole split: the text at those places is {'easier' if easier else 'harder'} than the split's average)"
    )  # the estimate is of step 5 too: no step came between
    assert "did not get worse" not in lines[2]  # a claim the figures cannot make (a --resume made it worse)
    assert lines[3] == "sample:"


def test_grad_clip_0_turns_clipping_off(text, tmp_path, monkeypatch):
    def no_clipping(*args, **kwargs):
        raise AssertionError("--grad-clip 0 clipped")

    monkeypatch.setattr(optim, "clip_grad_norm_", no_clipping)
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "2",
                "--time-budget",
                "0",
                "--out",
                str(tmp_path / "run"),
                "--grad-clip",
                "0",
                "--quiet",
                *TINY,
            ]
        )
        == 0
    )


def test_a_time_budget_alone_shows_progress_in_seconds(text, tmp_path, capsys, monkeypatch):
    _as_terminal(monkeypatch)
    assert main(["train", "--text", str(text), "--time-budget", "1", "--out", str(tmp_path / "run"), *TINY]) == 0
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert re.search(r"100%.*\| 1/1 s \[.*<.*, step \d+, loss", bar), bar


def test_output_that_is_not_a_terminal_gets_the_log_lines_and_no_bar(text, tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--text",
                str(text),
                "--steps",
                "3",
                "--time-budget",
                "0",
                "--out",
                str(tmp_path / "run"),
                *TINY,
                "--eval-interval",
                "1",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "\r" not in err and "step/s" not in err and "%|" not in err
    assert "corpus:" in out and "step 1: val " in out


# ---- Ctrl-C: real SIGINTs to the command in a subprocess -------------------------------------------
class _Command:
    """``minitorch-attn ARGS`` in a subprocess (the installed script, else ``python -m
    minitorch_attn.app.cli``), its output collected as it comes, so that a test can wait for a
    line and then press Ctrl-C (send SIGINT) at that point."""

    def __init__(self, *args, cwd, env=None):
        script = shutil.which("minitorch-attn", path=os.path.dirname(sys.executable))
        command = [script] if script else [sys.executable, "-m", "minitorch_attn.app.cli"]
        # Ctrl-C reaches the command as it reaches one typed in a terminal even when these tests
        # run in the background: a shell without job control starts background jobs with SIGINT
        # ignored, and a child would inherit that (Python then never raises KeyboardInterrupt)
        self.process = subprocess.Popen(
            [*command, *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.output = {"out": bytearray(), "err": bytearray()}
        self.readers = [
            threading.Thread(target=self._read, args=(stream, self.output[name]), daemon=True)
            for name, stream in (("out", self.process.stdout), ("err", self.process.stderr))
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, into):
        while chunk := os.read(stream.fileno(), 4096):
            into.extend(chunk)

    def text(self, name="out"):
        return self.output[name].decode("utf-8", "replace")

    def wait_for(self, condition, timeout=120):
        """Wait until ``condition(stdout text)`` holds while the command still runs."""
        deadline = time.monotonic() + timeout
        while not condition(self.text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise AssertionError(f"never seen (status {self.process.poll()}):\n{self.text()}\n{self.text('err')}")
            time.sleep(0.02)

    def ctrl_c(self):
        self.process.send_signal(signal.SIGINT)

    def finish(self, timeout=120):
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()  # never leave a training run behind the test
            raise
        for reader in self.readers:
            reader.join()
        assert "Traceback" not in self.text("err"), self.text("err")
        return status


def test_ctrl_c_twice_while_training_and_in_the_final_validation_keeps_the_checkpoint(tmp_path):
    # the default corpus with half of it for validation, scored one 8-character window at a
    # time: the final validation takes many seconds, the steps before it milliseconds
    run = _Command(
        "train",
        "--val-fraction",
        "0.5",
        "--block-size",
        "8",
        "--batch-size",
        "1",
        "--d-model",
        "8",
        "--num-layers",
        "1",
        "--num-heads",
        "1",
        "--eval-interval",
        "3",
        "--eval-windows",
        "1",
        "--steps",
        "100000",
        "--out",
        "run",
        cwd=tmp_path,
    )
    run.wait_for(lambda out: "step 3: val" in out)
    run.ctrl_c()
    run.wait_for(lambda out: "final validation on the whole split" in out)
    run.ctrl_c()
    assert run.finish() == 130, run.text("err")
    out = run.text()
    assert "interrupted at step" in out and "interrupted again: the checkpoint" in out
    step = int(re.search(r"checkpoint: run/checkpoint.npz \(step (\d+)\)", out).group(1))
    assert step >= 3 and ckpt.load(tmp_path / "run" / "checkpoint.npz")["extra"]["step"] == step
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["steps"] == step and metrics["val_bpc"] is None


def test_ctrl_c_while_training_saves_finishes_and_exits_130(text, tmp_path):
    run = _Command("train", "--text", str(text), "--steps", "100000", "--out", "run", *TINY, cwd=tmp_path)
    run.wait_for(lambda out: "step 5: val" in out)
    run.ctrl_c()
    assert run.finish() == 130, run.text("err")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["val_bpc"] > 0 and metrics["sample"].startswith("The ")
    assert ckpt.load(tmp_path / "run" / "checkpoint.npz")["extra"]["step"] == metrics["steps"] >= 5


def test_ctrl_c_while_the_corpus_is_read_stops_cleanly(tmp_path):
    fifo = tmp_path / "text"  # a named pipe: reading it waits until we write, so the command waits at start-up
    os.mkfifo(fifo)
    run = _Command("train", "--text", str(fifo), "--out", "run", cwd=tmp_path)
    deadline = time.monotonic() + 120
    while True:  # opening the writing end succeeds once the command has opened the reading end
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert run.process.poll() is None and time.monotonic() < deadline, run.text("err")
            time.sleep(0.02)
    try:
        run.ctrl_c()
        assert run.finish() == 130
    finally:
        os.close(writer)
    assert run.text("err").strip() == "minitorch-attn train: interrupted"
    assert not (tmp_path / "run").exists()


def test_sample_prints_as_it_generates_and_ctrl_c_stops_it_cleanly(trained, tmp_path):
    run = _Command(
        "sample",
        "--checkpoint",
        str(trained / "checkpoint.npz"),
        "--prompt",
        "The ",
        "--max-new-tokens",
        "1000000",
        cwd=tmp_path,
    )
    run.wait_for(lambda out: len(out) >= 10)  # the prompt and characters, long before the million
    run.ctrl_c()
    assert run.finish() == 130
    assert run.text().startswith("The ")
    assert run.text("err").strip() == "minitorch-attn sample: interrupted"


def test_errors_raised_while_running_say_error_and_point_to_help_in_every_command(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert _fails_with_status_2(["demo", "no_such_demo"], capsys).startswith(
        "minitorch-attn demo: error: no demo called 'no_such_demo'"
    )
    assert _fails_with_status_2(["gradcheck", "--only", "no such op"], capsys) == (
        "minitorch-attn gradcheck: error: no gradcheck entry matches 'no such op'"
    )
    assert _fails_with_status_2(
        ["export", "--checkpoint", str(tmp_path / "none.npz"), "--out", str(tmp_path / "m.safetensors")], capsys
    ).startswith("minitorch-attn export: error: ")


def test_the_readme_says_what_the_main_job_writes_and_what_to_run_next(trained):
    from minitorch_attn.app import demos_cli

    readme = (ROOT / "README.md").read_text()
    written = sorted(p.name for p in trained.iterdir())
    assert written == ["attention.png", "checkpoint.npz", "loss.png", "metrics.json"]
    assert all(f"`{name}`" in readme for name in written), written
    assert "`runs/<date-time>/`" in readme  # the default --out
    assert "minitorch-attn sample --checkpoint runs/<date-time>/checkpoint.npz" in readme
    for name in re.findall(r"`minitorch-attn demo (\w+)`", readme):
        assert demos_cli.find_demo(name, demos_cli.available_demos(ROOT / "demos")) is not None, name
    assert "tutorial on multi-head attention and layer normalization" in readme
