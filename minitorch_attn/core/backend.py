"""Backends: one array namespace per device, and the few kernels the array API lacks.

Every operation in minitorch-attn is written once, against the array API standard
(https://data-apis.org/array-api/), and runs on whatever namespace its inputs live in.
A *device* name picks the namespace:

====================  ===========================================================
``"cpu"``             NumPy (through ``array_api_compat.numpy``)
``"cuda"``            CuPy on the current CUDA device (from a source checkout:
                      ``pip install -e ".[cuda12]"`` or ``".[cuda13]"``, for CUDA 12
                      or 13; ``".[cuda]"`` is ``".[cuda12]"``)
``"strict"``          ``array_api_strict`` on its non-default device ``device1``: a
                      test backend that rejects any NumPy call or host round-trip
====================  ===========================================================

What the standard does not offer lives here, with one implementation per backend:

* ``erf``          -- for the exact GELU (CuPy has its own; the others share a
                      float64 rational approximation accurate to ~1 ulp);
* ``index_add``    -- scatter-add of rows, for the embedding backward;
* random numbers   -- ``normal``, ``uniform``, ``integers``, reproducible from
                      :func:`manual_seed`: one implementation over a ``default_rng``
                      generator, NumPy's (cpu, strict) or CuPy's (cuda);
* checks of the data -- ``all_false`` and ``check`` (below).

**Host synchronisations.** Reading a device array on the host (``bool()``, ``int()``,
``float()``, ``.item()``, a copy to NumPy) makes the host wait until the device has run
everything queued before it. On the CPU the arrays are on the host already and a read
costs nothing more. So a check of the data (is every index in range, is every row
finite) is made at once on the CPU, and on a device (cuda, strict) it does not stop
the host: a check that only picks a faster path (:meth:`Backend.all_false`) takes the
general path, which gives the same numbers, and a check that raises an error
(:meth:`Backend.check`) is read with the next copy of an array to the host, where its
error is raised (as PyTorch's CUDA kernels report a bad index at the next
synchronisation). A training step then waits for the device once: for its loss.

The process-wide default device is ``"cpu"``, or the value of the environment variable
``MINITORCH_ATTN_DEVICE``; :func:`set_default_device` changes it in code.
"""

from __future__ import annotations

import functools
import math
import numbers
import os

import numpy

DEVICES = ("cpu", "cuda", "strict")


class DeviceUnavailableError(RuntimeError):
    """The device's library (CuPy, array-api-strict) or hardware is missing; the message says
    how to install it."""


CUDA_INSTALL_HINT = (
    'pip install -e ".[cuda12]" for CUDA 12, or -e ".[cuda13]" for CUDA 13 '
    "(in the project's source checkout; docs/devices.md says which)"
)
STRICT_INSTALL_HINT = 'pip install -e ".[strict]" (in the project\'s source checkout)'


