"""Running user code again and again, and leaving the notebook as it was.

``%compile --bench``, ``%amp compare``, ``%%profile --warmup`` and ``%tune`` run the user's code
many times; they all go through :class:`~.runs.RepeatedRuns` (docs/magics.md, "What the
measuring magics put back"):

- ``reach.py``: what the code can reach, read from its bytecode before it runs, or the
  ``UsageError`` that names what could not be put back;
- ``state.py``: the copy of what the runs may change, put back in place and checked; with
  ``structure.py`` (a module's or optimizer's tables and hooks), ``stateful.py`` (objects with a
  ``state_dict``), ``settings.py`` (process-wide settings) and ``equality.py`` (whether a value
  is back bit for bit);
- ``runs.py``: the flow (reach, save, run, reset between variants, finish) and the ``Restored``
  record that lists what was compared.

It stands on ``shell/``, ``output/`` and ``probes/`` (TF32 is put back through
``probes/precision.py``) and never imports a magic (``tests/unit/test_layers.py``).
"""
