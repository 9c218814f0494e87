# %% [markdown]
# # Beyond the tutorial: train a character-level GPT, then sample from it
#
# Everything the tutorial builds, put to work: a GPT (token and position embeddings, Pre-LN
# blocks of causal multi-head attention and a feed-forward network) trained on the Python
# language reference with our own backward passes, then asked to continue a prompt. This runs
# the `minitorch-attn train` command; `--quick` trains a tiny model for a few seconds (it
# learns little: the full run takes minutes).

# %%
"""Train a character-level GPT on the Python language reference, then sample from it.

    python demos/train_gpt.py                      # the defaults: about 4 minutes on 2 CPU cores
    python demos/train_gpt.py --device cuda        # on a GPU (pip install -e ".[cuda12]" or ".[cuda13]")
    python demos/train_gpt.py --text my.txt --steps 2000 --time-budget 0
    python demos/train_gpt.py --threads 1          # fix the threads instead of timing them

Exactly ``minitorch-attn train`` (see ``minitorch-attn train --help`` for every flag), so
``minitorch-attn demo train_gpt`` runs the same code at the same speed: the training loop
itself times one thread against one per core (the batch in one part per thread) and
keeps the faster (see ``minitorch_attn.speed.threads`` and ``minitorch_attn.nn.parallel``).

Writes checkpoint.npz, loss.png, attention.png and metrics.json into a new folder under
runs/; then ``minitorch-attn sample --checkpoint runs/<folder>/checkpoint.npz --prompt "def "``
continues any prompt.
"""

import sys
import tempfile

from minitorch_attn.app.cli import main
from minitorch_attn.app.demo_common import demo_argv, quick_training_flags

# %% [markdown]
# ## Training
#
# The flags are the `train` command's; `--quick` stands for a tiny model (2 layers of width
# 32) trained 15 steps on an excerpt of the corpus, and any flag given after it still wins.

# %%
flags = demo_argv()
if "--quick" in flags:
    with tempfile.TemporaryDirectory() as folder:  # for the excerpt of the corpus
        status = main(["train", *quick_training_flags(folder), *[f for f in flags if f != "--quick"]])
else:
    status = main(["train", *flags])
if status:
    sys.exit(status)
