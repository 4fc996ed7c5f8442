"""The IPython plumbing every magic uses: arguments, cell code, lazy torch, quiet logs."""
