"""The minitorch-attn command and the set-up commands of the README."""

import pathlib
import re

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
