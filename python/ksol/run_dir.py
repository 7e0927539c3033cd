"""Reading the folder a module's `ksol optimize FILE.py --report DIR` run leaves
(src/cli/optimize_module.cpp, write_report), and what ksol.optimize adds to it.

Written by ksol:

  results.json         {"run", "gpu": {"name"}, "agent", "problem": the module file's absolute
                       path, "emulated" (--emulate only), "results": [one item]}; the item says
                       what was returned: `use_baseline` (PyTorch: `best_baseline` is the faster
                       of "eager", "compile", "compile_max_autotune"), `baseline_us`, `reason`,
                       `speedup_vs_best_baseline`, and either `best` (one DSL program: its
                       `kernel`, `program`, `score_us`) or, for a stitched module (`stop_reason`
                       "stitched"), `pieces` (each piece's fx `nodes`, `so`: its library in the
                       compile cache, `dims`, `family`, `kernel`, `program`) and `stitched`
                       (`status`, `median_us`)
  report.md, report.html
  best.ksol, best.cu   the one DSL program returned, and its CUDA (not when PyTorch is returned)
  piece-<i>.ksol/.cu   a stitched piece whose search found a faster schedule than synth's

Written by ksol.optimize beside them:

  <Name>.py, <Name>.pt the module as a KernelBench-format problem (serialize.py)
  lib/<name>.so        the verified library of best or piece-<i>, copied from where ksol built it
  ksol-python.json     the manifest: precision, tolerance scale, the command, versions, libraries
  ksol.log             everything `ksol optimize` printed

The verified libraries live in ksol's compile cache (`$KSOL_CACHE_DIR/compile/<k>/<key>/lib.so`,
with the CUDA it was built from as `source.cu` beside it). results.json names a stitched piece's
library; a single program's is found by its source, best.cu, in the cache.
"""
import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from .errors import RunDirError

MANIFEST = "ksol-python.json"
LIB_DIR = "lib"
# The precision modes of `ksol optimize FILE.py --precision` -> the worker's rtol_scale
# (docs/TORCH.md's bound). "fp32" is how runs before the modes named strict float32.
PRECISIONS = {"default": 16.0, "strict": 16.0, "tf32": 16.0, "fp32": 16.0}


def worker_mode(precision: str) -> str:
    """The worker's precision mode for a run's precision name ("fp32", from before the modes,
    was strict float32)."""
    return "strict" if precision == "fp32" else precision


@dataclasses.dataclass
class Piece:
    index: int
    nodes: List[str]    # the fx nodes of the module it computes (stitch.py's plan)
    dims: List[int]     # its ksol_run dims, in its task's order
    family: str
    kernel: str
    program: str = dataclasses.field(repr=False)  # the DSL program
    so: str = ""            # where the run's library was ("" when not recorded)
    keep: bool = False      # the piece's ops stay PyTorch calls (they were faster than its kernels)


