"""Host synchronisations: the points where a device value becomes a host value (``float()``,
``int()``, ``bool()``, ``.item()``, a copy to NumPy), each of which makes the host wait for
a GPU. They are counted on the ``strict`` device (array-api-strict on a device that is not
the host's, which runs the same code as CuPy does): a training step of ``minitorch-attn
train`` makes at most 2 (its loss, and the checks of its indices read with it), clipping
makes none, and a check of the data waits on a device for the next read instead of
making one (``core/backend.py``)."""

import collections
import json

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app import cli, data, train

xp = pytest.importorskip("array_api_strict")

MAX_PER_STEP = 2


@pytest.fixture
def syncs(monkeypatch):
    """A Counter of host synchronisations, by the function of minitorch_attn that made them
    (``counter.total()`` is their number): every conversion of an array on the strict
    device to a Python number, and every copy of one to the host's device."""
    from array_api_strict._array_object import Array

    host = xp.__array_namespace_info__().default_device()
    counter = collections.Counter()

    def counted(name):
        original = getattr(Array, name)

        def wrapper(self, *args, **kwargs):
            to_host = name != "to_device" or (args and args[0] == host)
            if self.device != host and to_host:
                counter[_caller()] += 1
            return original(self, *args, **kwargs)

        return wrapper

    for name in ("__float__", "__int__", "__bool__", "__index__", "__complex__", "to_device"):
        monkeypatch.setattr(Array, name, counted(name))
    return counter


def _caller():
    """``file:line`` of the innermost frame of minitorch_attn outside core/backend.py."""
    import traceback

    for frame in reversed(traceback.extract_stack()[:-2]):
        if "minitorch_attn" in frame.filename and not frame.filename.endswith("backend.py"):
            return f"{frame.filename.rsplit('minitorch_attn', 1)[1]}:{frame.lineno}"
    return "?"


def test_the_counter_counts_each_kind_of_read(syncs):
    t = mt.tensor([1.0, 2.0], device="strict")
    float(t.sum()), t.sum().item(), bool(t.sum() > 0), int(t.sum()), t.numpy()
    assert syncs.total() == 5


def test_a_training_step_makes_at_most_two_host_synchronisations(syncs, tmp_path, monkeypatch):
    text = tmp_path / "corpus.txt"
    text.write_text(data.load_corpus()[:4000], encoding="utf-8")
    at_batch, real_get_batch = [], train.get_batch

    def get_batch(*args, **kwargs):  # a step begins with its batch
        at_batch.append(syncs.copy())
        return real_get_batch(*args, **kwargs)

    monkeypatch.setattr(train, "get_batch", get_batch)
    assert (
        cli.main(
            [
                "train",
                "--text",
                str(text),
                "--device",
                "strict",
                "--steps",
                "5",
                "--time-budget",
                "0",
                "--eval-interval",
                "1000",
                "--sample-tokens",
                "0",
                "--quiet",
                "--out",
                str(tmp_path / "run"),
                "--d-model",
                "16",
                "--num-layers",
                "2",
                "--num-heads",
                "2",
                "--block-size",
                "16",
                "--batch-size",
                "4",
                "--grad-clip",
                "0.5",
            ]
        )
        == 0
    )
    steps = [after - before for before, after in zip(at_batch, at_batch[1:])]  # steps 1 to 4 (5 ends the loop)
    assert len(steps) == 4
    for made in steps:
        assert made.total() <= MAX_PER_STEP, f"a training step read the device {made.total()} times: {dict(made)}"
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 5


def test_clipping_makes_no_host_synchronisation(syncs):
    params = [nn.Parameter(mt.randn(4, 3, device="strict")), nn.Parameter(mt.randn(3, device="strict"))]
    params[0].grad = mt.tensor(np.full((4, 3), 2e19), dtype="float32", device="strict")  # overflows: redone
    params[1].grad = mt.ones(3, device="strict")
    total = optim.clip_grad_norm_(params, 1.0)
    assert syncs.total() == 0
    assert total.item() == pytest.approx(np.sqrt(12 * 4e38 + 3), rel=1e-6)


def test_a_bad_target_on_a_device_raises_at_the_next_read_and_on_the_cpu_at_once(syncs):
    logits = mt.randn(2, 5, device="strict")
    loss = F.cross_entropy(logits, mt.tensor([1, 7], device="strict"))  # the check waits: no read
    assert syncs.total() == 0
    with pytest.raises(ValueError, match=r"targets must be class indices in \[0, 5\).*from 1 to 7"):
        loss.item()
    assert syncs.total() == 1 + 2  # the checks, then the message's two values
    assert np.isfinite(F.cross_entropy(logits, mt.tensor([1, 4], device="strict")).item())  # the check is gone
    with pytest.raises(ValueError, match=r"targets must be class indices in \[0, 5\)"):
        F.cross_entropy(logits.cpu(), mt.tensor([1, 7]))
