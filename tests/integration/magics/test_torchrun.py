"""``%%torchrun`` in a real IPython shell: real torchrun, real ranks (CPU, gloo), no mocks.

Each launch starts torchrun and its ranks as fresh processes (each imports torch): a few
seconds on an idle 2-core machine. The shell fixture has imported torch already, as a notebook
that trained on the CPU has.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from jupyter_gpu.distributed import TorchrunError
from jupyter_gpu.distributed.process import alive
from jupyter_gpu.readings.deadline import READ_DEADLINE_S
from tests.fakes.fake_nvml import FakeNvml
from tests.helpers import free_port, repo_env, wait_for
from tests.integration.magics.conftest import Shell

# One worker runs these in turn (--dist loadgroup): each starts torchrun and two or four ranks,
# and several at once beside the rest of the suite oversubscribed 2 cores until one ran into
# pytest's 240 s limit and took the next tests on its worker with it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.xdist_group("torchrun")]

ROOT = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    return ANSI.sub("", text)


def screen(text: str) -> str:
    """What a notebook shows of streamed text: each line after its last carriage return."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in plain(text).split("\n"))


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The notebook's folder is tmp_path (the ranks start there); no GPU for the ranks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return tmp_path


def descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def test_both_ranks_stream_their_output_and_rank_0s_bar_renders(shell: Shell, in_tmp: Path) -> None:
    go, bar_seen = in_tmp / "go", in_tmp / "bar-seen"
    seen_while_running = threading.Event()
    # The bar's first draw opens the bottom line; each later one is "\r" + prefix + bar over it.
    bar_opened = re.compile(r"\x1b\[\d+m\[rank 0\]\x1b\[0m\s+0%\|")
    bar_redrawn = re.compile(r"\r\x1b\[\d+m\[rank 0\]\x1b\[0m\s+\d+%\|")

    def release_when_shown() -> None:
        # Streaming: rank 0 waits for each file, which is only written once what it printed
        # reached the cell's output while the ranks still ran: its first line, then its bar's
        # first draw. (On a loaded machine the whole bar came in one read, shown as its last
        # line alone, as a terminal would show it: no redraw to see.)
        def shown() -> str:
            return str(getattr(sys.stdout, "getvalue", str)())

        wait_for(lambda: "first line" in shown(), "rank 0's first line never reached the output",
                 timeout_s=120, poll_s=0.05)  # fmt: skip
        seen_while_running.set()
        go.touch()
        wait_for(lambda: bar_opened.search(shown()), "rank 0's bar never showed while it ran",
                 timeout_s=120, poll_s=0.05)  # fmt: skip
        bar_seen.touch()

    threading.Thread(target=release_when_shown, daemon=True).start()
    ran = shell.ok(
        f"%%torchrun -n 2\n"
        f"import atexit, os, sys, time\n"
        f"from tqdm import tqdm\n"
        # A rank ends without finalizing the interpreter (process_end.py), but as a normal exit
        # would: its atexit handlers run and what they print is shown.
        f"atexit.register(print, 'atexit handler of rank', rank)\n"
        f"def wait_for(path):\n"
        f"    end = time.monotonic() + 120\n"
        f"    while rank == 0 and not os.path.exists(path) and time.monotonic() < end:\n"
        f"        time.sleep(0.05)\n"
        f"print(f'first line from rank {{rank}} of {{world_size}} on {{device}}')\n"
        f"wait_for({str(go)!r})\n"
        f"bar = tqdm(range(4), disable=rank != 0, mininterval=0, ncols=60)\n"
        f"wait_for({str(bar_seen)!r})\n"
        f"for _ in bar:\n"
        f"    time.sleep(0.05)\n"
        f"print('done', rank, file=sys.stderr)\n"
    )
    assert seen_while_running.is_set(), "rank 0's first line did not stream into the cell"
    out = ran.captured.stdout
    shown = screen(out)
    assert "[rank 0] first line from rank 0 of 2 on cpu" in shown
    assert "[rank 1] first line from rank 1 of 2 on cpu" in shown
    assert "[rank 0] done 0" in shown
    assert "[rank 1] done 1" in shown
    assert "[rank 0] atexit handler of rank 0" in shown
    assert "[rank 1] atexit handler of rank 1" in shown
    assert bar_seen.exists(), out
    assert bar_redrawn.search(out), out  # the open line was drawn over, not left behind
    assert re.search(r"^\[rank 0\] 100%\|.*\| 4/4", shown, re.M), shown
    assert "%%torchrun: 2 ranks finished" in shown
    assert not descendants()