@dataclasses.dataclass
class RunResult:
    """What a module's ksol run returned: `answer` is "pytorch" (no kernel was faster, or none was
    verified), "kernel" (one DSL program computes the whole forward) or "stitched" (DSL pieces
    around ops kept as PyTorch calls). Times are the run's medians in microseconds."""
    run_dir: str
    problem: str                # the module's problem file
    answer: str
    reason: str                 # why PyTorch was returned, where it was
    best_baseline: str          # "eager", "compile" or "compile_max_autotune"
    baseline_us: Dict[str, float]
    kernel_us: Optional[float]  # the returned kernel's or stitched module's time (None for PyTorch)
    speedup: float              # over the best baseline (1.0 when PyTorch is returned)
    kernel: str                 # the kernel's name (one program), or the pieces' joined
    pieces: List[Piece]
    emulated: bool              # --emulate: the kernels are host builds for ksol's CUDA emulator
    gpu: str
    precision: str
    rtol_scale: float
    results: Dict[str, Any] = dataclasses.field(repr=False)   # results.json as read
    manifest: Dict[str, Any] = dataclasses.field(repr=False)  # ksol-python.json as read ({} for a run of the CLI alone)
    vendor: bool = False        # the stitched module is the vendor-call plan's (convolutions and GEMMs PyTorch's calls)

    @property
    def uses_ksol_kernels(self) -> bool:
        return self.answer != "pytorch"

    def summary(self) -> str:
        base = self.baseline_us.get(self.best_baseline, 0.0)
        if self.answer == "pytorch":
            best = f"{self.best_baseline}, {base:.1f} us" if self.best_baseline else "no baseline timed"
            hint = "; torch.compile(module) is the faster form" if self.best_baseline.startswith("compile") else ""
            return f"ksol returned PyTorch itself ({best}): {self.reason}{hint}"
        kept = sum(p.keep for p in self.pieces)
        what = f"its kernel {self.kernel}" if self.answer == "kernel" else \
            f"a stitched module of {len(self.pieces) - kept} DSL piece(s) ({self.kernel}) and PyTorch calls" + \
            (" (the vendor-call plan: its convolutions and GEMMs are cuDNN's and cuBLAS's)" if self.vendor else "") + \
            (f" ({kept} piece(s) left as PyTorch's calls: faster, or not built)" if kept else "")
        return (f"ksol returned {what}: {self.kernel_us or 0:.1f} us, {self.speedup:.3f}x over "
                f"{self.best_baseline} ({base:.1f} us) on {self.gpu or 'the GPU'}")


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise RunDirError(f"{path}: no such file ({what})") from None
    except (OSError, ValueError) as e:
        raise RunDirError(f"{path}: cannot be read ({what}): {e}") from e


def problem_file(run_dir: str, results: Dict[str, Any]) -> str:
    """The module's problem file: the one named in results.json where it is in the folder (a
    folder that was moved or copied), else the path results.json names."""
    named = results.get("problem") or ""
    here = os.path.join(run_dir, os.path.basename(named)) if named else ""
    for p in (here, named):
        if p and os.path.isfile(p):
            return p
    raise RunDirError(f"{run_dir}: the module's problem file {named or '(none named in results.json)'} is not there: "
                      "ksol.load reads runs of `ksol optimize FILE.py` and ksol.optimize")


def _reason(item: Dict[str, Any]) -> str:
    """Why PyTorch was returned: the item's own reason (a module that is not one program), else
    what the search's result says (a one-program module's item has no reason of its own)."""
    if item.get("reason"):
        return item["reason"]
    best, base = item.get("best") or {}, item.get("best_baseline", "")
    if item.get("stop_reason") == "seed_failed":
        errors = [a.get("error", "") for a in item.get("trajectory", []) if a.get("error")]
        return "the seed program failed ksol's gates" + (f": {errors[0][:300]}" if errors else "")
    if best.get("score_us"):
        base_us = item.get("baseline_us", {}).get(base, 0.0)
        return f"ksol's best kernel, {best.get('kernel', '?')} at {best['score_us']:.1f} us, is not faster than {base} ({base_us:.1f} us)"
    return "no candidate passed ksol's gates"


