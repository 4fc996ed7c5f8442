"""Helpers shared by the tutorial notebooks in ``notebooks/`` and by ``benchmarks/``.

Each module has one job: :mod:`.sizing` picks smoke / CPU / GPU sizes, :mod:`.corpus` reads the
Python standard library as a byte-level text corpus, :mod:`.gpt` is a small GPT,
:mod:`.mlp` the launch-bound MLP, :mod:`.digits` the scikit-learn digits image pipeline,
:mod:`.flops` counts model FLOPs, :mod:`.timing` measures steady-state step times,
:mod:`.results` records a notebook's figures and target checks, and :mod:`.plots` draws them.

``import jupyter_gpu`` never imports this package; the modules that need torch import it at
module level, so import them only where torch is wanted.
"""