def test_after_the_kernel_ran_a_step_the_ranks_all_reduce_and_o_brings_back_rank_0s_result(
    shell: Shell, in_tmp: Path
) -> None:
    shell.ok(
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loss = model(torch.randn(8, 4)).pow(2).mean()\n"
        "loss.backward(); opt.step()\n"
        "losses = 'before'\n"
    )
    ran = shell.ok(
        "%%torchrun -n 2 -o losses --no-color\n"
        "import torch, torch.distributed as dist\n"
        "from jupyter_gpu import torchrun_result\n"
        "t = torch.tensor([float(rank + 1)])\n"
        "dist.all_reduce(t)\n"
        "print('sum', t.item())\n"
        "torchrun_result({'rank': rank, 'weights': torch.full((3,), float(rank))})\n"
    )
    assert "[rank 0] sum 3.0" in ran.text
    assert "[rank 1] sum 3.0" in ran.text
    result = shell["losses"]
    assert result["rank"] == 0, "only rank 0's object comes back"
    assert result["weights"].tolist() == [0.0, 0.0, 0.0]
    assert result["weights"].device.type == "cpu"


def test_a_result_over_the_limit_fails_with_a_clear_error(shell: Shell, in_tmp: Path) -> None:
    shell.ok("big = 'unchanged'")
    ran = shell.run(
        "%%torchrun -n 2 -o big --max-result 1KB --no-color\n"
        "from jupyter_gpu import torchrun_result\n"
        "torchrun_result(list(range(10_000)))\n"
    )
    assert isinstance(ran.error, TorchrunError)
    text = plain(ran.text)
    assert "rank 0 raised ResultTooLargeError" in text
    assert "more than the limit of 1.0 KiB" in text
    assert "--max-result" in text
    assert 'File "<torchrun cell>", line 2' in text
    assert shell["big"] == "unchanged", "a failed cell leaves the namespace as it was"


def test_a_rank_that_raises_fails_the_cell_with_its_traceback(shell: Shell, in_tmp: Path) -> None:
    ran = shell.run(
        "%%torchrun -n 2 --no-color\n"
        "import torch.distributed as dist\n"
        "def check(x):\n"
        "    raise ValueError(f'bad batch {x}')\n"
        "if rank == 1:\n"
        "    check(7)\n"
        "dist.barrier()\n"
    )
    assert isinstance(ran.error, TorchrunError)
    assert ran.error.diagnosis.cause is not None
    assert ran.error.diagnosis.cause.rank == 1
    text = plain(ran.text)
    assert "%%torchrun failed: rank 1 raised ValueError" in text
    # the rank's own traceback, from the cell on: not torchrun's wrapper, not the preamble
    assert 'File "<torchrun cell>", line 5, in <module>' in text
    assert 'File "<torchrun cell>", line 3, in check' in text
    assert "ValueError: bad batch 7" in text
    assert "ChildFailedError" not in text
    assert "rank_main.py" not in text
    assert not descendants()


def test_a_name_from_the_notebook_gets_a_hint(shell: Shell, in_tmp: Path) -> None:
    shell.ok("learning_rate = 0.1")
    # rank 0 sleeps first, so that rank 1 fails first (left to the scheduler, a busy machine
    # sometimes had torchrun stop rank 0 before it reached the line, and the report said nothing
    # of it); the two ranks raising the same error are grouped in test_rank_output_and_failures
    ran = shell.run(
        "%%torchrun -n 2 --no-color\nimport time\nif rank == 0:\n    time.sleep(60)\n"
        "print(learning_rate)\n"
    )
    text = plain(ran.text)
    assert "rank 1 raised NameError" in text
    assert "NameError: name 'learning_rate' is not defined" in text
    assert "learning_rate is defined in the notebook, but the ranks are fresh processes" in text
    assert "%%writefile" in text
    assert "rank 0 was stopped when rank 1 failed, at cell line 3 (time.sleep(60))" in text, text


