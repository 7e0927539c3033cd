"""Cutting a forward into DSL pieces around kept PyTorch ops, and re-stitching it: each piece's
program is run by a float64 DSL evaluator (dsl_eval.py) inside the module's own graph, and the
whole is checked against the module in float64. CPU only: the pieces' CUDA is compiled and timed
by ksol on a GPU. Run: PYTHONPATH=python:tests/torch python3 -m unittest test_stitch"""
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

import dsl_eval
from ksol_torch import stitch, synth
from ksol_torch.trace import _canonical as _canon


def dsl_runner(piece, tensors):
    """Runs a piece's program in float64 on its ABI tensors (inputs, then parameters), each in the
    view the program declares (rows merged, a row of several dims merged, size-1 dims dropped)."""
    names = [t["name"] for t in piece.tensors if t["role"] == "in"]
    env = dsl_eval.as_declared(piece.program, piece.dims, dict(zip(names, tensors)))
    return dsl_eval.run(piece.program, env, piece.dims)["output0"]


class ConvEpilogue(nn.Module):
    """Level-2 style: a convolution then an elementwise chain: one conv piece, the chain its
    epilogue; with groups (depthwise) the convolution is kept (cuDNN) and the chain is a piece."""

    def __init__(self, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, groups=groups)

    def forward(self, x):
        y = self.conv(x)
        return torch.tanh(F.relu(y) * 2.0 - 0.5)


class ConvPool(nn.Module):
    """A strided, padded convolution with its epilogue, a max pool over overlapping windows (kept),
    then an elementwise chain."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.shift = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        y = F.relu(self.conv(x) + self.shift)
        return torch.sigmoid(F.max_pool2d(y, 3, stride=2, padding=1)) * 2.0


class ConvPoolChain(nn.Module):
    """A convolution, elementwise ops, a max pool and an elementwise epilogue (KernelBench level 2's
    pattern); `padding`: the pool's; `shift`: a parameter in the ops before the pool, per channel
    ([4, 1, 1]) or, with shift="column", varying along the image's width ([10])."""

    def __init__(self, padding=0, shift=False, bias=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=bias)
        self.padding = padding
        self.shift = nn.Parameter(torch.randn(10) if shift == "column" else torch.randn(4, 1, 1)) if shift else None

    def forward(self, x):
        y = self.conv(x) - 0.5
        if self.shift is not None:
            y = y + self.shift
        y = F.hardswish(y)
        return F.mish(F.max_pool2d(y, 2, padding=self.padding))


class MlpBlock(nn.Module):
    """Two GEMMs with epilogues around a LayerNorm, then a softmax: four pieces, nothing kept."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.ln = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 24)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = self.ln(h)
        return torch.softmax(self.fc2(h) * 0.5, dim=-1)


class ReduceThenMap(nn.Module):
    """A reduction over dim 1 between two elementwise chains: over the last dim of a 2-D tensor
    it is one row-wise piece with both chains; over the middle dim of a 3-D tensor a column
    reduction with the first chain inlined and the second its epilogue."""

    def forward(self, x):
        s = torch.sigmoid(x) * x
        m = s.mean(dim=1, keepdim=True)
        return torch.relu(m - 1.0) + 0.25


class SharedValue(nn.Module):
    """A value read by a kept op and by the chain after it: the chain is cut there, so every piece
    has one output."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(2, stride=1)  # overlapping windows: kept

    def forward(self, x):
        a = torch.exp(x * 0.1)
        p = self.pool(a.unsqueeze(0)).squeeze(0)
        return torch.cat([a + 1.0, p], dim=1)


class HingeLoss(nn.Module):
    """KernelBench's 100_HingeLoss: targets [N] broadcast over predictions [B, N], then the mean of
    everything (kept: a reduction to a scalar)."""

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


class ConvLayerNorm(nn.Module):
    """A convolution (a conv piece of its own: a row-wise op ends it), then LayerNorm over
    [C, H, W] and a ReLU: one row-wise piece whose row is the normalized dims flattened."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.ln = nn.LayerNorm([4, 5, 6])
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.ln(self.conv(x)))


class ScaledMean(nn.Module):
    """A Python number s scales the input and is subtracted after a mean (kept)."""

    def forward(self, x, s):
        m = (x * s).mean(dim=(0, 2), keepdim=True)
        return torch.relu(m - s) + x


class GemmNorms(nn.Module):
    """KernelBench level 2's Gemm + GroupNorm + BatchNorm1d (training mode): group_norm is a
    layer_norm over each group and the per-channel affine; batch_norm's statistics are column
    reductions over the batch."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 12)
        self.gn = nn.GroupNorm(3, 12)
        self.bn = nn.BatchNorm1d(12)
        with torch.no_grad():
            for m in (self.gn, self.bn):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.bn(self.gn(self.fc(x))))


class ImageNorms(nn.Module):
    """BatchNorm2d then GroupNorm on an NCHW image: the batch's statistics are means over the
    spatial dims (row-wise), then over the batch (column reductions)."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        with torch.no_grad():
            for m in (self.gn, self.bn):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.gn(self.bn(x))


class ConvGroupNormPool(nn.Module):
    """KernelBench level 2's conv, GroupNorm, scale, max pool and clamp: the pool reads its window
    through the ops before it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.gn = nn.GroupNorm(4, 8)
        self.scale = nn.Parameter(torch.rand(8, 1, 1) + 0.5)
        self.pool = nn.MaxPool2d(2)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.clamp(self.pool(self.gn(self.conv(x)) * self.scale), -0.5, 0.5)


class GemmPoolSoftmax(nn.Module):
    """A linear layer, a 1-D max pool over its features (a view between) and softmax of GELU."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        y = F.max_pool1d(self.fc(x).unsqueeze(1), 2).squeeze(1)
        return torch.softmax(F.gelu(y), -1)


class SpatialMeanScaled(nn.Module):
    """The mean over the spatial dims (no keepdim) of relu(x) times a per-channel factor."""

    def __init__(self, rank):
        super().__init__()
        self.w = nn.Parameter(torch.rand(8, *([1] * (rank - 2))) + 0.5)
        self.dims = tuple(range(2, rank))

    def forward(self, x):
        return torch.mean(torch.relu(x) * self.w, dim=self.dims)


class ConvPoolTiles(nn.Module):
    """KernelBench level 2's conv, max pool, activation, global average pool: a global pool is one
    reduction over the spatial dims; pools of small windows stay pools (the direct family)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = torch.relu(self.pool(self.conv(x)))
        return self.gap(y) + F.avg_pool1d(y.reshape(2, 4, 24), 4).sum(dim=2, keepdim=True).unsqueeze(3)


class ChannelSoftmax(nn.Module):
    """KernelBench level 2's softmax and logsumexp over the channels of NCHW: the max and the sum
    of exp(x - max) are batched column reductions, the rest elementwise."""

    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(x) * torch.logsumexp(x, dim=1, keepdim=True) + F.log_softmax(x, dim=1)


class Losses(nn.Module):
    """KernelBench level 1's Huber, KL divergence and triplet margin losses, summed: each is its
    pointwise terms and a reduction over every element (the triplet's distances row norms)."""

    def __init__(self):
        super().__init__()
        self.triplet = nn.TripletMarginLoss(margin=1.0)

    def forward(self, a, b, c):
        huber = F.smooth_l1_loss(a, b, beta=0.5)
        kl = F.kl_div(torch.log(torch.softmax(a, dim=-1)), torch.softmax(b, dim=-1), reduction="batchmean")
        return huber + kl + self.triplet(a, b, c)


class CrossEntropy(nn.Module):
    """KernelBench level 1's cross entropy of class-index targets, through F.cross_entropy or the
    module, with an ignore_index the targets hit."""

    def __init__(self, module=False, **kw):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(**kw) if module else None
        self.kw = kw

    def forward(self, x, t):
        return self.loss(x, t) if self.loss is not None else F.cross_entropy(x, t, **self.kw)


class FullReductions(nn.Module):
    """KernelBench level 1's hinge loss (its targets broadcast along the rows) beside a max of every
    element of a 3-D tensor and a sum of a small one."""

    def forward(self, x, t, y, z):
        hinge = torch.mean(torch.clamp(1 - x * t, min=0))
        return hinge + torch.max(y) * torch.sum(z)


class ReductionsOverOnes(nn.Module):
    """KernelBench level 2's 18 with a ReLU after the GEMM (which keeps the sum from folding into
    the weights): a GEMM, a sum over its rows, then reductions over the one element left (the
    max's values, a mean, two logsumexps), and one without keepdim."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 10)

    def forward(self, x):
        y = torch.sum(torch.relu(self.linear(x)), dim=1, keepdim=True)
        y = torch.max(y, dim=1, keepdim=True)[0]
        y = torch.logsumexp(torch.mean(y, dim=1, keepdim=True), dim=1, keepdim=True)
        return torch.logsumexp(y, dim=1, keepdim=True) * 2.0 + y.amax(dim=1)


class ConstantsInTheForward(nn.Module):
    """Level-2 style: one-value constants the forward makes, one on its input's device (which fx
    cannot trace as written), one as a plain torch.tensor of a Python number."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)
        self.floor = -0.25

    def forward(self, x):
        y = self.conv(x)
        y = torch.min(y, torch.tensor(0.5, device=y.device))
        return torch.max(y, torch.tensor(self.floor)) * 2.0


class PrefixSums(nn.Module):
    """cumsum along the last dim between two elementwise chains (KernelBench's scans): one
    row-wise piece whose scan the chains surround; along another dim it stays a PyTorch call."""

    def __init__(self, dim=-1, product=False):
        super().__init__()
        self.dim, self.product = dim, product

    def forward(self, x):
        if self.product:  # a cumulative product of values near 1
            return torch.tanh(torch.cumprod(x * 0.1 + 1.0, dim=self.dim)) - 1.0
        return torch.tanh(torch.cumsum(x * 0.5, dim=self.dim)) - 1.0


