"""Where one training step of the default GPT spends its time, against the matmul floor.

    python benchmarks/step_profile.py                 # the training job's model, 1 thread
    python benchmarks/step_profile.py --threads 2
    python benchmarks/step_profile.py --busy 1

One step is what ``minitorch-attn train`` does per batch: forward, cross-entropy,
``zero_grad``, backward, ``clip_grad_norm_`` and AdamW (the job's two parameter groups),
the forward and backward in one part of the batch per thread (``nn.SplitBatch``; with
``--threads 2`` the table adds up both threads' times, so it is not the wall time).
The script times every part of it in one process:

* **products**: every call of ``xp.matmul`` (the Functions call it through the array
  namespace), with its GFLOP;
* **each op's forward and backward**, without the products inside them (a Function's
  own ``forward``/``backward`` on raw arrays);
* **the engine**: what ``Function.apply`` and the backward walk do around those calls
  (wrapping results in Tensors, the graph, version checks, un-broadcasting, sending and
  accumulating gradients), the modules' Python code, and the optimizer and clipping;
* **the floor**: the machine's float32 matmul peak at this thread count, measured with a
  large product, and the step's products divided by it; and the same products replayed
  alone (the sizes and layouts of this step's calls, fresh arrays);
* with the batch in several parts (``--threads 2``): one part's forward and backward
  alone on one thread against all the parts at once, which says what the parts lose to
  what they share (:func:`parts_alone_and_at_once`).

The timers add a little to every call they wrap, so the table's total is somewhat above
the plain step, which is timed first, without them, in rounds that alternate with the
replayed products and the peak product (medians of ``--steps`` rounds; the ratios to the
floor are taken round by round, so a change of load slows both sides of each alike).
Nothing here is a test: it prints a table.
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
import threading
import time

import array_api_compat.numpy as np_namespace
import numpy

import minitorch_attn as mt
from minitorch_attn import nn, optim
from minitorch_attn.app.measure import busy, busy_flag
from minitorch_attn.app.train import DEFAULT_BLOCK, make_optimizer, next_char_loss
from minitorch_attn.argtypes import positive_int
from minitorch_attn.core import autograd
from minitorch_attn.nn import parallel
from minitorch_attn.speed import (
    keep_freed_memory,
    threads,
    use_fused,
)

TARGET_FLOOR = 1.6  # step time / matmul floor, 1 thread


def default_model(args):
    """The GPT, optimizer and step of ``minitorch-attn train`` with its default flags."""
    mt.manual_seed(args.seed)
    model = build_model(args)
    opt = make_optimizer(model, lr=4e-3, weight_decay=0.1)
    rng = numpy.random.default_rng(args.seed)
    batches = []
    for _ in range(4):
        w = rng.integers(0, args.vocab, size=(args.batch_size, args.block_size + 1))
        batches.append((mt.tensor(w[:, :-1]), mt.tensor(w[:, 1:])))
    return model, opt, batches


class Timers:
    """Self times of nested regions: a region's time without the regions timed inside it."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)
        self.calls = collections.Counter()
        self.local = threading.local()  # .stack: the open regions of this thread
        self.lock = threading.Lock()  # the parts of a step on threads add to the same totals

    def wrap(self, key_of, fn):
        def timed(*args, **kwargs):
            stack = self.local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inner = stack.pop()
                key = key_of(args)
                with self.lock:
                    self.seconds[key] += elapsed - inner
                    self.calls[key] += 1
                if stack:
                    stack[-1] += elapsed

        return timed

    def region(self, key, fn):
        return self.wrap(lambda args: key, fn)()


def _all_functions():
    todo, seen = [autograd.Function], []
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def instrument(timers):
    """Wrap every Function's forward and backward, ``xp.matmul`` and the engine's helpers."""
    originals = {}
    for cls in _all_functions():
        for name in ("forward", "backward"):
            if name in cls.__dict__:
                originals[cls, name] = cls.__dict__[name]
    for (cls, name), raw in originals.items():
        if isinstance(raw, classmethod):  # Elementwise: one forward for several classes
            fn = raw.__func__
            setattr(cls, name, classmethod(timers.wrap(lambda args, n=name: (args[0].__name__, n), fn)))
        else:
            fn = raw.__func__ if isinstance(raw, staticmethod) else raw
            setattr(cls, name, staticmethod(timers.wrap(lambda args, c=cls, n=name: (c.__name__, n), fn)))

    np_namespace.matmul = timers.wrap(lambda args: ("matrix products", ""), np_namespace.matmul)
    for name in ("record_versions", "check_versions", "sum_to_shape", "_accumulate", "_send"):
        setattr(autograd, name, timers.wrap(lambda args, n=name: ("engine", n), getattr(autograd, name)))
    autograd.run_backward = timers.wrap(lambda args: ("step", "backward (the walk)"), autograd.run_backward)
    parallel._replica = timers.wrap(lambda args: ("step", "SplitBatch: the replicas"), parallel._replica)


