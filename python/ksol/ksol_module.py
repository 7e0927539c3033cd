"""KsolModule, the module load() returns where a run returned kernels (docs/PYTHON.md). Kept
apart from module.py so that `import ksol` needs no PyTorch: this file is imported on first use."""
import warnings
from typing import Sequence

import torch



def signature(args: Sequence):
    """What a kernel was built for: each tensor's shape and dtype, each other argument's value."""
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", a) for a in args)


def _describe(sig) -> str:
    return "(" + ", ".join(f"{str(b).replace('torch.', '')} {list(a)}" if a != "value" else repr(b) for a, b in sig) + ")"


class KsolModule(torch.nn.Module):
    """A module whose forward runs ksol's verified kernels.

    `model` is the original (the run's problem file's Model: the weights as they were when the
    run was made) and holds the parameters the kernels read; the kernels are built for the
    run's input shapes and dtypes. A call with other shapes, or in training mode, runs
    `model` instead (PyTorch), with a warning the first time. Inference only: no autograd
    runs through the kernels. `ksol_result` says what the run returned and how fast it was;
    `ksol_call_path` how the kernels are called: "torch-op" (ksol::run, abi_op.py) or "ctypes"."""

    uses_ksol_kernels = True

    def __init__(self, model, result, built_for, device_type, whole=None, stitched=None, kernels=()):
        super().__init__()
        self.model = model
        self.ksol_result = result
        self.ksol_verification = None
        self._signature = built_for  # signature() of the inputs the kernels are built for
        self._device_type = device_type
        self._whole = whole          # the kernel (abi.open_kernel's) of one program for the whole forward
        self.stitched = stitched     # the stitched GraphModule (a submodule: it shares model's parameters)
        self.ksol_kernels = [whole] if whole is not None else list(kernels)  # each has call_path, path, label
        paths = {k.call_path for k in self.ksol_kernels}
        self.ksol_call_path = paths.pop() if len(paths) == 1 else "mixed"
        self._params = None
        self._warned = set()

    def _apply(self, fn, *args, **kwargs):
        self._params = None  # .to(), .cuda(), .half(): the table takes the tensors as they are after it
        return super()._apply(fn, *args, **kwargs)

    def _fallback(self, why, args):
        if why not in self._warned:
            self._warned.add(why)
            warnings.warn(f"ksol: {why}: running the PyTorch module instead", stacklevel=4)
        return self.model(*args)

    def forward(self, *args):
        if self.training:
            return self._fallback("ksol's kernels compute the module in eval mode, and it is in training mode", args)
        sig = signature(args)
        if sig != self._signature:
            return self._fallback(f"ksol's kernels are built for inputs {_describe(self._signature)}, not {_describe(sig)}",
                                  args)
        devs = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if devs != {self._device_type}:
            raise RuntimeError(f"ksol's kernels run on {self._device_type} tensors; the inputs are on "
                               f"{', '.join(sorted(devs))} (move them, e.g. with .to('{self._device_type}'))")
        with torch.no_grad():
            if self.stitched is not None:
                return self.stitched(*args)
            if self._params is None:
                self._params = list(self.model.state_dict().values())
            # ksol::run checks every tensor's device itself; ctypes would hand a host pointer to
            # a CUDA kernel, so that path checks here.
            if self.ksol_call_path == "ctypes" and any(p.device.type != self._device_type for p in self._params):
                raise RuntimeError(f"ksol's kernels run on {self._device_type}; the module's parameters are not there "
                                   f"(move the module, e.g. with .to('{self._device_type}'))")
            outs = self._whole([a for a in args if isinstance(a, torch.Tensor)] + self._params)
            return outs[0] if len(outs) == 1 else tuple(outs)

    def extra_repr(self):
        return self.ksol_result.summary()
