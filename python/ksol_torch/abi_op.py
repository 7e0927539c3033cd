"""ksol's ABI as PyTorch operators (csrc/abi_op.cpp): `ksol::bind` loads a verified library and
records the tensor table it was verified with, `ksol::run` calls it on tensors through PyTorch's
dispatcher, on PyTorch's current CUDA stream.

The extension is built once per PyTorch, CUDA and Python version with torch.utils.cpp_extension
(its `load`, which needs ninja; where there is no ninja, one compiler command with the include
and library paths and C++ ABI it gives) into `$KSOL_CACHE_DIR/torch_ext/<versions>/` (else
`$XDG_CACHE_HOME/ksol/...`, else `~/.cache/ksol/...`), and loaded into this process. It needs a
C++ compiler; nvcc is not used, and for CUDA only cuda_runtime_api.h, for the stream. Where it cannot be built, `status()` says why
and abi.open_kernel falls back to ctypes. The library a kernel calls is never rebuilt: ksol::bind
dlopens the file the gates verified.
"""
import dataclasses
import glob
import hashlib
import importlib.util
import logging
import os
import re
import subprocess
import sys
import threading
from typing import List, Optional, Sequence, Tuple

import torch

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "abi_op.cpp")
NAME = "ksol_abi_op"
log = logging.getLogger("ksol")


@dataclasses.dataclass
class Status:
    ok: bool
    reason: str = ""            # why not, where not ok
    with_cuda: bool = False     # the op can call CUDA libraries on PyTorch's stream
    cuda_reason: str = ""       # why not, where ok but without CUDA
    build_dir: str = ""
    builder: str = ""           # "cpp_extension.load", or "compiler" where there is no ninja


_lock = threading.Lock()
_status: Optional[Status] = None


