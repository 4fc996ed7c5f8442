"""``%tune`` on its three GPU targets, in a real IPython shell, with a short table for each.

    python benchmarks/tune_targets.py                         # all three, on the GPU
    python benchmarks/tune_targets.py --targets resnet --budget 8m
    python benchmarks/tune_targets.py --device cpu --smoke    # a dry run of the three on a CPU

1. ``capstone``: notebook 07's starting step at full size (the student's shape from
   ``capstone_sizes("gpu", tier)``, fp32, attention by hand, the default Adam, ``.item()`` every
   step, ``DataLoader(dataset, batch_size=batch)`` without workers, the batch halved from 32 until
   a step fits). Prints each fix %tune tried (its speedup over the start, with the interval) beside
   the notebook's matching row: that row's gain over the row before it, from the 07-capstone
   table of ``benchmarks/RESULTS.md`` (or ``--notebook-json``, a ``07-capstone.json`` written
   with ``JUPYTER_GPU_RESULTS_DIR``). The rows match where the climb before them changed
   nothing the fix meets: the loader (row 1 over the start), TF32 (2a over 1, the loader having
   bought 1.01x), the fused optimizer (4 over 3; the start's optimizer share is as small). The
   notebook compiles after SDPA and bf16: its row is printed, not matched.
   Target: the loader, TF32 (or bf16) and fused figures within their intervals of the rows;
   the suggestions name the hand-written attention and the ``.item()`` sync line.
2. ``gpt2``: a GPT-2-small-sized step (``gpt2`` style, d_model 768, 12 layers, 12 heads,
   1024 tokens, batch 16; AdamW; random windows of the corpus already on the GPU). Prints the
   total wall time. Target: under 5 minutes, compile included.
3. ``resnet``: torchvision's ResNet-50 in fp32 (SGD with momentum), fed by a DataLoader without
   workers whose dataset decodes JPEG bytes on the CPU (``torchvision.io.decode_jpeg``; the
   images are synthesised and encoded at start: no download), random crop and flip, batch 64.
   Target: a stack of at least 3x, and the input pipeline ranked first.

Each target's whole report goes to ``$JUPYTER_GPU_OUT/tune_<target>.txt`` (else ``$OUT``), and
the figures to ``tune_targets.json`` beside it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

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
tokens = load_corpus({corpus}).train.to(device)
torch.manual_seed(0)
model = GPT(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

def train_step():
    x, y = random_batch(tokens, {batch}, config.context)
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
loader = torch.utils.data.DataLoader(images, batch_size={batch}, shuffle=True, drop_last=True)
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


def out_dir() -> Path | None:
    folder = os.environ.get("JUPYTER_GPU_OUT") or os.environ.get("OUT")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    rows = []
    for fix in result.fixes:
        if fix.speedup is None:
            rows.append(f"  {fix.name:<42} failed: {fix.error[:60]}")
            continue
        low, high = fix.interval
        rows.append(
            f"  {fix.name:<42} {fix.speedup:6.2f}x  ({low:.2f}-{high:.2f})  "
            f"{'kept' if fix.kept else fix.verdict}"
        )
    return rows


def notebook_rows(path: Path | None) -> dict[str, float]:
    """tokens/s by the climb's row label, from a 07-capstone.json or RESULTS.md's 07 table."""
    rows: dict[str, float] = {}
    if path is not None:
        data = json.loads(path.read_text())
        for figure in data.get("figures", []):
            if figure.get("unit") == "tokens/s":
                rows[figure["label"].removesuffix(": tokens/s")] = float(figure["value"])
        return rows
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    section = text.split("### 07-capstone", 1)[-1].split("\n### ", 1)[0]
    for label, value in re.findall(r"^\| (.+?): tokens/s \| ([\d,]+) tokens/s", section, re.M):
        rows[label] = float(value.replace(",", ""))
    return rows


# The fix %tune names, and the notebook row that makes the same change on the same kind of
# step: (row, the row before it).
MATCHING = {
    "input pipeline": ("1 · ", "0 · "),
    "TF32 matmuls and convolutions": ("2a · ", "1 · "),
    "bf16 autocast": ("2b · ", "2a · "),
    "fused optimizer": ("4 · ", "3 · "),
    "torch.compile": ("5a · ", "4 · "),
}


def beside_notebook(result: Any, rows: dict[str, float]) -> list[str]:
    def find(prefix: str) -> tuple[str, float] | None:
        return next(((k, v) for k, v in rows.items() if k.startswith(prefix)), None)

    out = [
        "  fix: %tune's speedup over the start [interval] | the notebook's row over the one before"
    ]
    for fix in result.fixes:
        match = MATCHING.get(fix.name)
        if match is None or fix.speedup is None:
            continue
        row, before = find(match[0]), find(match[1])
        theirs = f"{row[0]}: {row[1] / before[1]:.2f}x" if row and before else "no row"
        low, high = fix.interval
        note = " (after SDPA and bf16 there: not the same step)" if fix.family == "compile" else ""
        out.append(f"  {fix.name}: {fix.speedup:.2f}x [{low:.2f}-{high:.2f}] | {theirs}{note}")
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
        "fixes": [
            {
                "name": f.name,
                "speedup": f.speedup,
                "interval": list(f.interval) if f.interval else None,
                "kept": f.kept,
                "verdict": f.verdict,
                "notes": list(f.notes),
            }
            for f in result.fixes
        ],
        "not_tried": [(n.name, n.why) for n in result.not_tried],
        "suggestions": [(s.name, s.where) for s in result.suggestions],
        "restored": result.restored.line if result.restored is not None else "",
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
                    f"--budget {args.budget}"
                )
            elif target == "gpt2":
                corpus = 1_000_000 if args.smoke else 8_000_000
                run(ip, GPT2_CELL.format(corpus=corpus, **sizes["gpt2"]))
                line = f'"train_step()" --model model --optimizer optimizer --budget {args.budget}'
            elif target == "resnet":
                run(ip, RESNET_CELL.format(**sizes["resnet"]))
                line = (
                    '"train_step()" --model model --optimizer optimizer --batches batches '
                    f"--loader loader --budget {args.budget}"
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
        print(*fix_rows(result), sep="\n")
        stack = result.stack
        if stack is not None and stack.ratio is not None:
            print(
                f"  together ({' + '.join(stack.names)}): {stack.ratio.value:.2f}x "
                f"({stack.ratio.low:.2f}-{stack.ratio.high:.2f}), product of the parts "
                f"{stack.product:.2f}x"
            )
        for s in result.suggestions:
            print(f"  suggested: {s.name} [{s.where}]")
        if target == "capstone":
            print(*beside_notebook(result, notebook_rows(args.notebook_json)), sep="\n")
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
            (folder / "tune_targets.json").write_text(json.dumps(figures, indent=1) + "\n")
        free(ip)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