def run_step(split, opt, batch, timers=None):
    """One step of ``minitorch-attn train``: ``split`` is its ``nn.SplitBatch`` (the batch in
    one part per thread; with ``timers``, one made by :func:`timed_split`)."""

    def go(key, fn):
        return fn() if timers is None else timers.region(("step", key), fn)

    with use_fused():  # as the training job (speed/fused.py)
        go("zero_grad", opt.zero_grad)
        loss = split.backward(*batch)
        go("clip_grad_norm_", lambda: optim.clip_grad_norm_(split.model.parameters(), 1.0))
        go("AdamW step", opt.step)
    return loss


def timed_split(model, timers):
    """The step's SplitBatch with each part's forward timed as a region of the step (its
    backward walk is timed by :func:`instrument`)."""

    def loss_fn(model, x, y):
        return timers.region(("step", "forward (modules, Function.apply)"), lambda: next_char_loss(model, x, y))

    return nn.SplitBatch(model, loss_fn)


def recorded_products(run):
    """Run ``run()`` with every ``xp.matmul`` call recorded: a list of ``(a's shape, b's
    shape, a row-major, b row-major, flop)``, one per product."""
    products, matmul = [], np_namespace.matmul

    def counted(a, b, **kwargs):
        batch = math.prod(numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        products.append(
            (
                a.shape,
                b.shape,
                a.flags.c_contiguous,
                b.flags.c_contiguous,
                2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1],
            )
        )
        return matmul(a, b, **kwargs)

    np_namespace.matmul = counted
    try:
        run()
    finally:
        np_namespace.matmul = matmul
    return products


def matmul_seconds(size=1024):
    """Seconds of one float32 ``(size, size) @ (size, size)`` product at the BLAS threads in
    force (the machine's peak: a product this large runs at BLAS's best speed)."""
    rng = numpy.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=numpy.float32) for _ in range(2))
    numpy.matmul(a, b)
    start = time.perf_counter()
    numpy.matmul(a, b)
    return time.perf_counter() - start


def replayer(products):
    """A function that runs this step's products alone (same shapes and operand layouts,
    in the order they were recorded, which with the batch in parts on threads is the
    order they happened to finish in; fresh arrays made once) and returns its seconds."""
    rng = numpy.random.default_rng(0)

    def operand(shape, row_major):
        if row_major or len(shape) < 2:
            return rng.standard_normal(shape, dtype=numpy.float32)
        return numpy.swapaxes(rng.standard_normal(shape[:-2] + shape[::-1][:2], dtype=numpy.float32), -1, -2)

    calls = [(operand(sa, ca), operand(sb, cb)) for sa, sb, ca, cb, _ in products]

    def run():
        start = time.perf_counter()
        for a, b in calls:
            numpy.matmul(a, b)
        return time.perf_counter() - start

    return run


SETTLE_SECONDS = 0.3
"""How long :func:`settle` waits. OpenBLAS's threads spin after a product for 2^28 cycles
(about 0.1 s) before they sleep, and libgomp's (PyTorch's OpenMP) spin too."""


def settle():
    """Wait until the threads of whatever ran before (a product on several BLAS threads,
    PyTorch's OpenMP threads) have stopped spinning, so that they take no core from what
    is timed next. An untimed step alone does not do it: a step whose products run in the
    pool's threads, on a one-thread BLAS, never wakes BLAS's own threads, which spin on
    through it (``step_profile.py --threads 2`` timed 77 ms for a 52 ms step)."""
    time.sleep(SETTLE_SECONDS)


