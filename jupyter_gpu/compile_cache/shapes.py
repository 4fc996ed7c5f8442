r"""What torch writes into its compile caches: the folders it makes and how it names their files.

A cache is recognised by this description alone (``recognise.py``): every folder must be one that
torch makes, where torch makes it, and every file in it must carry a name torch gives files
there, which is a hash of their content (or key) plus the suffixes the writer uses. A folder
that only carries one of torch's names (``cache/``, two letters) but holds a file torch does
not write is not a cache. The names come from the sources of torch 2.4 to 2.14 and Triton 3.x:

- ``torch/_inductor/codecache.py``: ``get_path``/``write`` put generated code at
  ``<key[1:3]>/<key>.<ext>`` with ``key = code_hash(...)`` (``"c"`` + 51 lower-case base32
  characters of a SHA-256: ``cache_key.py``); ``write_atomic`` writes ``.<pid>.<tid>.tmp``
  first, then renames it (a process killed in between leaves it); ``get_lock_dir`` is
  ``locks/<key>.lock``; ``FxGraphCache`` is ``fxgraph/<key[1:3]>/<"f" + hash>/<hash>``;
  ``LocalCache`` is ``cache/<sha256 hex of the system>``; 2.8+ puts precompiled headers in the
  *default* directory, ``precompiled_headers/<key>.h`` and ``.h.gch`` with ``locks/``;
  ``AotCodeCompiler`` writes ``<key>/`` folders of ``<key>.wrapper.cpp``, ``.kernel.cpp``,
  ``.wrapper.so``, ``.wrapper.pt2``, ``*_metadata.json`` (and ``CMakeLists.txt``).
- ``torch/_functorch/_aot_autograd/autograd_cache.py`` (2.5+): ``aotautograd/<"a" + hash>/<hash>``.
- ``torch/_inductor/runtime/autotune_cache.py``: ``<key>.best_config`` beside a Triton kernel's
  ``.py`` (2.4 to 2.9), ``<sha256 hex>.best_config`` (2.10+); ``codegen/triton.py``'s
  benchmarked fusions write ``<key>.kernel_perf`` beside the kernel's ``.py`` (seen with
  max-autotune on an H200, torch 2.11).
- ``torch/_inductor/runtime/cache_dir_utils.py`` / ``triton_heuristics.py``: Triton's cache is
  ``triton/<device>/`` under the Inductor cache unless ``TRITON_CACHE_DIR`` is set;
  ``utils.fresh_cache`` (``force_disable_caches``) makes a ``tmpXXXXXXXX`` cache inside the
  cache, with Triton's at ``triton/`` directly; ``triton_bundler.py`` (2.6+) stages kernels in
  ``tmp.<uuid4>/`` beside them.
- ``torch/_dynamo/pgo.py`` (2.6+, only with a job id): ``dynamo/code_state_<key>.pkl`` (with
  ``.lock``, ``.tmp``); ``torch/_dynamo/package.py`` (2.9+): ``dynamo/<sha256 hex>/entry``.
- ``torch/_inductor/cache.py``, ``runtime/caching/`` (2.10+): ``cache/<name>/<32 hex>``,
  ``dir.lock``, ``locks/<4 hex>.lock``; ``memoizer_cache.json`` and ``.lock`` (2.11+).
- Triton's ``runtime/cache.py``: ``<key>/<kernel name>.<stage>`` and ``__grp__<name>.json``, the
  key a SHA-256 (hex up to 3.1, then base32 upper case); a file is written as
  ``<name>.tmp.pid_<pid>_<random>`` (up to 3.1) or inside ``tmp.pid_<pid>_<uuid4>/`` (3.2+), then
  renamed; the launcher and driver modules are ``<name>.so`` (or with Python's ``EXT_SUFFIX``).

Folders torch fills with files of other programs (``gcc/``: a conda compiler; ``halide``,
``cutlass``, ``autoheuristic``, ``aoti_eager``, debugging dumps) are not described: a cache holding
them is refused, to be cleared by hand.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_B32 = "[a-z2-7]"  # torch's keys: base32 of a SHA-256, lower case (codecache.sha256_hash)
_HASH = f"{_B32}{{51}}"
_CODE_KEY = f"c{_HASH}"  # code_hash()
_HEX64 = "[0-9a-f]{64}"
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_ATOMIC_TMP = r"\.\d+\.\d+\.tmp"  # write_atomic's name before the rename

# What codecache appends to a key: an optional role, then the file's type.
_ROLES = r"(?:\.(?:main|optimized|wrapper|kernel))?"
_CODE_EXTS = (
    "py|cpp|h|so|o|json|cubin|ptx|fatbin|hsaco|amdgcn|spv|zebin|ll|cu|hip|S|bin|txt|exe|pt2"
    "|best_config|picked_kernel|kernel_perf"
)
_CODE_FILE = (
    rf"{_CODE_KEY}{_ROLES}\.(?:{_CODE_EXTS})"
    rf"|{_CODE_KEY}\.(?:wrapper|kernel)_metadata\.json"
    rf"|{_HEX64}\.best_config"
    rf"|{_ATOMIC_TMP}"
)

# Triton: <kernel or module name>.<compiler stage>, or a module built for this Python.
_TRITON_NAME = r"(?:__grp__)?[A-Za-z_]\w*"
_TRITON_STAGES = "json|ttir|ttgir|llir|ll|ptx|cubin|amdgcn|hsaco|spv|zebin|source|so"
_TRITON_FILE = rf"{_TRITON_NAME}\.(?:{_TRITON_STAGES})|[A-Za-z_]\w*\.(?:cpython-[\w-]+|abi3)\.so"
_TRITON_KEY = f"[0-9a-f]{{32}}|{_HEX64}|[A-Z2-7]{{52}}"


@dataclass(frozen=True)
class Folder:
    """One kind of folder torch makes: the names of what it may hold.

    ``files``: a regular expression the whole name of every file must match ("" for none).
    ``folders``: ``(name pattern, kind of folder)`` pairs, the first match winning.
    ``entry``: a unit that ``trim_cache`` removes whole (a kernel, a cached graph);
    ``file_entries``: each file here is such a unit by itself.
    """

    what: str
    files: str = ""
    folders: tuple[tuple[str, str], ...] = ()
    entry: bool = False
    file_entries: bool = False


_TRITON_FOLDERS = ((_TRITON_KEY, "triton_kernel"), (rf"tmp\.{_UUID}", "triton_kernel"))

FOLDERS: dict[str, Folder] = {
    "inductor": Folder(
        "an Inductor cache",
        files=r"memoizer_cache\.(?:json|lock)",
        folders=(
            (f"{_B32}{{2}}", "code"),
            (_CODE_KEY, "aoti"),
            ("locks", "locks"),
            ("fxgraph", "fxgraph"),
            ("aotautograd", "aotautograd"),
            ("triton", "inductor_triton"),
            ("cache", "local_cache"),
            ("dynamo", "dynamo"),
            ("precompiled_headers", "headers"),
            ("tmp[a-z0-9_]{8}", "inductor"),  # fresh_cache(dir=cache_dir()): a cache inside
        ),
    ),
    "code": Folder("generated code", files=_CODE_FILE, folders=((_CODE_KEY, "aoti"),), entry=True),
    "aoti": Folder(
        "an AOTInductor build",
        files=rf"{_CODE_FILE}|CMakeLists\.txt",
        folders=((_CODE_KEY, "aoti"),),
        entry=True,
    ),
    "locks": Folder("lock files", files=rf"(?:[acf]?{_HASH}|{_HEX64}|g\+\+)\.lock"),
    "fxgraph": Folder("FX graphs", folders=((f"{_B32}{{2}}", "fxgraph_prefix"),)),
    "fxgraph_prefix": Folder("FX graphs", folders=((f"f{_HASH}", "graphs"),)),
    "aotautograd": Folder("AOTAutograd graphs", folders=((f"a{_HASH}", "graphs"),)),
    "graphs": Folder("cached graphs of one key", files=f"{_HASH}|{_ATOMIC_TMP}", entry=True),
    "inductor_triton": Folder("Triton kernels", folders=((r"\d+", "triton"), *_TRITON_FOLDERS)),
    "triton": Folder("a Triton cache", folders=_TRITON_FOLDERS),
    "triton_kernel": Folder(
        "one Triton kernel",
        files=rf"{_TRITON_FILE}|(?:{_TRITON_FILE})\.tmp\.pid_\d+_(?:\d+|{_UUID})",
        folders=((rf"tmp\.pid_\d+_{_UUID}", "triton_staging"),),
        entry=True,
    ),
    "triton_staging": Folder("a Triton file being written", files=_TRITON_FILE),
    "local_cache": Folder(
        "autotuning results",
        files=f"{_HEX64}|{_ATOMIC_TMP}",
        folders=(("[a-z][a-z0-9_]*", "memo"),),
        file_entries=True,
    ),
    "memo": Folder(
        "memoized results",
        files=rf"[0-9a-f]{{32}}|dir\.lock|{_ATOMIC_TMP}",
        folders=(("locks", "memo_locks"),),
        entry=True,
    ),
    "memo_locks": Folder("lock files", files=r"[0-9a-f]{4}\.lock"),
    "dynamo": Folder(
        "dynamo's profiles and packages",
        files=r"code_state_.+\.pkl(?:\.lock|\.tmp)?",
        folders=((_HEX64, "package"),),
        file_entries=True,
    ),
    "package": Folder("a precompiled package", files=f"entry|{_ATOMIC_TMP}", entry=True),
    "headers": Folder(
        "precompiled headers",
        files=rf"{_CODE_KEY}\.h(?:\.gch)?|{_ATOMIC_TMP}",
        folders=(("locks", "locks"),),
        file_entries=True,
    ),
}
"""Every kind of folder, by name; ``"inductor"`` and ``"triton"`` are the roots."""


# Compiled at first use, not at import: every pattern compiled at once took 21 ms of
# ``%load_ext jupyter_gpu`` (``python -X importtime``, 2-vCPU VM, 2026-12-05), which reaches this
# module through the readings' records.
@functools.cache
def _files(folder: str) -> re.Pattern[str] | None:
    kind = FOLDERS.get(folder)
    return re.compile(kind.files) if kind is not None and kind.files else None


@functools.cache
def _subfolders(folder: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern), kind) for pattern, kind in FOLDERS[folder].folders)


def file_allowed(folder: str, name: str) -> bool:
    """Whether torch writes a file called ``name`` in a folder of kind ``folder``."""
    pattern = _files(folder)
    return pattern is not None and pattern.fullmatch(name) is not None


def subfolder(folder: str, name: str) -> str | None:
    """The kind of folder torch makes as ``name`` inside a ``folder``, or ``None``."""
    for pattern, kind in _subfolders(folder):
        if pattern.fullmatch(name):
            return kind
    return None