class Backend:
    """One device: its array namespace ``xp``, its device handle, and the extra kernels.

    Subclasses override only what their library does differently.
    """

    name = "?"

    reads_are_free = False  # True where the arrays live on the host (the CPU): see the module docstring
    MAX_WAITING_CHECKS = 64  # more waiting checks are read at once (one host synchronisation)

    def __init__(self, xp, device=None):
        self.xp = xp
        self.device = device  # the namespace's own device object, passed to creation functions
        self._waiting = []  # (any bad, error) of the checks not read yet (a device only)

    def __repr__(self):
        return f"Backend({self.name!r})"

    # ---- moving data in and out --------------------------------------------------------
    def asarray(self, obj, dtype=None):
        """Make an array of this backend from a Python scalar, list or host (NumPy) array."""
        return self.xp.asarray(obj, dtype=dtype, device=self.device)

    def to_numpy(self, array):
        """Copy an array of this backend to a NumPy array on the host (a host
        synchronisation on a device), first raising the error of any waiting
        :meth:`check` that failed."""
        self.read_checks()
        return self._to_host(array)

    def _to_host(self, array):
        return numpy.asarray(array)

    # ---- checks of the data (module docstring: host synchronisations) ---------------------
    def all_false(self, flags):
        """Whether the boolean array ``flags`` is known to hold no True without waiting for
        a device: read on the CPU; False ("not known") on a device, so that a caller that
        uses it to skip work takes its general path there."""
        return self.reads_are_free and not bool(self.xp.any(flags))

    def check(self, bad, error):
        """Raise ``error()`` (it returns the exception) if the boolean array ``bad`` holds a
        True: on the CPU at once; on a device at the next :meth:`to_numpy` (``.item()``,
        ``float()``, ``.numpy()``), which reads every waiting check in one copy."""
        if self.reads_are_free:
            if bool(self.xp.any(bad)):
                raise error()
            return
        self._waiting.append((self.xp.any(bad), error))
        if len(self._waiting) >= self.MAX_WAITING_CHECKS:
            self.read_checks()

    def read_checks(self):
        """Read the waiting checks (one host synchronisation) and raise the first failed one's error."""
        waiting, self._waiting = self._waiting, []
        if waiting:
            failed = self._to_host(self.xp.stack([bad for bad, _ in waiting]))
            for (_, error), hit in zip(waiting, failed.tolist()):
                if hit:
                    raise error()

    def dtype(self, name):
        """The namespace's dtype object for a dtype name such as ``"float32"``."""
        return getattr(self.xp, name)

    # ---- kernels the array API standard lacks ------------------------------------------
    def erf(self, x):
        """Error function, elementwise, for float32/float64 arrays (see :func:`_erf_float64`)."""
        xp = self.xp
        return xp.astype(_erf_float64(xp, xp.astype(x, xp.float64)), x.dtype)

    def fmod(self, a, b):
        """C's ``fmod``, elementwise: ``a - b * trunc(a / b)`` computed exactly (the result is
        representable), with the sign of ``a``. The array API has only ``remainder``, whose
        result (sign of ``b``) is not always representable (``remainder(-501, 1e20)`` rounds
        to ``1e20``), so the generic version computes it on the host."""
        host = [self.to_numpy(v) if hasattr(v, "shape") else v for v in (a, b)]
        return self.asarray(numpy.fmod(*host))

    def index_add(self, num_rows, index, values):
        """Return ``out`` of shape ``(num_rows, *values.shape[index.ndim:])`` with
        ``out[index[i]] += values[i]`` for every position ``i`` of ``index``, repeated
        indices accumulating. Generic version: a one-hot matrix product."""
        xp = self.xp
        flat_index = xp.reshape(index, (-1,))
        rows = xp.reshape(values, (flat_index.shape[0], math.prod(values.shape[index.ndim :])))  # not -1: 0 rows
        one_hot = xp.astype(flat_index[:, None] == xp.arange(num_rows, device=self.device)[None, :], values.dtype)
        out = xp.matmul(xp.matrix_transpose(one_hot), rows)
        return xp.reshape(out, (num_rows, *values.shape[index.ndim :]))

    # ---- random numbers ----------------------------------------------------------------
    def generator(self, seed):
        """A ``default_rng``-style generator whose draws are arrays this backend accepts:
        NumPy's, whose host arrays ``asarray`` places on the device (cpu, strict)."""
        return numpy.random.default_rng(seed)

    def manual_seed(self, seed):
        self._rng = self.generator(int(seed))

    def normal(self, shape, dtype):
        return self.asarray(self._rng.standard_normal(shape, dtype=dtype))

    def uniform(self, shape, dtype):
        return self.asarray(self._rng.random(shape, dtype=dtype))

    def integers(self, low, high, shape, dtype):
        return self.asarray(self._rng.integers(low, high, size=shape, dtype=dtype))

    def next_seed(self):
        """A fresh 63-bit integer from the seeded stream (for counter-based random masks)."""
        return int(self._rng.integers(0, 2**63 - 1, size=()))


class NumpyBackend(Backend):
    name = "cpu"
    reads_are_free = True

    def __init__(self):
        import array_api_compat.numpy as xp

        super().__init__(xp, device=None)

    def fmod(self, a, b):
        return self.xp.fmod(a, b)

    def index_add(self, num_rows, index, values):
        """speed: the rows of ``values`` sorted by their index and summed run by run
        (``add.reduceat``), 5x faster than ``numpy.add.at`` for an embedding's backward
        (1,024 indices into 103 rows of 128: 0.20 against 1.16 ms). The same sums, added in
        another order: equal to rounding."""
        out = numpy.zeros((num_rows, *values.shape[index.ndim :]), dtype=values.dtype)
        flat = numpy.reshape(index, (-1,))
        if flat.size == 0:
            return out
        flat = numpy.where(flat < 0, flat + num_rows, flat)  # -1 and num_rows - 1 are one row
        rows = numpy.reshape(values, (flat.size, *values.shape[index.ndim :]))
        order = numpy.argsort(flat, kind="stable")
        sorted_index = flat[order]
        starts = numpy.flatnonzero(numpy.concatenate(([True], sorted_index[1:] != sorted_index[:-1])))
        out[sorted_index[starts]] = numpy.add.reduceat(rows[order], starts, axis=0)
        return out


