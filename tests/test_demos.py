"""Smoke test of the tutorial's demos: each runs in --quick mode, prints its key numbers
(shapes, row sums, parameter counts) and writes its pictures; and the ``demo`` command."""

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from minitorch_attn.app import cli, demo_common, demos_cli, measure
from tests.conftest import float64_tolerance

pytest.importorskip("matplotlib")

DEMOS = Path(__file__).resolve().parents[1] / "demos"

# demo -> (lines or fragments its output must contain, pictures it must write)
EXPECTED = {
    "00_why_attention": (
        [
            "x (1, 30, 64)",
            "RNN, PyTorch's init",
            "RNN, W_h x 6",
            "attention (causal, one layer)",
            "attention / RNN time ratio",
            "tutorial: 'when an RNN reaches word 100",
        ],
        ["why_attention.png"],
    ),
    "01_attention": (
        [
            "sharpness 16: weights [1.000 0.000 0.000 0.000]  answer   4.00 °C",
            "x xᵀ (no projections)  largest score with itself in 100% of the rows",
            "Q, K, V shape: (2, 1, 5, 64)",
            "output shape: (2, 1, 5, 64)",
            "attention weights shape: (2, 1, 5, 5)",
            "every row sums to 1: True",
        ],
        ["attention_weights.png"],
    ),
    "02_multihead": (
        [
            "output shape: (4, 10, 512)",
            "attention weights shape: (4, 8, 10, 10)",
            "every row sums to 1: True",
            "parameters: 1,048,576 ",
            "(4, 10, 8, 64)",
            "(4, 8, 10, 64)",
            "(weights); within float32 rounding: True",
            "multiply-adds 42,352,640 for both; softmax entries 400 against 3,200 (8x)",
            "8 heads / 1 head time ratio",
        ],
        ["heads.png", "heads_cost.png"],
    ),
    "03_layernorm": (
        [
            "batch 1, no sequence axis, training mode: two inputs -> max |y1 - y2| = 0.00, |grad x| = 0.00",
            "changes the output of sample 0 by: BatchNorm",
            "LayerNorm 0.0e+00",
            "input  shape (4, 10, 512)",
            "output std per row: min 1.0000",
            "max 1.0000",
        ],
        ["layernorm_histogram.png"],
    ),
    "04_norm_speed": (
        ["x (8, 64, 512) float32", "NumPy, written alike", "RMSNorm / LayerNorm time ratio"],
        ["norm_speed.png"],
    ),
    "05_encoder": (
        [
            "token ids shape: (4, 20)",
            "output shape: (4, 20, 256)",
            "total parameters: "
            f"{30000 * 256 + 512 * 256 + 6 * (4 * 256 * 256 + 4 * 256 + 2 * 256 * 1024 + 1024 + 256) + 2 * 256:,}",
            "sum of the rows: 12,544,000",
            "by the formula: 12,544,000",
            "the tutorial prints 6,832,384",
        ],
        ["encoder_parameters.png"],
    ),
    "06_masks": (
        [
            "[[1 0 0 0 0]",
            " [1 1 1 1 1]]",
            "self-attention: output (2, 15, 256), attention map (2, 8, 15, 15), rows sum to 1: True",
            "causal self-attention: output (2, 8, 256), attention map (2, 8, 8, 8), rows sum to 1: True",
            "cross-attention: output (2, 8, 256), attention map (2, 8, 8, 15), rows sum to 1: True",
            "above the diagonal (the future): max 0.0",
        ],
        ["three_attentions.png"],
    ),
    "07_flash": (
        [
            "Counted: 134,217,728 (0.134 billion",
            "16,777,216 (right)",
            "causal",
            "not causal",
            "max |flash - standard|",
            "time ratio flash / standard",
        ],
        ["flash_memory.png"],
    ),
    "08_heatmaps": (
        [
            "the tutorial's example ['The', 'cat', 'sat', 'on', 'mat']: weights (5, 5), rows sum to 1.000000",
            "tutorial: 'cat' attends to 'sat' (0.08); measured: 'cat' attends most to 'cat' (0.80)",
            "tutorial: 'on' attends to 'mat' (0.09); measured: 'on' attends most to 'on' (0.63)",
            "attention maps: (2, 2, 56, 56) (layers, heads, queries, keys), rows sum to 1: True",
        ],
        ["cat_sat_on_mat.png", "trained_heads.png", "trained_head_detail.png", "model/checkpoint.npz"],
    ),
    "09_scaling": (
        [
            "uniform weights would have entropy log 32",
            "with the 1/sqrt(d_k) factor",
            "q, k entries of std 4, divided by sqrt(64)",
        ],
        ["scaling.png"],
    ),
    "10_pre_post_ln": (
        [
            "4 blocks",
            "Pre-LN                       gradient norm at init",
            "Post-LN                      gradient norm at init",
            "Post-LN, 2-step warmup",
            "final loss, Post-LN minus Pre-LN",
        ],
        ["pre_post_ln.png"],
    ),
    "11_mistakes": (
        [
            "d_k = 64   parameters  1,048,576   multiply-adds     17,039,360",
            "d_k = 512  parameters  8,388,608   multiply-adds    136,314,880",
            "8x the parameters, 8x the multiply-adds",
            "is_causal=True  |change of position 0| = 0.000e+00",
            "training mode: two different inputs -> max |y1 - y2| = 0.000e+00 (a constant output)",
            "Linear before the norm: weight    0.000e+00  vanishes",
            "LayerNorm: bias",
            "tutorial: 'no gradient flows, training is dead'",
        ],
        ["zero_gamma_gradients.png"],
    ),
    "12_graph": (
        [
            "layernorm_primitives: 11 tensors, 8 Function calls, 20 arrows",
            "layernorm_fused: 4 tensors, 1 Function call, 4 arrows",
            "attention_block: 33 tensors, 20 Function calls, 56 arrows",
        ],
        ["layernorm_graphs.png", "attention_block.png"]
        if shutil.which("dot")
        else ["layernorm_primitives.dot", "attention_block.dot"],
    ),
    "13_rope": (
        [
            "30 steps each, batch 8, context 32",
            "positions  parameters  val bits/char",
            "learned        16,416",
            "rope           15,392",
            "rope minus learned: ",
            "sample, learned positions:\nThe ",
            "sample, rope positions:\nThe ",
        ],
        ["rope_vs_learned.png"],
    ),
    "14_modern_block": (
        [
            "GPT-2 (LayerNorm, GELU, learned)       128      16,416    +0.00%",
            "LLaMA (RMSNorm, RoPE, SwiGLU)           99      16,448    +0.19%",
            "LLaMA + GQA (1 of 2 kv heads)          109      16,384    -0.19%",
            "β, the parameters RMSNorm drops: 3 norms x d_model 32 = 96, 0.58% of the budget",
            "forward + backward: RMSNorm / LayerNorm time ratio",
            "training step (forward + backward) of the whole model: RMSNorm / LayerNorm time ratio",
            "12 steps each, batch 8, context 32, seed 0",
            "LLaMA + GQA (1 of 2 kv heads) minus GPT-2: ",
            "  2 kv heads:    7,936 bytes for 31 positions = 256 bytes per token (2 x 1 x 2 x 16 x 4 = 256)",
            "  1 kv heads:    3,968 bytes for 31 positions = 128 bytes per token (2 x 1 x 1 x 16 x 4 = 128)",
        ],
        ["modern_block.png"],
    ),
    "15_hooks": (
        [
            "1. hooks on the projections of one causal attention layer",
            "under the causal mask key/value 0 is read by all 8 queries, key/value 7 by one",
            "||dL/dQ|| at position 0 is 0.000",
            "q.grad, k.grad, v.grad (retain_grad) equal what the hooks saw: True",
            "with a hook returning zeros on V: ||W_v.grad|| = 0.000",
            "3. full backward hooks on each block of a GPT",
        ],
        ["hooks.png"],
    ),
    "16_pretrained": (
        [
            "1. model: random weights: 2 layers, 2 heads, d_model 32",
            "no --pretrained folder",
            '"it" is token 9, "trophy" [1], "bag" [7]',
            "heads putting more weight on 'trophy' than on 'bag':",
            "(random weights: no evidence either way)",
            "(falls)",
            "Function calls from the block's input to its output",
        ],
        ["it_attention.png"],
    ),
    "train_gpt": (
        ["corpus: 20,000 characters", "model: GPT with 28,000 parameters (2 layers, d_model 32", "step 15: validation"],
        ["checkpoint.npz", "loss.png", "attention.png", "metrics.json"],
    ),
}


