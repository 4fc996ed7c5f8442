"""``%tune`` on its three GPU targets, in a real IPython shell, with a short table for each.

    python benchmarks/tune_targets.py                         # all three, on the GPU
    python benchmarks/tune_targets.py --targets resnet --budget 8m
    python benchmarks/tune_targets.py --device cpu --smoke    # a dry run of the three on a CPU

1. ``capstone``: notebook 07's starting step at full size (the student's shape from
   ``capstone_sizes("gpu", tier)``, fp32, attention by hand, the default Adam, ``.item()`` every
   step, ``DataLoader(dataset, batch_size=batch)`` without workers, the batch halved from 32 until
   a step fits). Prints each fix %tune tried (its speedup over the start, with the interval) beside
   the notebook's matching row, each row timed against the row before it: from
   ``--notebook-json`` (a ``07-capstone.json`` that notebook 07 writes with
   ``JUPYTER_GPU_RESULTS_DIR``; rows by key) or else the 07-capstone table of
   ``benchmarks/RESULTS.md`` (rows by label). Each %tune fix is timed on top of the fixes it kept
   before it (printed beside its figure), so the rows compare as follows:

   - TF32: row 1 over the start, the same change on the same step where %tune kept nothing
     before it (else on top of its new loader: another step);
   - bf16 (fp16) autocast: row 2 (autocast over TF32) where %tune kept TF32 before it, else rows
     1 and 2 together over the start (the product of their gains: autocast over strict fp32,
     and TF32 changes nothing a 16-bit matmul does);
   - the fused optimizer: row 5 over row 4 comes after bf16, SDPA and compile, where the
     optimizer is a larger share of a shorter step, so the ratios differ; the time it saves a
     step (rows 0 to 6 share the shape and the batch; %tune's from the step with the fixes kept
     before it) should not: both are printed in ms;
   - torch.compile (row 4, each block compiled after bf16 and SDPA) and the input pipeline
     (row 11, at the final shape and batch) are printed, not matched: other steps.

   Target: TF32 and autocast within each other's intervals, the fused optimizer's saved ms
   alike; the suggestions name the hand-written attention and the ``.item()`` sync line.
2. ``gpt2``: a GPT-2-small-sized step (``gpt2`` style, d_model 768, 12 layers, 12 heads,
   1024 tokens, batch 16; AdamW; random windows of the corpus already on the GPU). Prints the
   total wall time. Target: under 5 minutes, compile included.
3. ``resnet``: torchvision's ResNet-50 in fp32 (SGD with momentum), fed by a DataLoader without
   workers whose dataset decodes JPEG bytes on the CPU (``torchvision.io.decode_jpeg``; the
   images are synthesised and encoded at start: no download), random crop and flip, batch 64.
   Target: a stack of at least 3x, and the input pipeline ranked first.

For each target: each fix with its speedup, what it was timed on top of (the fixes kept before
it) and its notes (the loader alone as it is and with its workers, the step on one fixed batch,
the compile time); then the kept fixes together beside the product of their gains, a step's
time as it is, with the kept fixes, and with them on one fixed batch, and, where the new loader
alone made batches more slowly than that, the line saying that it now limits the step.

Each target's whole report goes to ``$JUPYTER_GPU_OUT/tune_<target>.txt`` (else ``$OUT``), and
its figures to ``tune_<target>.json`` beside it. One target fits a 10-minute call (set up, then
``%tune`` within its budget, default 5m; a compile already running finishes): run them one call
each (``--targets capstone``, ``--targets gpt2``, ``--targets resnet``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

from benchmarks.outputs import out_dir  # noqa: E402 (after the path set-up)

CAPSTONE_CELL = """
import torch
from jupyter_gpu.tutorials.capstone import train_script
from jupyter_gpu.tutorials.capstone.data import NoisyWindows, endless, student_loader
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import capstone_sizes

sizes = capstone_sizes({mode!r}, {tier!r})
shape = sizes.student
text = train_script.corpus_text({corpus})
dataset = NoisyWindows(text, shape.seq_len, length=10**7)
torch.manual_seed(0)
with torch.device(device):
    model = CapstoneGPT(shape)  # attention written out by hand
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
batch = sizes.requested_batch
while True:  # the student halves the batch until a step fits, as the notebook does
    x, y = next(iter(student_loader(dataset, batch)))
    try:
        model(x.to(device), y.to(device)).backward()
        break
    except torch.OutOfMemoryError:
        batch //= 2
    finally:
        optimizer.zero_grad(set_to_none=True)
