"""Running user code again and again, and leaving the notebook as it was."""
