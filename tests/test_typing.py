"""The public API carries type hints, and the package says so (``py.typed``).

mypy (``pyproject.toml``, run by CI with the lint extra) checks the body of every annotated
function; this test says which functions must be annotated: every name of ``F.__all__``,
the functions of ``mt.__all__`` and ``nn.__all__``, the constructors and ``forward`` of the
nn modules, the optimizers and the schedule, gradcheck and Tensor's main methods. A new
public function without hints fails here, by name.
"""

import configparser
import inspect
import pathlib

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim

ROOT = pathlib.Path(__file__).resolve().parents[1]
TENSOR_METHODS = (
    "__init__",
    "size",
    "numel",
    "dim",
    "requires_grad_",
    "backward",
    "clone",
    "detach",
    "zero_grad",
    "numpy",
    "tolist",
    "item",
    "to",
    "cpu",
    "cuda",
    "float",
    "double",
    "long",
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__neg__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__getitem__",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "abs",
    "clamp",
    "sum",
    "mean",
    "max",
    "min",
    "var",
    "std",
    "argmax",
    "argmin",
    "reshape",
    "flatten",
    "transpose",
    "permute",
    "unsqueeze",
    "squeeze",
    "expand",
    "masked_fill",
    "split",
    "chunk",
    "gather",
    "contiguous",
)
TENSOR_PROPERTIES = ("shape", "ndim", "dtype", "device", "is_leaf", "grad", "requires_grad", "T")


def unannotated(function):
    """The parameters of ``function`` without a hint (``self`` and ``cls`` aside), and
    ``"return"`` when its result has none."""
    signature = inspect.signature(function)
    missing = [
        name
        for name, p in signature.parameters.items()
        if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def public_api():
    """``{name: function}``: every function the module docstring lists."""
    api = {f"F.{name}": getattr(F, name) for name in F.__all__}
    for prefix, module in (("mt", mt), ("nn", nn)):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                api[f"{prefix}.{name}"] = value
            elif inspect.isclass(value) and value.__module__.startswith("minitorch_attn.nn"):
                api[f"nn.{name}.__init__"] = value.__init__
                if "forward" in vars(value):
                    api[f"nn.{name}.forward"] = value.forward
    for cls in (optim.Optimizer, optim.SGD, optim.Adam, optim.AdamW, optim.WarmupCosineLR):
        for name, value in vars(cls).items():
            if inspect.isfunction(value) and (name == "__init__" or not name.startswith("_")):
                api[f"optim.{cls.__name__}.{name}"] = value
    api["optim.clip_grad_norm_"] = optim.clip_grad_norm_
    api["mt.Function.apply"] = mt.Function.apply
    for name in (
        "__call__",
        "named_modules",
        "named_parameters",
        "parameters",
        "train",
        "eval",
        "to",
        "state_dict",
        "load_state_dict",
        "zero_grad",
    ):
        api[f"nn.Module.{name}"] = getattr(nn.Module, name)
    for name in TENSOR_METHODS:
        api[f"Tensor.{name}"] = getattr(mt.Tensor, name)
    for name in TENSOR_PROPERTIES:
        api[f"Tensor.{name}"] = getattr(mt.Tensor, name).fget
    return api


def test_the_public_api_has_type_hints():
    missing = {name: gaps for name, function in public_api().items() if (gaps := unannotated(function))}
    assert not missing, f"public functions without type hints (parameter or 'return'): {missing}"


def test_the_api_list_is_not_empty():
    # a broken walk (a renamed __all__, a module moved) would pass the test above vacuously
    api = public_api()
    assert {
        "F.scaled_dot_product_attention",
        "nn.GPT.forward",
        "optim.AdamW.__init__",
        "mt.gradcheck",
        "Tensor.backward",
        "Tensor.shape",
    } <= set(api)
    assert len(api) > 200


def test_the_package_ships_its_py_typed_marker():
    assert (ROOT / "minitorch_attn" / "py.typed").is_file()
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert "py.typed" in config.get("options.package_data", "minitorch_attn")
