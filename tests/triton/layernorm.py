"""Layer normalization over the last dimension with a weight and a bias, written as a Triton user
would: one program per row, three passes over the row in blocks of BLOCK_SIZE columns (the mean,
the variance, the normalized values). The input for ksol:
`ksol optimize layernorm.py --triton-fn layernorm_kernel`."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

ROWS, COLS = 4096, 4096
EPS = 1e-5


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        d = tl.where(cols < n_cols, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(y_row + cols, (x - mean) * rstd * w + b, mask=mask)


def launch(kernel, x, weight, bias, *, BLOCK_SIZE=512, num_warps=4):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    kernel[(n_rows,)](x, y, weight, bias, x.stride(0), n_cols, EPS, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.rand(COLS) + 0.5, torch.randn(COLS)]


def reference(x, weight, bias):
    return F.layer_norm(x, (COLS,), weight, bias, EPS)
