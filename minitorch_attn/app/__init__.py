"""The application: the ``minitorch-attn`` command and what it runs, built on the course's packages.

``cli`` (the command), ``demos_cli`` (the demo runner), ``train``, ``data`` and ``sampling`` (the
main job), ``checkpoint`` (save and load), ``export`` and ``torch_gpt`` (safetensors and the
same GPT in PyTorch), ``hf_export`` (Hugging Face folders), ``demo_common`` and ``measure``
(what demos and benchmarks share). Nothing of the course (``core``, ``functional``, ``nn``,
``optim``, ``graph``, ``gradcheck``, ``opinfo``) imports this package (``tests/test_layout.py``
checks it).
"""