def against_the_floor(step, products, rounds):
    """``{name: median}`` over ``rounds`` rounds, each timing one plain step, the step's
    products replayed alone and the peak product, in turn (so that a change of load
    slows them alike): the step's and the replay's seconds, the peak's GFLOP/s, and the
    per-round ratios step / floor and replay / floor (floor = the step's flop at that
    round's peak). A pause (:func:`settle`) and an untimed step come before each timed
    one: after a product on several BLAS threads, those threads spin for a while waiting
    for the next, and a step whose own threads start then (the parts of its batch) would
    share the cores with them; in training a step follows a step."""
    flop = sum(p[-1] for p in products)
    replay = replayer(products)
    rows = collections.defaultdict(list)
    for _ in range(rounds):
        settle()  # the last round's products leave BLAS's threads spinning for a while
        step()  # untimed: the step's own first allocations and threads
        start = time.perf_counter()
        step()
        rows["step"].append(time.perf_counter() - start)
        rows["replay"].append(replay())
        rows["peak"].append(2.0 * 1024**3 / matmul_seconds() / 1e9)
        floor = flop / (rows["peak"][-1] * 1e9)
        rows["step / floor"].append(rows["step"][-1] / floor)
        rows["replay / floor"].append(rows["replay"][-1] / floor)
    return {name: statistics.median(values) for name, values in rows.items()}


def parts_alone_and_at_once(split, batch, rounds):
    """``(one part alone, every part at once)``: the median seconds of the forward and
    backward of the batch's first part (its rows of :meth:`nn.SplitBatch.parts`) on one
    thread with nothing beside it, and of :meth:`nn.SplitBatch.backward` of the whole
    batch, its parts on the pool's threads at once, in alternating rounds. With equal
    parts on as many free cores, the two would be equal but for what the parts share: the
    cores' caches and memory, and the interpreter's lock (the GIL), which each part holds
    for its Python (the graph's bookkeeping) and takes back after every NumPy call."""
    x, y = batch
    (start, stop), *_ = split.parts(x)
    share = (stop - start) / x.shape[0]

    def one_part():
        with threads.blas_threads(1):
            loss = next_char_loss(split.model, x[start:stop], y[start:stop])
            (loss * share).backward()

    times = collections.defaultdict(list)
    for _ in range(rounds):
        for name, run in (("alone", one_part), ("at once", lambda: split.backward(x, y))):
            split.model.zero_grad()
            run()  # untimed: as against_the_floor
            split.model.zero_grad()
            begin = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - begin)
    return statistics.median(times["alone"]), statistics.median(times["at once"])


def model_flags(parser, seed_help="the weights and the batches"):
    """The default GPT's shape and seed as flags (this script's and train_bench.py's)."""
    parser.add_argument("--d-model", type=positive_int, default=128)
    parser.add_argument("--num-layers", type=positive_int, default=3)
    parser.add_argument("--num-heads", type=positive_int, default=4)
    parser.add_argument("--block-size", type=positive_int, default=64)
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--vocab", type=positive_int, default=103, help="the default corpus has 103 characters")
    parser.add_argument("--seed", type=int, default=1337, help=seed_help)
    parser.add_argument("--norm", choices=("layernorm", "rmsnorm"), default=DEFAULT_BLOCK["norm"])
    parser.add_argument("--mlp", choices=("gelu", "swiglu"), default=DEFAULT_BLOCK["mlp"])
    parser.add_argument("--pos-encoding", choices=("learned", "rope"), default=DEFAULT_BLOCK["pos_encoding"])


def build_model(args):
    """The GPT of ``minitorch-attn train`` with its default flags but the shape and block of ``args``."""
    return nn.GPT(
        args.vocab,
        d_model=args.d_model,
        num_heads=args.num_heads,
        num_layers=args.num_layers,
        max_seq_len=args.block_size,
        norm=args.norm,
        mlp=args.mlp,
        pos_encoding=args.pos_encoding,
    )


def main(argv=None):
    keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="threads (the batch in one part per thread, as the training job does)",
    )
    parser.add_argument("--steps", type=positive_int, default=20, help="rounds against the floor")
    parser.add_argument("--profiled-steps", type=positive_int, default=10, help="steps profiled (the table sums them)")
    model_flags(parser)
    busy_flag(parser)
    args = parser.parse_args(argv)
    mt.set_num_threads(args.threads)
    with busy(args.busy):
        profile(args)