def run(name, out, *flags):
    """Run a demo in this process with --quick, its pictures into ``out``; returns what it printed."""
    path = demos_cli.find_demo(name, demos_cli.available_demos(DEMOS))
    assert path is not None, f"demos/{name}.py is missing"
    printed = io.StringIO()
    print_options = numpy.get_printoptions()
    with contextlib.redirect_stdout(printed):
        status = demos_cli.run_demo(path, ["--quick", "--out", str(out), *flags])
    assert status == 0, f"{name} exited with {status}:\n{printed.getvalue()}"
    assert numpy.get_printoptions() == print_options, f"{name} changed NumPy's print options for everyone"
    return printed.getvalue()


def run_as_notebook(name, out, kernel):
    """Run a demo as the notebook of its cells in ``kernel``, with --quick (from
    $MINITORCH_ATTN_DEMO_FLAGS) and its pictures into ``out``; returns what it printed."""
    import nbclient
    import nbformat

    nb = demos_cli.notebook(DEMOS / f"{name}.py")
    flags = f"--quick --out {out}"
    nb.cells.insert(
        0, nbformat.v4.new_code_cell(f"%reset -f\nimport os\nos.environ[{demo_common.FLAGS_VARIABLE!r}] = {flags!r}")
    )
    nbclient.NotebookClient(nb, km=kernel, timeout=600).execute()
    return "".join(
        output.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream" and output.name == "stdout"
    )


