"""Closing the terminal (SIGHUP) and ``kill`` (SIGTERM) stop every command that writes as
Ctrl-C does: what it writes is there whole or not at all, never a temporary file.

Each test stops a command in a subprocess at the worst moment: inside a write, after the
temporary file exists and before it is renamed. A ``sitecustomize`` module put on the
subprocess's path holds the write there (the moment ``STOP_AT`` names) and prints a line;
the test waits for that line, sends the signal, then lets the write go on (a write that
holds signals back finishes). Nothing depends on timing.
"""

import json
import os
import signal
import textwrap
import time

import pytest

from minitorch_attn.app import checkpoint as ckpt
from tests.test_cli import TINY, _Command

SIGNALS = [signal.SIGHUP, signal.SIGTERM]

HOLD = textwrap.dedent("""
    import os, shutil, sys, time

    def _hold(what):
        print(f"held while writing {what}", flush=True)
        deadline = time.monotonic() + 120    # never hang a test for ever
        while not os.path.exists(os.environ["RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.01)                 # the signal's KeyboardInterrupt ends this, or (where the
                                             # command holds signals back) the test's release file

    _stop_at = os.environ["STOP_AT"]
    _fsync, _copyfile = os.fsync, shutil.copyfile

    def fsync(fd):                           # atomic writes: the temporary file is written, not yet renamed
        path = os.readlink(f"/proc/self/fd/{fd}")
        _fsync(fd)
        if path.endswith(_stop_at):
            _hold(path)

    def copyfile(source, target, **kwargs):  # homework make: a tree half copied
        _copyfile(source, target, **kwargs)
        if _stop_at == "copyfile":
            _hold(target)

    os.fsync, shutil.copyfile = fsync, copyfile
""")


def _held(tmp_path, *args, stop_at):
    """The command ``args``, run in ``tmp_path / "work"`` and held at ``stop_at``."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOLD)
    work = tmp_path / "work"
    work.mkdir()
    run = _Command(
        *args, cwd=work, env={"PYTHONPATH": str(hooks), "STOP_AT": stop_at, "RELEASE": str(hooks / "release")}
    )
    run.wait_for(lambda out: "held while writing" in out)
    return run, work


def _stop(run, signum, tmp_path):
    """Send ``signum``, then let the held write go on."""
    run.process.send_signal(signum)
    (tmp_path / "hooks" / "release").touch()


def _debris(folder):
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.startswith(".tmp") or ".partial" in p.name]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    from minitorch_attn.app.data import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(load_corpus()[:3000], encoding="utf-8")
    return path


@pytest.mark.parametrize("stop_at", [".png", ".npz"], ids=["a picture", "the checkpoint"])
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_train_stopped_while_writing_leaves_the_checkpoint_and_metrics(signum, stop_at, text, tmp_path):
    # stopped in a picture's write: no picture half made; in the checkpoint's: the write holds
    # the signal back and ends whole. Either way the rest is skipped as after Ctrl-C
    run, work = _held(
        tmp_path,
        "train",
        "--text",
        str(text),
        "--steps",
        "5",
        "--time-budget",
        "0",
        "--out",
        "run",
        "--quiet",
        *TINY,
        stop_at=stop_at,
    )
    _stop(run, signum, tmp_path)
    assert run.finish() == 130, run.text("err")
    assert _debris(work) == []
    folder = work / "run"
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.npz", "metrics.json"]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["plots"] == [] and metrics["steps"] == 5
    assert ckpt.load(folder / "checkpoint.npz")["extra"]["step"] == 5
    assert "interrupted: the checkpoint run/checkpoint.npz is saved" in run.text()


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_demo_stopped_while_writing_a_picture_leaves_no_half_picture(signum, tmp_path):
    pytest.importorskip("matplotlib")
    run, work = _held(tmp_path, "demo", "01_attention", "--quick", "--out", "pictures", stop_at=".png")
    _stop(run, signum, tmp_path)
    assert run.finish() == 130, run.text("err")
    assert _debris(work) == [] and not any(p.suffix == ".png" for p in work.rglob("*"))
    assert run.text("err").strip() == "minitorch-attn demo: interrupted"


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_homework_make_stopped_half_way_leaves_no_tree(signum, tmp_path):
    run, work = _held(tmp_path, "homework", "make", "--assignment", "1", "--out", "student", stop_at="copyfile")
    _stop(run, signum, tmp_path)
    assert run.finish() == 130, run.text("err")
    assert list(work.iterdir()) == []  # neither the tree nor the hidden folder it was made in


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_export_stopped_while_writing_leaves_no_half_file(signum, text, tmp_path):
    pytest.importorskip("safetensors")
    from minitorch_attn.app.cli import main

    trained = tmp_path / "trained"
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
                str(trained),
                "--quiet",
                *TINY,
            ]
        )
        == 0
    )
    run, work = _held(
        tmp_path,
        "export",
        "--checkpoint",
        str(trained / "checkpoint.npz"),
        "--out",
        "m.safetensors",
        stop_at=".safetensors",
    )
    _stop(run, signum, tmp_path)
    assert run.finish() == 130, run.text("err")
    assert list(work.iterdir()) == []


def test_after_sighup_the_output_that_went_to_the_closed_terminal_goes_nowhere(tmp_path):
    # the command's output is a terminal (a pseudo-terminal), closed, then SIGHUP, as when its
    # window is closed: writing on must not fail (a closed terminal answers EIO). The hang-up
    # often comes twice (the kernel's, then the shell's): the second, sent once the first is
    # handled, must not stop the command again while it saves, nor kill it as it exits
    import pty
    import subprocess
    import sys

    report, handled, second_sent = tmp_path / "report", tmp_path / "handled", tmp_path / "second-sent"
    code = textwrap.dedent(f"""
        import os, sys, time
        from minitorch_attn.stopping import stop_as_ctrl_c
        stop_as_ctrl_c()
        try:
            print("ready", flush=True)
            while True:
                time.sleep(0.01)
        except KeyboardInterrupt:
            pass
        open({str(handled)!r}, "w").close()
        while not os.path.exists({str(second_sent)!r}):   # saving, when the second hang-up comes
            time.sleep(0.01)
        print("after the hang-up", flush=True)
        print("and on stderr", file=sys.stderr, flush=True)
        open({str(report)!r}, "w").write(f"{{os.isatty(1)}} {{os.isatty(2)}}")
    """)
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", code], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while b"ready" not in seen:
        seen += os.read(master, 1024)
    os.close(master)  # the terminal is gone
    child.send_signal(signal.SIGHUP)
    for _ in range(6000):  # the first hang-up handled (or the child gone): at most a minute
        if handled.exists() or child.poll() is not None:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGHUP)
    second_sent.touch()
    assert child.wait(timeout=60) == 0
    assert report.read_text() == "False False"