def profile(args):
    model, opt, batches = default_model(args)
    split = nn.SplitBatch(model, next_char_loss)
    for i in range(3):  # warm-up: first allocations
        run_step(split, opt, batches[i % 4])
    products = recorded_products(lambda: run_step(split, opt, batches[0]))
    counter = iter(range(10**9))
    floor = against_the_floor(lambda: run_step(split, opt, batches[next(counter) % 4]), products, args.steps)
    parts = len(split.parts(batches[0][0]))
    alone, at_once = parts_alone_and_at_once(split, batches[0], args.steps) if parts > 1 else (None, None)

    timers = Timers()
    instrument(timers)
    split = timed_split(model, timers)
    run_step(split, opt, batches[0], timers)  # warm the wrappers
    timers.seconds.clear()
    timers.calls.clear()
    n = args.profiled_steps
    for i in range(n):
        run_step(split, opt, batches[i % 4], timers)

    flop = sum(p[-1] for p in products)
    rows = {key: s / n for key, s in timers.seconds.items()}
    calls = {key: c / n for key, c in timers.calls.items()}
    total = sum(rows.values())
    print(
        f"one training step of the default GPT ({args.norm}, {args.mlp}, {args.pos_encoding} positions; "
        f"{model.num_parameters():,} parameters, batch "
        f"{args.batch_size} x {args.block_size}), {args.threads} thread(s), {args.busy} busy helper process(es); "
        f"ms per step, the mean of {n} profiled steps"
        + ("; the batch in one part per thread, each part's times added" if len(split.parts(batches[0][0])) > 1 else "")
    )
    print(f"{'part':<46}{'calls':>7}{'ms':>9}{'share':>8}")

    def line(name, key_list):
        ms = sum(rows.get(k, 0.0) for k in key_list) * 1e3
        count = sum(calls.get(k, 0) for k in key_list)
        print(f"{name:<46}{count:>7.0f}{ms:>9.2f}{ms / (total * 1e3):>8.1%}")

    line(f"matrix products ({flop / 1e9:.2f} GFLOP)", [("matrix products", "")])
    ops = sorted(
        {k[0] for k in rows if k[1] in ("forward", "backward")},
        key=lambda name: -(rows.get((name, "forward"), 0) + rows.get((name, "backward"), 0)),
    )
    for name in ops:
        for part in ("forward", "backward"):
            if (name, part) in rows:
                line(f"{name}.{part}", [(name, part)])
    for key in sorted(k for k in rows if k[0] == "engine"):
        line(f"engine: {key[1]}", [key])
    for key in sorted(k for k in rows if k[0] == "step"):
        line(f"{key[1]} (the rest)", [key])
    outside = total - sum(rows.get(k, 0.0) for k in [("matrix products", "")])
    print(f"{'total (profiled)':<46}{'':>7}{total * 1e3:>9.2f}")
    print(f"{'  of which outside the matrix products':<46}{'':>7}{outside * 1e3:>9.2f}{outside / total:>8.1%}")

    print(
        f"\nagainst the floor, median of {args.steps} rounds of a plain step (no timers), the step's "
        f"{len(products)} products replayed alone, and the peak product, in turn:"
    )
    print(
        f"  matmul peak of this machine: {floor['peak']:.1f} GFLOP/s float32 at {args.threads} thread(s) "
        f"((1024, 1024) @ (1024, 1024)); floor: {flop / 1e9:.2f} GFLOP at that peak, "
        f"{flop / (floor['peak'] * 1e9) * 1e3:.1f} ms"
    )
    print(
        f"  plain step {floor['step'] * 1e3:.1f} ms = {floor['step / floor']:.2f}x the floor; its products "
        f"alone {floor['replay'] * 1e3:.1f} ms = {floor['replay / floor']:.2f}x"
    )
    ratio = floor["step / floor"]
    verdict = ("met" if ratio <= TARGET_FLOOR else "NOT met") if args.threads == 1 else "(the target is for 1 thread)"
    print(f"target: step / floor <= {TARGET_FLOOR} at 1 thread: {ratio:.2f}  {verdict}")
    if parts > 1:
        print(
            f"\nthe batch in {parts} parts, median of {args.steps} alternating rounds: one part alone on one thread "
            f"{alone * 1e3:.1f} ms, the {parts} parts at once {at_once * 1e3:.1f} ms ({at_once / alone:.2f}x one "
            f"alone: what the parts lose to what they share, the cores' caches and memory and the GIL)"
        )


if __name__ == "__main__":
    main()