class CupyBackend(Backend):
    name = "cuda"

    def __init__(self):
        try:
            import cupy
        except ImportError as exc:
            raise DeviceUnavailableError(
                f"device 'cuda' needs CuPy, which is not installed. Install it with: {CUDA_INSTALL_HINT}"
            ) from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDA driver missing or broken
            raise DeviceUnavailableError(
                f"device 'cuda' found no usable CUDA GPU ({exc}). Install the CUDA build with "
                f"{CUDA_INSTALL_HINT} on a machine with an NVIDIA GPU, or use device='cpu'."
            ) from exc
        if count == 0:
            raise DeviceUnavailableError("device 'cuda' found no CUDA GPU on this machine; use device='cpu'.")
        import array_api_compat.cupy as xp

        super().__init__(xp, device=None)

    def _to_host(self, array):
        return array.get()

    def fmod(self, a, b):
        return self.xp.fmod(a, b)

    def erf(self, x):
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(x)

    def index_add(self, num_rows, index, values):
        import cupyx

        out = self.xp.zeros((num_rows, *values.shape[index.ndim :]), dtype=values.dtype)
        cupyx.scatter_add(out, index, values)
        return out

    def generator(self, seed):
        """CuPy's ``default_rng``: draws are made on the GPU."""
        import cupy

        return cupy.random.default_rng(seed)


class StrictBackend(Backend):
    """``array_api_strict`` on a non-default device: the portability proof.

    Any hidden ``numpy`` call on a tensor's data, or any mixing with host arrays, fails
    here with an error. Random numbers are drawn on the host and moved to the device,
    which is this backend's one honest way to make them.
    """

    name = "strict"

    def __init__(self):
        try:
            import array_api_strict as xp
        except ImportError as exc:
            raise DeviceUnavailableError(
                "device 'strict' needs array-api-strict, which is not installed. "
                f"Install it with: {STRICT_INSTALL_HINT}"
            ) from exc
        super().__init__(xp, device=xp.Device("device1"))

    def _to_host(self, array):
        host = array.to_device(self.xp.__array_namespace_info__().default_device())
        return numpy.asarray(host)


_BACKEND_CLASSES = {"cpu": NumpyBackend, "cuda": CupyBackend, "strict": StrictBackend}


def _check_device_name(device):
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")
    name = device.split(":")[0]  # accept "cuda:0" as PyTorch users write it
    if name not in _BACKEND_CLASSES:
        raise ValueError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")
    return name


_backends: dict[str, Backend] = {}  # device name -> Backend, made on first use
_initial_seed = 0  # the last manual_seed, given to backends made later


def _make_backend(name):
    if name not in _backends:
        backend = _BACKEND_CLASSES[name]()
        backend.manual_seed(_initial_seed)
        _backends[name] = backend
    return _backends[name]


def get_backend(device=None):
    """The :class:`Backend` for a device name (``None`` means the default device).

    Raises ValueError for an unknown name and DeviceUnavailableError (a RuntimeError, with the install command)
    when ``"cuda"`` is asked for without CuPy or without a GPU.
    """
    return _make_backend(_check_device_name(get_default_device() if device is None else device))


def backend_of(array):
    """The :class:`Backend` an array belongs to, found from its array namespace."""
    return _backend_for_type(type(array))


@functools.cache
def _backend_for_type(array_type):
    module = array_type.__module__.split(".")[0]
    if module == "numpy":
        return get_backend("cpu")
    if module == "cupy":
        return get_backend("cuda")
    if module == "array_api_strict":
        return get_backend("strict")
    raise TypeError(f"arrays of type {array_type.__name__} are not supported; expected NumPy, CuPy or array-api-strict")


# ---- default device and seeding ---------------------------------------------------------
_default_device = None


def get_default_device() -> str:
    """The process-wide default device: set in code, else ``$MINITORCH_ATTN_DEVICE``, else ``"cpu"``."""
    if _default_device is not None:
        return _default_device
    return _check_device_name(os.environ.get("MINITORCH_ATTN_DEVICE", "cpu") or "cpu")


def set_default_device(device: str) -> None:
    """Set the device used by factories when no ``device=`` is given. Checks it is usable."""
    global _default_device
    get_backend(device)
    _default_device = _check_device_name(device)