def test_a_module_written_with_writefile_is_importable_and_the_run_leaves_no_temporary_files(
    shell: Shell, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torchrun and its ranks read TMPDIR afresh (this process's tempfile has cached its folder):
    # torch's agent made a torchelastic_* log folder there for every run, and left it.
    ranks_tmp = in_tmp / "ranks-tmp"
    ranks_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(ranks_tmp))
    shell.ok("%%writefile helpers_for_ranks.py\ndef scale(x):\n    return 10 * x\n")
    ran = shell.ok(
        "%%torchrun -n 2 --no-color\n"
        "import helpers_for_ranks\n"
        "print(helpers_for_ranks.scale(rank))\n"
    )
    assert "[rank 1] 10" in ran.text
    assert not list(ranks_tmp.iterdir())


def test_interrupting_leaves_no_process(shell: Shell, in_tmp: Path) -> None:
    started, done = threading.Event(), threading.Event()

    def press_stop() -> None:  # the stop button: SIGINT to the kernel, once both ranks run
        # Pressed at the deadline too, so that a cell whose ranks never start cannot outlive the
        # test (under the full suite it once ran to pytest's 240 s limit, and the next tests on
        # that worker failed), and never once the cell has ended.
        deadline = time.monotonic() + 150
        while not done.is_set() and time.monotonic() < deadline:
            if ranks_written(in_tmp, "started-*"):
                started.set()
                break
            time.sleep(0.05)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    # The stop button's SIGINT must reach the cell as KeyboardInterrupt: Python's own handler,
    # whatever an earlier test on this worker left (the full suite once lost the SIGINT and ran
    # the cell to pytest's limit; the handler found is named below if it was not Python's).
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    stopper = threading.Thread(target=press_stop, daemon=True)
    stopper.start()
    try:
        ran = shell.run(
            "%%torchrun -n 2 --no-color\n"
            "import os, time\n"
            "open(f'started-{rank}', 'w').write(str(os.getpid()))\n"
            "time.sleep(600)\n"
        )
    finally:
        done.set()
        stopper.join(timeout=5)
        signal.signal(signal.SIGINT, found)
    assert started.is_set(), f"the ranks did not start within 150 s: {ran.text[-2000:]}"
    assert isinstance(ran.error, KeyboardInterrupt), (found, ran.error)
    pids = [int(p.read_text()) for p in in_tmp.glob("started-*")]
    assert len(pids) == 2
    assert not [p for p in pids if psutil.pid_exists(p)], "a rank survived the interrupt"
    assert not descendants(), [p.cmdline() for p in descendants()]
    assert "torchrun and its 2 rank(s) have stopped" in ran.text


def test_a_timeout_ends_a_hang_and_names_the_rank_that_did_not_arrive(
    shell: Shell, in_tmp: Path
) -> None:
    start = time.monotonic()
    ran = shell.run(
        "%%torchrun -n 2 --timeout 3 --no-color\n"
        "import time, torch, torch.distributed as dist\n"
        "if rank == 1:\n"
        "    time.sleep(600)  # never reaches the all_reduce\n"
        "dist.all_reduce(torch.ones(1))\n"
    )
    assert time.monotonic() - start < 120
    assert isinstance(ran.error, TorchrunError)
    diag = ran.error.diagnosis
    assert diag.timed_out
    assert diag.missing_ranks == [1]
    text = plain(ran.text)
    assert "did not complete within --timeout 3 s: rank 0 waited, rank 1 did not arrive" in text
    assert "rank 1 was busy elsewhere: at cell line 3 (time.sleep(600)) when it was stopped" in text
    assert "GLOO_SOCKET_IFNAME" in text, "the environment that matters is shown"
    assert not descendants()


def test_a_port_in_use_is_refused_with_who_holds_it(shell: Shell, in_tmp: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = shell.usage_error(
            f"%%torchrun -n 2 --rdzv-endpoint 127.0.0.1:{port}\nprint(rank)\n"
        )
    assert f"port {port} is already in use on this machine" in message
    assert f"pid {os.getpid()}" in message
    assert "leave --rdzv-endpoint out" in message
    assert not descendants(), "nothing may start on a clash"


def test_usage_errors_say_what_to_do(shell: Shell, in_tmp: Path) -> None:
    shell.refuses(
        {
            "%%torchrun -n 2\n\n": "this cell is empty",
            "%%torchrun\nprint(rank)\n": "give the number of ranks, e.g. %%torchrun -n 2",
            "%%torchrun -n 2 --backend nccl\nprint(rank)\n": "--backend gloo",
            "%%torchrun -n 2 --nnodes 2\nx = 1\n": "needs --rdzv-endpoint",
            "%%torchrun -n 2 --nnodes 2 --rdzv-endpoint 127.0.0.1:29999\nx = 1\n": (
                "needs this machine's --node-rank"
            ),
            "%%torchrun -n 2 --env NCCL_DEBUG\nx = 1\n": "NAME=VALUE",
            "%%torchrun -n 2 --max-result lots\nx = 1\n": "not a size",
            "%%torchrun -n 2 -o 2x\nx = 1\n": "-o NAME",
        }
    )
    assert not descendants(), "nothing may start on a usage error"
    ran = shell.run("%%torchrun -n 2\nfor\n")
    assert isinstance(ran.error, SyntaxError), "a syntax error shows before any rank starts"


def test_a_driver_that_hangs_at_start_gives_a_usage_error_within_the_deadline(
    shell: Shell, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # %%torchrun counts the GPUs through NVML: a driver whose nvmlInit hangs must not hang the
    # kernel (the fake answers after 30 s at the latest, were there no deadline).
    fake = FakeNvml(devices=2)
    fake.hang(None, calls={"nvmlInit"})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with fake.released_after(None):
        began = time.monotonic()
        message = shell.usage_error("%%torchrun\nprint(rank)\n")
        took = time.monotonic() - began
    assert took < READ_DEADLINE_S + 1.5  # the deadline, and busy cores
    assert f"NVML did not answer within {READ_DEADLINE_S:g} s while starting" in message
    assert "give the number of ranks" in message


def ranks_written(folder: Path, pattern: str) -> bool:
    """Both ranks wrote their file (``pattern``) into ``folder``, each its pid."""
    files = list(folder.glob(pattern))
    return len(files) == 2 and all(f.read_text() for f in files)


def wait_for_ranks(
    folder: Path, pattern: str, process: subprocess.Popen[Any] | None = None
) -> None:
    """Until both ranks wrote their file (``pattern``) into ``folder``, each its pid: the cell
    is running, past the line that wrote it."""

    wait_for(
        lambda: ranks_written(folder, pattern),
        "the ranks did not start",
        timeout_s=120,
        poll_s=0.05,
        process=process,
    )


AGENT = textwrap.dedent(
    """
    import sys
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_gpu")
    ip.run_cell_magic("torchrun", sys.argv[1], open(sys.argv[2]).read())
    print("RESULT", ip.user_ns.get("result"))
    """
)

TRAIN_WORLD_4 = """\
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from jupyter_gpu import torchrun_result
assert world_size == 4, world_size
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
gen = torch.Generator().manual_seed(rank)  # each rank its own data
target = torch.arange(8.0) / 8
losses = []
for step in range(30):
    x = torch.randn(32, 8, generator=gen)
    loss = torch.nn.functional.mse_loss(model(x).squeeze(1), x @ target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
assert losses[-1] < 0.5 * losses[0], losses
weights = [torch.zeros(8) for _ in range(world_size)]
dist.all_gather(weights, model.module.weight.detach().reshape(8))
assert all(torch.equal(weights[0], w) for w in weights), "DDP keeps the replicas identical"
print(f"trained in a world of {world_size}: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
torchrun_result({"world_size": world_size, "losses": losses})
"""


def test_two_agents_on_two_nodes_train_a_world_of_four(shell: Shell, in_tmp: Path) -> None:
    port = free_port()
    cell = in_tmp / "cell.txt"
    cell.write_text(TRAIN_WORLD_4)
    common = f"-n 2 --nnodes 2 --rdzv-endpoint 127.0.0.1:{port} --timeout 120 --no-color"
    env = repo_env(IPYTHONDIR=str(in_tmp / "ipython-agent"))
    other = subprocess.Popen(
        [sys.executable, "-c", AGENT, f"{common} --node-rank 1 -o result", str(cell)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        ran = shell.run(f"%%torchrun {common} --node-rank 0 -o result\n{TRAIN_WORLD_4}")
        other_out, _ = other.communicate(timeout=180)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert ran.error is None, f"{ran.error!r}\n{ran.text}\n--- node 1:\n{other_out}"
    assert other.returncode == 0, other_out
    both = plain(ran.text + other_out)
    for rank in range(4):
        assert re.search(rf"\[rank {rank}\] trained in a world of 4: loss", both), both
    assert "this node's 2 of 4 ranks finished" in plain(ran.text)
    # rank 0 ran on one of the two nodes: there -o holds its result
    here = shell.ip.user_ns.get("result")
    assert (here is not None) != ("RESULT {" in other_out), (here, other_out)
    result = here if here is not None else None
    if result is not None:
        assert result["world_size"] == 4


def test_the_help_explains_how_to_share_code_with_the_ranks(shell: Shell) -> None:
    ran = shell.ok("%%torchrun?")
    for words in (
        "%%writefile helpers.py",
        "do NOT see the notebook's variables",
        "--nnodes",
        "torchrun_result",
        "--rdzv-endpoint HOST:PORT",
        "-o NAME, --output NAME",
    ):
        assert words in ran.text, words


def test_ranks_count_as_the_processes_of_the_kernel_that_started_them(
    shell: Shell, in_tmp: Path
) -> None:
    """The monitor's attribution walks parents: rank -> torchrun -> kernel (this process)."""
    from jupyter_gpu.readings.records import DeviceSample, ProcessSample
    from jupyter_gpu.sampling.attribution import KernelRef, ProcessAnnotator, freeze_kernel_map

    found: dict[str, object] = {}

    def annotate_while_ranks_run() -> None:
        wait_for_ranks(in_tmp, "started-*")
        pids = [int(p.read_text()) for p in in_tmp.glob("started-*")]
        annotator = ProcessAnnotator()
        annotator.kernel_map = freeze_kernel_map({os.getpid(): KernelRef("k-1", "train.ipynb")})
        gpu = DeviceSample(
            index=0, uuid=None, name="GPU", processes=tuple(ProcessSample(p, None, 1) for p in pids)
        )
        found["processes"] = annotator.annotate((gpu,))[0].processes
        (in_tmp / "go").touch()

    threading.Thread(target=annotate_while_ranks_run, daemon=True).start()
    shell.ok(
        "%%torchrun -n 2 --no-color\n"
        "import os, time\n"
        "open(f'started-{rank}', 'w').write(str(os.getpid()))\n"
        "while not os.path.exists('go'):\n"
        "    time.sleep(0.05)\n"
    )
    processes = found["processes"]
    assert isinstance(processes, tuple)
    assert len(processes) == 2
    for proc in processes:
        assert (proc.kernel_id, proc.notebook) == ("k-1", "train.ipynb"), proc
        assert proc.pid != os.getpid()


def test_a_killed_kernel_takes_torchrun_and_its_ranks_with_it(tmp_path: Path) -> None:
    """A kernel restart SIGKILLs the kernel: Linux's parent-death signal stops torchrun."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    cell = tmp_path / "cell.txt"
    cell.write_text(
        "import os, time\n"
        f"folder = {str(tmp_path)!r}\n"
        "open(os.path.join(folder, f'rank-{rank}.pid'), 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    env = repo_env(IPYTHONDIR=str(tmp_path / "ipython"), CUDA_VISIBLE_DEVICES="")
    kernel = subprocess.Popen(
        [sys.executable, "-c", AGENT, "-n 2 --no-color", str(cell)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    try:
        wait_for_ranks(tmp_path, "rank-*.pid", process=kernel)
        ranks = [int(p.read_text()) for p in tmp_path.glob("rank-*.pid")]
        torchrun = [c.pid for c in psutil.Process(kernel.pid).children()]
        assert len(torchrun) == 1
        kernel.kill()
        kernel.wait()

        def left() -> list[int]:
            return alive([*torchrun, *ranks])  # a zombie has ended: only its reaping is left

        def described() -> str:
            said = []
            for pid in left():
                with contextlib.suppress(psutil.Error):
                    p = psutil.Process(pid)
                    role = "torchrun" if pid in torchrun else "rank"
                    said.append(f"{role} {pid} ({p.status()}, parent {p.ppid()}: {p.cmdline()})")
            return "still running after the kernel died: " + "; ".join(said)

        wait_for(lambda: not left(), described, timeout_s=60, poll_s=0.2)
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()


def test_in_a_real_kernel_a_failing_rank_is_an_error_output(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jupyter_gpu"),
        nbformat.v4.new_code_cell(
            "%%torchrun -n 2 --backend gloo\n"
            "from tqdm import tqdm\n"
            "for _ in tqdm(range(3), disable=rank != 0, mininterval=0):\n"
            "    pass\n"
            "if rank == 1:\n"
            "    raise KeyError('missing shard')\n"
        ),
    ]
    # coalesce_streams: nbclient then applies the carriage returns as JupyterLab's output area
    # does (it is off by default: CI once saw the bar's "1/3" and "\r...3/3" as sent, when the
    # relay read rank 0's log in the middle of the bar).
    client = NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        coalesce_streams=True,
    )
    with pytest.raises(CellExecutionError):
        client.execute()
    outputs = nb.cells[1].outputs
    streamed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    # nbclient applies the carriage returns as the output area does: the bar's last state stays
    assert re.search(r"^\[rank 0\] 100%\|.*\| 3/3", plain(streamed), re.M), streamed
    error = next(o for o in outputs if o.output_type == "error")
    assert error.ename == "TorchrunError"
    shown = plain("\n".join(error.traceback))
    assert "%%torchrun failed: rank 1 raised KeyError" in shown
    assert 'File "<torchrun cell>", line 5, in <module>' in shown
    assert "KeyError: 'missing shard'" in shown
    assert "launcher.py" not in shown, "the launcher's own frames are not the user's business"


def test_interrupting_a_real_kernel_stops_every_rank(tmp_path: Path) -> None:
    """The stop button's path: jupyter_client interrupts the kernel (SIGINT to its group)."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path), env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        reply = client.execute_interactive("%load_ext jupyter_gpu", timeout=60)
        assert reply["content"]["status"] == "ok"
        msg_id = client.execute(
            "%%torchrun -n 2\n"
            "import os, time\n"
            "open(f'rank-{rank}.pid', 'w').write(str(os.getpid()))\n"
            "time.sleep(600)\n"
        )
        wait_for_ranks(tmp_path, "rank-*.pid")
        ranks = [int(p.read_text()) for p in tmp_path.glob("rank-*.pid")]
        km.interrupt_kernel()
        while True:
            reply = client.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert not [p for p in ranks if psutil.pid_exists(p)], "a rank survived the interrupt"
        kernel_pid = km.provisioner.process.pid  # type: ignore[union-attr]  # a local kernel
        assert not psutil.Process(kernel_pid).children(recursive=True)
        assert client.execute_interactive("1 + 1", timeout=60)["content"]["status"] == "ok"
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