NOTEBOOK_MODULES = ("jupytext", "nbclient", "ipykernel")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, request):
    """``quick_run(name) -> (output, folder)``, each demo run once in quick mode for all
    the tests here: as a Jupyter notebook, in one kernel, where the ``notebooks`` extra is
    installed (the way the site and a reader run it: from top to bottom, printing what its
    script prints), else as a script in this process. The script path keeps tests of its
    own (the same seed, ``python demos/NAME.py``, ``minitorch-attn demo``), so no demo has
    to run twice."""
    as_notebook = all(importlib.util.find_spec(module) for module in NOTEBOOK_MODULES)
    kernel = request.getfixturevalue("kernel") if as_notebook else None
    done = {}

    def get(name):
        if name not in done:
            folder = tmp_path_factory.mktemp(name)
            done[name] = (run_as_notebook(name, folder, kernel) if kernel else run(name, folder), folder)
        return done[name]

    return get


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_demo_runs_quick_and_prints_its_numbers(name, quick_run):
    text, folder = quick_run(name)
    lines, pictures = EXPECTED[name]
    assert "picture check" not in text, f"{name} draws a picture that is hard to read:\n{text}"
    for line in lines:
        assert line in text, f"{name}: expected {line!r} in its output:\n{text}"
    for picture in pictures:
        path = folder / picture
        assert path.is_file() and path.stat().st_size > (1000 if picture.endswith(".png") else 0), (
            f"{name} did not write {picture}"
        )


def reference_table(text, title):
    """``{row: [errors..., scale]}`` from the table a demo prints under the line ``title``."""
    lines = text[text.index(title) :].splitlines()[2:]
    rows = {}
    for line in lines:
        match = re.match(r"  (\S+(?: \S+)?) +((?:[0-9.e+-]+ +)+[0-9.e+-]+)$", line)
        if not match:
            break
        rows[match.group(1)] = [float(v) for v in match.group(2).split()]
    return rows


@pytest.mark.parametrize("name, rows_summed", [("03_layernorm", 40), ("04_norm_speed", 40)])
def test_norm_demos_agree_with_their_float64_reference(quick_run, name, rows_summed):
    """Every float32 result within rounding of the float64 NumPy reference: a few ulps of
    the reference's scale for each of the ``rows_summed`` terms a parameter gradient adds."""
    text, _ = quick_run(name)
    table = reference_table(text, "float64 NumPy reference|")
    assert set(table) >= {"output", "grad x", "grad gamma"}, text
    for row, (*errors, scale) in table.items():
        tolerance = float64_tolerance(scale, n_ops=4 * rows_summed)
        assert max(errors) <= tolerance, f"{name}: {row} differs from float64 by {max(errors)} > {tolerance}"


def test_attention_demo_agrees_with_its_numpy_check(quick_run):
    text, _ = quick_run("01_attention")
    assert text.count(": agrees)") == 2 and "DISAGREES" not in text, text


