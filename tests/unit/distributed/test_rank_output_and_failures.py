"""The launcher's pure parts: streaming rank output, explaining failures, options, sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_gpu.distributed.failure import environment_report, explain
from jupyter_gpu.distributed.output import RankOutput, rank_prefix
from jupyter_gpu.distributed.rendezvous import (
    Endpoint,
    EndpointError,
    check_host_endpoint,
    parse_endpoint,
)
from jupyter_gpu.distributed.result import format_size, parse_size
from jupyter_gpu.distributed.script import LaunchSpec, torchrun_args
from tests.helpers import free_port


def render(stream: str) -> list[str]:
    """A notebook's output area: "\\r" moves to the line start and overwrites char by char."""
    lines = [""]
    col = 0
    for ch in stream:
        if ch == "\n":
            lines.append("")
            col = 0
        elif ch == "\r":
            col = 0
        else:
            line = lines[-1]
            lines[-1] = line[:col] + ch + line[col + 1 :]
            col += 1
    return [line.rstrip() for line in lines if line.strip()]


class Ranks:
    def __init__(self, folder: Path, world: int = 2) -> None:
        self.folder = folder
        self.written: list[str] = []
        self.out = RankOutput(folder, world, self.written.append, color=False)

    def write(self, rank: int, text: str) -> None:
        with (self.folder / f"rank-{rank}.log").open("a") as f:
            f.write(text)

    @property
    def stream(self) -> str:
        return "".join(self.written)


def test_lines_get_their_rank_prefix_and_partial_lines_wait(tmp_path: Path) -> None:
    ranks = Ranks(tmp_path)
    ranks.write(0, "hello\nwor")
    ranks.write(1, "from one\n")
    ranks.out.poll()
    ranks.write(0, "ld\n")
    ranks.out.poll()
    ranks.write(1, "no newline at the end")
    ranks.out.finish()
    assert render(ranks.stream) == [
        "[rank 0] hello",
        "[rank 1] from one",
        "[rank 0] world",
        "[rank 1] no newline at the end",
    ]
    assert ranks.out.lines == {0: ["hello", "world"], 1: ["from one", "no newline at the end"]}


def test_rank_0s_progress_bar_redraws_in_place_under_other_ranks_lines(tmp_path: Path) -> None:
    ranks = Ranks(tmp_path)
    ranks.write(0, "\r 10%|#         |")
    ranks.out.poll()
    assert ranks.stream == "[rank 0]  10%|#         |"
    ranks.write(0, "\r 50%|#####     |")
    ranks.write(1, "a line of rank 1\n")
    ranks.out.poll()
    ranks.write(1, "\r rank 1's own bar")  # a bar of a higher rank waits for its newline
    ranks.write(0, "\r100%|##########|\n")
    ranks.out.poll()
    ranks.out.finish()
    assert render(ranks.stream) == [
        "[rank 1] a line of rank 1",
        "[rank 0] 100%|##########|",
        "[rank 1]  rank 1's own bar",
    ]


def test_a_shorter_update_erases_the_longer_one(tmp_path: Path) -> None:
    ranks = Ranks(tmp_path)
    ranks.write(0, "\ra long status text")
    ranks.out.poll()
    ranks.write(0, "\rshort")
    ranks.out.poll()
    ranks.out.finish()
    assert render(ranks.stream) == ["[rank 0] short"]


def test_prefixes_are_padded_and_coloured() -> None:
    assert rank_prefix(3, 16, color=False) == "[rank  3] "
    coloured = rank_prefix(0, 2, color=True)
    assert coloured.startswith("\x1b[36m[rank 0]\x1b[0m")
    assert rank_prefix(1, 2, color=True) != coloured


def write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data))


def error(rank: int, ts: float, **extra: object) -> dict[str, object]:
    base = {
        "rank": rank,
        "host": "h",
        "type": "ValueError",
        "message": "boom",
        "traceback": 'Traceback (most recent call last):\n  File "<torchrun cell>", line 1\n'
        "ValueError: boom\n",
        "timestamp": ts,
        "timeout": False,
        "distributed": False,
        "missing_name": None,
    }
    return {**base, **extra}


def started(folder: Path, *ranks: int) -> None:
    for r in ranks:
        write_json(folder / f"rank-{r}.json", {"rank": r, "pid": 100 + r, "host": "h"})