class ConvAvgPool(nn.Module):
    """A convolution, an average pool of its output (any stride, padding and dilation of the
    conv, the pool's windows not tiling its input), then an elementwise op and a sum."""

    def __init__(self, rank=2, stride=1, padding=0, dilation=1, groups=1, window=4, pool_stride=None, functional=False):
        super().__init__()
        conv = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[rank - 1]
        self.conv = conv(4, 6, 3, stride=stride, padding=padding, dilation=dilation, groups=groups)
        self.rank, self.window, self.pool_stride, self.functional = rank, window, pool_stride, functional
        self.pool = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)[rank - 1](window, pool_stride)

    def forward(self, x):
        if self.functional:
            f = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[self.rank - 1]
            y = f(F.conv2d(x, self.conv.weight, self.conv.bias, self.conv.stride, self.conv.padding, self.conv.dilation,
                           self.conv.groups),
                  self.window, self.pool_stride)
        else:
            y = self.pool(self.conv(x))
        return torch.sum(torch.sigmoid(y), dim=1)


class ConvTransposeAvgPool(nn.Module):
    """A transposed convolution, a scaling, an average pool at its stride, a bias and a scaling
    (level2/50's chain)."""

    def __init__(self, rank=3, k=3, stride=2, padding=1, output_padding=0, dilation=1, groups=1, window=None):
        super().__init__()
        ct = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)[rank - 1]
        self.conv = ct(4, 6, k, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
        self.pool = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)[rank - 1](window or stride)
        self.bias = nn.Parameter(torch.randn(6, *([1] * rank)))
        self.scale = nn.Parameter(torch.tensor(0.5))  # one value: pooled or not, the same product
        self.channel_scale = nn.Parameter(torch.randn(6, *([1] * rank)))

    def forward(self, x):
        return (self.pool(self.conv(x) * self.scale / self.channel_scale * 0.5) + self.bias) * 3.0


class ConvTransposeStrideOne(nn.Module):
    """A transposed convolution at stride 1 (module or F call) with a bias, then a channel scaling
    and a tanh; `kw` are its arguments."""

    def __init__(self, rank=2, k=3, functional=False, bias=True, **kw):
        super().__init__()
        ct = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)[rank - 1]
        self.conv = ct(4, 6, k, bias=bias, **kw)
        self.rank, self.functional, self.kw = rank, functional, kw
        self.scale = nn.Parameter(torch.randn(6, *([1] * rank)))

    def forward(self, x):
        if self.functional:
            f = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self.rank - 1]
            y = f(x, self.conv.weight, self.conv.bias, **self.kw)
        else:
            y = self.conv(x)
        return torch.tanh(y * self.scale)


class LinearFeatureSum(nn.Module):
    """A reduction over a linear layer's output features, through scalings and per-feature
    terms: `kind` 0 nn.Linear, / 2, sum keepdim, * 1.5; 1 matmul by the weight's transpose, minus
    a per-feature parameter, plus a number, mean, times a 0-d parameter; 2 F.linear with a bias
    on a 3-D input, sum without keepdim."""

    def __init__(self, kind: int):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(12, 10)
        self.shift = nn.Parameter(torch.randn(10))
        self.scale = nn.Parameter(torch.tensor(0.75))

    def forward(self, x):
        if self.kind == 0:
            return torch.sum(self.fc(x) / 2, dim=1, keepdim=True) * 1.5
        if self.kind == 1:
            return torch.mean(torch.matmul(x, self.fc.weight.T) - self.shift + 0.25, dim=-1) * self.scale
        return F.linear(x, self.fc.weight, self.fc.bias).sum(-1)


