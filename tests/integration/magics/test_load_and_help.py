"""Loading, unloading and the help of every magic, in a real IPython shell."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import Shell

LINE_MAGICS = ("compile", "amp", "memsummary", "gpu")
CELL_MAGICS = ("amp", "memsummary", "profile")


def test_loading_imports_neither_torch_nor_plotly() -> None:
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gpu')\n"
        "print(sorted(m for m in ('torch', 'plotly', 'numpy', 'pynvml') if m in sys.modules))\n"
        "print(sorted(ip.magics_manager.magics['line']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, magics = out.stdout.strip().splitlines()
    assert imported == "[]"
    for name in LINE_MAGICS:
        assert f"'{name}'" in magics


def test_magics_are_registered_and_removed_on_unload(shell: Shell) -> None:
    table = shell.ip.magics_manager.magics
    for name in LINE_MAGICS:
        assert name in table["line"]
    for name in CELL_MAGICS:
        assert name in table["cell"]
    shell.ok("%unload_ext jupyter_gpu")
    for name in LINE_MAGICS:
        assert name not in table["line"]
    assert "profile" not in table["cell"]
    assert "prun" in table["line"]  # IPython's own magics are untouched
    shell.ok("%load_ext jupyter_gpu")
    assert "compile" in table["line"]
    shell.ok("%reload_ext jupyter_gpu")
    assert "compile" in table["line"]


@pytest.mark.parametrize(
    ("magic", "expected"),
    [
        ("%compile?", "--bench EXPR"),
        ("%amp?", "compare"),
        ("%memsummary?", "--snapshot"),
        ("%%profile?", "--row-limit"),
        ("%gpu?", "--backend"),
    ],
)
def test_help_is_the_docstring_with_the_options(shell: Shell, magic: str, expected: str) -> None:
    ran = shell.ok(magic)
    assert expected in ran.text
    assert "-o, --output" in ran.text
    assert "-q, --quiet" in ran.text


def test_profile_line_form_needs_a_statement(shell: Shell) -> None:
    message = shell.usage_error("%profile --sort calls")
    assert "needs a statement" in message
    assert "%%profile" in message


@pytest.mark.slow
def test_exit_after_torch_compile_prints_nothing() -> None:
    # Without the exit hook, dynamo's cleanup of the names it put in the cell's namespace
    # raised KeyError in weakref callbacks after IPython had emptied that namespace at exit.
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gpu')\n"
        "ip.run_cell('import torch\\ndef f(x):\\n    return torch.sin(x) + 1')\n"
        "ip.run_cell('%compile f --backend eager -q')\n"
        "assert ip.run_cell('y = f(torch.ones(3))').success\n"
        # A graph break and a recompile: their compiled code lives on after dynamo.reset(),
        # with the function, until IPython empties the namespace (2026-12-05: two KeyErrors).
        "ip.run_cell('def g(t):\\n    s = t.sum().item()\\n    return torch.sin(t) * s')\n"
        "ip.run_cell('%compile g --backend eager -q')\n"
        "assert ip.run_cell('g(torch.ones(8)); g(torch.ones(8)); g(torch.ones(4, 4))').success\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("done")
    assert "Exception ignored" not in out.stderr
    assert "KeyError" not in out.stderr


def test_no_magic_help_starts_with_a_stray_literal_block_marker(shell: Shell) -> None:
    # IPython writes the usage as reStructuredText (``::`` then an indent); %compile? showed
    # the ``::`` as the first line of its help.
    from jupyter_gpu.magics import MAGIC_CLASSES

    helps = {}
    for cls in MAGIC_CLASSES:
        for kind in ("line", "cell"):
            for name, method in cls.magics[kind].items():
                helps[f"{kind} {name}"] = getattr(cls, method).__doc__ or ""
    assert helps
    for magic, doc in helps.items():
        assert not doc.lstrip().startswith("::"), magic
        assert "\n::\n" not in doc, magic
    ran = shell.ok("%compile?")
    first = ran.text.strip().splitlines()
    assert not any(line.strip() == "::" for line in first), first[:5]
    assert any(line.startswith("%compile [") for line in first), first[:8]
