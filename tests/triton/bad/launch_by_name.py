"""launch calls the kernel by its global name, so the kernel ksol configures would never run:
ksol refuses it."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(kernel, x, y, *, BLOCK=1024):
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), BLOCK),)
    add_kernel[grid](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def get_inputs():
    return [torch.randn(1 << 20), torch.randn(1 << 20)]
