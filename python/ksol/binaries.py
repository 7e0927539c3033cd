"""Finding the `ksol` and `ksol-worker` binaries this package drives.

Looked for, first found wins:

1. `ksol_bin=`, a path given by the caller;
2. `$KSOL_HOME/build`, then `$KSOL_HOME/.carry/bin` (the binaries carried to a GPU host,
   docs/GPU.md), when KSOL_HOME names the ksol tree;
3. `build/` of the ksol tree this package lies in (an editable install, or PYTHONPATH=python);
4. `ksol` on PATH.

`ksol-worker` is `$KSOL_WORKER` where that is set (as for the CLI), else the file beside `ksol`.
Nothing is built here: the C++ build is the README's (`./setup.sh`, or CMake into `build/`).
"""
import dataclasses
import os
import shutil
from typing import List, Mapping, Optional

from .errors import BinaryNotFoundError

BUILD_HINT = ("build them in the ksol tree with ./setup.sh (or: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && "
              "cmake --build build), then set KSOL_HOME to that tree or put its build/ folder on PATH")


@dataclasses.dataclass(frozen=True)
class Binaries:
    ksol: str        # the ksol CLI
    worker: str      # ksol-worker
    found_by: str    # "ksol_bin", "KSOL_HOME", "source tree" or "PATH"


def source_tree() -> Optional[str]:
    """The ksol tree this package lies in (python/ksol/ inside it), or None when installed elsewhere."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isfile(os.path.join(root, "include", "ksol", "abi.h")) else None


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binaries(ksol_bin: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  tree: Optional[str] = "auto") -> Binaries:
    """The binaries, or BinaryNotFoundError saying where they were looked for and how to build
    them. `env` stands in for os.environ and `tree` for the source tree (None: none), for tests."""
    env = os.environ if env is None else env
    tree = source_tree() if tree == "auto" else tree
    tried: List[str] = []
    places = []
    if ksol_bin:
        places.append(("ksol_bin", os.path.abspath(ksol_bin)))
    if env.get("KSOL_HOME"):
        for sub in ("build", os.path.join(".carry", "bin")):
            places.append(("KSOL_HOME", os.path.join(env["KSOL_HOME"], sub, "ksol")))
    if tree:
        places.append(("source tree", os.path.join(tree, "build", "ksol")))
    on_path = shutil.which("ksol", path=env.get("PATH", ""))
    if on_path:
        places.append(("PATH", os.path.abspath(on_path)))
    for how, ksol in places:
        if not _executable(ksol):
            tried.append(f"{ksol} ({how}): no such executable")
            continue
        worker = env.get("KSOL_WORKER") or os.path.join(os.path.dirname(ksol), "ksol-worker")
        if not _executable(worker):
            tried.append(f"{ksol} ({how}): found, but not ksol-worker at {worker}" +
                         (" (KSOL_WORKER)" if env.get("KSOL_WORKER") else ""))
            continue
        return Binaries(ksol, worker, how)
    if not on_path:
        tried.append("PATH: no ksol on it")
    raise BinaryNotFoundError("ksol's binaries (ksol and ksol-worker) were not found; looked at: " + "; ".join(tried) +
                              ". To fix: " + BUILD_HINT + ".", tried)
