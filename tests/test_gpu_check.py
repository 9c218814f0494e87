"""``benchmarks/gpu_check.sh`` and the CUDA extras agree with ``setup.cfg``: the wheels the
check carries to a GPU machine with no network cover every run-time and test requirement
that machine lacks, with the same version bounds, and each CUDA extra names its CuPy."""

import configparser
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
ON_THE_GPU_MACHINE = {"numpy", "pytest", "hypothesis", "pytest-xdist", "matplotlib"}  # docs/devices.md


def requirements(text):
    return {
        re.split(r"[<>=!~ ]", line, maxsplit=1)[0]: line.replace(" ", "")
        for line in (s.strip() for s in text.splitlines())
        if line and not line.startswith("#")
    }


def setup_cfg():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def carried():
    """``{distribution: requirement}`` of the script's CARRIED list (``module:requirement``)."""
    block = re.search(r"CARRIED=\((.*?)\)", SCRIPT.read_text(), re.S).group(1)
    return requirements("\n".join(entry.split(":", 1)[1] for entry in re.findall(r'"([^"]+)"', block)))


def test_the_carried_wheels_are_what_the_gpu_machine_lacks_with_setup_cfgs_bounds():
    config = setup_cfg()
    needed = requirements(config["options"]["install_requires"]) | requirements(
        config["options.extras_require"]["test"]
    )
    expected = {name: spec for name, spec in needed.items() if name not in ON_THE_GPU_MACHINE}
    assert carried() == expected


def test_each_cuda_extra_names_the_cupy_of_its_cuda_version():
    extras = setup_cfg()["options.extras_require"]
    assert requirements(extras["cuda12"]).keys() == {"cupy-cuda12x"}
    assert requirements(extras["cuda13"]).keys() == {"cupy-cuda13x"}
    assert requirements(extras["cuda"]) == requirements(extras["cuda12"])  # the alias docs/devices.md names
    devices = (ROOT / "docs" / "devices.md").read_text()
    assert '".[cuda12]"' in devices and '".[cuda13]"' in devices and "the same as `cuda12`" in devices


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_script_parses_and_refuses_an_unknown_flag():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    wrong = subprocess.run(["bash", str(SCRIPT), "--gpu"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "usage" in wrong.stderr
