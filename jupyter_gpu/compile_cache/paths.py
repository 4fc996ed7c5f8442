"""Cache paths that are not UTF-8 text: named in a sentence, shown, never used to clear.

A path comes from an environment (the server's, or a kernel's ``/proc/PID/environ``), and Unix
allows any byte but ``/`` and NUL in it. Python carries an undecodable byte as a lone surrogate
(``os.fsdecode``'s ``surrogateescape``), which no UTF-8 text, JSON for a browser, or log line can
hold: one such path used to stop every cache scan. Such a directory is listed with its bytes
shown as U+FFFD and refused with the reason (``scan.scan_sources``); the others are unaffected.
"""

from __future__ import annotations

import os


def not_utf8(path: str) -> str | None:
    """``None`` for a UTF-8 path; else which byte is not, e.g. ``"the byte 0xff at 12"``."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as err:
        raw = os.fsencode(path[err.start : err.end])
        return f"the byte 0x{raw[0]:02x} at character {err.start}"
    return None


def printable(path: str) -> str:
    """``path`` as UTF-8 text: each byte that is not UTF-8 shown as U+FFFD."""
    return os.fsencode(path).decode("utf-8", errors="replace")