losses = []
batches = endless(student_loader(dataset, batch))

def train_step():
    x, y = next(batches)
    x, y = x.to(device), y.to(device)
    loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())  # the progress line: a sync every step
    return loss

train_step()
"""

GPT2_CELL = """
import torch
from jupyter_gpu.tutorials.corpus import load_corpus, random_batch
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig

config = GPTConfig(256, {context}, {layers}, {heads}, {width}, style="gpt2")
batch = {batch}
tokens = load_corpus({corpus}).train.to(device)
torch.manual_seed(0)
model = GPT(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

def train_step():
    x, y = random_batch(tokens, batch, config.context)
    loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss

train_step()
"""

RESNET_CELL = """
import torch
import torchvision
from torchvision.io import decode_jpeg, encode_jpeg

class Jpegs(torch.utils.data.Dataset):
    # JPEG files held as bytes, decoded and augmented on the CPU per item, as ImageNet loaders do.
    def __init__(self, count, size):
        generator = torch.Generator().manual_seed(0)
        self.files = []
        for _ in range(count):
            base = torch.randint(0, 256, (3, size // 8, size // 8), generator=generator)
            image = torch.nn.functional.interpolate(
                base[None].float(), size=(size, size), mode="bilinear"
            )[0].to(torch.uint8)  # smooth enough to compress as photos do
            self.files.append(encode_jpeg(image, quality=90))
        self.labels = torch.randint(0, 1000, (count,), generator=generator)
        self.crop = {crop}

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = decode_jpeg(self.files[i]).float().div_(255)
        top, left = torch.randint(0, image.shape[1] - self.crop + 1, (2,)).tolist()
        image = image[:, top : top + self.crop, left : left + self.crop]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
        std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
        return (image - mean) / std, self.labels[i]

images = Jpegs({count}, {size})
batch = {batch}
loader = torch.utils.data.DataLoader(images, batch_size=batch, shuffle=True, drop_last=True)
batches = iter(loader)
torch.manual_seed(0)
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

def train_step():
    x, y = next(batches)
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss

train_step()
"""

FULL = {
    "gpt2": {"context": 1024, "layers": 12, "heads": 12, "width": 768, "batch": 16},
    "resnet": {"count": 2048, "size": 256, "crop": 224, "batch": 64},
}
SMOKE = {
    "gpt2": {"context": 64, "layers": 2, "heads": 2, "width": 64, "batch": 4},
    "resnet": {"count": 64, "size": 72, "crop": 64, "batch": 8},
}


def shell_with_extension() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_gpu")
    return ip


def run(ip: Any, source: str) -> str:
    """Run a cell; its printed and displayed text. Raises the cell's error."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = ip.run_cell(source)
    text = "\n".join(
        [captured.stdout, captured.stderr]
        + [o.data.get("text/plain", "") for o in captured.outputs]
    )
    error = result.error_before_exec or result.error_in_exec
    if error is not None:
        raise RuntimeError(f"{source.splitlines()[0][:80]!r} failed: {error!r}\n{text[-3000:]}")
    return text


def free(ip: Any) -> None:
    import torch

    run(ip, "%reset -f")
    gc.collect()
    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def fix_rows(result: Any) -> list[str]:
    """Each fix: its speedup, what it was timed on top of, its verdict, then its notes.

    The notes: the loader alone (as it is, with its workers), the step on one fixed batch, the
    compile time.
    """
    rows = []
    for fix in result.fixes:
        on = f"on top of {fix.baseline()}"
        if fix.speedup is None:
            rows.append(f"  {fix.name:<42} failed: {fix.error[:60]} ({on})")
        else:
            low, high = fix.interval
            rows.append(
                f"  {fix.name:<42} {fix.speedup:6.2f}x  ({low:.2f}-{high:.2f})  {on}; "
                f"{'kept' if fix.stacked else fix.verdict}"
            )
        rows += [f"      {note}" for note in fix.notes]
    return rows


def stack_rows(result: Any) -> list[str]:
    """The kept fixes together, beside the product of their gains.

    Then the step with them and with them on one fixed batch, and the line saying that the new
    loader limits the step where the run measured so.
    """
    stack = result.stack
    if stack is None:
        return ["  no fix kept"]
    if stack.ratio is None:
        return [f"  together ({' + '.join(stack.names)}) failed: {stack.error[:200]}"]
    rows = [
        f"  together ({' + '.join(stack.names)}): {stack.ratio.value:.2f}x "
        f"({stack.ratio.low:.2f}-{stack.ratio.high:.2f}) against the step as it is, product of "
        f"the parts' gains (each on top of the ones kept before it) {stack.product:.2f}x"
    ]
    # Both from the same rounds (the stack's; one fix kept: its own).
    if stack.step_s is not None:
        rows.append(f"  a step with the kept fixes: {stack.step_s * 1e3:.1f} ms")
    if stack.fixed_batch_step_s is not None:
        rows.append(
            "  a step with the kept fixes on one fixed batch (no loading): "
            f"{stack.fixed_batch_step_s * 1e3:.1f} ms"
        )
    rows += [f"  {note}" for note in stack.notes]
    return rows


@dataclass(frozen=True)
class NotebookRow:
    """One row of notebook 07's climb: its gain over the row before (its interval where the run
    recorded one) and its tokens/s."""

    label: str
    gain: float | None
    low: float | None
    high: float | None
    tokens_per_s: float | None


#: The climb's row keys (notebook 07's ``record(key, label, ...)``) and their labels' start
#: (RESULTS.md's rows carry labels only).
ROW_LABELS = {
    "start": r"0 · the start",
    "tf32": r"1 · TF32",
    "autocast": r"2 · (?:bf16|fp16) autocast",
    "sdpa": r"3 · scaled_dot_product_attention",
    "compile": r"4 · torch\.compile",
    "fused": r"5 · fused AdamW",
    "pipeline": r"11 · \d+ workers",
}
_INTERVAL = re.compile(r"\(([\d.]+)-([\d.]+)x;")
_TABLE_ROW = re.compile(r"^\| (.+?) \| ([\d,.]+)[^|]*\| (.*) \|$", re.M)


def _figures(path: Path | None) -> dict[str, tuple[str, float, str]]:
    """Key (JSON) or label (RESULTS.md) -> (label, value, detail)."""
    figures: dict[str, tuple[str, float, str]] = {}
    if path is not None:
        for figure in json.loads(path.read_text()).get("figures", []):
            figures[figure["key"]] = (figure["label"], float(figure["value"]), figure["detail"])
        return figures
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    section = text.split("### 07-capstone", 1)[-1].split("\n### ", 1)[0]
    for label, value, detail in _TABLE_ROW.findall(section):
        figures[label] = (label, float(value.replace(",", "")), detail)
    return figures


def notebook_rows(path: Path | None) -> dict[str, NotebookRow]:
    """Notebook 07's climb rows by key, from a 07-capstone.json or RESULTS.md's 07 table."""
    figures = _figures(path)

    def find(key: str, suffix: str, label_end: str) -> tuple[str, float, str] | None:
        if f"{key}_{suffix}" in figures:
            return figures[f"{key}_{suffix}"]
        wanted = re.compile(rf"{ROW_LABELS[key]}.*: {label_end}$")
        return next((f for name, f in figures.items() if wanted.match(name)), None)

    rows: dict[str, NotebookRow] = {}
    for key in ROW_LABELS:
        gain = find(key, "gain", "over the row before")
        tflops = find(key, "tflops", "model TFLOP/s")
        tokens = find(key, "tok_s", "tokens/s")
        if gain is None and tokens is None:
            continue
        found = _INTERVAL.search(tflops[2]) if tflops else None
        rows[key] = NotebookRow(
            (tokens or gain or ("",))[0].split(":")[0],
            gain[1] if gain else None,
            float(found.group(1)) if found else None,
            float(found.group(2)) if found else None,
            tokens[1] if tokens else None,
        )
    return rows


def _row(rows: dict[str, NotebookRow], key: str) -> str:
    r = rows.get(key)
    if r is None or r.gain is None:
        return f"no row {key!r}"
    span = f" [{r.low:.2f}-{r.high:.2f}]" if r.low is not None and r.high is not None else ""
    return f"{r.label}: {r.gain:.2f}x{span}"


def _ms_saved(tokens_per_step: int, rows: dict[str, NotebookRow]) -> float | None:
    """Milliseconds a step the fused row saved over the row before (the same tokens a step)."""
    before, after = rows.get("compile"), rows.get("fused")
    if before is None or after is None or not before.tokens_per_s or not after.tokens_per_s:
        return None
    return (tokens_per_step / before.tokens_per_s - tokens_per_step / after.tokens_per_s) * 1e3


def beside_notebook(result: Any, rows: dict[str, NotebookRow], tokens_per_step: int) -> list[str]:
    """Each fix %tune tried beside the notebook's matching row (the module doc says which)."""
    out = ["  %tune's fix [interval] (on top of what) | the notebook's row(s) [interval]"]
    if not rows:
        return [*out, "  no notebook rows found: pass --notebook-json (a 07-capstone.json)"]
    base_s = result.profile.step_s if result.profile is not None else None
    by_name = {f.name: f for f in result.fixes}
    for fix in result.fixes:
        if fix.speedup is None or fix.interval is None:
            continue
        low, high = fix.interval
        ours = f"{fix.speedup:.2f}x [{low:.2f}-{high:.2f}] (on top of {fix.baseline()})"
        if fix.name.startswith("TF32"):
            same = "the same change on the same step" if not fix.on_top_of else "another step"
            theirs = _row(rows, "tf32") + f" ({same})"
        elif fix.name.endswith("autocast"):
            tf32, amp = rows.get("tf32"), rows.get("autocast")
            if any(name.startswith("TF32") for name in fix.on_top_of):
                theirs = _row(rows, "autocast") + " (row 2: autocast over TF32, as %tune's)"
            elif tf32 and amp and tf32.gain and amp.gain:
                theirs = (
                    f"rows 1 and 2 together: {tf32.gain * amp.gain:.2f}x "
                    f"({_row(rows, 'tf32')}; {_row(rows, 'autocast')}), autocast over strict fp32"
                )
            else:
                theirs = _row(rows, "autocast")
        elif fix.name.endswith("optimizer"):
            saved = _ms_saved(tokens_per_step, rows)
            # Its gain is over the fixes kept before it: the step it saves time on is theirs.
            below = math.prod(by_name[n].speedup or 1.0 for n in fix.on_top_of if n in by_name)
            mine = base_s / below * 1e3 * (1 - 1 / fix.speedup) if base_s else None
            theirs = (
                f"{_row(rows, 'fused')} (after bf16, SDPA, compile); time saved a step: %tune "
                + (f"{mine:.1f} ms" if mine is not None else "n/a")
                + ", the notebook "
                + (f"{saved:.1f} ms" if saved is not None else "n/a")
            )
        elif fix.family == "compile":
            theirs = _row(rows, "compile") + " (after bf16 and SDPA, each block: another step)"
        elif fix.family == "loader":
            theirs = _row(rows, "pipeline") + " (at the final shape and batch: another step)"
        else:
            continue
        out.append(f"  {fix.name}: {ours} | {theirs}")
    return out


def tune(ip: Any, line: str, name: str, folder: Path | None) -> tuple[Any, float, str]:
    started = time.perf_counter()
    text = run(ip, f"_tuned = %tune {line} -o")
    wall = time.perf_counter() - started
    if folder is not None:
        (folder / f"tune_{name}.txt").write_text(text)
    return ip.user_ns["_tuned"], wall, text


def summary(result: Any, wall: float) -> dict[str, Any]:
    return {
        "wall_s": wall,
        "stack": result.speedup,
        "stack_interval": (
            [result.stack.ratio.low, result.stack.ratio.high]
            if result.stack is not None and result.stack.ratio is not None
            else None
        ),
        "product": result.stack.product if result.stack is not None else None,
        "stack_step_s": result.stack.step_s if result.stack is not None else None,
        "stack_fixed_batch_step_s": (
            result.stack.fixed_batch_step_s if result.stack is not None else None
        ),
        "stack_notes": list(result.stack.notes) if result.stack is not None else [],
        "fixes": [
            {
                "name": f.name,
                "speedup": f.speedup,
                "interval": list(f.interval) if f.interval else None,
                "on_top_of": list(f.on_top_of),
                "kept": f.stacked,
                "kept_in_its_trial": f.kept,
                "verdict": f.verdict,
                "notes": list(f.notes),
            }
            for f in result.fixes
        ],
        "not_tried": [(n.name, n.why) for n in result.not_tried],
        "suggestions": [(s.name, s.where) for s in result.suggestions],
        "restored": result.restored.line if result.restored is not None else "",
        "elapsed_s": result.elapsed_s,
        "stages": [[label, seconds] for label, seconds in result.stages],
        "estimates": dict(result.estimates),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="capstone,gpt2,resnet")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--smoke", action="store_true", help="small sizes (a CPU dry run)")
    parser.add_argument("--budget", default="5m", help="%%tune's --budget for each target")
    parser.add_argument("--notebook-json", type=Path, help="a 07-capstone.json (else RESULTS.md)")
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: use --device cpu --smoke for a dry run")
        return 2
    folder = out_dir()
    ip = shell_with_extension()
    sizes = SMOKE if args.smoke else FULL
    figures: dict[str, Any] = {}
    failed = False
    for target in [t.strip() for t in args.targets.split(",") if t.strip()]:
        print(f"== {target}", flush=True)
        run(ip, f"device = {args.device!r}")
        try:
            if target == "capstone":
                tier = None
                if args.device == "cuda" and not args.smoke:
                    from jupyter_gpu.tutorials.tiers import tier_for_memory

                    total = torch.cuda.get_device_properties(0).total_memory
                    tier = tier_for_memory(int(total)).name
                mode = "smoke" if args.smoke else ("gpu" if args.device == "cuda" else "cpu")
                corpus = 1_000_000 if args.smoke else 16_000_000
                run(ip, CAPSTONE_CELL.format(mode=mode, tier=tier, corpus=corpus))
                line = (
                    '"train_step()" --model model --optimizer optimizer --batches batches '
                    f"--batch batch --budget {args.budget}"
                )
            elif target == "gpt2":
                corpus = 1_000_000 if args.smoke else 8_000_000
                run(ip, GPT2_CELL.format(corpus=corpus, **sizes["gpt2"]))
                line = (
                    '"train_step()" --model model --optimizer optimizer --batch batch '
                    f"--budget {args.budget}"
                )
            elif target == "resnet":
                run(ip, RESNET_CELL.format(**sizes["resnet"]))
                line = (
                    '"train_step()" --model model --optimizer optimizer --batches batches '
                    f"--loader loader --batch batch --budget {args.budget}"
                )
            else:
                print(f"unknown target {target!r}")
                return 2
            result, wall, _text = tune(ip, line, target, folder)
        except Exception as err:  # one target failing is reported, the rest run
            print(f"  failed: {err}"[:2000])
            failed = True
            free(ip)
            continue
        figures[target] = summary(result, wall)
        print(f"  %tune took {wall:.0f} s (budget {args.budget})")
        for label, seconds in result.stages:
            expected = result.estimates.get(label)
            told = f" (estimated {expected:.1f} s)" if expected is not None else ""
            print(f"    {seconds:6.1f} s  {label}{told}")
        print(*fix_rows(result), sep="\n")
        print(*stack_rows(result), sep="\n")
        for s in result.suggestions:
            print(f"  suggested: {s.name} [{s.where}]")
        if target == "capstone":
            tokens = int(ip.user_ns["batch"]) * int(ip.user_ns["shape"].seq_len)
            rows = notebook_rows(args.notebook_json)
            print(*beside_notebook(result, rows, tokens), sep="\n")
            named = {s.name: s.where for s in result.suggestions}
            attention = "softmax" in named.get("scaled_dot_product_attention", "")
            syncs = "line" in named.get("no host syncs", "")
            print(
                f"  target: suggestions name the hand-written attention "
                f"({'yes' if attention else 'NO'}) and the sync line ({'yes' if syncs else 'NO'})"
            )
        if target == "gpt2":
            print(f"  target: under 300 s -> {'met' if wall < 300 else 'NOT met'}")
        if target == "resnet":
            first = result.fixes[0].name if result.fixes else "none"
            speed = result.speedup or 0.0
            met = first == "input pipeline" and speed >= 3.0
            print(
                f"  target: stack >= 3x and the input pipeline first -> "
                f"{'met' if met else 'NOT met'} ({speed:.2f}x; first: {first})"
            )
        if folder is not None:
            (folder / f"tune_{target}.json").write_text(
                json.dumps(figures[target], indent=1) + "\n"
            )
        free(ip)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