def test_flash_demo_agrees_with_standard_attention(quick_run):
    text, _ = quick_run("07_flash")
    differences = [
        float(d) for d in re.findall(r"max \|flash - standard\| of the outputs over all lengths: ([0-9.e+-]+)", text)
    ]
    assert len(differences) == 2 and max(differences) < 1e-5, text


def test_mistakes_demo_zero_gamma_verdicts(quick_run):
    text, _ = quick_run("11_mistakes")
    verdicts = dict(re.findall(r"   (\S.*?\S)\s+[0-9.e+-]+  (vanishes|flows)", text))
    assert verdicts == {
        "input x": "vanishes",
        "Linear before the norm: weight": "vanishes",
        "Linear before the norm: bias": "vanishes",
        "LayerNorm: weight": "flows",
        "LayerNorm: bias": "flows",
        "Linear after the norm: weight": "vanishes",
        "Linear after the norm: bias": "flows",
    }


def test_same_seed_same_numbers(tmp_path):
    first, second, other = (
        run("01_attention", tmp_path / folder, "--seed", seed) for folder, seed in (("a", "3"), ("b", "3"), ("c", "4"))
    )
    strip = lambda text: re.sub(r"picture: .*", "", text)  # noqa: E731 (the folders differ)
    assert strip(first) == strip(second) != strip(other)


