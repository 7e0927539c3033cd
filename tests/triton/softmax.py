"""A fused row softmax, written as a Triton user would: one program per row, which reads the row
in blocks of BLOCK_SIZE columns twice (an online max and sum, then the normalized values), so
any row length works. The input for ksol: `ksol optimize softmax.py --triton-fn softmax_kernel`."""
import torch
import triton
import triton.language as tl

ROWS, COLS = 4096, 8192


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    offs = tl.arange(0, BLOCK_SIZE)
    # Per lane: the largest value seen and the sum of exp(x - that value).
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has seen only masked columns keeps m = -inf; exp(-inf - 0) = 0 keeps its sum 0.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(out_row + cols, tl.exp(x - row_max) / row_sum, mask=cols < n_cols)


def launch(kernel, x, *, BLOCK_SIZE=1024, num_warps=4):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def reference(x):
    return torch.softmax(x, dim=-1)