def read_run(run_dir: str) -> RunResult:
    """The run in `run_dir`, or RunDirError naming what is missing."""
    run_dir = os.path.abspath(run_dir)
    if not os.path.isdir(run_dir):
        raise RunDirError(f"{run_dir}: no such folder")
    doc = _read_json(os.path.join(run_dir, "results.json"), "the run's results")
    if not isinstance(doc, dict) or not doc.get("results"):
        raise RunDirError(f"{run_dir}/results.json holds no result")
    if "problem" not in doc:
        raise RunDirError(f"{run_dir}/results.json is not a module's run (no problem file): ksol.load reads runs of "
                          "`ksol optimize FILE.py` and ksol.optimize, not of built-in tasks")
    item = doc["results"][0]
    mpath = os.path.join(run_dir, MANIFEST)
    manifest = _read_json(mpath, "ksol.optimize's manifest") if os.path.exists(mpath) else {}
    # ksol.optimize's manifest, else the mode the CLI wrote in results.json; a run from before
    # the modes was verified in strict float32.
    cli_mode = doc.get("precision", {}).get("mode") if isinstance(doc.get("precision"), dict) else None
    precision = manifest.get("precision") or cli_mode or "fp32"
    pieces = [Piece(i, list(p.get("nodes", [])), [int(d) for d in p.get("dims", [])], p.get("family", ""),
                    p.get("kernel", ""), p.get("program", ""), p.get("so", ""), bool(p.get("keep", False)))
              for i, p in enumerate(item.get("pieces", []))]
    use_baseline = bool(item.get("use_baseline", True))
    best = item.get("best") or {}
    if use_baseline:
        answer, kernel_us, kernel = "pytorch", None, ""
    elif item.get("stop_reason") == "stitched":
        if not pieces or all(p.keep for p in pieces):
            raise RunDirError(f"{run_dir}/results.json returns a stitched module but lists no piece ksol computes")
        answer, kernel_us = "stitched", float(item.get("stitched", {}).get("median_us", 0.0))
        kernel = ", ".join(p.kernel for p in pieces if not p.keep)
    else:
        if not best:
            raise RunDirError(f"{run_dir}/results.json returns a kernel but names no best program")
        answer, kernel_us, kernel = "kernel", float(best.get("score_us", 0.0)), best.get("kernel", "")
    return RunResult(
        run_dir=run_dir, problem=problem_file(run_dir, doc), answer=answer, reason=_reason(item) if answer == "pytorch" else "",
        best_baseline=item.get("best_baseline", "") or "", baseline_us={k: float(v) for k, v in item.get("baseline_us", {}).items()},
        kernel_us=kernel_us, speedup=float(item.get("speedup_vs_best_baseline", 1.0)) if answer != "pytorch" else 1.0,
        kernel=kernel, pieces=pieces, emulated=bool(doc.get("emulated", False)),
        gpu=(doc.get("gpu") or {}).get("name", "") if isinstance(doc.get("gpu"), dict) else "",
        precision=precision, rtol_scale=float(manifest.get("rtol_scale", PRECISIONS.get(precision, 16.0))),
        results=doc, manifest=manifest, vendor=item.get("plan") == "vendor")


def cache_dir(env=None) -> str:
    """ksol's cache folder, as the CLI finds it (README: KSOL_CACHE_DIR)."""
    env = os.environ if env is None else env
    if env.get("KSOL_CACHE_DIR"):
        return env["KSOL_CACHE_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "ksol")
    return os.path.join(os.path.expanduser("~"), ".cache", "ksol")


def find_in_compile_cache(source: str, cache: str) -> Optional[str]:
    """The library ksol built from CUDA source `source` (the newest, where several flags or
    toolchains built it), or None."""
    want = source.encode()
    root = os.path.join(cache, "compile")
    found, newest = None, -1.0
    try:
        shards = [e.path for e in os.scandir(root) if e.is_dir()]
    except OSError:
        return None
    for shard in shards:
        try:
            entries = list(os.scandir(shard))
        except OSError:
            continue
        for e in entries:
            src, so = os.path.join(e.path, "source.cu"), os.path.join(e.path, "lib.so")
            try:
                if os.path.getsize(src) != len(want) or not os.path.isfile(so):
                    continue
                with open(src, "rb") as fh:
                    if fh.read() != want:
                        continue
                mtime = os.path.getmtime(so)
            except OSError:
                continue
            if mtime > newest:
                found, newest = so, mtime
    return found


def library(run: RunResult, name: str, recorded: str = "", cache: Optional[str] = None) -> str:
    """The library of `name` ("best" or "piece-<i>"): lib/<name>.so in the folder, else the one
    results.json records where it still is, else the one ksol's compile cache holds for
    <name>.cu. RunDirError when none is there."""
    tried = []
    here = os.path.join(run.run_dir, LIB_DIR, name + ".so")
    if os.path.isfile(here):
        return here
    tried.append(here)
    if recorded:
        if os.path.isfile(recorded):
            return recorded
        tried.append(recorded)
    cu = os.path.join(run.run_dir, name + ".cu")
    cache = cache or cache_dir()
    if os.path.isfile(cu):
        with open(cu) as fh:
            hit = find_in_compile_cache(fh.read(), cache)
        if hit:
            return hit
        tried.append(f"{name}.cu's build in {cache}/compile")
    else:
        tried.append(f"{cu} (the run kept no CUDA for it)")
    raise RunDirError(f"{run.run_dir}: the library of {name} is not there (looked at: {'; '.join(tried)}); ksol.optimize "
                      "copies it into lib/, a run of the CLI leaves it in ksol's compile cache: run ksol.optimize again")