def cache_dir(env=None) -> str:
    """ksol's cache folder, as the CLI finds it (src/core/util.h's cache_dir)."""
    env = os.environ if env is None else env
    if env.get("KSOL_CACHE_DIR"):
        return env["KSOL_CACHE_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "ksol")
    return os.path.join(os.path.expanduser("~"), ".cache", "ksol")


def build_dir(with_cuda: bool, env=None) -> str:
    """Where this PyTorch's build of the extension lives: one folder per PyTorch, CUDA and Python
    version, since a build for one does not load in another."""
    tag = f"torch{torch.__version__}-{'cuda' + str(torch.version.cuda) if with_cuda else 'cpu'}-py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(cache_dir(env), "torch_ext", re.sub(r"[^A-Za-z0-9._+-]", "_", tag))


def cuda_include_dirs() -> List[str]:
    """Folders holding cuda_runtime_api.h for c10/cuda's headers: the CUDA toolkit PyTorch's
    cpp_extension finds (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda), else the CUDA
    runtime wheel PyTorch was installed with (nvidia/cuda_runtime, nvidia/cu*)."""
    from torch.utils import cpp_extension

    dirs = []
    home = cpp_extension.CUDA_HOME
    if home:
        dirs += [os.path.join(home, "include"), os.path.join(home, "targets", "x86_64-linux", "include"),
                 os.path.join(home, "targets", "sbsa-linux", "include")]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        dirs += [os.path.join(root, "cuda_runtime", "include")] + sorted(glob.glob(os.path.join(root, "cu*", "include")))
    for d in dirs:
        if os.path.isfile(os.path.join(d, "cuda_runtime_api.h")):
            return [d]
    return []


def abi_header_dir() -> Optional[str]:
    """The source tree's include/ (include/ksol/abi.h), where this package is the tree's python/."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(SOURCE))))
    d = os.path.join(root, "include")
    return d if os.path.isfile(os.path.join(d, "ksol", "abi.h")) else None


def build_flags(with_cuda: bool) -> Tuple[List[str], List[str], List[str]]:
    """(cflags, include dirs, ldflags) of the extension's build."""
    cflags, includes, ldflags = ["-O2"], [], []
    header = abi_header_dir()
    if header:
        cflags.append("-DKSOL_OP_ABI_HEADER")
        includes.append(header)
    if with_cuda:
        cflags.append("-DKSOL_OP_WITH_CUDA")
        includes += cuda_include_dirs()
        # c10::cuda::getCurrentCUDAStream is in PyTorch's own libc10_cuda; nothing of the CUDA
        # toolkit is linked, so the toolkit's version need not be PyTorch's.
        ldflags.append("-lc10_cuda")
    return cflags, includes, ldflags


def compiler() -> str:
    """The C++ compiler the operator is built with: $KSOL_TORCH_CXX, else `c++`, never $CXX. The
    operator must use the C++ runtime PyTorch's libraries use (the system's libstdc++): a
    compiler that brings its own (one that links libstdc++ statically, as a $CXX under /opt may)
    puts a second, uninitialised copy of iostreams in the process, and the operator's first
    formatted message then prints nothing or crashes."""
    return os.environ.get("KSOL_TORCH_CXX") or "c++"


def _build() -> Status:
    try:
        from torch.utils import cpp_extension
    except Exception as e:  # it runs tools on import (hipconfig, for one) that may fail
        return Status(False, f"torch.utils.cpp_extension cannot be imported: {type(e).__name__}: {e}")
    if not os.path.isfile(SOURCE):
        return Status(False, f"{SOURCE} is missing from the installed package")
    with_cuda, cuda_reason = False, ""
    if torch.version.cuda is None:
        cuda_reason = f"PyTorch {torch.__version__} is built without CUDA"
    elif not cuda_include_dirs():
        cuda_reason = ("no cuda_runtime_api.h for c10/cuda's headers (set CUDA_HOME to a CUDA toolkit, or install the "
                       "nvidia-cuda-runtime wheel of PyTorch's CUDA)")
    else:
        with_cuda = True
    folder = build_dir(with_cuda)
    cflags, includes, ldflags = build_flags(with_cuda)
    if not os.path.isfile(os.path.join(folder, NAME + ".so")):
        log.info("building ksol's torch operator in %s (once per PyTorch, CUDA and Python version)", folder)
    builder = "cpp_extension.load" if cpp_extension.is_ninja_available() else "compiler"
    saved_cxx = os.environ.get("CXX")
    try:
        # cpp_extension reads the compiler from $CXX when it builds: ksol's choice for the
        # operator's build, $CXX as it was afterwards.
        os.environ["CXX"] = compiler()
        os.makedirs(folder, exist_ok=True)
        # Loading registers the ops in torch.ops.ksol.
        if builder == "cpp_extension.load":
            # It rebuilds only when the source or the flags changed, and locks the folder
            # against a concurrent build.
            cpp_extension.load(NAME, [SOURCE], extra_cflags=cflags, extra_include_paths=includes, extra_ldflags=ldflags,
                               build_directory=folder, is_python_module=False, verbose=False)
        else:
            torch.ops.load_library(_compile(cpp_extension, folder, cflags, includes, ldflags))
    except Exception as e:  # a compiler error, a missing compiler, an unwritable cache
        text = " ".join(str(e).split())
        return Status(False, f"building {SOURCE} in {folder} ({builder}, {compiler()}) failed: {type(e).__name__}: {text[-1500:]}",
                      build_dir=folder, builder=builder)
    finally:
        if saved_cxx is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved_cxx
    return Status(True, with_cuda=bool(torch.ops.ksol.built_with_cuda()), cuda_reason=cuda_reason, build_dir=folder,
                  builder=builder)


def _compile(cpp_extension, folder: str, cflags: List[str], includes: List[str], ldflags: List[str]) -> str:
    """The extension built by one compiler command, where cpp_extension.load cannot run (no
    ninja): cpp_extension's include and library paths, PyTorch's C++ ABI, the compiler's default
    language standard. The library's name carries a digest of the source and the command, so a
    changed source or flag builds anew; it is renamed into place, so concurrent builders agree."""
    cmd = [compiler(), "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
           *cflags, *[f"-I{d}" for d in includes], *[a for d in cpp_extension.include_paths() for a in ("-isystem", d)]]
    libs = [f"-L{d}" for d in cpp_extension.library_paths()] + ["-lc10", "-ltorch_cpu", "-ltorch"] + ldflags
    with open(SOURCE, "rb") as fh:
        digest = hashlib.sha256(fh.read() + repr((cmd, libs, torch.__version__)).encode()).hexdigest()[:16]
    out = os.path.join(folder, f"{NAME}-{digest}.so")
    if not os.path.isfile(out):
        tmp = f"{out}.{os.getpid()}.tmp"
        r = subprocess.run(cmd + [SOURCE, "-o", tmp] + libs, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} ... exited with {r.returncode}: {r.stderr[-2000:]}")
        os.replace(tmp, out)
    return out


def status() -> Status:
    """Whether the extension is built and loaded (the first call builds it; later calls answer
    at once), and, where not, why."""
    global _status
    with _lock:
        if _status is None:
            _status = _build()
        return _status


class OpKernel:
    """A library bound by ksol::bind to the table it was verified with: called on the input
    tensors (the table's first entries), it returns the fresh outputs (the rest). `table` is
    (shape, dtype) per tensor, `names` their ABI names; errors name the kernel by `label`.
    Raises OSError where the library cannot be loaded or exports no ksol_run."""

    call_path = "torch-op"

    def __init__(self, so_path: str, table: Sequence[Tuple[Sequence[int], torch.dtype]], num_outputs: int,
                 dims: Sequence[int], device_type: str, label: str, names: Optional[Sequence[str]] = None):
        st = status()
        if not st.ok:
            raise RuntimeError(f"ksol's torch op is not available: {st.reason}")
        self.path = os.path.abspath(so_path)
        self.label = label
        names = list(names) if names is not None else [f"t{i}" for i in range(len(table))]
        metas = [torch.empty(tuple(int(e) for e in shape), dtype=dt, device="meta") for shape, dt in table]
        try:
            self.handle = torch.ops.ksol.bind(self.path, label, names, metas, int(num_outputs), [int(d) for d in dims],
                                              torch.device(device_type))
        except RuntimeError as e:
            raise OSError(str(e)) from None
        self._run = torch.ops.ksol.run.default
        self._check = torch.ops.ksol.check.default
        self._inputs = [(torch.Size(int(e) for e in shape), dt) for shape, dt in table[:len(table) - int(num_outputs)]]
        self._device_type = torch.device(device_type).type

    def _matches(self, inputs: Sequence[torch.Tensor]) -> bool:
        return len(inputs) == len(self._inputs) and all(
            isinstance(t, torch.Tensor) and t.dtype == dt and t.shape == shape and t.device.type == self._device_type
            for t, (shape, dt) in zip(inputs, self._inputs))

    def __call__(self, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        # Inputs that are not the table's are reported by ksol::check as a value and raised here,
        # so a caller's mistake is a Python exception that never unwinds through the extension
        # (ksol::run checks again, and raises from C++, when called directly).
        if not self._matches(inputs):
            why = self._check(self.handle, inputs)
            if why:
                raise RuntimeError(why)
        return self._run(self.handle, inputs)
