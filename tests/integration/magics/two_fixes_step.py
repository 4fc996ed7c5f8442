# A training step that two of %tune's fixes help, run as a notebook cell by
# tests/integration/magics/test_tune.py (the stacked-fixes test) and ui-tests/tests/tune.spec.ts
# (the report in JupyterLab, and docs/screenshot-tune.png).
#
# The fixes: reading a batch (a DataLoader without workers, its dataset waiting on "files"), and
# AdamW over a large embedding table (dense gradients: every step updates all of it; on a CPU
# AdamW's default is its for-loop, about ten elementwise passes over each parameter; fused, it
# makes one). The stand-ins are sized from this machine's own update, measured just before (the
# fastest of five: a median taken in a busy spell once made the read as long as the update once
# the load eased):
# - the stand-in GPU's wait is as long as the update's CPU work (C), so the step as it is takes
#   read + 2C, and fused about C + C/5;
# - a batch's read waits two thirds of the fused update (timed on a copy of the model), so that
#   the new loader's worker still feeds the fused step with a third of it to spare (its hand-over
#   to the step costs 1-3 ms on a 2-core VM). Ideally the loader gives (read + 2C) / 2C, about
#   1.4x, and fusing, timed on top of it, about 1.7x.
# Before, the read was half the update with a floor of 5 ms and the GPU's wait a fixed 5 ms: on a
# fast CPU the fused step was barely longer than the worker's read, the worker set the step's pace
# and fusing measured nothing (clean-clone CIs of 2026-12-07: 0.989-1.04x and 0.970-1.06x, no busy
# note; the loader 1.59x). Sized this way, on the 2-core VM alone: loader 1.27-1.31x, fused
# 1.38-1.47x; beside two busy loops 1.23-1.32x and 1.45-1.54x.
# An epoch is 16 batches: on top of a kept loader whose epoch is short, %tune times blocks of
# whole epochs, so a longer epoch makes the fused optimizer's rounds longer.
import copy
import time

import torch

torch.set_num_threads(1)


class Files(torch.utils.data.Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(16 * 64, 64), torch.randn(16 * 64, 4)
        self.read_s = 0.0  # set below

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices):  # the DataLoader reads a batch's items in one call
        time.sleep(self.read_s)  # reading a batch's files: the CPU waits
        return [(self.x[i], self.y[i]) for i in indices]


class Tagged(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tags = torch.nn.Embedding(100_000, 16)
        self.head = torch.nn.Linear(64 + 16, 4)

    def forward(self, t):
        ids = (t[:, 0] * 1000).long().abs() % 100_000
        return self.head(torch.cat([t, self.tags(ids)], dim=1))


model = Tagged()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(Files(), batch_size=64)
device_s = 0.0  # the stand-in GPU's part of a step: set below


def update(x, y, net, optim):
    optim.zero_grad()
    loss = torch.nn.functional.mse_loss(net(x), y)
    loss.backward()
    optim.step()
    time.sleep(device_s)  # the GPU's kernels, waited for: the one fake (no GPU here)
    return loss


def train_step():
    x, y = next(batches)
    return update(x, y, model, opt)


def fastest_update_s(net, optim):
    x0, y0 = loader.dataset.x[:64], loader.dataset.y[:64]
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        update(x0, y0, net, optim)
        times.append(time.perf_counter() - t0)
    return min(times)


batches = iter(loader)
train_step()
device_s = fastest_update_s(model, opt)  # the GPU's part as long as the update's CPU part
twin = copy.deepcopy(model)  # the fused update, timed on a copy: model and opt stay as they are
fused_s = fastest_update_s(twin, torch.optim.AdamW(twin.parameters(), lr=1e-3, fused=True))
loader.dataset.read_s = fused_s * 2 / 3
del twin
batches = iter(loader)
