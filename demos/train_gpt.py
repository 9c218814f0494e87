"""Train a character-level GPT on the Python language reference, then sample from it.

    python demos/train_gpt.py                      # the defaults: about 4 minutes on 2 CPU cores
    python demos/train_gpt.py --device cuda        # on a GPU (pip install -e ".[cuda]")
    python demos/train_gpt.py --text my.txt --steps 2000 --time-budget 0

The same as ``minitorch-attn train`` (see ``minitorch-attn train --help`` for every flag),
except that it asks NumPy's BLAS for one thread unless ``OPENBLAS_NUM_THREADS`` (or
``OMP_NUM_THREADS``) is set: the matrices of this small model are too small for threads to
pay off much, and on a machine that is also busy with other work, BLAS threads that wait
for each other make training several times slower.

Writes checkpoint.npz, loss.png, attention.png and metrics.json into a new folder under
runs/; then ``minitorch-attn sample --checkpoint runs/<folder>/checkpoint.npz --prompt "def "``
continues any prompt.
"""

import os
import sys

if "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # must be set before NumPy is imported

from minitorch_attn.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
