"""The training job's data: the vocabulary, the split, the batches and the bigram baseline."""

import _thread
import math
import os
import sys
import threading
import time

import numpy as np
import pytest

from minitorch_attn.app import data


def test_vocab_round_trip_and_unknown_characters():
    vocab = data.CharVocab.from_text("hello world")
    assert vocab.chars == " dehlorw" and len(vocab) == 8
    assert vocab.decode(vocab.encode("world hello")) == "world hello"
    assert vocab.decode(vocab.encode("héllo")) == "h llo"  # é was never seen: a space
    assert vocab.unknown_count == 1
    with pytest.raises(ValueError):
        data.CharVocab("aa")


def test_split_and_batches():
    ids = np.arange(100, dtype=np.int64)
    tr, va = data.split_ids(ids, 0.1)
    assert len(tr) == 90 and va[0] == 90
    x, y = data.get_batch(tr, 4, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8) and x.dtype == "int64"
    np.testing.assert_array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])
    with pytest.raises(ValueError, match="too few"):
        data.get_batch(ids[:5], 2, 8, np.random.default_rng(0))


def test_bigram_baseline_by_hand():
    # train "abab...": P(b|a) = (n_ab + 1) / (n_a + 2); val "ab" is one a->b transition
    tr = np.array([0, 1] * 5)
    bpc = data.bigram_bpc(tr, np.array([0, 1]), 2)
    assert bpc == pytest.approx(-math.log2((5 + 1) / (5 + 2)))


needs_pipes = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def _press_ctrl_c_once_reading():
    """Press Ctrl-C in the main thread the way Python notes a signal, without cutting a
    system call short (so a read that is already waiting would go on waiting), once the main
    thread is inside ``data._read_bytes``: it looks at the main thread's stack, not at a
    clock, so a busy machine cannot make it press too early."""
    main = threading.main_thread().ident
    while True:
        frame = sys._current_frames().get(main)
        while frame is not None and frame.f_code is not data._read_bytes.__code__:
            frame = frame.f_back
        if frame is not None:
            break
        time.sleep(0.01)
    _thread.interrupt_main()


def _write_to_pipe(path, data, ctrl_c=False):
    """In a thread: open the writing end of the named pipe ``path`` (this waits for the
    reader), write ``data`` and close it. With ``ctrl_c`` it instead keeps its end open and
    presses Ctrl-C in the main thread (:func:`_press_ctrl_c_once_reading`) until ``done`` is
    set. Returns (thread, done)."""
    done = threading.Event()

    def write():
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, data)
        if ctrl_c:
            _press_ctrl_c_once_reading()
            done.wait()
        os.close(fd)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread, done


@needs_pipes
def test_a_file_and_a_pipe_give_the_same_text_with_every_line_ending_as_newline(tmp_path):
    raw = "one\r\ntwo\rthree\nfour é\r\n".encode()
    (tmp_path / "file").write_bytes(raw)
    os.mkfifo(tmp_path / "pipe")
    writer, _ = _write_to_pipe(tmp_path / "pipe", raw)
    assert data.load_corpus(tmp_path / "pipe") == data.load_corpus(tmp_path / "file") == "one\ntwo\nthree\nfour é\n"
    writer.join()
    (tmp_path / "bad").write_bytes(b"ok\xff")
    with pytest.raises(ValueError, match="not UTF-8 text \\(byte 2"):
        data.load_corpus(tmp_path / "bad")


@needs_pipes
@pytest.mark.timeout(30, method="signal")  # without the short waits the read never ends: fail instead
def test_a_ctrl_c_noted_while_a_pipe_is_read_stops_the_read(tmp_path):
    # the race the command met: Ctrl-C arrives just before a blocking read begins, so no
    # read is cut short, and the writer keeps its end open; reading in short waits notices it
    os.mkfifo(tmp_path / "pipe")
    writer, done = _write_to_pipe(tmp_path / "pipe", b"the writer never closes", ctrl_c=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            data.load_corpus(tmp_path / "pipe")
    finally:
        done.set()
        writer.join()


@needs_pipes
@pytest.mark.timeout(30, method="signal")  # a blocking open would wait for a writer for ever: fail instead
def test_a_ctrl_c_before_a_named_pipe_has_a_writer_stops_the_read(tmp_path):
    os.mkfifo(tmp_path / "pipe")  # no writer ever connects
    press = threading.Thread(target=_press_ctrl_c_once_reading, daemon=True)
    press.start()
    with pytest.raises(KeyboardInterrupt):
        data.load_corpus(tmp_path / "pipe")
    press.join()


@needs_pipes
def test_the_ctrl_c_tests_pass_in_a_suite_started_with_ctrl_c_ignored(tmp_path):
    # `pytest &` from a script, nohup or a CI runner starts the suite with SIGINT ignored
    # (SIG_IGN is inherited); the conftest gives every test Python's Ctrl-C back, else the
    # two tests above wait until their time limit
    import signal
    import subprocess

    tests = [
        f"{__file__}::{name}"
        for name in (
            "test_a_ctrl_c_noted_while_a_pipe_is_read_stops_the_read",
            "test_a_ctrl_c_before_a_named_pipe_has_a_writer_stops_the_read",
        )
    ]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-o",
            "addopts=",
            f"--basetemp={tmp_path / 'run'}",
            *tests,
        ],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 passed" in run.stdout


@needs_pipes
def test_a_pipe_is_read_whatever_the_number_of_its_file_descriptor(tmp_path):
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the process may not open 1,100 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if soft != resource.RLIM_INFINITY else soft, hard))
    held = [open(os.devnull) for _ in range(1100)]  # the pipe's descriptor is then above 1024 (select's limit)
    try:
        os.mkfifo(tmp_path / "pipe")
        writer, _ = _write_to_pipe(tmp_path / "pipe", b"hello\n")
        assert data.load_corpus(tmp_path / "pipe") == "hello\n"
        writer.join()
    finally:
        for f in held:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_default_corpus_is_the_python_reference():
    text = data.load_corpus()
    assert len(text) > 400_000 and "lambda" in text


@pytest.mark.parametrize("block_size", [1, 8, 64])
@pytest.mark.parametrize("val_fraction", [0.01, 0.1, 0.5, 0.9])
def test_the_shortest_text_is_the_first_whose_split_leaves_a_window_on_each_side(block_size, val_fraction):
    def fits(length):
        train, val = data.split_ids(np.arange(length), val_fraction)
        return min(len(train), len(val)) >= block_size + 1

    shortest = data.shortest_text(block_size, val_fraction)
    assert fits(shortest) and not any(fits(n) for n in range(shortest))
    data.check_text_size(shortest, block_size, val_fraction)
    with pytest.raises(ValueError, match=f"at least {shortest:,} characters"):
        data.check_text_size(shortest - 1, block_size, val_fraction)


def test_the_defaults_need_641_characters():
    assert data.shortest_text(64, 0.1) == 641  # validation gets 65 of them: one window of the context + 1