def test_script_runs_as_python_demos_name(tmp_path):
    done = subprocess.run(
        [sys.executable, str(DEMOS / "01_attention.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "every row sums to 1: True" in done.stdout


def test_demo_list_names_every_demo_in_order(capsys):
    assert cli.main(["demo", "--list"]) == 0
    text = capsys.readouterr().out
    positions = [text.index(name) for name in sorted(EXPECTED)]
    assert positions == sorted(positions)


def test_demo_list_shows_the_sections_of_each_demo_and_a_demo_for_every_section(capsys):
    assert cli.main(["demo", "--list"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^  00_why_attention +§1 +Section 1", text, re.M), text
    assert re.search(r"^  01_attention +§2-4 ", text, re.M), text
    assert re.search(r"^  09_scaling +§4, 16 ", text, re.M), text
    assert re.search(r"^  train_gpt +beyond ", text, re.M), text
    index = dict(re.findall(r"^ +(\d+)\. .*? {2,}(\S.*)$", text, re.M))
    assert sorted(map(int, index)) == list(range(1, 17)), text
    assert "(no demo)" not in text, text
    assert index["4"] == "attention, scaling, hooks" and index["16"] == "scaling, mistakes"


@pytest.mark.parametrize(
    "sections, label", [((1,), "§1"), ((2, 3, 4), "§2-4"), ((4, 16), "§4, 16"), ((8, 9), "§8, 9"), ((), "beyond")]
)
def test_section_label(sections, label):
    assert demos_cli.section_label(sections) == label


def test_a_demo_of_another_folder_is_listed_by_its_short_name(tmp_path, monkeypatch, capsys):
    """Demos that others add (12_graph, 13_rope, ...) are picked up from the folder: mapped
    when the table knows their name, beyond the tutorial otherwise."""
    for stem in ("01_attention", "12_graph", "13_rope"):
        (tmp_path / f"{stem}.py").write_text(f'"""The {stem} demo."""\n', encoding="utf-8")
    monkeypatch.setattr(demos_cli, "demos_folder", lambda: tmp_path)
    assert cli.main(["demo", "--list"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^  12_graph +§9 +The 12_graph demo\.$", text, re.M), text
    assert re.search(r"^  13_rope +beyond +The 13_rope demo\.$", text, re.M), text
    assert re.search(r"^ +9\. .* graph$", text, re.M) and re.search(r"^ +5\. .* \(no demo\)$", text, re.M), text


@pytest.mark.parametrize("name", ["01_attention", "attention", "1", "01"])
def test_demo_found_by_file_name_or_number(name):
    assert demos_cli.find_demo(name, demos_cli.available_demos(DEMOS)).name == "01_attention.py"


def test_demo_command_runs_a_demo(tmp_path, capsys):
    assert cli.main(["demo", "encoder", "--quick", "--out", str(tmp_path)]) == 0
    assert "by the formula: 12,544,000" in capsys.readouterr().out


def test_unknown_demo_and_missing_folder_say_so(monkeypatch, capsys):
    assert cli.main(["demo", "no_such_demo"]) == 2
    assert "no demo called 'no_such_demo'" in capsys.readouterr().err
    monkeypatch.setattr(demos_cli, "demos_folder", lambda: None)
    assert cli.main(["demo", "--list"]) == 2
    assert "no demos/ folder found" in capsys.readouterr().err


def test_train_gpt_demo_is_the_train_command_and_leaves_the_environment_alone(monkeypatch):
    """``python demos/train_gpt.py`` and ``minitorch-attn demo train_gpt`` run the same code:
    the script sets no BLAS variable (which would work only before NumPy is loaded)."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    calls = []
    monkeypatch.setattr(cli, "main", lambda argv: calls.append(argv) or 0)
    status = demos_cli.run_demo(DEMOS / "train_gpt.py", ["--steps", "3"])
    assert status == 0 and calls == [["train", "--steps", "3"]]
    assert not {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"} & set(os.environ)


def test_alternate_swaps_the_order_each_round_and_reports_the_median_ratio(monkeypatch):
    """A fake clock: the first function takes 1 s, the second 3 s, except one slow round of
    the first (10 s) that the median ignores."""
    clock, calls = [0.0], []
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    first_costs = iter([1.0, 1.0, 10.0, 1.0, 1.0, 1.0])  # warm-up, then 5 rounds

    def first():
        calls.append("a")
        clock[0] += next(first_costs)

    def second():
        calls.append("b")
        clock[0] += 3.0

    result = measure.alternate(first, second, repeats=5, warmup=1, min_seconds=0.0)
    assert "".join(calls) == "ab" + "ab" + "ba" + "ab" + "ba" + "ab"
    assert (result.first, result.second, result.ratio, result.rounds) == (1.0, 3.0, 3.0, 5)
    assert result.describe("A", "B") == (
        "B / A time ratio 3.00 (speed relative to A: 0.33x; medians 1 s and 3 s over 5 alternating rounds)"
    )


def test_alternate_adds_rounds_until_each_function_ran_min_seconds(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])

    def tick():
        clock[0] += 0.25

    assert measure.alternate(tick, tick, repeats=2, warmup=0, min_seconds=1.0).rounds == 4
    assert measure.alternate(tick, tick, repeats=2, warmup=0, min_seconds=1.0, max_rounds=3).rounds == 3
    assert measure.alternate(tick, tick, repeats=2, warmup=0, min_seconds=0.25).rounds == 2


def test_describe_flags_a_noisy_measurement():
    steady = measure.Comparison(first=1.0, second=2.0, ratio=2.1, rounds=5)
    noisy = measure.Comparison(first=1.0, second=2.0, ratio=3.0, rounds=5)
    assert not steady.noisy and noisy.noisy
    assert "noisy" not in steady.describe("A", "B")
    assert noisy.describe("A", "B").endswith("[noisy: the ratio of the medians is 2.00]")


@pytest.mark.parametrize("repeats, warmup, max_rounds", [(0, 1, 10), (3, -1, 10), (3, 1, 2)])
def test_alternate_refuses_no_rounds_negative_warmup_or_too_few_rounds(repeats, warmup, max_rounds):
    with pytest.raises(ValueError, match="repeats >= 1, warmup >= 0 and max_rounds >= repeats"):
        measure.alternate(lambda: None, lambda: None, repeats=repeats, warmup=warmup, max_rounds=max_rounds)


@pytest.mark.parametrize("seconds, text", [(2.5, "2.5 s"), (0.0123, "12.3 ms"), (4.56e-5, "45.6 µs"), (3e-9, "3 ns")])
def test_format_seconds_keeps_three_digits(seconds, text):
    assert measure.format_seconds(seconds) == text


@pytest.mark.parametrize(
    "name",
    [
        "00_why_attention",
        "04_norm_speed",
        "07_flash",
        "08_heatmaps",
        "10_pre_post_ln",
        "11_mistakes",
        "14_modern_block",
    ],
)
def test_quick_runs_say_which_lesson_needs_the_full_size(quick_run, name):
    text, _ = quick_run(name)
    assert re.search(r"^\[--quick\] these sizes are too small to show .+: run without --quick to see it$", text, re.M)


def test_quick_caveat_is_silent_at_full_size(capsys):
    assert demo_common.quick_caveat(argparse.Namespace(quick=False), "a lesson") is False
    assert capsys.readouterr().out == ""


def test_flags_come_from_the_environment_inside_a_jupyter_kernel(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/lib/python3/site-packages/ipykernel_launcher.py", "-f", "kernel.json"])
    monkeypatch.setenv(demo_common.FLAGS_VARIABLE, "--quick --out 'a folder'")
    assert demo_common.demo_argv() == ["--quick", "--out", "a folder"]
    monkeypatch.delenv(demo_common.FLAGS_VARIABLE)
    assert demo_common.demo_argv() == []
    monkeypatch.setattr(sys, "argv", ["demos/01_attention.py", "--seed", "3"])
    assert demo_common.demo_argv() == ["--seed", "3"]


def test_picture_problems_finds_small_cut_and_overlapping_text():
    plt = demo_common.pyplot()
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.set_xlabel("time (s)")
    ax.set_title("a readable picture")
    assert demo_common.picture_problems(fig) == []
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    ax.text(0.1, 0.1, "one label")
    ax.text(0.12, 0.1, "another label")
    fig.text(0.98, 0.5, "beyond the right edge")
    problems = demo_common.picture_problems(fig)
    plt.close(fig)
    assert "'tiny' is 6.0 pt (under 8)" in problems
    assert "'one label' overlaps 'another label'" in problems
    assert "'beyond the right edge' is cut by the picture's edge" in problems
    assert len(problems) == 3, problems


@pytest.fixture(scope="module")
def kernel():
    """One Jupyter kernel for the notebook tests (starting one takes seconds); each notebook
    clears the namespace the one before it left. Skips without the ``notebooks`` extra."""
    for module in ("jupytext", "nbclient", "ipykernel"):
        pytest.importorskip(module, reason='the notebook tests need pip install -e ".[notebooks]"')
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel()
    yield manager
    manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("name", sorted(demos_cli.available_demos(DEMOS)))
def test_demo_is_a_notebook_of_prose_and_code_cells(name):
    """Every demo is a notebook of jupytext percent cells, with prose (it runs as one in
    ``quick_run`` when the ``notebooks`` extra is installed)."""
    pytest.importorskip("jupytext", reason='the notebook tests need pip install -e ".[notebooks]"')
    kinds = [cell.cell_type for cell in demos_cli.notebook(DEMOS / f"{name}.py").cells]
    assert kinds.count("markdown") >= 1 and kinds.count("code") >= 2, (
        f"demos/{name}.py is not written in cells: '# %% [markdown]' prose and '# %%' code (see demos/01_attention.py)"
    )


def test_every_demo_is_run_by_the_tests():
    assert set(EXPECTED) == set(demos_cli.available_demos(DEMOS))


def test_notebooks_command_writes_one_notebook_per_demo(tmp_path, capsys):
    jupytext = pytest.importorskip("jupytext", reason='needs pip install -e ".[notebooks]"')
    assert cli.main(["demo", "--notebooks", str(tmp_path)]) == 0
    written = sorted(path.stem for path in tmp_path.glob("*.ipynb"))
    assert written == sorted(demos_cli.available_demos(DEMOS))
    nb = jupytext.read(tmp_path / "01_attention.ipynb")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# Sections 2-4")


def test_notebooks_command_without_jupytext_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jupytext", None)  # import jupytext now raises ImportError
    assert cli.main(["demo", "--notebooks", str(tmp_path)]) == 2
    assert 'pip install -e ".[notebooks]"' in capsys.readouterr().err


def test_a_missing_checkpoint_is_refused_before_the_heatmaps_demo_draws(tmp_path, capsys):
    out = tmp_path / "heatmaps"
    status = demos_cli.run_demo(
        DEMOS / "08_heatmaps.py", ["--checkpoint", str(tmp_path / "nothere.npz"), "--out", str(out)]
    )
    assert status == 2 and "no checkpoint at" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_the_device_flag_help_choices_and_errors_agree(capsys, tmp_path):
    with pytest.raises(SystemExit):
        demo_common.setup("A demo.", "x", argv=["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--device {cpu,cuda}" in help_text and "cpu or cuda" in help_text
    for device in ("strict", "gpu"):  # strict proves the engine's portability, not the demos'
        with pytest.raises(SystemExit):
            demo_common.setup("A demo.", "x", argv=["--device", device, "--out", str(tmp_path)])
        assert f"unknown device '{device}'; expected one of cpu, cuda\n" in capsys.readouterr().err
