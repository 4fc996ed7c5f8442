"""Notebook 07, the capstone: one starved training run taken to near the GPU's limit.

Each module has one job: :mod:`.shapes` holds the model shapes (the student's and the one that
feeds the tensor cores) and their FLOP count, :mod:`.model` the GPT in both shapes (attention
written out by hand, or ``scaled_dot_product_attention``), :mod:`.data` the student's input
pipeline, :mod:`.fit` sizes a batch from measured memory, :mod:`.steps` times a configuration
against the one before it (interleaved rounds, a gain with its interval), :mod:`.variants` the
contexts that undo one fix for the row before, :mod:`.float8` switches the blocks to torchao's
FP8 training and back, :mod:`.climb` keeps the table, chart and claims of the climb,
:mod:`.exercise` the second model and its check, :mod:`.held` says what the kernel still holds
of the GPU before the script's ranks start, and :mod:`.train_script` is the same training
as a plain PyTorch script (``torchrun``-ready). ``benchmarks/capstone_probe.py`` measures the
candidate final shapes with the same pieces.
"""