def test_the_first_failure_is_the_cause(tmp_path: Path) -> None:
    started(tmp_path, 0, 1, 2)
    write_json(tmp_path / "rank-2.error.json", error(2, 5.0))
    write_json(
        tmp_path / "rank-0.error.json",
        error(0, 6.0, type="RuntimeError", message="Connection closed by peer", distributed=True),
    )
    diag = explain(tmp_path, world_size=3, timeout_s=300, cell_source="x", torchrun_log="")
    assert diag.headline == "rank 2 raised ValueError"
    assert diag.cause is not None
    assert diag.cause.rank == 2
    assert not diag.show_environment
    assert diag.notes == ["then rank 0 failed too: RuntimeError: Connection closed by peer"]


def test_a_cell_that_inits_the_process_group_again_is_told_to_leave_it_out(
    tmp_path: Path,
) -> None:
    started(tmp_path, 0, 1)
    message = "trying to initialize the default process group twice!"  # torch's own words
    for r in (0, 1):
        write_json(tmp_path / f"rank-{r}.error.json", error(r, 5.0 + r, message=message))
    diag = explain(tmp_path, world_size=2, timeout_s=30, cell_source="x", torchrun_log="")
    assert diag.headline == "rank 0 raised ValueError"
    assert "so the cell's dist.init_process_group was a second one: leave it out" in diag.notes[0]
    assert diag.notes[1:] == ["rank 1 raised the same error"]
    write_json(tmp_path / "rank-0.error.json", error(0, 5.0))
    write_json(tmp_path / "rank-1.error.json", error(1, 6.0))
    other = explain(tmp_path, world_size=2, timeout_s=30, cell_source="x", torchrun_log="")
    assert not any("init_process_group" in note for note in other.notes)


def test_a_rank_stopped_after_another_failed_says_where_it_was(tmp_path: Path) -> None:
    started(tmp_path, 0, 1, 2)
    write_json(tmp_path / "rank-1.error.json", error(1, 5.0, type="NameError"))
    (tmp_path / "rank-0.stack").write_text(
        "Current thread 0x1 (most recent call first):\n"
        '  File "<torchrun cell>", line 2 in <module>\n'
        '  File "/x/rank_main.py", line 80 in _run_cell\n'
    )
    cell = "import time\ntime.sleep(1)\nprint(learning_rate)\n"
    diag = explain(tmp_path, world_size=3, timeout_s=30, cell_source=cell, torchrun_log="")
    assert diag.headline == "rank 1 raised NameError"
    # rank 2 left no stack (it may have ended on its own): nothing is said of it
    assert diag.notes == ["rank 0 was stopped when rank 1 failed, at cell line 2 (time.sleep(1))"]


def test_a_timeout_names_who_waited_and_where_the_others_were(tmp_path: Path) -> None:
    started(tmp_path, 0, 1, 2)
    for r in (0, 2):
        write_json(
            tmp_path / f"rank-{r}.error.json",
            error(r, 5.0 + r, type="DistBackendError", message="Timed out", timeout=True),
        )
    (tmp_path / "rank-1.stack").write_text(
        "Current thread 0x1 (most recent call first):\n"
        '  File "/usr/lib/python3/time.py", line 9 in helper\n'
        '  File "<torchrun cell>", line 3 in <module>\n'
        '  File "/x/rank_main.py", line 80 in _run_cell\n'
    )
    diag = explain(
        tmp_path,
        world_size=3,
        timeout_s=30,
        cell_source="import time\nif rank == 1:\n    time.sleep(99)\n",
        torchrun_log="",
    )
    assert diag.timed_out
    assert diag.headline == (
        "a collective did not complete within --timeout 30 s: ranks 0, 2 waited, "
        "rank 1 did not arrive"
    )
    assert diag.missing_ranks == [1]
    assert (
        "rank 1 was busy elsewhere: at cell line 3 (time.sleep(99)) when it was stopped"
        in diag.notes
    )
    assert diag.show_environment


def test_an_nccl_watchdog_abort_is_a_timeout_too(tmp_path: Path) -> None:
    started(tmp_path, 0, 1)
    (tmp_path / "rank-0.log").write_text(
        "[rank0]:[E] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
        "OpType=ALLREDUCE, Timeout(ms)=5000) ran for 5001 milliseconds before timing out.\n"
    )
    diag = explain(tmp_path, world_size=2, timeout_s=5, cell_source="", torchrun_log="")
    assert diag.timed_out
    assert diag.missing_ranks == [1]
    assert any("WorkNCCL(SeqNum=3, OpType=ALLREDUCE" in n for n in diag.notes)


