"""What a refusal leaves behind, in a real IPython shell: nothing run, nothing kept alive.

A usage error is kept by IPython until the next error (``sys.last_traceback``), and a
traceback keeps every frame's variables alive, so a refusal raised deep in a magic kept what
the magic had looked up: ``del model`` freed nothing. A step written without its call
(``%tune "train_step"``) ran, and was timed, as a name look-up.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from .conftest import MODEL_CELL, Shell

COUNTED = """
calls = 0
def counted(batch):
    global calls
    calls += 1
    return train_step()
"""


@pytest.mark.parametrize(
    ("source", "call"),
    [
        ('%tune "train_step" --model model --optimizer opt', '%tune "train_step()"'),
        ('%tune "counted" --model model --optimizer opt', '%tune "counted(batch)"'),
        ('%amp compare "train_step" --model model --optimizer opt', 'compare "train_step()"'),
        ("%compile model --bench train_step --optimizer opt", '--bench "train_step()"'),
        ("%compile model --bench model", '--bench "model(t)"'),  # the Net's forward(t)
        ("%%profile --model model --optimizer opt\ntrain_step", "Call it: train_step()"),
        ("%profile counted", "Call it: counted(batch)"),
    ],
)
def test_a_step_named_without_its_call_is_refused_before_it_runs(
    shell: Shell, source: str, call: str
) -> None:
    shell.ok(MODEL_CELL + COUNTED)
    shell.refuses({source: "without calling it"})
    assert call in shell.usage_error(source)
    assert shell["calls"] == 0


@pytest.mark.parametrize(
    "source",
    [
        "%compile model --bench train_step() --optimizer nope",
        '%tune "train_step()" --model model --optimizer nope',
        '%amp compare "train_step()" --model model --optimizer nope',
        "%%profile --model model --optimizer nope\ntrain_step()",
    ],
)
def test_a_refused_magic_keeps_nothing_the_notebook_deletes(shell: Shell, source: str) -> None:
    shell.ok(MODEL_CELL)
    model = weakref.ref(shell["model"])
    shell.usage_error(source)
    shell.ok("del model, opt")
    gc.collect()  # what a cycle would hold goes; what the last error holds stays
    assert model() is None


def test_the_notebooks_names_met_in_a_magics_frame_are_not_the_last_errors(shell: Shell) -> None:
    # %%profile takes the notebook's namespace (local_ns): a failure in its cell keeps the
    # magic's frames, and x was listed again as "<last error> profile.local_ns['x']".
    shell.ok(MODEL_CELL + "def fails():\n    held = torch.zeros(100, 100)\n    raise ValueError\n")
    assert isinstance(shell.run("%%profile\nfails()").error, ValueError)
    shell.ok("s = %memsummary -o -q -n 100000")
    labels = {t.label for t in shell["s"].tensors}
    assert "x" in labels
    assert "<last error> fails.held" in labels
    assert not [label for label in labels if "local_ns" in label], labels


def test_a_bench_that_never_loads_the_compiled_name_is_refused(shell: Shell) -> None:
    # %compile --bench binds NAME to the eager and the compiled model in turn; a step that
    # holds the model in a closure would time the eager one twice.
    shell.ok(
        MODEL_CELL
        + "def make_step(net):\n    return lambda: net(x).sum()\ncstep = make_step(model)\n"
    )
    shell.refuses(
        {
            '%compile model --bench "cstep()"': (
                "never loads the name model (it holds model as <lambda>'s net), and the bench "
                "binds model to the eager and the compiled model in turn"
            )
        }
    )
    assert not hasattr(shell["model"], "_orig_mod")  # nothing compiled, the name as it was


def test_an_attribute_named_where_a_notebook_name_goes_gets_what_to_write(shell: Shell) -> None:
    shell.ok(MODEL_CELL + "class Holder:\n    pass\nholder = Holder()\nholder.net = model\n")
    shell.refuses(
        {
            "%compile holder.net": "in place with holder.net = torch.compile(holder.net)",
            '%tune "train_step()" --model holder.net': "(net = holder.net), then --model net.",
            '%tune "train_step()" --model model --optimizer holder.opt': "then --optimizer opt.",
        }
    )
