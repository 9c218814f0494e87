"""Train a character-level GPT on the Python language reference, then sample from it.

    python demos/train_gpt.py                      # the defaults: about 4 minutes on 2 CPU cores
    python demos/train_gpt.py --device cuda        # on a GPU (pip install -e ".[cuda]")
    python demos/train_gpt.py --text my.txt --steps 2000 --time-budget 0
    python demos/train_gpt.py --threads 1          # fix the BLAS threads instead of timing them

Exactly ``minitorch-attn train`` (see ``minitorch-attn train --help`` for every flag), so
``minitorch-attn demo train_gpt`` runs the same code at the same speed: the training loop
itself times one BLAS thread against one per core and keeps the faster (see
``minitorch_attn.threads``).

Writes checkpoint.npz, loss.png, attention.png and metrics.json into a new folder under
runs/; then ``minitorch-attn sample --checkpoint runs/<folder>/checkpoint.npz --prompt "def "``
continues any prompt.
"""

import sys

from minitorch_attn.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
