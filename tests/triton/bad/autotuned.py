"""A kernel under @triton.autotune: ksol refuses it (it tunes the configs itself)."""
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(kernel, x, y):
    out = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())
    return out


def get_inputs():
    return [torch.randn(1 << 20), torch.randn(1 << 20)]
