"""What every magic shares: argument parsing, cell code, output rendering, lazy torch access."""
