"""Notebooks 02's and 03's exercise answers, right and wrong, that the CPU and GPU tests both run.

02 5.1 (an fp16 step with a GradScaler and clipping): the solution and the steps its check must
reject. 03 4.1 (a whole batch under a memory cap, with torch.utils.checkpoint): the solution and
the steps that fit without checkpointing written by the student.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from jupyter_gpu.tutorials.gpt import GPT, logits_or_loss


def fp16_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The forward all of 5.1's answers share (they differ in the scaler's part): fp16 autocast,
    a cross-entropy loss."""
    with torch.autocast(x.device.type, dtype=torch.float16):
        return F.cross_entropy(net(x), y)


def solution_step(net, opt, scaler, x, y, max_norm):  # type: ignore[no-untyped-def]
    loss = fp16_loss(net, x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)


def no_scaler(net, opt, scaler, x, y, max_norm):  # type: ignore[no-untyped-def]
    loss = fp16_loss(net, x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)


def never_updates(net, opt, scaler, x, y, max_norm):  # type: ignore[no-untyped-def]
    loss = fp16_loss(net, x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    opt.zero_grad(set_to_none=True)


def clips_scaled(net, opt, scaler, x, y, max_norm):  # type: ignore[no-untyped-def]
    loss = fp16_loss(net, x, y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)  # before unscale_: wrong numbers
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)


def steps_around_the_scaler(net, opt, scaler, x, y, max_norm):  # type: ignore[no-untyped-def]
    loss = fp16_loss(net, x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    opt.step()  # not scaler.step: an overflowing step is not skipped
    scaler.update()
    opt.zero_grad(set_to_none=True)


# ---- 03 4.1 ----


def batch_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return model(x, y)  # type: ignore[no-any-return]


def checkpointed_loss(model: GPT, x: torch.Tensor, y: torch.Tensor, wrap: int) -> torch.Tensor:
    """The GPT's forward with its first ``wrap`` blocks in torch.utils.checkpoint."""
    h = model.drop(model.wte(x))
    for i, block in enumerate(model.blocks):
        h = (
            checkpoint(block, h, model.rope, use_reentrant=False)
            if i < wrap
            else block(h, model.rope)
        )
    return logits_or_loss(model.lm_head(model.ln_f(h)), y)


def my_step_solution(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The notebook's solution: every block's call wrapped in checkpoint."""
    loss = checkpointed_loss(model, x, y, wrap=len(model.blocks))  # type: ignore[arg-type]
    loss.backward()
    return loss


def micro_batches(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Four micro-batches, each loss divided by four: it fits, but checkpoints nothing."""
    micro = 4
    total = torch.zeros((), device=x.device)  # on the CPU, += a CUDA loss fails
    for xs, ys in zip(x.chunk(micro), y.chunk(micro), strict=True):
        loss = batch_loss(model, xs, ys) / micro
        loss.backward()
        total += loss.detach()
    return total


def flag_only(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The model's own switch: torch.utils.checkpoint never written by the student."""
    model.checkpointing = True
    loss = batch_loss(model, x, y)
    loss.backward()
    return loss


def first_block_only(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = checkpointed_loss(model, x, y, wrap=1)  # type: ignore[arg-type]
    loss.backward()
    return loss
