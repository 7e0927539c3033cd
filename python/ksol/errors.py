"""The exceptions ksol.optimize and ksol.load raise. Every one is a KsolError; each says what
went wrong and what to do about it in its message, and carries the details as attributes."""
from typing import Any, Dict, List, Optional


class KsolError(Exception):
    """Base class of every error the ksol package raises on purpose."""


class BinaryNotFoundError(KsolError, FileNotFoundError):
    """The `ksol` and `ksol-worker` binaries are not where ksol looks (`tried`: each place and
    what was missing there). The message says how to build them."""

    def __init__(self, message: str, tried: List[str]):
        super().__init__(message)
        self.tried = tried


class UnsupportedError(KsolError, ValueError):
    """A module, an input or a precision that ksol.optimize cannot take, with the reason. Nothing
    was run."""


class NoGPUError(KsolError):
    """There is no GPU to time or run ksol's kernels on. From ksol.optimize: `ksol optimize` said
    so in its first line (`notice`) and stopped with exit status 77 after tracing, lowering and
    compiling what it could (`details`: its JSON, with `lowered`, `family` and `pieces`). From
    ksol.load: the run's kernels are CUDA and this process sees no CUDA device."""

    exit_status = 77

    def __init__(self, message: str, reason: str = "", notice: str = "", details: Optional[Dict[str, Any]] = None,
                 run_dir: str = ""):
        super().__init__(message)
        self.reason, self.notice, self.details, self.run_dir = reason, notice, details or {}, run_dir


class RunFailedError(KsolError):
    """`ksol optimize` ended with an error (exit status 1: the front end or a compile failed; 2:
    a bad command line, a bug in this package; 128+N: interrupted by signal N). `log` is the end
    of what it printed; the whole is in `log_path`."""

    def __init__(self, message: str, exit_status: int, command: List[str], log: str = "", log_path: str = ""):
        super().__init__(message)
        self.exit_status, self.command, self.log, self.log_path = exit_status, command, log, log_path


class RunDirError(KsolError):
    """A run folder that cannot be loaded: a file missing or unreadable, a library that is
    neither in the folder nor where the run left it, a module whose plan no longer matches."""


class VerificationError(KsolError):
    """The module built from a run's kernels does not compute what the original does, on fresh
    inputs, within the tolerance of the run's precision: `gate` and `error_class` are the
    correctness gate's (docs/TORCH.md), `message` names the case, element and values."""

    def __init__(self, message: str, gate: str = "", error_class: str = "", run_dir: str = ""):
        super().__init__(message)
        self.gate, self.error_class, self.run_dir = gate, error_class, run_dir
