"""%amp and %%amp in a real IPython shell (CPU autocast)."""

from __future__ import annotations

import torch

from .conftest import MODEL_CELL, Shell, training_bits


def test_cell_magic_runs_the_cell_under_autocast_and_returns_its_value(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    ran = shell.ok("%%amp\nout = model(x)\nout.dtype")
    assert shell["out"].dtype == torch.bfloat16
    assert shell.ip.user_ns["Out"][ran.result.execution_count] == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")
    assert shell.ok("model(x).dtype").result.result == torch.float32


def test_trailing_semicolon_hides_the_value(shell: Shell) -> None:
    ran = shell.ok("%%amp\n1 + 1;")
    assert ran.result.result is None


def test_fp16_puts_a_grad_scaler_in_the_notebook_and_prints_the_recipe(shell: Shell) -> None:
    ran = shell.ok("%%amp --dtype fp16\nz = torch.ones(2, 2) @ torch.ones(2, 2)")
    assert shell["z"].dtype == torch.float16
    assert isinstance(shell["scaler"], torch.amp.GradScaler)
    assert "scaler.scale(loss).backward()" in ran.text
    assert "scaler.update()" in ran.text


def test_fp16_refuses_to_overwrite_another_scaler_variable(shell: Shell) -> None:
    shell.ok("scaler = [1, 2]")
    message = shell.usage_error("%%amp --dtype fp16\nz = 1")
    assert "--scaler" in message
    assert shell["scaler"] == [1, 2]
    assert "z" not in shell.ip.user_ns


def test_bad_dtype_is_a_usage_error_and_changes_nothing(shell: Shell) -> None:
    message = shell.usage_error("%%amp --dtype int8\nz = 1")
    assert "bf16 or fp16" in message
    assert "z" not in shell.ip.user_ns
    assert not torch.is_autocast_enabled("cpu")
    assert "bf16 or fp16" in shell.usage_error("%amp on --dtype int8")
    assert loaded_amp(shell).hooks is None


def test_cell_that_raises_shows_its_own_error_and_leaves_autocast_off(shell: Shell) -> None:
    ran = shell.run("%%amp\nbefore = 1\n1 / 0")
    assert isinstance(ran.error, ZeroDivisionError)
    assert shell["before"] == 1
    assert not torch.is_autocast_enabled("cpu")


def test_cuda_device_without_cuda_is_a_usage_error(shell: Shell) -> None:
    assert "--device cpu" in shell.usage_error("%%amp --device cuda\nz = 1")


def test_line_command_in_cell_form_is_a_usage_error(shell: Shell) -> None:
    assert "only options" in shell.usage_error("%%amp on\nz = 1")


def loaded_amp(shell: Shell) -> object:
    from jupyter_gpu.magics import AmpMagics, loaded_magics

    magics = loaded_magics(shell.ip, AmpMagics)
    assert magics is not None
    return magics


def test_on_autocasts_following_cells_until_off(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    ran = shell.ok("%amp on")
    assert "autocast on" in ran.text
    assert shell.ok("model(x).dtype").result.result == torch.bfloat16
    # Between cells (here, in the test) autocast is off: the post-run hook left it.
    assert not torch.is_autocast_enabled("cpu")
    failing = shell.run("model(x)\nraise ValueError('boom')")
    assert isinstance(failing.error, ValueError)
    assert not torch.is_autocast_enabled("cpu")
    assert shell.ok("model(x).dtype").result.result == torch.bfloat16
    shell.ok("%amp off")
    assert shell.ok("model(x).dtype").result.result == torch.float32
    callbacks = shell.ip.events.callbacks
    assert not any("AmpHooks" in repr(cb) for cb in callbacks["pre_run_cell"])
    assert not any("AmpHooks" in repr(cb) for cb in callbacks["post_run_cell"])


MATMUL = "(torch.ones(2, 2) @ torch.ones(2, 2)).dtype"


def amp_hooks(shell: Shell) -> list[object]:
    callbacks = shell.ip.events.callbacks
    return [
        cb
        for cb in callbacks["pre_run_cell"] + callbacks["post_run_cell"]
        if "AmpHooks" in repr(cb)
    ]


def test_on_autocasts_from_its_own_line_and_keeps_it_for_following_cells(shell: Shell) -> None:
    ran = shell.ok(f"before = {MATMUL}\n%amp on\nafter = {MATMUL}")
    assert shell["before"] == torch.float32
    assert shell["after"] == torch.bfloat16  # the cell of %amp on itself
    assert "from this line" in ran.text
    assert not torch.is_autocast_enabled("cpu")  # between cells: closed by the post-run hook
    for _ in range(2):
        assert shell.ok(MATMUL).result.result == torch.bfloat16
    shell.ok("%amp off")


def test_off_stops_from_its_own_line_and_for_following_cells(shell: Shell) -> None:
    shell.ok("%amp on")
    ran = shell.ok(f"before = {MATMUL}\n%amp off\nafter = {MATMUL}")
    assert shell["before"] == torch.bfloat16
    assert shell["after"] == torch.float32  # the cell of %amp off itself
    assert "from this line" in ran.text
    assert shell.ok(MATMUL).result.result == torch.float32
    assert amp_hooks(shell) == []
    assert not torch.is_autocast_enabled("cpu")


def test_a_cell_that_raises_leaves_autocast_whole_on_or_whole_off(shell: Shell) -> None:
    failing = shell.run(f"%amp on\ninside = {MATMUL}\nraise ValueError('boom')")
    assert isinstance(failing.error, ValueError)
    assert shell["inside"] == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")  # closed between cells all the same
    assert len(amp_hooks(shell)) == 2  # one pre and one post hook: on, for the next cells
    assert shell.ok(MATMUL).result.result == torch.bfloat16
    # Raising before %amp off: it never ran, so autocast stays on.
    assert isinstance(shell.run("raise ValueError('early')\n%amp off").error, ValueError)
    assert shell.ok(MATMUL).result.result == torch.bfloat16
    failing = shell.run(f"%amp off\ninside = {MATMUL}\nraise ValueError('boom')")
    assert isinstance(failing.error, ValueError)
    assert shell["inside"] == torch.float32
    assert amp_hooks(shell) == []
    assert not torch.is_autocast_enabled("cpu")
    assert shell.ok(MATMUL).result.result == torch.float32


def test_on_again_in_a_cell_switches_the_dtype_from_that_line(shell: Shell) -> None:
    shell.ok(f"%amp on\nfirst = {MATMUL}\n%amp on --dtype fp16\nsecond = {MATMUL}")
    assert (shell["first"], shell["second"]) == (torch.bfloat16, torch.float16)
    assert shell.ok(MATMUL).result.result == torch.float16
    assert len(amp_hooks(shell)) == 2
    shell.ok("%amp off")
    assert not torch.is_autocast_enabled("cpu")


def test_on_or_off_inside_another_autocast_block_is_refused_and_changes_nothing(
    shell: Shell,
) -> None:
    # torch.autocast's __exit__ puts back the state its __enter__ found: contexts must close in
    # the order they opened, or the block's end would leave autocast in neither state.
    message = shell.usage_error(
        "with torch.autocast('cpu', dtype=torch.float16):\n    %amp on\nafter = 1"
    )
    assert "outside that block" in message
    assert amp_hooks(shell) == []
    assert not torch.is_autocast_enabled("cpu")
    assert shell.ok(MATMUL).result.result == torch.float32
    assert "%amp on" in shell.usage_error("%%amp\n%amp on")
    shell.ok("%amp on")
    message = shell.usage_error("with torch.autocast('cpu', enabled=False):\n    %amp off")
    assert "%amp off" in message
    assert shell.ok(MATMUL).result.result == torch.bfloat16  # still on
    assert not torch.is_autocast_enabled("cpu")
    # A block of the user's own inside the cell, closed before %amp off, is fine.
    shell.ok(
        "with torch.autocast('cpu', enabled=False):\n"
        f"    off_inside = {MATMUL}\n"
        f"on_again = {MATMUL}\n"
        "%amp off\n"
        f"after = {MATMUL}"
    )
    assert (shell["off_inside"], shell["on_again"], shell["after"]) == (
        torch.float32,
        torch.bfloat16,
        torch.float32,
    )
    assert not torch.is_autocast_enabled("cpu")


def test_tf32_switch_takes_effect_on_its_own_line(shell: Shell) -> None:
    """TF32 is a process-wide flag set by the magic itself: no lag to fix (a guard)."""
    from jupyter_gpu.magics.probes import precision as prec

    saved = prec.Tf32Settings.read()
    try:
        shell.ok("%amp tf32 on\nseen_on = torch.get_float32_matmul_precision()\n%amp tf32 off")
        assert shell["seen_on"] == "high"
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        saved.apply()


def test_on_twice_changes_the_dtype_without_stacking_hooks(shell: Shell) -> None:
    shell.ok("%amp on")
    shell.ok("%amp on --dtype fp16")
    assert shell.ok("(torch.ones(2, 2) @ torch.ones(2, 2)).dtype").result.result == torch.float16
    hooks = [cb for cb in shell.ip.events.callbacks["pre_run_cell"] if "AmpHooks" in repr(cb)]
    assert len(hooks) == 1
    shell.ok("%amp off")


def test_status_reports_autocast_and_tf32(shell: Shell) -> None:
    ran = shell.ok("%amp")
    assert "autocast: off" in ran.text
    assert "TF32" in ran.text
    shell.ok("%amp on")
    status = shell.ok("s = %amp -o -q").result
    assert status.error_in_exec is None
    assert shell["s"].autocast_on
    assert shell["s"].dtype == "bf16"
    assert shell["s"].device == "cpu"
    shell.ok("%amp off")


def test_unload_removes_the_hooks(shell: Shell) -> None:
    shell.ok("%amp on")
    shell.ok("%unload_ext jupyter_gpu")
    assert shell.ok("(torch.ones(2, 2) @ torch.ones(2, 2)).dtype").result.result == torch.float32
    assert not torch.is_autocast_enabled("cpu")
    assert "amp" not in shell.ip.magics_manager.magics["line"]


def test_tf32_switch_uses_the_available_api_and_says_cpu_is_unaffected(shell: Shell) -> None:
    from jupyter_gpu.magics.probes import precision as prec

    saved = prec.Tf32Settings.read()
    try:
        ran = shell.ok("%amp tf32 on")
        assert prec.tf32_enabled() == (True, True)
        assert "CPU" in ran.text
        shell.ok("%amp tf32 off")
        assert prec.tf32_enabled() == (False, False)
        assert "on or off" in shell.usage_error("%amp tf32 maybe")
    finally:
        saved.apply()
    assert prec.Tf32Settings.read() == saved


def test_tf32_switch_keeps_torchs_old_readers_answering(shell: Shell) -> None:
    """Inductor's max-autotune reads the old settings; with only the new ones set they raise."""
    from jupyter_gpu.magics.probes import precision as prec

    saved = prec.Tf32Settings.read()
    try:
        for mode, legacy, enabled in (("on", "high", True), ("off", "highest", False)):
            shell.ok(f"%amp tf32 {mode}")
            assert torch.get_float32_matmul_precision() == legacy
            assert torch.backends.cuda.matmul.allow_tf32 is enabled
            assert torch.backends.cudnn.allow_tf32 is enabled
            assert torch.backends.mkldnn.matmul.fp32_precision == saved.cpu_matmul
    finally:
        saved.apply()
    assert prec.Tf32Settings.read() == saved


def test_unknown_command_is_a_usage_error(shell: Shell) -> None:
    assert "%amp on" in shell.usage_error("%amp sideways")


def test_compare_restores_model_optimizer_and_rng_bit_for_bit(shell: Shell) -> None:
    shell.mid_training(MODEL_CELL)  # AdamW's state and gradients exist before
    before = training_bits(shell)
    ran = shell.ok('r = %amp compare "train_step()" --model model --optimizer opt --runs 3 -o')
    r = shell["r"]
    assert [m.mode for m in r.results] == ["fp32", "tf32", "bf16", "fp16"]
    # On a CPU tf32 computes exactly as fp32: said, not timed apart (it once read 0.22x).
    assert r.same_as == {"tf32": "fp32"}
    timed = [m for m in r.results if m.mode != "tf32"]
    assert all(m.error is None and m.time_s > 0 and m.runs == 3 for m in timed)
    assert all(m.loss is not None for m in timed)
    assert r.speedup("tf32") == 1.0
    assert r.ratio("bf16") is not None
    assert r.ratio("bf16").rounds == 3
    assert "tf32 = fp32 here" in ran.text
    bf16 = next(m for m in r.results if m.mode == "bf16")
    assert bf16.loss_diff is not None
    assert 0 <= bf16.loss_diff < 0.05
    assert training_bits(shell) == before  # bit for bit, the param groups too
    assert r.restore is not None
    assert r.restore.exact
    # per timed mode: the first step, a profiled step, a warm-up, 3 rounds
    assert r.restore.runs >= 3 * (1 + 1 + 1 + 3)
    assert "checked bit for bit: model, opt" in ran.text
    assert "fp32" in ran.text
    assert "bf16" in ran.text


def test_compare_refuses_before_running_what_it_cannot_put_back(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.ok("train_step()")
    before = training_bits(shell)
    message = shell.usage_error('%amp compare "train_step()" --modes bf16 --runs 3')
    assert "--optimizer opt" in message  # the optimizer the step steps, by its name
    assert "--model model" in message
    assert "--allow-side-effects" in message
    assert training_bits(shell) == before  # refused before the first run
    shell.ok(
        "import collections\n"
        "calls = collections.deque()\n"
        "def counted():\n"
        "    calls.append(1)\n"
        "    return train_step()"
    )
    message = shell.usage_error(
        '%amp compare "counted()" --model model --optimizer opt --modes bf16 --runs 3'
    )
    assert "calls: a deque" in message
    assert len(shell["calls"]) == 0
    ran = shell.ok(
        '%amp compare "counted()" --model model --optimizer opt --modes bf16 --runs 3 '
        "--allow-side-effects"
    )
    assert len(shell["calls"]) >= 2 * (1 + 1 + 3)  # it ran, and the deque kept its changes
    assert "Not put back (--allow-side-effects): calls" in ran.text
    assert training_bits(shell) == before  # the named state is still put back


def test_compare_bad_input(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.refuses(
        {
            "%amp compare": "one expression",
            '%amp compare "x ="': "not a Python expression",
            '%amp compare "train_step()" --model modle': "no variable named modle",
            '%amp compare "train_step()" --model x': "not a torch.nn.Module",
            '%amp compare "train_step()" --modes fp8': "--modes",
            "%amp on --model model": "--model, --optimizer",
        }
    )


def test_compare_step_failing_in_fp32_restores_and_says_why(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    before = shell["model"].fc1.weight.clone()
    shell.ok("def bad_step():\n    train_step()\n    raise RuntimeError('data ran out')")
    message = shell.usage_error('%amp compare "bad_step()" --model model --optimizer opt')
    assert "data ran out" in message
    assert torch.equal(shell["model"].fc1.weight, before)


def test_compare_under_amp_on_still_measures_fp32_in_fp32(shell: Shell) -> None:
    shell.ok(
        "def dtype_step():\n    return float((torch.ones(4, 4) @ torch.ones(4, 4)).dtype.itemsize)"
    )
    shell.ok("%amp on")
    shell.ok('r = %amp compare "dtype_step()" --modes fp32,bf16 --runs 3 -o -q')
    losses = {m.mode: m.loss for m in shell["r"].results}
    assert losses == {"fp32": 4.0, "bf16": 2.0}  # bytes per element of the matmul's result
    shell.ok("%amp off")


# Autocast caches the low-precision copy of each weight until its outermost context closes;
# optimizer.step() changes the float32 weights in place. A context around a whole cell (or
# every cell) must therefore not cache, or every forward after the first step uses stale
# weights. FRESH is the reference: explicit bf16 inputs, computed outside any cache.
FRESH = "torch.nn.functional.linear(x.bfloat16(), lin.weight.bfloat16(), lin.bias.bfloat16())"
LINEAR_CELL = "lin = torch.nn.Linear(16, 8)\nx = torch.randn(4, 16)"


def test_cell_forward_after_an_in_place_weight_change_sees_the_new_weights(shell: Shell) -> None:
    shell.ok(LINEAR_CELL)
    shell.ok(
        "%%amp --dtype bf16\n"
        "y1 = lin(x)\n"
        "with torch.no_grad():\n"
        "    lin.weight.mul_(2)\n"
        "y2 = lin(x)\n"
        f"expected = {FRESH}"
    )
    assert shell["y2"].dtype == torch.bfloat16
    assert not torch.equal(shell["y1"], shell["y2"])
    assert torch.equal(shell["y2"], shell["expected"])


TRAIN_CELL = """
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
start = {k: v.clone() for k, v in net.state_dict().items()}
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
xb, yb = torch.randn(8, 16), torch.randn(8, 4)

def sgd_step():
    sgd.zero_grad()
    loss = torch.nn.functional.mse_loss(net(xb).float(), yb)
    loss.backward()
    sgd.step()
    return loss.item()

def reference_losses(n):
    # The usual loop: one autocast per step, so every step casts the current weights.
    net.load_state_dict(start)
    losses = []
    for _ in range(n):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            losses.append(sgd_step())
    net.load_state_dict(start)
    return losses
"""


def test_several_optimizer_steps_in_one_cell_train_as_a_per_step_autocast_would(
    shell: Shell,
) -> None:
    shell.ok(TRAIN_CELL)
    expected = shell.ok("reference_losses(5)").result.result
    assert expected[-1] < expected[0]
    shell.ok("%%amp --dtype bf16\nlosses = [sgd_step() for _ in range(5)]")
    assert shell["losses"] == expected


def test_on_several_optimizer_steps_in_one_cell_see_fresh_weights(shell: Shell) -> None:
    shell.ok(TRAIN_CELL)
    expected = shell.ok("reference_losses(5)").result.result
    shell.ok("%amp on --dtype bf16")
    shell.ok("losses = [sgd_step() for _ in range(5)]")
    shell.ok(LINEAR_CELL)
    # A torch.autocast of the user's own inside the cell inherits the no-cache setting.
    shell.ok(
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    lin(x)\n"
        "with torch.no_grad():\n"
        "    lin.weight.mul_(2)\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    y2 = lin(x)\n"
        f"expected = {FRESH}"
    )
    shell.ok("%amp off")
    assert shell["losses"] == expected
    assert torch.equal(shell["y2"], shell["expected"])


def test_compare_runs_each_step_on_its_fresh_weights(shell: Shell) -> None:
    shell.ok(LINEAR_CELL)
    shell.ok(
        "import collections\n"
        "seen = collections.deque()  # a record the comparison cannot put back\n"
        "def drift_step():\n"
        "    y = lin(x)\n"
        "    if y.dtype == torch.bfloat16:\n"
        f"        seen.append(torch.equal(y, {FRESH}))\n"
        "    with torch.no_grad():\n"
        "        lin.weight.add_(0.5)\n"
        "    return y.float().square().mean()"
    )
    shell.ok(
        '%amp compare "drift_step()" --modes bf16 --runs 3 -q --model lin --allow-side-effects'
    )
    assert len(shell["seen"]) >= 4  # the first step, one warm-up, three timed runs
    assert all(shell["seen"])


def test_compare_batch_keeps_the_same_batch_in_every_mode(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.ok(
        "batch = torch.randn(8, 16)\n"
        "first = batch\n"
        "def drifting_step(b):\n"
        "    global batch\n"
        "    loss = torch.nn.functional.mse_loss(model(b), y)\n"
        "    batch = b + 1.0  # the next call would see another batch\n"
        "    return loss\n"
    )
    ran = shell.ok(
        'r = %amp compare "drifting_step(batch)" --batch batch --model model --optimizer opt '
        "--modes fp32,bf16 --runs 2 -o"
    )
    r = shell["r"]
    assert r.batch == "batch"
    bf16 = next(m for m in r.results if m.mode == "bf16")
    assert bf16.loss_diff is not None
    assert bf16.loss_diff < 0.05  # the same batch: the losses are comparable
    assert "The same batch (batch) in every mode" in ran.text
    assert shell["batch"] is shell["first"]  # put back as it was


def test_compare_without_batch_says_the_expression_must_use_the_same_batch(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    ran = shell.ok(
        '%amp compare "train_step()" --modes fp32,bf16 --runs 2 --model model --optimizer opt'
    )
    assert "--batch NAME keeps the batch" in ran.text
    message = shell.usage_error('%amp compare "train_step()" --batch x')
    assert "does not use x" in message
    assert "no variable named nope" in shell.usage_error('%amp compare "f(nope)" --batch nope')
