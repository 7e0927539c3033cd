"""ksol for PyTorch users: `ksol.optimize(model, inputs)` searches kernels for a module with the
ksol CLI and returns a module that runs the ones it verified; `ksol.load(run_dir)` builds the
same module again from the run's folder. docs/PYTHON.md describes the API.

Importing this package needs no PyTorch; optimize and load do.
"""
from .binaries import Binaries, find_binaries
from .errors import (BinaryNotFoundError, KsolError, NoGPUError, RunDirError, RunFailedError, UnsupportedError,
                     VerificationError)
from .module import load
from .optimize import optimize
from .run_dir import RunResult, read_run

__version__ = "0.1.0"


def __getattr__(name):
    # KsolModule needs PyTorch: imported when asked for, so that `import ksol` does not.
    if name == "KsolModule":
        from .ksol_module import KsolModule
        return KsolModule
    raise AttributeError(f"module 'ksol' has no attribute {name!r}")

__all__ = ["optimize", "load", "read_run", "KsolModule", "find_binaries", "Binaries", "RunResult", "KsolError", "BinaryNotFoundError",
           "UnsupportedError", "NoGPUError", "RunFailedError", "RunDirError", "VerificationError"]