def manual_seed(seed: int) -> None:
    """Seed the random numbers of every backend, in use now or made later, and so every
    random draw of the package: factories, initial weights, dropout, sampling, batches
    (as ``torch.manual_seed``). ``seed``: an int, Python's or NumPy's."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    global _initial_seed
    _initial_seed = seed
    for backend in _backends.values():
        backend.manual_seed(seed)


def host_generator():
    """A NumPy ``Generator`` for draws made on the host (sampling the next token, picking a
    batch's windows), seeded from the cpu backend's stream: after ``manual_seed(n)`` the
    same program draws the same values, as PyTorch's ``multinomial`` does from its global
    generator. Each call takes one number from the stream, so successive calls differ."""
    return numpy.random.default_rng(get_backend("cpu").next_seed())


# ---- erf in float64 on any array namespace ------------------------------------------------
# Piecewise rational approximations of erf and erfc (the classical Sun fdlibm scheme,
# coefficients from W. J. Cody's style minimax fits). Relative error below 2**-52 on
# each interval, so finite differences through erf in float64 stay meaningful.
_ERX = 8.45062911510467529297e-01
_EFX = 1.28379167095512586316e-01
_PP = (
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
)
_QQ = (
    1.0,
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
)
_PA = (
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
)
_QA = (
    1.0,
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
)
_RA = (
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e01,
    -6.23753324503260060396e01,
    -1.62396669462573470355e02,
    -1.84605092906711035994e02,
    -8.12874355063065934246e01,
    -9.81432934416914548592e00,
)
_SA = (
    1.0,
    1.96512716674392571292e01,
    1.37657754143519042600e02,
    4.34565877475229228821e02,
    6.45387271733267880336e02,
    4.29008140027567833386e02,
    1.08635005541779435134e02,
    6.57024977031928170135e00,
    -6.04244152148580987438e-02,
)
_RB = (
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e01,
    -1.60636384855821916062e02,
    -6.37566443368389627722e02,
    -1.02509513161107724954e03,
    -4.83519191608651397019e02,
)
_SB = (
    1.0,
    3.03380607434824582924e01,
    3.25792512996573918826e02,
    1.53672958608443695994e03,
    3.19985821950859553908e03,
    2.55305040643316442583e03,
    4.74528541206955367215e02,
    -2.24409524465858183362e01,
)


def _poly(coefficients, t):
    """Horner's rule: c0 + c1 t + c2 t^2 + ..."""
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = result * t + c
    return result


def _erf_float64(xp, x):
    """erf(x) for a float64 array, on any array-API namespace.

    |x| < 0.84375        erf(x) = x + x * P(x^2)/Q(x^2)
    0.84375 <= |x| < 1.25  erf(x) = erx + P(s)/Q(s),  s = |x| - 1
    1.25 <= |x| < 6      erf(x) = 1 - erfc(x),  erfc(x) = exp(-x^2 - 0.5625 + R(1/x^2)/S(1/x^2)) / x
    |x| >= 6             erf(x) = sign(x)
    For erfc, x^2 is split as z^2 + (z - x)(z + x) with z = x rounded to float32, so
    z^2 is exact and exp(-x^2) loses no digits.
    """
    a = xp.abs(x)
    sign = xp.sign(x)

    # each branch is evaluated on its own interval (clipped), so no inf or nan is ever formed
    a_small = xp.clip(a, 0.0, 0.84375)
    s = a_small * a_small
    small = a_small + a_small * (_poly(_PP, s) / _poly(_QQ, s))

    t = xp.clip(a, 0.84375, 1.25) - 1.0
    middle = _ERX + _poly(_PA, t) / _poly(_QA, t)

    safe = xp.clip(a, 1.25, 6.0)  # keep 1/x^2 finite everywhere
    u = 1.0 / (safe * safe)
    ratio = xp.where(safe < 1.0 / 0.35, _poly(_RA, u) / _poly(_SA, u), _poly(_RB, u) / _poly(_SB, u))
    z = xp.astype(xp.astype(safe, xp.float32), xp.float64)
    erfc = xp.exp(-z * z - 0.5625) * xp.exp((z - safe) * (z + safe) + ratio) / safe
    large = 1.0 - erfc

    value = xp.where(a < 0.84375, small, xp.where(a < 1.25, middle, xp.where(a < 6.0, large, 1.0)))
    value = sign * value
    return xp.where(xp.isnan(x), x, value)
