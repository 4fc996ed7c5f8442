"""The IPython plumbing every magic uses: arguments, cell code, torch on demand, quiet logs.

- ``args.py``: ``@magic_arguments`` parsed with POSIX quoting, errors as ``UsageError``;
  notebook-namespace lookups;
- ``cell.py``: a cell magic's body run like a normal cell, with the notebook's line numbers;
- ``lazy_torch.py``: torch imported when a magic runs (``%load_ext jupyter_gpu`` stays fast);
- ``quiet.py``: torch's warnings as one short note each; ``kineto.py``: the profiler's own log
  lines kept out of the notebook;
- ``origin.py``: whose code a file holds (a library's or the user's).

It stands on ``output/`` alone (``quiet.py`` shows its notes through it).
"""