class LinearFeatureSumLeftAlone(nn.Module):
    """Reductions over a linear layer's output that are not folded: through a sigmoid, over the
    batch, of an output read again."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(12, 10), nn.Linear(12, 10), nn.Linear(12, 10)

    def forward(self, x):
        yc = self.c(x)
        return torch.sigmoid(self.a(x)).sum(1, keepdim=True) + self.b(x).sum(0).sum() + yc.sum(1, keepdim=True) + yc[:, :1]


class LinearFeaturePool(nn.Module):
    """An average pool over a linear layer's output features: `kind` 0 a [B, N] output unsqueezed,
    pooled by 4 and squeezed, then GELU; 1 a [B, C, N] output pooled by 3 at stride 2 (the last
    window short of N, floor mode); 2 F.linear without a bias, unsqueezed and pooled, not squeezed."""

    def __init__(self, kind: int):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(12, 16, bias=kind != 2)

    def forward(self, x):
        if self.kind == 0:
            return F.gelu(F.avg_pool1d(self.fc(x).unsqueeze(1), 4).squeeze(1)) * 2.0
        if self.kind == 1:
            return F.avg_pool1d(self.fc(x), 3, stride=2)
        return F.avg_pool1d(F.linear(x, self.fc.weight).unsqueeze(1), 2) + 1.0


class FoldEdges(nn.Module):
    """Cases the folds once got wrong: `kind` 0 a constant added after a scaling of a linear
    layer's output, then summed (the constant is not scaled); 1 a one-value parameter added, then
    summed (N of it); 2 a layer called with input=; 3 a transposed conv whose pooled positions all
    fall between its taps; 4 an unbatched image under a 2-D pool."""

    def __init__(self, kind: int):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(8, 6)
        self.t = nn.Parameter(torch.tensor(0.5))
        self.ct = nn.ConvTranspose1d(2, 3, 1, stride=2, padding=1)

    def forward(self, x):
        if self.kind == 0:
            return (self.fc(x) * 2 + 1).sum(-1) + (self.fc(x) / 3 - 1).mean(-1)
        if self.kind == 1:
            return (self.fc(x) + self.t).sum(-1)
        if self.kind == 2:
            return self.fc(input=x).sum(-1, keepdim=True)
        if self.kind == 3:
            return F.avg_pool1d(self.ct(x), 1, 2)
        return F.avg_pool2d(torch.relu(x), 2)


class ConvGlobalMean(nn.Module):
    """A mean over every output position of a convolution: `kind` 0 a strided, padded transposed
    conv with output_padding, scaled, mean keepdim (level2/44's chain); 1 a stride-1 transposed
    conv, mean; 2 a strided, padded, dilated conv2d, mean over [-1, -2] without keepdim; 3 a
    conv1d then AdaptiveAvgPool1d(1); 4 a conv3d then a mean; 5 grouped (not folded); 6 a mean
    over one spatial dim (not folded)."""

    def __init__(self, kind: int):
        super().__init__()
        self.kind = kind
        if kind in (0, 1):
            self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2 if kind == 0 else 1, padding=1 if kind == 0 else 0,
                                           output_padding=1 if kind == 0 else 0)
        elif kind in (2, 5, 6):
            self.conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2 if kind == 5 else 1)
        elif kind == 3:
            self.conv = nn.Conv1d(4, 6, 5, stride=2)
        else:
            self.conv = nn.Conv3d(4, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        if self.kind == 0:
            return torch.mean(y * 0.5, dim=(2, 3), keepdim=True)
        if self.kind == 2:
            return y.mean(dim=[-1, -2])
        if self.kind == 3:
            return F.adaptive_avg_pool1d(y, 1) + 1.0
        if self.kind == 6:
            return y.mean(dim=3)
        return y.mean(dim=(2, 3, 4) if self.kind == 4 else (2, 3))


class ConvNormPool(nn.Module):
    """A convolution, a scaling and an eval-mode batch_norm (a per-channel affine), then a pool:
    `kind` 0 a transposed conv under a global average pool (level2/77's chain); 1 a conv2d under
    a 2x2 average pool; 2 the same pool with padding 1 (the shift does not move: padded windows
    average zeros that the shift never reached)."""

    def __init__(self, kind: int):
        super().__init__()
        self.kind = kind
        self.conv = nn.ConvTranspose3d(3, 5, 3) if kind == 0 else nn.Conv2d(3, 5, 3)
        self.bn = nn.BatchNorm3d(5) if kind == 0 else nn.BatchNorm2d(5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        y = self.bn(self.conv(x) * 2.0)
        if self.kind == 0:
            return F.adaptive_avg_pool3d(y, 1)
        return F.avg_pool2d(y, 2, padding=1 if self.kind == 2 else 0)


class ConvAvgPoolLeftAlone(nn.Module):
    """Average pools after convolutions that are not folded: a padded pool, ceil mode, the conv's
    output read again."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3)
        self.b = nn.Conv2d(3, 4, 3)
        self.c = nn.Conv2d(3, 4, 3)
        self.d = nn.Conv2d(3, 4, 3)
        self.ramp = nn.Parameter(torch.linspace(0.5, 2.0, 10).reshape(1, 1, 1, 10))  # varies within a window

    def forward(self, x):
        ya = F.avg_pool2d(self.a(x), 2, padding=1)
        yb = F.avg_pool2d(self.b(x), 2, ceil_mode=True)
        yc = self.c(x)
        yd = F.avg_pool2d(self.d(x) * self.ramp, 2)
        return ya.sum() + yb.sum() + F.avg_pool2d(yc, 2).sum() + yc.sum() + yd.sum()


class _InPlace(nn.Module):
    """A forward of one statement on x and y, for stitch._mutates."""

    def __init__(self, stmt):
        super().__init__()
        self.stmt = stmt

    def forward(self, x, y):
        if self.stmt == "x.add_(y)":
            x.add_(y)
        elif self.stmt == "torch.relu_(x)":
            torch.relu_(x)
        elif self.stmt == "F.relu(x, inplace=True)":
            x = F.relu(x, inplace=True)
        elif self.stmt == "x.__iadd__(y)":
            x = x.__iadd__(y)
        else:
            x = x.add(y)
        return x


class Stitching(unittest.TestCase):
    def stitched(self, model, inputs, pieces, kept_ops, train=False, vendor=False, keep_layout=()):
        model.train(train)
        plan = stitch.split(model, inputs, vendor=vendor, keep_layout=keep_layout)
        self.assertEqual(len(plan.pieces), pieces, plan.summary())
        self.assertEqual(sorted(k["op"] for k in plan.kept), sorted(kept_ops), plan.summary())
        for k in plan.kept:
            self.assertTrue(k["reason"], k)
        # The stitched module (what the worker times) computes what the module does, calling each
        # piece once.
        calls = []

        def counting(piece, tensors):
            calls.append(piece.id)
            return dsl_runner(piece, tensors)

        cm = stitch.compiled(plan, counting).double()
        wide = [x.double() if x.is_floating_point() else x for x in inputs]  # index tensors stay int64
        with torch.no_grad():
            want = model.double()(*wide)
            torch.testing.assert_close(cm(*wide), want, rtol=1e-10, atol=1e-12)
        self.assertEqual(sorted(calls), [p.id for p in plan.pieces])
        kept_targets = {n.name for n in cm.graph.nodes}
        for p in plan.pieces:
            self.assertFalse(set(p.nodes) & kept_targets, "a piece's nodes are gone from the compiled graph")
        # Each piece kept as PyTorch calls instead (the search's candidate of PyTorch's own calls):
        # the same values, its nodes still in the graph, its runner never called.
        for p in plan.pieces:
            calls.clear()
            km = stitch.compiled(plan, counting, keep={p.id}).double()
            with torch.no_grad():
                torch.testing.assert_close(km(*wide), want, rtol=1e-10, atol=1e-12)
            self.assertEqual(sorted(calls), [q.id for q in plan.pieces if q.id != p.id])
            self.assertTrue(set(p.nodes) <= {n.name for n in km.graph.nodes}, p.nodes)
        return plan

    def test_a_request_that_keeps_every_piece_is_refused(self):
        # With every piece kept as PyTorch calls the candidate would be the forward itself.
        from ksol_torch import worker
        torch.manual_seed(0)
        model, x = ConvEpilogue(groups=2), torch.randn(2, 4, 10, 10)
        plan = stitch.split(model, [x])
        self.assertTrue(plan.pieces)
        spec = [{"nodes": p.nodes, "keep": True} for p in plan.pieces]
        with self.assertRaises(worker.GateFailure) as e:
            worker._stitched_candidate(spec, model, [x], plan)
        self.assertEqual((e.exception.gate, e.exception.error_class), ("load", "binding"))
        self.assertIn("every piece is kept", e.exception.message)

    def test_a_convolution_and_its_epilogue_are_one_conv_piece(self):
        torch.manual_seed(0)
        plan = self.stitched(ConvEpilogue(), [torch.randn(2, 4, 10, 10)], 1, [])
        self.assertEqual(plan.pieces[0].family, "conv")
        self.assertEqual(plan.pieces[0].nodes, ["conv", "relu", "mul", "sub", "tanh"])
        self.assertEqual(plan.pieces[0].inputs, ["x"])
        self.assertEqual(plan.pieces[0].params, ["conv.weight", "conv.bias"])

    def test_a_reduction_over_a_convs_channels_joins_its_piece(self):
        # conv -> min over the channels -> tanh: the reduction is the conv piece's epilogue and
        # the tanh its output's definition; an op after it that reads a tensor (a shift per
        # position) is a piece of its own. A softmax over the channels reads the conv's output
        # twice (its maximum, then each exp): the conv piece ends before it.
        class ConvMin(nn.Module):
            def __init__(self, shifted=False):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.shift = nn.Parameter(torch.randn(1, 1, 7, 8)) if shifted else None

            def forward(self, x):
                y = torch.tanh(torch.min(self.conv(x), dim=1, keepdim=True)[0])
                return y + self.shift if self.shift is not None else y

        class ConvSoftmax(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)

            def forward(self, x):
                return torch.softmax(self.conv(x) * 2.0, dim=1)

        torch.manual_seed(3)
        plan = self.stitched(ConvMin(), [torch.randn(2, 3, 9, 10)], 1, [])
        self.assertEqual(plan.pieces[0].nodes, ["conv", "min_1", "getitem", "tanh"])
        self.assertIn("v1[n, h, w] = min(", plan.pieces[0].program)
        self.assertIn("output0[n, h, w] = (tanh(v1[n, h, w]))", plan.pieces[0].program)
        plan = self.stitched(ConvMin(shifted=True), [torch.randn(2, 3, 9, 10)], 2, [])
        self.assertEqual([p.family for p in plan.pieces], ["conv", "elementwise"])
        self.assertEqual(plan.pieces[0].nodes, ["conv", "min_1", "getitem", "tanh"])
        plan = self.stitched(ConvSoftmax(), [torch.randn(2, 3, 9, 10)], 4, [])
        self.assertEqual([p.family for p in plan.pieces], ["conv", "rowwise", "rowwise", "elementwise"])
        self.assertEqual(plan.pieces[0].nodes, ["conv", "mul"])

    def test_a_reduction_over_a_convs_channels_and_positions_takes_the_channels_first(self):
        # sum over [1, 2, 3] of sigmoid(conv): the sum over the channels (kept as a dim of 1) is the
        # conv piece's epilogue, the rest a row-wise sum of its [N, 1, P, Q]; a mean with keepdim
        # the same. Without a convolution before it the reduction is one piece, as written.
        class ConvReduce(nn.Module):
            def __init__(self, how, filters=8):
                super().__init__()
                self.conv, self.how = nn.Conv2d(3, filters, 3), how

            def forward(self, x):
                y = torch.sigmoid(self.conv(x))
                return torch.sum(y, dim=[1, 2, 3]) if self.how == "sum" else y.mean(dim=(1, 2, 3), keepdim=True)

        class Reduce(nn.Module):
            def forward(self, x):
                return torch.sum(torch.sigmoid(x), dim=[1, 2, 3])

        torch.manual_seed(4)
        for how in ("sum", "mean"):
            plan = self.stitched(ConvReduce(how), [torch.randn(2, 3, 9, 10)], 2, [])
            self.assertEqual([p.family for p in plan.pieces], ["conv", "rowwise"], how)
            self.assertIn(f"output0[n, h, w] = {how}(", plan.pieces[0].program)
            self.assertEqual(plan.pieces[0].shape, [2, 1, 7, 8])
        plan = self.stitched(Reduce(), [torch.randn(2, 3, 9, 10)], 1, [])
        self.assertEqual(plan.pieces[0].nodes, ["sigmoid", "sum_1"])
        # More channels than one block of the conv holds: the sum stays as written, one piece.
        plan = self.stitched(ConvReduce("sum", 130), [torch.randn(2, 3, 9, 10)], 2, [])
        self.assertEqual([p.nodes for p in plan.pieces], [["conv", "sigmoid"], ["sum_1"]])

    def test_a_conv_piece_takes_the_products_it_is_given(self):
        torch.manual_seed(0)
        plan = stitch.split(ConvLayerNorm(), [torch.randn(2, 3, 7, 8)], conv_products="tf32")
        conv = [p for p in plan.pieces if p.family == "conv"]
        self.assertEqual(len(conv), 1, plan.summary())
        self.assertIn("sum(tf32(input0[", conv[0].program)
        self.assertTrue(all("tf32(" not in p.program for p in plan.pieces if p.family != "conv"))
        self.assertNotIn("tf32(", stitch.split(ConvLayerNorm(), [torch.randn(2, 3, 7, 8)]).pieces[0].program)

    def test_a_gemm_piece_carries_its_cuda_core_fallback(self):
        torch.manual_seed(0)
        plan = stitch.split(GemmNorms().eval(), [torch.randn(4, 8)], gemm_products="tf32")
        gemm = [p for p in plan.pieces if p.family == "gemm"]
        self.assertEqual(len(gemm), 1, plan.summary())
        self.assertIn("mainloop = cooperative", gemm[0].program)
        self.assertIn("mainloop = simt", gemm[0].program_fallback)
        self.assertIn("program_fallback", plan.summary()["pieces"][gemm[0].id])

    def test_a_depthwise_convolution_and_its_epilogue_are_one_direct_piece(self):
        torch.manual_seed(0)
        plan = self.stitched(ConvEpilogue(groups=4), [torch.randn(2, 4, 10, 10)], 1, [])
        self.assertEqual(plan.pieces[0].family, "direct")
        self.assertIn("input0[n, g, c, ", plan.pieces[0].program)

    def test_a_conv_piece_then_a_pool_piece_with_its_epilogue(self):
        torch.manual_seed(9)
        plan = self.stitched(ConvPool(), [torch.randn(2, 3, 11, 12)], 2, [])
        self.assertEqual([p.family for p in plan.pieces], ["conv", "direct"])  # the pool with its epilogue
        conv = plan.pieces[0]
        self.assertEqual(sorted(conv.params), ["conv.bias", "conv.weight", "shift"])
        self.assertIn("input0[n, c, h*2+r-1, w*2+s-1]", conv.program)
        self.assertEqual((conv.dims["P"], conv.dims["Q"]), (6, 6))

    def test_the_vendor_plan_keeps_convolutions_and_gemms_and_cuts_the_ops_around_them(self):
        torch.manual_seed(3)
        # The convolution runs channels-last (cuDNN's NHWC kernels): a piece writes its image
        # permuted to [N, H, W, C]; its output, laid out [N, H, W, K], is read by the next piece
        # through the permutation back to [N, K, H, W]; its bias leaves it for that piece (a view
        # of the parameter per channel, kept: it moves no data), where PyTorch would add it in a
        # pass of its own.
        plan = self.stitched(ConvEpilogue(), [torch.randn(2, 4, 10, 10)], 2, ["conv2d", "reshape"], vendor=True)
        image, reader = plan.pieces
        self.assertEqual((image.family, image.nodes, image.inputs), ("elementwise", ["permute"], ["x"]))
        self.assertIn("output0[i0, i1, i2, i3] = input0[i0, i3, i1, i2]", image.program)
        self.assertEqual(image.shape, [2, 10, 10, 4])
        self.assertEqual(reader.family, "elementwise")
        self.assertEqual(reader.nodes, ["permute_1", "add", "relu", "mul", "sub", "tanh"])
        self.assertEqual(reader.inputs, ["_ksol_channels_last0", "reshape"])
        self.assertIn("input0: f32[D0, D2, D3, D1]", reader.program)
        self.assertIn("input0[i0, i2, i3, i1] + input1[i1]", reader.program)
        self.assertNotIn("vector", reader.program)  # one element a thread: the transposing kernel
        self.assertEqual(reader.tensors[0]["shape"], ["D0", "D2", "D3", "D1"])
        vendor = [k for k in plan.kept if k["op"] == "conv2d"]
        self.assertIn("cuDNN", vendor[0]["reason"])
        self.assertTrue(vendor[0]["vendor"])
        self.assertEqual(vendor[0]["layout"], "channels_last")
        view = [k for k in plan.kept if k["op"] == "reshape"]
        self.assertIn("view of a parameter", view[0]["reason"])
        self.assertFalse(view[0].get("vendor"))
        conv = plan.gm.get_submodule("_ksol_channels_last0")
        self.assertEqual((conv.op, conv.source), ("conv2d", "conv"))
        # In the module's layout where asked (keep_layout names the convolution's node): the
        # bias still goes to the piece.
        plan = self.stitched(ConvEpilogue(), [torch.randn(2, 4, 10, 10)], 1, ["conv2d", "reshape"], vendor=True,
                             keep_layout={"conv"})
        self.assertEqual(plan.pieces[0].nodes, ["add", "relu", "mul", "sub", "tanh"])
        self.assertIn("input0[i0, i1, i2, i3] + input1[i1]", plan.pieces[0].program)
        self.assertNotIn("layout", plan.kept[-1])
        conv = next(n for n in plan.gm.graph.nodes if n.name == "conv2d")
        self.assertIsNone(conv.args[2])  # no bias left in the convolution
        # A conv the own plan keeps because the DSL has no form for it is no vendor call by plan.
        reflect = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, padding_mode="reflect"), nn.ReLU())
        own = stitch.split(reflect, [torch.randn(2, 4, 10, 10)]).kept
        self.assertEqual([k["op"] for k in own], ["conv2d"])
        self.assertFalse(own[0].get("vendor"))
        plan = self.stitched(MlpBlock(), [torch.randn(5, 16)], 2, ["linear", "linear"], vendor=True)
        self.assertEqual([p.nodes for p in plan.pieces], [["gelu", "ln"], ["mul", "softmax"]])
        self.assertTrue(all("cuBLAS" in k["reason"] for k in plan.kept))
        # A transposed convolution at stride 1 stays cuDNN's as it is (no flipped filter); its bias
        # goes to the piece after it too.
        plan = self.stitched(ConvTransposeStrideOne(rank=2), [torch.randn(2, 4, 7, 9)], 2, ["conv_transpose2d", "reshape"],
                             vendor=True)
        self.assertEqual(plan.pieces[1].family, "elementwise")
        self.assertEqual(plan.pieces[1].nodes[:2], ["permute_1", "add"])
        # Strided, padded, dilated, grouped and 3-D ones keep their arguments without the bias.
        for model, x, op in ((nn.Sequential(nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), nn.Tanh()),
                              torch.randn(2, 4, 11, 9), "conv2d"),
                             (nn.Sequential(nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1), nn.ReLU()),
                              torch.randn(2, 4, 3, 4, 5), "conv_transpose3d"),
                             (nn.Sequential(nn.Conv1d(4, 6, 5, padding=2), nn.Sigmoid()), torch.randn(2, 4, 17), "conv1d")):
            plan = self.stitched(model, [x], 1 if op == "conv1d" else 2, [op, "reshape"], vendor=True)
            self.assertEqual(plan.pieces[-1].nodes[:2] if op != "conv1d" else plan.pieces[-1].nodes[:1],
                             ["add"] if op == "conv1d" else ["permute_1", "add"])
        # Without a bias the convolution still runs channels-last (its reader is elementwise);
        # where its reader is a row-wise op it stays as it is, bias and layout.
        plan = self.stitched(ConvPoolChain(bias=False), [torch.randn(2, 3, 12, 12)], 2, ["conv2d"], vendor=True)
        self.assertEqual(plan.pieces[1].nodes, ["permute_1", "sub", "hardswish", "max_pool2d", "mish"])
        softmax = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Softmax(dim=-1))
        plan = stitch.split(softmax, [torch.randn(2, 3, 12, 12)], vendor=True)
        self.assertEqual([k["op"] for k in plan.kept], ["conv2d"])
        # The default plan of the same module is unchanged.
        self.assertEqual([p.family for p in stitch.split(MlpBlock(), [torch.randn(5, 16)]).pieces],
                         ["gemm", "rowwise", "gemm", "rowwise"])

    def test_a_pool_reads_its_input_through_the_elementwise_ops_before_it(self):
        torch.manual_seed(4)
        plan = self.stitched(ConvPoolChain(), [torch.randn(2, 3, 12, 12)], 2, ["conv2d", "reshape"], vendor=True)
        self.assertEqual(plan.pieces[1].family, "direct")
        self.assertEqual(plan.pieces[1].nodes, ["permute_1", "add", "sub", "hardswish", "max_pool2d", "mish"])
        # The window reads the channels-last image through the permutation, the bias at its channel.
        self.assertIn("input0: f32[N, I0, I1, C]", plan.pieces[1].program)
        self.assertIn("input0[n, h*2+r, w*2+s, c] + input1[c]", plan.pieces[1].program)
        # A pool right after the convolution (no bias, no prologue), over padded windows too.
        pool = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.MaxPool2d(3, 2, padding=1), nn.Tanh())
        plan = self.stitched(pool, [torch.randn(2, 3, 12, 12)], 2, ["conv2d"], vendor=True)
        self.assertEqual(plan.pieces[1].nodes[0], "permute_1")
        self.assertIn("input0: f32[N, I0, I1, C] outside -inf", plan.pieces[1].program)
        # A 3-D one, channels-last too ([N, D, H, W, K]).
        pool3 = nn.Sequential(nn.Conv3d(3, 4, 3), nn.ReLU(), nn.MaxPool3d(2))
        plan = self.stitched(pool3, [torch.randn(2, 3, 8, 8, 8)], 2, ["conv3d", "reshape"], vendor=True)
        self.assertIn("output0[i0, i1, i2, i3, i4] = input0[i0, i4, i1, i2, i3]", plan.pieces[0].program)
        self.assertIn("input0: f32[N, I0, I1, I2, C]", plan.pieces[1].program)
        # A pool that reads padding keeps its prologue in a piece of its own: the padding's -inf
        # does not go through the prologue's ops.
        plan = self.stitched(ConvPoolChain(padding=1), [torch.randn(2, 3, 12, 12)], 3, ["conv2d", "reshape"], vendor=True)
        self.assertEqual([p.family for p in plan.pieces], ["elementwise", "elementwise", "direct"])
        self.assertEqual(plan.pieces[1].nodes[0], "permute_1")
        # A per-channel parameter is read at the window's channel, the output's: one piece.
        plan = self.stitched(ConvPoolChain(shift=True), [torch.randn(2, 3, 12, 12)], 2, ["conv2d", "reshape"], vendor=True)
        self.assertEqual([p.family for p in plan.pieces], ["elementwise", "direct"])
        # One that varies along the width would be read at the output's column, not the window's.
        plan = self.stitched(ConvPoolChain(shift="column"), [torch.randn(2, 3, 12, 12)], 3, ["conv2d", "reshape"],
                             vendor=True)
        self.assertEqual([p.family for p in plan.pieces], ["elementwise", "elementwise", "direct"])

    def test_a_channels_last_output_no_piece_reads_is_planned_in_the_modules_layout(self):
        # Where no piece takes the permuted read (here: synth made to refuse every one), the
        # permutation would stay a PyTorch view and the next piece would copy it back: the plan
        # is made again with that convolution in the module's layout.
        torch.manual_seed(5)
        real = synth._permuted_input
        synth._permuted_input = lambda n: None
        try:
            plan = self.stitched(ConvEpilogue(), [torch.randn(2, 4, 10, 10)], 1, ["conv2d", "reshape"], vendor=True)
        finally:
            synth._permuted_input = real
        self.assertEqual(plan.pieces[0].nodes, ["add", "relu", "mul", "sub", "tanh"])
        self.assertFalse(any(k.get("layout") for k in plan.kept))
        # Where no piece writes the image's permutation, it stays a view, kept with the reason,
        # and the convolution's call converts it (the same values).
        synth._permuted_input = lambda n: None if n.target == "permute" and list(n.args[1]) == [0, 2, 3, 1] else real(n)
        try:
            plan = self.stitched(ConvEpilogue(), [torch.randn(2, 4, 10, 10)], 1, ["conv2d", "reshape", "permute"], vendor=True)
        finally:
            synth._permuted_input = real
        self.assertEqual(plan.pieces[0].nodes[0], "permute_1")
        self.assertIn("the convolution's call converts it", next(k for k in plan.kept if k["op"] == "permute")["reason"])
        # A row-wise program does not read a permuted input: the elementwise ops before it do.
        class ConvNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)

            def forward(self, x):
                return torch.softmax(F.relu(self.conv(x)), dim=-1)
        plan = self.stitched(ConvNorm(), [torch.randn(2, 3, 12, 12)], 3, ["conv2d", "reshape"], vendor=True)
        self.assertEqual([(p.family, p.nodes[0]) for p in plan.pieces],
                         [("elementwise", "permute"), ("elementwise", "permute_1"), ("rowwise", "softmax")])

    def test_a_copy_is_read_as_its_source_where_nothing_is_written_in_place(self):
        class Residual(nn.Module):
            """x, its detached copy, and a chain that reads both (level2/20's form)."""

            def __init__(self, inplace=False):
                super().__init__()
                self.conv = nn.Conv2d(3, 6, 3)
                self.act = nn.ReLU(inplace=inplace)

            def forward(self, x):
                y = self.conv(x)
                orig = y.clone().detach()
                y = self.act(y + 0.5)
                return (y + orig) * orig

        torch.manual_seed(6)
        x = torch.randn(2, 3, 9, 11)
        # No copy kept: the convolution and the whole chain are one piece (its epilogue), and the
        # vendor-call plan's channels-last convolution is read by the chain's three readers of it.
        plan = self.stitched(Residual(), [x], 1, [])
        self.assertNotIn("clone", str(plan.summary()))
        plan = self.stitched(Residual(), [x], 2, ["conv2d", "reshape"], vendor=True)
        self.assertEqual(plan.pieces[1].nodes[0], "permute_1")
        self.assertEqual(next(k for k in plan.kept if k["op"] == "conv2d")["layout"], "channels_last")
        # With an in-place op in the forward a copy may hold other values than its source: kept.
        plan = stitch.split(Residual(inplace=True).eval(), [x])
        self.assertIn("clone", [k["op"] for k in plan.kept])
        for n, want in (("x.add_(y)", True), ("torch.relu_(x)", True), ("F.relu(x, inplace=True)", True),
                        ("x.__iadd__(y)", True), ("x.add(y)", False)):
            gm = torch.fx.symbolic_trace(_InPlace(n))
            self.assertEqual(any(stitch._mutates(m, gm) for m in gm.graph.nodes), want, n)

    def test_a_copy_the_forward_returns_or_that_changes_the_layout_is_kept(self):
        class Copies(nn.Module):
            def __init__(self, how):
                super().__init__()
                self.how = how

            def forward(self, x):
                if self.how == "input":  # dropped, the output would be the input's memory
                    return x.clone()
                if self.how == "view":  # the same through a view
                    return torch.relu(x).clone().view(-1), torch.tanh(x)
                if self.how == "expanded":  # a dense copy of an expanded tensor, which view needs
                    return torch.tanh(x.expand(3, 4, 8).clone().view(-1))
                return torch.tanh(x.clone(memory_format=torch.contiguous_format).view(-1))

        for how, x in (("input", torch.randn(4, 8)), ("view", torch.randn(4, 8)), ("expanded", torch.randn(1, 4, 8)),
                       ("format", torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last))):
            plan = stitch.split(Copies(how), [x])
            # Still there: a PyTorch call, or an op of a piece (which writes a buffer of its own).
            self.assertIn("clone", [k["op"] for k in plan.kept] + [n for p in plan.pieces for n in p.nodes], how)

    def test_a_channels_last_convolution_read_by_several_elementwise_ops_is_read_by_one_piece(self):
        class Swish(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.ConvTranspose3d(3, 5, 3, stride=2)

            def forward(self, x):
                y = self.conv(x)
                return torch.sigmoid(y) * y - 1.0

        torch.manual_seed(7)
        plan = self.stitched(Swish(), [torch.randn(2, 3, 3, 4, 5)], 2, ["conv_transpose3d", "reshape"], vendor=True)
        self.assertEqual(plan.pieces[1].nodes[:3], ["permute_1", "add", "sigmoid"])
        self.assertIn("input0: f32[D0, D2, D3, D4, D1]", plan.pieces[1].program)
        # A reader that is neither elementwise nor a pool leaves the convolution as it is.
        class Both(Swish):
            def forward(self, x):
                y = self.conv(x)
                return torch.softmax(y, dim=1) + torch.relu(y)

        plan = stitch.split(Both(), [torch.randn(2, 3, 3, 4, 5)], vendor=True)
        conv = next(k for k in plan.kept if k["op"] == "conv_transpose3d")
        self.assertNotIn("layout", conv)

    def test_gemms_layernorm_and_softmax_are_four_pieces(self):
        torch.manual_seed(1)
        plan = self.stitched(MlpBlock(), [torch.randn(5, 16)], 4, [])
        self.assertEqual([p.family for p in plan.pieces], ["gemm", "rowwise", "gemm", "rowwise"])
        self.assertEqual(plan.pieces[0].params, ["fc1.weight", "fc1.bias"])

    def test_a_reduction_over_a_middle_dim_is_a_batched_column_reduction(self):
        # mean(dim=1) of [6, 7, 3] with the chain before it inlined and the chain after it (of its
        # value alone) its epilogue: one piece.
        torch.manual_seed(2)
        plan = self.stitched(ReduceThenMap(), [torch.randn(6, 7, 3)], 1, [])
        self.assertEqual([p.family for p in plan.pieces], ["rowwise"])
        self.assertIn("v1[b, c] = mean(", plan.pieces[0].program)
        self.assertIn("output0[b, c] = (((relu(((v1[b, c] - 1.0)))) + 0.25))", plan.pieces[0].program)
        self.assertEqual(plan.pieces[0].dims, {"B": 6, "R": 7, "C": 3, "U": 1})

    def test_a_reduction_over_the_last_dim_and_its_chains_are_one_rowwise_piece(self):
        # mean(dim=1, keepdim=True) of [6, 7]: one value per row, [6, 1], read by the chain after it.
        torch.manual_seed(2)
        plan = self.stitched(ReduceThenMap(), [torch.randn(6, 7)], 1, [])
        p = plan.pieces[0]
        self.assertEqual(p.family, "rowwise")
        self.assertIn("output0[r] = ", p.program)
        self.assertEqual(p.tensors[-1]["shape"], ["R", "U"])

    def test_a_prefix_sum_over_the_last_dim_and_its_chains_are_one_rowwise_piece(self):
        torch.manual_seed(4)
        plan = self.stitched(PrefixSums(), [torch.randn(5, 3, 9)], 1, [])
        p = plan.pieces[0]
        self.assertEqual(p.family, "rowwise")
        self.assertEqual(p.nodes, ["mul", "cumsum", "tanh", "sub"])
        self.assertRegex(p.program, r"v\d+\[r, c\] = scan\(v\d+\[r, c\]\) over c")
        # Along dim 1 of [5, 3, 9] the rows are not the last index: the scan stays PyTorch's, the chains are pieces.
        plan = self.stitched(PrefixSums(dim=1), [torch.randn(5, 3, 9)], 2, ["cumsum"])
        self.assertIn("only the last dim is lowered", plan.kept[0]["reason"])

    def test_a_prefix_product_over_the_last_dim_and_its_chains_are_one_rowwise_piece(self):
        torch.manual_seed(5)
        plan = self.stitched(PrefixSums(product=True), [torch.randn(5, 3, 9)], 1, [])
        p = plan.pieces[0]
        self.assertEqual((p.family, p.nodes), ("rowwise", ["mul", "add", "cumprod", "tanh", "sub"]))
        self.assertRegex(p.program, r"v\d+\[r, c\] = prodscan\(v\d+\[r, c\]\) over c")
        plan = self.stitched(PrefixSums(dim=1, product=True), [torch.randn(5, 3, 9)], 2, ["cumprod"])
        self.assertIn("cumprod over dim 1", plan.kept[0]["reason"])

    def test_the_max_and_logsumexp_after_a_gemm_are_a_rowwise_piece(self):
        # KernelBench level 2's Gemm + Max / LogSumExp: the values of torch.max over a dim
        # ([0] of its tuple) and logsumexp, each row to one value.
        import os
        from ksol_torch import problem
        p = problem.load(os.path.join(os.path.dirname(__file__), "synth_problems", "14_gemm_row_reductions.py"))
        torch.manual_seed(10)
        model, inputs = problem.instantiate(p, 0)
        plan = self.stitched(model, inputs, 2, [])
        self.assertEqual([p.family for p in plan.pieces], ["gemm", "rowwise"])
        self.assertIn("max(", plan.pieces[1].program)
        self.assertEqual(plan.pieces[1].tensors[-1]["shape"], ["R", "U"])

    def test_group_norm_and_batch_norm_are_cut_into_the_ops_of_their_definition(self):
        views = lambda k: ["reshape"] * k
        torch.manual_seed(13)
        plan = self.stitched(GemmNorms(), [torch.randn(5, 8)], 7, views(6), train=True)
        self.assertEqual([p.family for p in plan.pieces],
                         ["gemm", "rowwise", "elementwise", "rowwise", "elementwise", "rowwise", "elementwise"])
        # The batch's mean of [5, 12] is a column reduction: one value per channel.
        self.assertIn("output0[c] = mean(input0[r, c]) over r", plan.pieces[3].program)
        torch.manual_seed(14)
        plan = self.stitched(ImageNorms(), [torch.randn(3, 4, 5, 6)], 8, views(6), train=True)
        self.assertEqual(sum("over r" in p.program for p in plan.pieces), 2)
        # With running statistics (eval mode) batch_norm is elementwise.
        torch.manual_seed(15)
        m = ImageNorms()
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
        plan = self.stitched(m, [torch.randn(3, 4, 5, 6)], 4, views(8))
        self.assertEqual([p.family for p in plan.pieces], ["elementwise", "elementwise", "rowwise", "elementwise"])

    def test_a_long_group_norm_is_its_statistics_and_the_pool_takes_the_normalization(self):
        # Groups of 2 x 8 x 10 = 160 elements. Over GROUP_STATS_ROW, group_norm is its statistics
        # (two row-wise pieces over the [N, G, 160] view, the second reading the first's mean at
        # [r]), spread to [N, C, 1, 1] by PyTorch, and elementwise ops the pool reads its window
        # through; at most that, a layer_norm piece whose affine the pool takes.
        x = torch.randn(2, 3, 10, 12)
        saved = stitch.GROUP_STATS_ROW
        try:
            for limit, vendor, families, kept in (
                    (159, False, ["conv", "rowwise", "rowwise", "direct"], ["expand"] * 2 + ["reshape"] * 5),
                    (159, True, ["rowwise", "rowwise", "direct"], ["conv2d"] + ["expand"] * 2 + ["reshape"] * 5),
                    (160, False, ["conv", "rowwise", "direct"], ["reshape"] * 4),
                    (160, True, ["rowwise", "direct"], ["conv2d"] + ["reshape"] * 4)):
                with self.subTest(limit=limit, vendor=vendor):
                    stitch.GROUP_STATS_ROW = limit
                    torch.manual_seed(21)
                    plan = self.stitched(ConvGroupNormPool(), [x], len(families), kept, vendor=vendor)
                    self.assertEqual([p.family for p in plan.pieces], families)
                    pool = plan.pieces[-1]
                    self.assertEqual(pool.nodes[-2:], ["pool", "clamp"])
                    self.assertIn("mul", pool.nodes)  # the affine and the scale, in the pool's prologue
                    if limit == 159:
                        var = plan.pieces[-2]
                        self.assertIn("input1[r]", var.program)
                        self.assertIn("rsqrt", var.program)
                        self.assertIn("input1[n, c]", pool.program)  # the spread mean
        finally:
            stitch.GROUP_STATS_ROW = saved

    def test_a_row_wise_op_after_a_gemm_and_a_pool_takes_the_ops_between_as_its_prologue(self):
        # The pool continues the GEMM's chain; the GELU after it (the squeeze a kept view between)
        # is the softmax's prologue, not a piece of its own.
        torch.manual_seed(22)
        plan = self.stitched(GemmPoolSoftmax(), [torch.randn(4, 16)], 3, ["unsqueeze", "squeeze"])
        self.assertEqual([(p.family, p.nodes) for p in plan.pieces],
                         [("gemm", ["fc"]), ("direct", ["max_pool1d"]), ("rowwise", ["gelu", "softmax"])])

    def test_a_per_channel_factor_moved_after_a_spatial_mean_loses_the_spatial_dims(self):
        # mean(relu(x) * w, spatial dims) with w [C, 1, 1] (or [C, 1]): w moves after the mean as
        # [1, C], so the output stays [N, C] (not [C, N, C]).
        for shape in ((2, 8, 5, 6), (2, 8, 7)):
            with self.subTest(shape=shape):
                torch.manual_seed(23)
                m = SpatialMeanScaled(len(shape))
                plan = self.stitched(m, [torch.randn(*shape)], 2, ["reshape"])
                self.assertEqual(plan.pieces[-1].shape, [2, 8])

    def test_an_average_pool_after_a_convolution_is_folded_into_its_filter(self):
        # avg_pool(conv(x, W, b)) is one conv at the strides' product with W averaged over the
        # window: the conv piece reads that filter as an input, its output is the pool's, and
        # the stitched whole computes what the module does (float64).
        cases = [((2, 4, 22, 23), {}, (6, 6)),                        # 3x3 then 4x4: floor mode, 20 x 21 -> 5 x 5
                 ((2, 4, 25, 27), {"stride": 2, "padding": 1, "dilation": 3, "window": 2, "pool_stride": 3}, (9, 9)),
                 ((2, 4, 16, 15), {"groups": 2, "window": 3, "functional": True}, (5, 5))]
        for shape, kw, taps in cases:
            with self.subTest(**kw):
                torch.manual_seed(3)
                m = ConvAvgPool(**kw)
                with torch.no_grad():
                    want = m.pool(m.conv(torch.randn(*shape))).shape if not kw.get("functional") else \
                        F.avg_pool2d(m.conv(torch.randn(*shape)), kw["window"]).shape
                # The sum over the channels after it is the conv family's epilogue too (one piece);
                # a grouped convolution is the direct family's, and the sum a piece of its own.
                fused = not kw.get("groups")
                plan = self.stitched(m, [torch.randn(*shape)], 1 if fused else 2, ["avgpoolfold"])
                conv = plan.pieces[0]
                self.assertEqual(conv.family, "conv" if fused else "direct")
                self.assertEqual(len(conv.inputs), 2, conv.inputs)  # the image and the folded filter
                self.assertNotIn("conv.weight", conv.params)
                self.assertIn("sigmoid", conv.program)
                self.assertEqual(conv.shape, [want[0]] + list(want[2:]) if fused else list(want))
                if fused:
                    self.assertIn("output0[n, h, w] = sum(", conv.program)
                self.assertIn("weight preparation", plan.kept[0]["reason"])
                # The folded filter: the window's extent times the conv's stride, plus the taps' reach.
                f = [t for t in conv.tensors if t["name"] == "input1"][0]
                self.assertEqual([conv.dims[d] for d in f["shape"][-2:]], list(taps), f)

    def test_an_average_pool_after_a_1d_or_3d_convolution_is_folded_too(self):
        for rank, shape in ((1, (2, 4, 30)), (3, (2, 4, 9, 10, 11))):
            with self.subTest(rank=rank):
                torch.manual_seed(4)
                plan = self.stitched(ConvAvgPool(rank=rank, window=2), [torch.randn(*shape)], 2, ["avgpoolfold"])
                self.assertEqual(len(plan.pieces[0].inputs), 2)

    def test_an_average_pool_at_a_transposed_convolutions_stride_is_a_convolution(self):
        # The pool of what a stride-s transposed convolution made, at stride s: a convolution at
        # stride 1 of the padded image by the folded filter (one direct piece with the epilogue),
        # the scaling between the two moved after the pool.
        cases = [(3, (2, 4, 5, 6, 7), {}),
                 (2, (2, 4, 9, 8), {"k": 4, "stride": 2, "padding": 1, "output_padding": 1}),
                 (2, (2, 4, 7, 9), {"k": 3, "stride": 3, "padding": 2, "dilation": 2, "groups": 2}),
                 (1, (2, 4, 11), {"k": 5, "stride": 2, "padding": 0, "window": None}),
                 (2, (2, 4, 6, 7), {"k": 3, "stride": 2, "padding": 1, "window": 3})]  # pool window 3, stride 2
        for rank, shape, kw in cases:
            with self.subTest(rank=rank, **kw):
                torch.manual_seed(6)
                m = ConvTransposeAvgPool(rank=rank, **kw)
                if kw.get("window") == 3:
                    m.pool = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)[rank - 1](3, 2)
                plan = self.stitched(m, [torch.randn(*shape)], 1, ["transposedavgpoolfold"])
                self.assertEqual(plan.pieces[0].family, "direct")
                self.assertEqual(len(plan.pieces[0].inputs), 2)
                self.assertNotIn("/", plan.pieces[0].program.split("{")[1].split("}")[0].split("=")[1])

    def test_an_average_pool_at_another_stride_than_the_transposed_convolutions_is_not_folded(self):
        torch.manual_seed(7)
        m = ConvTransposeAvgPool(rank=2, stride=2)
        m.pool = nn.AvgPool2d(3)
        plan = stitch.split(m, [torch.randn(2, 4, 6, 6)])
        self.assertFalse([k for k in plan.kept if "fold" in k["op"]], plan.summary())

    def test_a_transposed_convolution_at_stride_1_is_the_conv_familys_by_its_flipped_filter(self):
        # conv_transpose(x, W, b) at stride 1 = conv(x, W as [K, C, T...] flipped, b) padded by
        # d*(T-1) - p: one conv piece with the epilogue, its filter a weight preparation.
        cases = [(2, (2, 4, 7, 9), {}, "h+r-2, w+s-2"),
                 (2, (2, 4, 7, 9), {"k": (3, 5), "padding": (1, 2), "dilation": (2, 1), "functional": True}, "h+r*2-3, w+s-2"),
                 (2, (2, 4, 6, 5), {"k": 3, "padding": 2, "bias": False}, "h+r, w+s"),
                 (1, (2, 4, 11), {"k": 4, "padding": 1}, "w+s-2")]
        for rank, shape, kw, reads in cases:
            with self.subTest(rank=rank, **kw):
                torch.manual_seed(11)
                plan = self.stitched(ConvTransposeStrideOne(rank=rank, **kw), [torch.randn(*shape)], 1, ["transposedfilterflip"])
                conv = plan.pieces[0]
                self.assertEqual(conv.family, "conv")
                self.assertIn(reads, conv.program)
                self.assertIn("tanh", conv.program)
                self.assertNotIn("conv.weight", conv.params)
                self.assertIn("weight preparation", plan.kept[0]["reason"])

    def test_a_reduction_over_a_flipped_convolutions_channels_is_its_epilogue(self):
        # The rewrites run again over the convolution the flip made: the minimum over its channels
        # joins its program (one piece); a mean over its positions is folded whole instead
        # (GlobalPoolFold), the transposed convolution never flipped.
        class Min(nn.Module):
            def __init__(self):
                super().__init__()
                self.ct = nn.ConvTranspose2d(4, 6, 3, padding=1)

            def forward(self, x):
                return torch.tanh(torch.amin(self.ct(x), dim=1, keepdim=True))

        class Mean(Min):
            def forward(self, x):
                return torch.mean(self.ct(x), dim=(2, 3)) * 2.0

        torch.manual_seed(13)
        plan = self.stitched(Min(), [torch.randn(2, 4, 7, 6)], 1, ["transposedfilterflip"])
        self.assertEqual(plan.pieces[0].family, "conv")
        self.assertIn("= min(", plan.pieces[0].program)
        plan = stitch.split(Mean(), [torch.randn(2, 4, 7, 6)])
        self.assertEqual(sorted(k["op"] for k in plan.kept if k["op"] in stitch.WEIGHT_PREP), ["globalpoolfold", "globalpoolfold"])

    def test_transposed_convolutions_that_are_no_stride_1_convolution_stay_the_direct_familys(self):
        # A stride of 2, groups, output padding (with dilation 2 at stride 1), padding past the
        # taps' reach, 3-D: not flipped.
        cases = [(2, (2, 4, 5, 6), {"stride": 2}), (2, (2, 4, 5, 6), {"groups": 2}),
                 (2, (2, 4, 5, 6), {"dilation": 2, "output_padding": 1}), (2, (2, 4, 9, 9), {"padding": 3}),
                 (3, (2, 4, 4, 5, 6), {})]
        for rank, shape, kw in cases:
            with self.subTest(rank=rank, **kw):
                torch.manual_seed(12)
                plan = self.stitched(ConvTransposeStrideOne(rank=rank, **kw), [torch.randn(*shape)], 1, [])
                self.assertEqual(plan.pieces[0].family, "direct")

    def test_a_sum_over_a_linear_layers_features_is_a_dot_product_with_its_folded_weights(self):
        # One row-wise piece over x (its rows' dot product with the weights' rows summed), the
        # bias's and the per-feature terms' own reductions and the scalings after it.
        for kind, shape, preps in ((0, (6, 12), 2), (1, (6, 12), 2), (2, (2, 3, 12), 2)):
            with self.subTest(kind=kind):
                torch.manual_seed(8)
                plan = self.stitched(LinearFeatureSum(kind), [torch.randn(*shape)], 1, ["featurereducefold"] * preps)
                self.assertEqual(plan.pieces[0].family, "rowwise")
                self.assertFalse([n for n in plan.gm.graph.nodes if _canon(n, plan.gm) in ("linear", "matmul")])

    def test_reductions_of_a_linear_layers_output_that_do_not_fold(self):
        torch.manual_seed(9)
        plan = stitch.split(LinearFeatureSumLeftAlone(), [torch.randn(6, 12)])
        self.assertFalse([k for k in plan.kept if k["op"] == "featurereducefold"], plan.summary())
        self.assertEqual(sum(1 for n in plan.gm.graph.nodes if _canon(n, plan.gm) == "linear"), 3)

    def test_an_average_pool_over_a_linear_layers_features_is_the_layer_with_rows_averaged(self):
        for kind, shape, pieces, kept in ((0, (6, 12), 1, ["featurepoolfold"] * 2),
                                          (1, (2, 5, 12), 1, ["featurepoolfold"] * 2),
                                          (2, (6, 12), 2, ["featurepoolfold", "unsqueeze"])):
            with self.subTest(kind=kind):
                torch.manual_seed(10)
                plan = self.stitched(LinearFeaturePool(kind), [torch.randn(*shape)], pieces, kept)
                self.assertEqual(plan.pieces[0].family, "gemm")
                self.assertFalse([n for n in plan.gm.graph.nodes if "pool" in _canon(n, plan.gm) and "fold" not in _canon(n, plan.gm)])

    def test_the_folds_edge_cases(self):
        # Each against the module in float64 (stitched): kind 0's two calls of fc fold each (weight
        # and bias); kind 1's N times the parameter is an elementwise piece after the row-wise one;
        # kind 3 is not folded (no tap to fold), kind 4's pool is kept (an unbatched image).
        for kind, shape, pieces, kept in ((0, (4, 8), 3, ["featurereducefold"] * 4), (1, (4, 8), 2, ["featurereducefold"] * 2),
                                          (2, (4, 8), 1, ["featurereducefold"] * 2), (3, (2, 2, 9), 2, []),
                                          (4, (4, 8, 8), 1, ["avg_pool2d"])):
            with self.subTest(kind=kind):
                torch.manual_seed(11)
                self.stitched(FoldEdges(kind), [torch.randn(*shape)], pieces, kept)

    def test_a_constant_added_after_a_scaling_is_not_scaled(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 6)

            def forward(self, x):
                return (self.fc(x) * 2 + 1).sum(-1)
        torch.manual_seed(12)
        plan = self.stitched(M(), [torch.randn(4, 8)], 1, ["featurereducefold"] * 2)
        self.assertEqual(plan.pieces[0].family, "rowwise")

    def test_a_mean_over_a_convolutions_positions_is_two_products(self):
        # x's sums over each tap's box (x viewed [N*C, I...] times the boxes' indicator), then
        # those by the filter over |O| plus the bias: two GEMM pieces, no convolution.
        for kind, shape in ((0, (2, 4, 7, 6)), (1, (2, 4, 5, 5)), (2, (2, 4, 11, 9)), (3, (2, 4, 19)), (4, (2, 4, 5, 6, 4))):
            with self.subTest(kind=kind):
                torch.manual_seed(13)
                plan = stitch.split(ConvGlobalMean(kind), [torch.randn(*shape)])
                self.assertEqual(sorted(k["op"] for k in plan.kept if k["op"] not in ("reshape",)),
                                 ["globalpoolfold"] * 2, plan.summary())
                self.assertEqual([p.family for p in plan.pieces][:2], ["gemm", "gemm"])
                self.stitched(ConvGlobalMean(kind), [torch.randn(*shape)], len(plan.pieces),
                              [k["op"] for k in plan.kept])
        for kind, shape in ((5, (2, 4, 11, 9)), (6, (2, 4, 11, 9))):
            with self.subTest(kind=kind):
                plan = stitch.split(ConvGlobalMean(kind), [torch.randn(*shape)])
                self.assertFalse([k for k in plan.kept if k["op"] == "globalpoolfold"], plan.summary())

    def test_a_batch_norms_affine_moves_after_a_pool_without_padding(self):
        for kind, shape, fold in ((0, (2, 3, 4, 5, 4), "globalpoolfold"), (1, (2, 3, 10, 12), "avgpoolfold"), (2, (2, 3, 10, 12), None)):
            with self.subTest(kind=kind):
                torch.manual_seed(14)
                m = ConvNormPool(kind).eval()
                plan = stitch.split(m, [torch.randn(*shape)])
                folds = [k["op"] for k in plan.kept if "fold" in k["op"]]
                self.assertEqual(bool(folds), fold is not None, plan.summary())
                if fold:
                    self.assertIn(fold, folds)
                self.stitched(m, [torch.randn(*shape)], len(plan.pieces), [k["op"] for k in plan.kept])

    def test_average_pools_that_do_not_fold_are_left_to_the_pool_rewrites(self):
        torch.manual_seed(5)
        plan = stitch.split(ConvAvgPoolLeftAlone(), [torch.randn(2, 3, 12, 12)])
        self.assertFalse([k for k in plan.kept if k["op"] == "avgpoolfold"], plan.summary())
        self.assertFalse([n for n in plan.gm.graph.nodes if n.op == "call_module" and "fold" in str(n.target)])

    def test_global_and_long_pools_are_reductions_small_windows_stay_pools(self):
        torch.manual_seed(16)
        plan = self.stitched(ConvPoolTiles(), [torch.randn(2, 3, 10, 14)], 6, ["reshape", "unsqueeze"])
        self.assertEqual([p.family for p in plan.pieces], ["conv", "direct", "rowwise", "direct", "rowwise", "elementwise"])
        # The 2x2 max pool is one direct piece, the ReLU its epilogue (reductions over its window
        # dims would be rows of two elements); the global pool one row-wise mean.
        self.assertEqual(plan.pieces[1].nodes, ["pool", "relu"])
        self.assertIn("max(input0[n, c, h*2+r, w*2+s]) over r:2, s:2", plan.pieces[1].program)
        self.assertIn("mean(v1[r, c]) over c", plan.pieces[2].program)
        # A 1-D pool of 32 or more elements a window is a row-wise reduction over them; an adaptive
        # pool (which the direct family does not take) is reductions over its window dims.
        long = self.stitched(nn.Sequential(nn.AvgPool1d(32), nn.Tanh()), [torch.randn(2, 3, 64)], 1, ["reshape"])
        self.assertEqual([p.family for p in long.pieces], ["rowwise"])
        adaptive = self.stitched(nn.AdaptiveMaxPool2d((2, 3)), [torch.randn(2, 3, 4, 6)], 2, ["reshape"])
        self.assertEqual([p.family for p in adaptive.pieces], ["rowwise", "rowwise"])
        self.assertIn("output0[b, c] = max(input0[b, r, c]) over r", adaptive.pieces[1].program)
        # Overlapping or padded windows are a direct piece, the ReLU its epilogue.
        m = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.ReLU())
        plan = self.stitched(m, [torch.randn(2, 3, 8, 8)], 1, [])
        self.assertEqual(plan.pieces[0].family, "direct")
        self.assertIn("outside -inf", plan.pieces[0].program)

    def test_softmax_and_logsumexp_over_channels_are_column_reductions(self):
        torch.manual_seed(17)
        plan = self.stitched(ChannelSoftmax(), [torch.randn(2, 3, 4, 5)], 10, [])
        sums = [p for p in plan.pieces if "sum(" in p.program]
        self.assertEqual(len(sums), 3)
        # exp(x - max) summed over the channels reads the max at the output's own index [b, c].
        self.assertIn("output0[b, c] = sum((exp(((input0[b, r, c] - input1[b, c]))))) over r", sums[0].program)
        self.assertEqual(sums[0].tensors[1]["shape"], ["B", "U", "C0", "C1"])

    def test_losses_are_their_pointwise_terms_and_a_reduction(self):
        torch.manual_seed(19)
        # The sum of the three 0-d losses joins the pieces that reduce to them: a 0-d loss computed
        # before is read as one value (`input2[]`), and the 0-d output is laid out as the module's [].
        plan = self.stitched(Losses(), [torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6)], 7, [])
        self.assertEqual([p.family for p in plan.pieces], ["rowwise"] * 7)
        last = {t["name"]: t["shape"] for t in plan.pieces[-1].tensors}
        self.assertEqual((last["input2"], last["output0"]), ([], []))
        self.assertIn("output0[r] = ((input2[] + v2[r]))", plan.pieces[-1].program)
        self.assertIn("min(v1[r, c], 0.5)", plan.pieces[0].program)
        kept = synth.synthesize(Losses(), [torch.randn(4, 6)] * 3)["reason"]
        self.assertIn("smooth_l1_loss", kept)  # one program synth refuses; stitching decomposes it

    def test_cross_entropy_is_a_row_wise_logsumexp_less_the_targets_logits(self):
        torch.manual_seed(23)
        x, t = torch.randn(6, 5) * 3, torch.tensor([0, 4, 2, 2, 1, 3])
        kept = ["gather", "mul", "ne", "squeeze", "sum", "truediv", "unsqueeze", "where"]
        # An ignored row may hold infinite logits: its term is 0, as PyTorch's, not inf * 0.
        x_inf = x.clone()
        x_inf[2, 0], x_inf[3, 1] = float("-inf"), float("inf")
        for model, logits in ((CrossEntropy(), x), (CrossEntropy(ignore_index=2), x),
                              (CrossEntropy(module=True, ignore_index=2), x), (CrossEntropy(ignore_index=2), x_inf)):
            # One pass over the logits (the rows' logsumexp), the difference and the sum of the
            # counted terms; the gather of the targets' logits and the index arithmetic stay PyTorch.
            plan = self.stitched(model, [logits, t], 3, kept)
            self.assertIn("logsumexp", plan.pieces[0].nodes[-1])
            self.assertEqual(plan.pieces[0].family, "rowwise")
        for kw, n, k in (({"reduction": "sum"}, 3, [o for o in kept if o not in ("sum", "truediv")]),
                         ({"reduction": "none", "ignore_index": 4}, 2, [o for o in kept if o not in ("sum", "truediv")])):
            self.stitched(CrossEntropy(module=True, **kw), [x, t], n, k)
        # Label smoothing, class weights and probability targets keep the loss a PyTorch call.
        self.stitched(CrossEntropy(label_smoothing=0.1), [x, t], 0, ["cross_entropy"])
        self.stitched(CrossEntropy(module=True, weight=torch.rand(5)), [x, t], 0, ["crossentropyloss"])
        self.stitched(CrossEntropy(), [x, torch.softmax(torch.randn(6, 5), 1)], 0, ["cross_entropy"])

    def test_a_full_reduction_is_one_over_rows_then_one_over_their_values(self):
        torch.manual_seed(29)
        x, t, y, z = torch.randn(3, 1100), torch.randn(1100), torch.randn(2, 4, 600), torch.randn(2, 10)
        plan = self.stitched(FullReductions(), [x, t, y, z], 5, [])
        nodes = [p.nodes for p in plan.pieces]
        # The hinge's elementwise terms join the mean over each row of 1100; the rows' means are
        # a second piece. The max's rows are y's [4, 600]; z's rows of 10 stay one row of 20, which
        # the sum of the two 0-d values joins.
        self.assertEqual(["rowwise"] * 5, [p.family for p in plan.pieces], nodes)
        first = next(p for p in plan.pieces if "mul" in p.nodes)
        self.assertEqual((first.dims["R"], first.dims["C"]), (3, 1100))
        self.assertIn("input1[c]", first.program)
        rows_of_y = next(p for p in plan.pieces if p.dims.get("C") == 2400)
        self.assertEqual(rows_of_y.dims["R"], 2)
        self.assertTrue(any(p.dims.get("C") == 20 and p.dims["R"] == 1 for p in plan.pieces), nodes)

    def test_reductions_the_rewrites_leave_alone(self):
        class M(nn.Module):
            def forward(self, x, y, z):
                a = torch.sum(x * 2, 1, dtype=torch.float64).float()  # a dtype argument
                b = torch.sum(y * 2)                                   # 0-d, over dims of one element
                c = (z > 0).sum(1) + (z > 0).sum(1)                    # int64 counts of bools, over one element
                return a.sum() + b + c.sum()
        torch.manual_seed(37)
        x, y, z = torch.randn(4, 8), torch.randn(1, 1), torch.randn(4, 1, 6)
        plan = stitch.split(M(), [x, y, z])
        calls = stitch.compiled(plan, dsl_runner)
        with torch.no_grad():
            # (a's cast to float32 rounds in the module, not in the float64 evaluator's pieces)
            torch.testing.assert_close(calls(x.double(), y.double(), z.double()), M()(x.double(), y.double(), z.double()),
                                       rtol=1e-6, atol=1e-6)
        ops = [_canon(n, plan.gm) for n in plan.gm.graph.nodes]
        self.assertEqual(ops.count("sum"), 5, ops)  # z's two sums of bools stay sums (int64), not the bools

    def test_a_reduction_over_dims_of_one_element_is_its_input(self):
        torch.manual_seed(31)
        plan = self.stitched(ReductionsOverOnes(), [torch.randn(5, 6)], 4, ["reshape"])
        self.assertEqual([p.family for p in plan.pieces], ["gemm", "rowwise", "elementwise", "elementwise"])
        ops = {_canon(n, plan.gm) for n in plan.gm.graph.nodes if n.op != "placeholder"}
        self.assertFalse(ops & {"max", "mean", "logsumexp", "amax"}, ops)

    def test_a_value_read_outside_its_chain_ends_the_piece(self):
        torch.manual_seed(3)
        plan = self.stitched(SharedValue(), [torch.randn(4, 6)], 3, ["cat", "squeeze", "unsqueeze"])
        for p in plan.pieces:
            # Every node inside a piece but its last is read only inside it.
            inner = set(p.nodes[:-1])
            for n in plan.gm.graph.nodes:
                if n.name not in p.nodes:
                    self.assertFalse({a.name for a in n.all_input_nodes} & inner, (p.nodes, n.name))

    def test_each_piece_is_a_program_synth_writes_on_its_own_tensors(self):
        torch.manual_seed(4)
        model = MlpBlock().eval()
        plan = stitch.split(model, [torch.randn(5, 16)])
        for p in plan.pieces:
            self.assertTrue(p.program.startswith("# Lowered by ksol"), p.program)
            names = [t["name"] for t in p.tensors]
            self.assertEqual(names[:len(p.inputs)], [f"input{i}" for i in range(len(p.inputs))])
            self.assertEqual(names[-1], "output0")
            self.assertEqual(len(names), len(p.inputs) + len(p.params) + 1)

    def test_a_refused_op_in_a_chain_leaves_the_rest_to_a_piece(self):
        # A local response norm has no DSL form: it stays a call, and the ReLU
        # after it is still a piece, the pool's prologue.
        torch.manual_seed(5)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.LocalResponseNorm(2), nn.ReLU(), nn.MaxPool2d(2))
        plan = self.stitched(model, [torch.randn(2, 3, 9, 9)], 2, ["local_response_norm"])
        self.assertEqual([p.family for p in plan.pieces], ["conv", "direct"])
        self.assertEqual(len(plan.pieces[1].nodes), 2)  # the second ReLU and the pool
        lrn = next(k for k in plan.kept if k["op"] == "local_response_norm")
        self.assertIn("local_response_norm", lrn["reason"])

    def test_eval_mode_batch_norm_is_a_conv_epilogue(self):
        # With running statistics: 1/sqrt(var + eps) per channel is a piece of its own; the
        # normalization, the affine and the ReLU are the convolution's epilogue.
        torch.manual_seed(5)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        with torch.no_grad():
            model[1].running_mean.uniform_(-1, 1)
            model[1].running_var.uniform_(0.5, 2)
        plan = self.stitched(model, [torch.randn(2, 3, 9, 9)], 3, ["reshape"] * 4)
        self.assertEqual([p.family for p in plan.pieces], ["elementwise", "conv", "direct"])
        self.assertEqual(plan.pieces[1].nodes[-1], "_2")  # the ReLU (Sequential index 2)

    def test_a_broadcast_input_joins_the_piece(self):
        torch.manual_seed(6)
        inputs = [torch.rand(8, 16), torch.randint(0, 2, (16,)).float() * 2 - 1]
        plan = self.stitched(HingeLoss(), inputs, 2, [])
        self.assertEqual(plan.pieces[0].nodes, ["mul", "sub", "clamp"])  # the mul, 1 - x and the clamp
        self.assertEqual(plan.pieces[0].inputs, ["predictions", "targets"])
        self.assertEqual([t["shape"] for t in plan.pieces[0].tensors], [["D0", "D1"], ["D1"], ["D0", "D1"]])
        # The mean of everything is one row of every element, its output the 0-d scalar.
        self.assertEqual(plan.pieces[1].family, "rowwise")
        self.assertEqual((plan.pieces[1].dims["R"], plan.pieces[1].dims["C"]), (1, 128))
        self.assertEqual(plan.pieces[1].tensors[-1]["shape"], [])

    def test_layernorm_over_trailing_dims_is_a_piece(self):
        torch.manual_seed(7)
        plan = self.stitched(ConvLayerNorm(), [torch.randn(2, 3, 7, 8)], 2, [])
        self.assertEqual(plan.pieces[0].family, "conv")
        p = plan.pieces[1]
        self.assertEqual(p.family, "rowwise")
        self.assertEqual(p.dims, {"R": 2, "C": 120, "C0": 4, "C1": 5, "C2": 6})
        self.assertEqual(p.params, ["ln.weight", "ln.bias"])

    def test_constants_the_forward_makes_are_numbers_of_the_piece(self):
        # torch.tensor(0.5, device=x.device) traces, and fx's _tensor_constant<i> are not
        # parameters of the piece's table: the program reads them as numbers.
        torch.manual_seed(3)
        # The elementwise min and max of the constants are the conv's epilogue.
        plan = self.stitched(ConstantsInTheForward(), [torch.randn(2, 4, 10, 10)], 1, [])
        self.assertEqual([p.family for p in plan.pieces], ["conv"])
        self.assertEqual(plan.pieces[0].params, ["conv.weight", "conv.bias"])
        self.assertIn("(min((acc[n, k, h, w] + w_conv_bias[k]), 0.5))", plan.pieces[0].program)
        self.assertIn("(-0.25)", plan.pieces[0].program)

    def test_a_python_number_the_same_in_every_draw_is_a_constant_of_the_pieces(self):
        torch.manual_seed(8)
        x = torch.randn(4, 6, 3)  # the mean over dims 0 and 2 is over neither trailing nor consecutive dims: kept
        model = ScaledMean().eval()
        plan = stitch.split(model, [x, 0.75], draw=lambda seeds: [[None, 0.75] for _ in seeds])
        self.assertEqual(len(plan.pieces), 2, plan.summary())
        self.assertEqual(sorted(k["op"] for k in plan.kept), ["mean"])
        self.assertEqual([c["argument"] for c in plan.summary()["constants"]], ["s"])
        self.assertIn("* 0.75", plan.pieces[0].program)
        for p in plan.pieces:
            self.assertNotIn("s", p.inputs)
        cm = stitch.compiled(plan, dsl_runner).double()
        with torch.no_grad():
            torch.testing.assert_close(cm(x.double(), 0.75), model.double()(x.double(), 0.75), rtol=1e-10, atol=1e-12)
        # A number that changes between draws stays an input: the ops reading it stay PyTorch calls, with the reason.
        plan = stitch.split(model, [x, 0.75], draw=lambda seeds: [[None, 0.75 + s] for s in seeds])
        mul = next(k for k in plan.kept if k["op"] == "mul")
        self.assertIn("changes between draws", mul["reason"])

    def test_synth_says_what_stitching_would_make(self):
        import os
        from ksol_torch import __main__ as cli
        r = cli._synth_one(os.path.join(os.path.dirname(__file__), "problems", "03_conv_bn_relu.py"), 0)
        self.assertIsNone(r["program"])
        self.assertEqual(r["stitch"]["pieces"], ["elementwise", "direct"])  # its conv pads by reflection: kept
        self.assertIn("2 DSL piece(s) (elementwise, direct)", r["reason"])
        self.assertIn("evaluated stitched back together", r["reason"])


if __name__ == "__main__":
    unittest.main()