def test_a_crash_without_exception_reads_torchruns_exit_codes(tmp_path: Path) -> None:
    started(tmp_path, 0, 1)
    (tmp_path / "rank-1.log").write_text("about to crash\n")
    log = (
        "Root Cause (first observed failure):\n[0]:\n  time : 2026\n  host : h\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 4)\n"
    )
    diag = explain(tmp_path, world_size=2, timeout_s=5, cell_source="", torchrun_log=log)
    assert diag.headline.startswith("rank 1 was ended by SIGKILL (killed: often the out-of-memory")
    assert "about to crash" in diag.traceback


def test_nothing_started_shows_torchruns_own_words(tmp_path: Path) -> None:
    diag = explain(
        tmp_path,
        world_size=4,
        timeout_s=5,
        cell_source="",
        torchrun_log="...\nRendezvousTimeoutError: the join timed out\n",
    )
    assert diag.headline == "torchrun failed before any rank started"
    assert "RendezvousTimeoutError" in diag.traceback


def test_the_environment_report_fits_the_backend() -> None:
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Ring"}
    nccl = {name: value for name, value, _ in environment_report(env, "nccl")}
    assert nccl["NCCL_P2P_DISABLE"] == "1"
    assert nccl["NCCL_DEBUG"] == "not set"
    assert nccl["NCCL_ALGO"] == "Ring", "other NCCL variables that are set are listed too"
    assert "NCCL_SOCKET_IFNAME" in nccl
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" in nccl
    gloo = [name for name, _, _ in environment_report(env, "gloo")]
    assert "NCCL_DEBUG" not in gloo
    assert "GLOO_SOCKET_IFNAME" in gloo


def test_endpoints_parse_and_check() -> None:
    assert parse_endpoint("node0:29500") == Endpoint("node0", 29500)
    assert parse_endpoint("10.0.0.1") == Endpoint("10.0.0.1", 29400)
    assert str(parse_endpoint("[::1]:29501")) == "[::1]:29501"
    for bad in ("node0:http", ":29500", "node0:70000"):
        with pytest.raises(EndpointError):
            parse_endpoint(bad)
    with pytest.raises(EndpointError, match="is not this machine"):
        check_host_endpoint(Endpoint("192.0.2.1", 29500))  # TEST-NET-1: never ours
    check_host_endpoint(Endpoint("127.0.0.1", free_port()))  # free: no error


def test_torchrun_arguments() -> None:
    single = torchrun_args(LaunchSpec(nproc_per_node=2, backend="gloo"))
    assert single == ["--nproc-per-node=2", "--max-restarts=0", "--standalone"]
    node0 = LaunchSpec(
        nproc_per_node=4, backend="nccl", nnodes=2, endpoint=Endpoint("n0", 29500), timeout_s=60
    )
    args = torchrun_args(node0)
    assert "--rdzv-backend=c10d" in args
    assert "--rdzv-endpoint=n0:29500" in args
    assert "--rdzv-conf=join_timeout=60,read_timeout=60,is_host=true" in args
    node1 = LaunchSpec(
        nproc_per_node=4, backend="nccl", nnodes=2, node_rank=1, endpoint=Endpoint("n0", 29500)
    )
    assert any("is_host=false" in a for a in torchrun_args(node1))
    assert node1.world_size == 8


def test_sizes() -> None:
    assert parse_size("512MB") == 512 * 2**20
    assert parse_size("2 GiB") == 2 * 2**30
    assert parse_size("100k") == 100 * 2**10
    assert parse_size("4096") == 4096
    for bad in ("lots", "-1MB", "0", "5 parsecs"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)
    assert format_size(1536) == "1.5 KiB"
    assert format_size(300) == "300 B"


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, 4),
        ("", 0),
        ("0,1", 2),
        ("GPU-aaa,GPU-bbb,GPU-ccc", 3),
        ("1,-1,2", 1),
        ("0,1,2,3,4,5", 4),
    ],
)
def test_visible_gpus_follows_cuda_visible_devices(
    monkeypatch: pytest.MonkeyPatch, visible: str | None, expected: int
) -> None:
    from jupyter_gpu.magics.torchrun.magic import visible_gpus
    from jupyter_gpu.nvml import topology

    monkeypatch.setattr(topology, "gpu_count", lambda: (4, None))
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    count, _ = visible_gpus(env)
    assert count == expected
