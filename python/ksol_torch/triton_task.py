"""A standalone Triton kernel as a ksol task (`ksol optimize FILE.py --triton-fn NAME`, docs/TRITON.md).

The file is the user's own Python: a @triton.jit kernel NAME, `launch(kernel, *inputs, *, KNOB=int,
...)` that runs it on get_inputs()'s tensors and returns its output(s), `get_inputs()` (KernelBench's
convention: tensors made without a device; ksol draws them on the GPU), and optionally
`reference(*inputs)`, the computation in PyTorch, which ksol runs in float64 to verify every
config. What is done with it here:

  parse     the file read with `ast` alone (no Triton, no PyTorch): the kernel, its tl.constexpr
            parameters, whether it loops and masks its loads, launch's knobs, get_inputs and
            reference; a bad file is an error at its line and column
  space     the legal configs of the knobs, from the parse and the input shapes
  prepare   the task as a KernelBench problem (a generated file whose Model is the reference, or
            the kernel at its default config where there is none) and one ModelNew file per
            config (the kernel launched at it), which the Python worker verifies and times like
            any candidate
  screen    on the GPU: a coordinate search over the knobs from the default config, each config
            checked on one case against the float64 reference and timed briefly, its log kept
            line by line so that a config that kills the process is skipped on the rerun, and a
            process whose share of the time is up stops between configs ("batch") for another to
            go on from the log
  compare   the contenders of the answer (the kernel as given, its verified configs, the DSL
            search's answer, eager and torch.compile of the reference) timed side by side in one
            process, so that the answer and its speedups come from one process's timings

    python3 -m ksol_torch.triton_task prepare FILE --fn NAME --dir DIR --out JSON
    python3 -m ksol_torch.triton_task screen DIR/task.json --log LOG --out JSON [--configs N] [--top K]
                                             [--deadline T] [--batch-deadline T]
    python3 -m ksol_torch.triton_task compare DIR/task.json --contenders JSON --out JSON [--rounds N]

The C++ driver (src/cli/optimize_triton.cpp) runs them, verifies the default config and the
fastest screened ones through the worker's gates, times the verified contenders side by side and
returns the fastest.
"""
import argparse
import ast
import dataclasses
import hashlib
import importlib.util
import itertools
import json
import math
import os
import sys
import time
import types
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .problem import ProblemError, line_in_file

# Triton's launch options ksol tunes beside the kernel's block sizes. Values tried: powers of two
# up to 16 warps (512 threads; more rarely helps one program and spills registers), and 1 to 4
# pipeline stages where the kernel has a loop to pipeline.
NUM_WARPS = (1, 2, 4, 8, 16)
NUM_STAGES = (1, 2, 3, 4)
LAUNCH_OPTIONS = ("num_warps", "num_stages")
# Triton's largest tensor (TRITON_MAX_TENSOR_NUMEL): a block of the kernel holds at most this many
# elements, and a tile of two block sizes too, so ksol keeps the product of a config's block sizes
# within it.
MAX_BLOCK_ELEMENTS = 1 << 20
# The smallest block size tried, unless the default is smaller: below 16 elements a program does
# too little work to pay for its launch, and tl.dot refuses smaller operands.
MIN_BLOCK = 16


# --- parse -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class Knob:
    name: str
    kind: str                  # "block" (a tl.constexpr of the kernel, a keyword of launch) or "option" (num_warps, num_stages)
    where: str                 # "launch" (launch's keyword-only parameter) or "launcher" (ksol's launcher overrides it)
    default: Optional[int]     # None: as launch passes it (an expression ksol does not evaluate), or Triton's own default
    line: int
    col: int
    values: List[Optional[int]] = dataclasses.field(default_factory=list)
    why: str = ""              # how the values were chosen, or why the knob is not tuned


@dataclasses.dataclass
class TaskSpec:
    path: str
    fn: str
    fn_line: int
    params: List[str]              # the kernel's parameters, in order
    constexprs: List[str]          # those annotated tl.constexpr
    loops: bool                    # the kernel has a loop a pipeline can overlap (not tl.static_range)
    unmasked: List[Tuple[int, int]]  # (line, col) of each tl.load / tl.store with neither mask nor boundary_check
    launch_params: List[str]       # launch's positional parameters after the kernel
    knobs: List[Knob]
    has_reference: bool
    reference_params: List[str]
    reference_line: int


def _error(path, node, message):
    line = getattr(node, "lineno", 1) or 1
    col = (getattr(node, "col_offset", 0) or 0) + 1
    return ProblemError(path, line, col, message)


class _Names:
    """What the file's top-level imports make each name mean: `tl` -> triton.language,
    `jit` -> triton.jit, so that `@tl_alias.jit` and `x: tl.constexpr` resolve whatever the file
    called them."""

    def __init__(self, tree):
        self.alias = {}
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.alias[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.alias[a.asname or a.name] = node.module + "." + a.name

    def resolve(self, node) -> str:
        """The dotted name an expression refers to ("triton.language.constexpr"), or ""."""
        if isinstance(node, ast.Call):
            return self.resolve(node.func)
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return base + "." + node.attr if base else ""
        return ""


def _top_function(tree, name):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _is_jit(names, dec) -> bool:
    return names.resolve(dec) in ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit")


def _all_args(fn):
    a = fn.args
    return list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)


def read_source(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as e:
        raise ProblemError(path, 1, 1, f"cannot read: {e.strerror}") from e


def parse(path: str, fn: str, src: Optional[str] = None) -> TaskSpec:
    """The task file read with `ast` only: raises ProblemError (file:line:col) for a file that does
    not follow the contract (docs/TRITON.md)."""
    src = read_source(path) if src is None else src
    try:
        tree = ast.parse(src, filename=path)
    except SyntaxError as e:
        raise ProblemError(path, e.lineno or 1, e.offset or 1, f"syntax error: {e.msg}") from e
    names = _Names(tree)
    jits = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(_is_jit(names, d) for d in n.decorator_list)]

    kernel = _top_function(tree, fn)
    if kernel is None:
        raise ProblemError(path, 1, 1, f"no function '{fn}' at the top level of the file; its @triton.jit kernels: "
                                       f"{', '.join(jits) if jits else 'none'}")
    decorators = [names.resolve(d) or ast.unparse(d) for d in kernel.decorator_list]
    for d, dn in zip(kernel.decorator_list, decorators):
        if dn in ("triton.autotune", "triton.runtime.autotuner.autotune", "triton.heuristics"):
            raise _error(path, d, f"'{fn}' is decorated with @{dn}: ksol tunes the configs itself; give the kernel with "
                                  "@triton.jit alone and its block sizes as keyword-only parameters of launch")
    if not any(_is_jit(names, d) for d in kernel.decorator_list):
        raise _error(path, kernel, f"'{fn}' is not a @triton.jit kernel (its decorators: "
                                   f"{', '.join('@' + d for d in decorators) if decorators else 'none'})")
    if len(kernel.decorator_list) > 1:
        other = [d for d in kernel.decorator_list if not _is_jit(names, d)]
        raise _error(path, other[0], f"'{fn}' has decorators besides @triton.jit ({', '.join('@' + names.resolve(d) for d in other)}): "
                                     "ksol launches the @triton.jit kernel alone")
    args = _all_args(kernel)
    params = [a.arg for a in args]
    constexprs = [a.arg for a in args if a.annotation is not None and
                  names.resolve(a.annotation) in ("triton.language.constexpr", "triton.language.core.constexpr")]

    loops = False
    unmasked = []
    for node in ast.walk(kernel):
        if isinstance(node, ast.While):
            loops = True
        elif isinstance(node, ast.For) and names.resolve(node.iter) != "triton.language.static_range":
            loops = True
        elif isinstance(node, ast.Call) and names.resolve(node.func) in ("triton.language.load", "triton.language.store"):
            kws = {k.arg for k in node.keywords}
            positional_mask = len(node.args) >= (2 if names.resolve(node.func).endswith("load") else 3)
            if not ({"mask", "boundary_check"} & kws) and not positional_mask:
                unmasked.append((node.lineno, node.col_offset + 1))

    launch = _top_function(tree, "launch")
    if launch is None:
        raise ProblemError(path, 1, 1, "no function 'launch': the file defines launch(kernel, *inputs, *, KNOB=default, ...), "
                                       "which runs the kernel given as its first argument on get_inputs()'s tensors and "
                                       "returns its output(s)")
    pos = list(launch.args.posonlyargs) + list(launch.args.args)
    if not pos:
        raise _error(path, launch, "launch takes the kernel as its first parameter: launch(kernel, *inputs, *, KNOB=default, ...)")
    kparam = pos[0].arg
    knobs = []
    for a, d in zip(launch.args.kwonlyargs, launch.args.kw_defaults):
        if d is None:
            raise _error(path, a, f"launch's keyword-only parameter '{a.arg}' has no default: a knob's default is its value "
                                  "in the kernel as given")
        if a.arg not in LAUNCH_OPTIONS and a.arg not in constexprs:
            raise _error(path, a, f"launch's keyword-only parameter '{a.arg}' is not a knob: knobs are num_warps, num_stages "
                                  f"and the tl.constexpr parameters of '{fn}' ({', '.join(constexprs) if constexprs else 'none'})")
        if not (isinstance(d, ast.Constant) and type(d.value) is int and d.value > 0):
            raise _error(path, d, f"knob '{a.arg}' needs a positive integer literal as its default, not {ast.unparse(d)}")
        if a.arg not in LAUNCH_OPTIONS and d.value & (d.value - 1):
            raise _error(path, d, f"knob '{a.arg}' defaults to {d.value}, not a power of two: a block size is one "
                                  "(tl.arange needs it)")
        knobs.append(Knob(a.arg, "option" if a.arg in LAUNCH_OPTIONS else "block", "launch", d.value, a.lineno, a.col_offset + 1))

    launches, by_name = [], []
    for node in ast.walk(launch):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name):
            if node.func.value.id == kparam:
                launches.append(node)
            elif node.func.value.id == fn:
                by_name.append(node)
    if not launches:
        if by_name:
            raise _error(path, by_name[0], f"launch launches '{fn}' by its name: launch the kernel it is given, its first "
                                           f"parameter ({kparam}[grid](...)), which is the kernel ksol configures")
        raise _error(path, launch, f"launch never launches its first parameter '{kparam}' ({kparam}[grid](...))")
    declared = {k.name for k in knobs}
    for opt in LAUNCH_OPTIONS:
        if opt in declared:
            continue
        # Not a knob of launch: ksol's launcher passes it to every kernel[grid](...) call. Its
        # default is what launch passes where that is one literal, else Triton's own.
        passed = [k.value for c in launches for k in c.keywords if k.arg == opt]
        literal = [p.value for p in passed if isinstance(p, ast.Constant) and type(p.value) is int]
        default = literal[0] if passed and len(literal) == len(passed) and len(set(literal)) == 1 else None
        node = passed[0] if passed else launches[0]
        knobs.append(Knob(opt, "option", "launcher", default, node.lineno, node.col_offset + 1))

    gi = _top_function(tree, "get_inputs")
    if gi is None:
        raise ProblemError(path, 1, 1, "no function 'get_inputs': the file defines get_inputs(), which returns the kernel's "
                                       "input tensors (made without a device; ksol draws them on the GPU)")
    ref = _top_function(tree, "reference")
    # reference(*inputs) names no input: the generated Model then names them itself.
    ref_params = [] if ref is None or ref.args.vararg else [a.arg for a in list(ref.args.posonlyargs) + list(ref.args.args)]
    return TaskSpec(path=os.path.abspath(path), fn=fn, fn_line=kernel.lineno, params=params, constexprs=constexprs,
                    loops=loops, unmasked=unmasked,
                    launch_params=[a.arg for a in pos[1:]] if not launch.args.vararg else [],
                    knobs=knobs, has_reference=ref is not None, reference_params=ref_params,
                    reference_line=ref.lineno if ref is not None else 0)


# --- the config space ------------------------------------------------------------------------------
def _pow2_ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def space(spec: TaskSpec, shapes: Sequence[Sequence[int]]) -> List[Knob]:
    """Each knob with the values ksol tries (its default first) and why those. Block sizes: powers
    of two from MIN_BLOCK (or the default, if smaller) to the largest input extent rounded up to a
    power of two (a block past every extent only masks); where the kernel has an unmasked load or
    store, only sizes that divide every extent the default divides, so no block runs past an edge
    the default did not. num_warps: NUM_WARPS. num_stages: NUM_STAGES where the kernel has a loop,
    else not tuned."""
    extents = [int(e) for sh in shapes for e in sh if int(e) > 0]
    largest = max(extents) if extents else 1
    out = []
    for k in spec.knobs:
        k = dataclasses.replace(k)
        if k.kind == "block":
            hi = min(max(k.default, _pow2_ceil(largest)), MAX_BLOCK_ELEMENTS)
            lo = min(MIN_BLOCK, k.default)
            vals = [1 << i for i in range(lo.bit_length() - 1, hi.bit_length())]
            why = f"powers of two {lo}..{hi} (the largest input extent is {largest})"
            if spec.unmasked:
                divided = [e for e in extents if e % k.default == 0]
                vals = [v for v in vals if v <= k.default or all(e % v == 0 for e in divided)]
                line, col = spec.unmasked[0]
                why += (f"; the kernel loads or stores without a mask (line {line}), so no larger block than the default "
                        f"unless it divides every extent the default divides ({', '.join(map(str, sorted(set(divided)))) or 'none'})")
            k.values, k.why = vals, why
        elif k.name == "num_warps":
            k.values, k.why = list(NUM_WARPS), "powers of two 1..16"
        else:
            if spec.loops:
                k.values, k.why = list(NUM_STAGES), "1..4 (the kernel loops)"
            else:
                k.values, k.why = [], "not tuned: the kernel has no loop to pipeline"
        if k.values or k.default is not None:
            # The default first; None (as launch passes it) is a value of its own.
            k.values = [k.default] + [v for v in k.values if v != k.default]
        else:
            k.values = [None]
        out.append(k)
    return out


def default_config(knobs: Sequence[Knob]) -> Dict[str, Optional[int]]:
    return {k.name: k.default for k in knobs}


def legal(config: Dict[str, Optional[int]], knobs: Sequence[Knob]) -> bool:
    """The product of a config's block sizes fits Triton's largest tensor."""
    prod = 1
    for k in knobs:
        if k.kind == "block":
            prod *= config[k.name]
    return prod <= MAX_BLOCK_ELEMENTS


def configs(knobs: Sequence[Knob]) -> List[Dict[str, Optional[int]]]:
    """Every legal config, the default first."""
    names = [k.name for k in knobs]
    out = []
    for vals in itertools.product(*[k.values for k in knobs]):
        c = dict(zip(names, vals))
        if legal(c, knobs):
            out.append(c)
    return out


def label(fn: str, config: Dict[str, Optional[int]], knobs: Sequence[Knob]) -> str:
    """The kernel's name with its config (STYLE: names encode their configuration):
    softmax_kernel_block_size2048_w8_s2. A launch option left as launch passes it is not named."""
    parts = [fn]
    for k in knobs:
        v = config.get(k.name)
        if v is None:
            continue
        parts.append({"num_warps": "w", "num_stages": "s"}.get(k.name, k.name.lower()) + str(v))
    return "_".join(parts)


def config_text(config: Dict[str, Optional[int]]) -> str:
    """"BLOCK_SIZE=2048 num_warps=8" (a launch option as launch passes it: left out)."""
    return " ".join(f"{k}={v}" for k, v in config.items() if v is not None) or "as given"


# --- the search over the knobs ---------------------------------------------------------------------
class _Stop(Exception):
    pass


def coordinate_search(knobs: Sequence[Knob], measure: Callable[[Dict], Dict], max_configs: int,
                      deadline: Optional[float] = None, clock: Callable[[], float] = time.monotonic,
                      min_gain: float = 0.02, max_passes: int = 3):
    """From the default config, one knob at a time: every value of the knob with the others held,
    nearest (in log2) to the current value first; the fastest passing one becomes current when it
    is at least `min_gain` faster. Passes over the knobs repeat until one moves nothing, at most
    `max_passes`. measure(config) -> {"status": "ok"|"failed", "median_us", ...}; stops after
    `max_configs` measurements or at `deadline` (by `clock`). Returns (the measurements in order as
    (config, result) pairs, the current config at the end, why it stopped)."""
    seen: Dict[Tuple, Dict] = {}
    order: List[Tuple[Dict, Dict]] = []

    def key(c):
        return tuple((k.name, c[k.name]) for k in knobs)

    def run(c):
        if key(c) in seen:
            return seen[key(c)]
        if len(order) >= max_configs:
            raise _Stop("configs")
        if deadline is not None and clock() >= deadline:
            raise _Stop("seconds")
        r = measure(dict(c))
        seen[key(c)] = r
        order.append((dict(c), r))
        return r

    def us(r):
        return r.get("median_us", math.inf) if r.get("status") == "ok" else math.inf

    cur = default_config(knobs)
    stop = "converged"
    try:
        cur_us = us(run(cur))
        for _ in range(max_passes):
            moved = False
            for k in knobs:
                if len(k.values) < 2:
                    continue
                here = cur[k.name]

                def distance(v):
                    if v is None or here is None:
                        return (0 if v == here else 1, 0)
                    return (abs(math.log2(v) - math.log2(here)), v)

                best, best_us = None, cur_us
                for v in sorted((v for v in k.values if v != here), key=distance):
                    c = dict(cur, **{k.name: v})
                    if not legal(c, knobs):
                        continue
                    t = us(run(c))
                    if t < best_us:
                        best, best_us = c, t
                if best is not None and best_us < cur_us * (1 - min_gain):
                    cur, cur_us, moved = best, best_us, True
            if not moved:
                break
        else:
            stop = "passes"
    except _Stop as s:
        stop = str(s)
    return order, cur, stop


# --- running the file ------------------------------------------------------------------------------
class _Missing:
    """The stand-in for an object of Triton's where Triton is not installed: the file's top level
    runs (decorators, constants), anything that would launch a kernel says why it cannot."""

    def __init__(self, what, fn=None):
        self._what, self.fn = what, fn

    def _fail(self, *a, **k):
        raise RuntimeError(f"Triton is not installed for {sys.executable}: {self._what} cannot run here "
                           "(ksol parses the file, traces its reference and lists its configs without Triton)")

    __call__ = __getitem__ = _fail

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self._what}.{name}")


def _stand_in_triton():
    """Modules `triton` and `triton.language` enough for a task file's top level to run without
    Triton: jit keeps the function (launching it raises), cdiv and next_power_of_2 compute, the
    rest are stand-ins."""
    triton = types.ModuleType("triton")
    language = types.ModuleType("triton.language")
    triton.__ksol_stand_in__ = True

    def jit(fn=None, **_):
        if fn is None:
            return lambda f: _Missing(f"@triton.jit kernel {f.__name__}", f)
        return _Missing(f"@triton.jit kernel {fn.__name__}", fn)

    def decorator(name):
        def make(*a, **k):
            return lambda f: _Missing(f"@triton.{name} kernel", f)
        return make

    triton.jit = jit
    triton.autotune = decorator("autotune")
    triton.heuristics = decorator("heuristics")
    triton.Config = lambda *a, **k: (a, k)
    triton.cdiv = lambda a, b: (a + b - 1) // b
    triton.next_power_of_2 = _pow2_ceil
    triton.language = language

    class constexpr:  # noqa: N801 (Triton's name)
        def __init__(self, value=None):
            self.value = value

    language.constexpr = constexpr
    triton.__getattr__ = lambda name: _Missing(f"triton.{name}")
    language.__getattr__ = lambda name: _Missing(f"triton.language.{name}")
    return triton, language


def triton_available() -> bool:
    """Triton itself is importable here (not ksol's stand-in)."""
    m = sys.modules.get("triton")
    if m is not None:
        return not getattr(m, "__ksol_stand_in__", False)
    try:
        return importlib.util.find_spec("triton") is not None
    except ValueError:
        return False


class Task:
    """The task file run in a namespace of its own: the kernel, launch, get_inputs, reference, and
    what ksol builds on them (the reference as a module, the kernel at a config)."""

    def __init__(self, path: str, fn: str, spec: Optional[TaskSpec] = None):
        self.path, self.fn = os.path.abspath(path), fn
        src = read_source(path)
        self.spec = spec or parse(path, fn, src)
        if not triton_available():
            sys.modules["triton"], sys.modules["triton.language"] = _stand_in_triton()
        # A module of its own in sys.modules, named after the file's path: torch.compile of the
        # reference imports the module its functions name (__module__), and fails on a name that
        # is not there.
        name = "ksol_triton_task_" + hashlib.sha1(self.path.encode()).hexdigest()[:12]
        module = types.ModuleType(name)
        module.__file__ = self.path
        sys.modules[name] = module
        self.ns = module.__dict__
        try:
            exec(compile(src, self.path, "exec"), self.ns)  # the user's file, as KernelBench runs a problem's
        except Exception as e:
            raise ProblemError(self.path, line_in_file(self.path, e), 1, f"running the file raised {type(e).__name__}: {e}") from e
        for name in ("launch", "get_inputs") + (("reference",) if self.spec.has_reference else ()):
            if not callable(self.ns.get(name)):
                raise ProblemError(self.path, 1, 1, f"'{name}' is not a function once the file has run")
        self.kernel = self.ns[fn]
        self.launch = self.ns["launch"]
        self.reference = self.ns.get("reference")

    def get_inputs(self):
        return self.ns["get_inputs"]()

    def run(self, config: Dict[str, Optional[int]], *inputs):
        """The kernel at `config` on `inputs`: launch's own knobs as its keyword arguments, the
        launch options launch does not take (num_warps, num_stages) put into each kernel[grid](...)
        call by a launcher around the kernel. At the default config, launch as written."""
        kw, options = {}, {}
        for k in self.spec.knobs:
            v = config.get(k.name, k.default)
            if v is None:
                continue
            if k.where == "launch":
                kw[k.name] = v
            elif v != k.default:
                options[k.name] = v
        kernel = _Configured(self.kernel, options) if options else self.kernel
        return self.launch(kernel, *inputs, **kw)

    def configured_model(self, config):
        """ModelNew for the worker: an nn.Module whose forward is the kernel at `config`."""
        import torch

        task, cfg = self, dict(config)

        class TritonConfig(torch.nn.Module):
            def forward(self, *inputs):
                return task.run(cfg, *inputs)

        TritonConfig.__qualname__ = TritonConfig.__name__ = label(self.fn, cfg, self.spec.knobs)
        return TritonConfig


class _Configured:
    """The kernel with Triton launch options (num_warps, num_stages) put into every launch:
    kernel[grid](*args, **kwargs) runs with them over whatever launch passed."""

    def __init__(self, kernel, options):
        self._kernel, self._options = kernel, dict(options)

    def __getitem__(self, grid):
        launcher = self._kernel[grid]
        options = self._options

        def run(*args, **kwargs):
            kwargs.update(options)
            return launcher(*args, **kwargs)

        return run

    def __getattr__(self, name):
        return getattr(self._kernel, name)


_TASKS: Dict[Tuple[str, str], Task] = {}


def load_task(path: str, fn: str) -> Task:
    """The task, run once per process (the problem file and every config's ModelNew share it, and
    with it Triton's compiled kernels)."""
    key = (os.path.abspath(path), fn)
    if key not in _TASKS:
        _TASKS[key] = Task(path, fn)
    return _TASKS[key]


# --- prepare: the files the worker reads -----------------------------------------------------------
def _input_names(spec: TaskSpec, n: int) -> List[str]:
    for names in (spec.reference_params, spec.launch_params):
        if len(names) == n and all(x.isidentifier() and x != "self" for x in names):
            return list(names)
    return [f"in{i}" for i in range(n)]


def problem_source(spec: TaskSpec, n_inputs: int) -> str:
    """The task as a KernelBench problem: Model is the reference (run by the worker in float64),
    or, where the file has none, the kernel at its default config (run in float64 too: its launch's
    tensors, allocated under the worker's float64 mode, are float64)."""
    args = ", ".join(_input_names(spec, n_inputs))
    call = f"_task.reference({args})" if spec.has_reference else f"_task.run({{}}, {args})"
    what = (f"reference() of {spec.path}" if spec.has_reference else
            f"{spec.fn} at its default config (the file has no reference()): verifying a config shows it computes what "
            "the kernel as given computes")
    return f'''"""The Triton task {spec.path} (kernel {spec.fn}) as a KernelBench problem, for ksol's Python
worker: Model is {what}. Written by `ksol optimize --triton-fn`; re-run a config with
`ksol eval-module THIS_FILE --candidate CONFIG.py`."""
import torch

from ksol_torch import triton_task as _triton_task

_task = _triton_task.load_task({spec.path!r}, {spec.fn!r})


class Model(torch.nn.Module):
    def forward(self, {args}):
        return {call}


def get_inputs():
    return _task.get_inputs()


def get_init_inputs():
    return []
'''


def candidate_source(spec: TaskSpec, config: Dict[str, Optional[int]], knobs: Sequence[Knob]) -> str:
    """ModelNew for one config: the kernel of the task file launched at it."""
    return f'''"""{label(spec.fn, config, knobs)}: {spec.fn} of {spec.path} at {config_text(config)}.
Written by `ksol optimize --triton-fn`; a ModelNew for `ksol eval-module`."""
from ksol_torch import triton_task as _triton_task

ModelNew = _triton_task.load_task({spec.path!r}, {spec.fn!r}).configured_model({config!r})
'''


def _write(path: str, text: str):
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(path + ".tmp", path)


def write_candidate(dirname: str, spec: TaskSpec, config, knobs) -> str:
    os.makedirs(os.path.join(dirname, "configs"), exist_ok=True)
    p = os.path.join(dirname, "configs", label(spec.fn, config, knobs) + ".py")
    _write(p, candidate_source(spec, config, knobs))
    return p


def _shapes_of(task: Task):
    """get_inputs() on shape-only tensors: (shapes, dtypes, how many inputs)."""
    import torch

    from .problem import meta_tensors

    try:
        with meta_tensors():
            xs = task.get_inputs()
    except Exception as e:
        raise ProblemError(task.path, line_in_file(task.path, e), 1, f"get_inputs() raised {type(e).__name__}: {e}") from e
    if not isinstance(xs, (list, tuple)):
        node = _top_function(ast.parse(read_source(task.path)), "get_inputs")
        raise _error(task.path, node, f"get_inputs() must return a list, not {type(xs).__name__}")
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    if not tensors:
        node = _top_function(ast.parse(read_source(task.path)), "get_inputs")
        raise _error(task.path, node, "get_inputs() returned no tensor")
    return ([list(x.shape) if isinstance(x, torch.Tensor) else None for x in xs],
            [str(x.dtype).replace("torch.", "") if isinstance(x, torch.Tensor) else type(x).__name__ for x in xs], len(xs))


def prepare(path: str, fn: str, dirname: str) -> Dict:
    """Parses the file, runs its top level, draws get_inputs on shape-only tensors, and writes the
    problem file and the default config's ModelNew into `dirname`. The JSON the C++ driver reads."""
    spec = parse(path, fn)
    task = Task(path, fn, spec)
    shapes, dtypes, n = _shapes_of(task)
    knobs = space(spec, [s for s in shapes if s is not None])
    default = default_config(knobs)
    os.makedirs(dirname, exist_ok=True)
    problem = os.path.join(dirname, fn + ".py")
    _write(problem, problem_source(spec, n))
    cand = write_candidate(dirname, spec, default, knobs)
    all_configs = configs(knobs)
    return {
        "ok": True, "file": spec.path, "fn": fn, "line": spec.fn_line, "params": spec.params, "constexprs": spec.constexprs,
        "loops": spec.loops, "unmasked": [list(u) for u in spec.unmasked],
        "inputs": [{"shape": s, "dtype": d} for s, d in zip(shapes, dtypes)],
        "reference": spec.has_reference, "reference_line": spec.reference_line,
        "knobs": [{"name": k.name, "kind": k.kind, "where": k.where, "default": k.default, "values": k.values, "why": k.why,
                   "line": k.line, "col": k.col} for k in knobs],
        "space": len(all_configs), "default": default, "default_label": label(fn, default, knobs),
        "default_text": config_text(default), "default_candidate": cand,
        "problem": problem, "dir": os.path.abspath(dirname), "triton": triton_available(),
    }


# --- screen: the search on the GPU -----------------------------------------------------------------
# Exit status of `screen` when the CUDA context died under a config: the log says which; run it
# again and it goes on from there.
EXIT_RESUME = 3
# How an earlier process's end is told of the config it was running, where the driver did not
# say (src/cli/optimize_triton.cpp writes why when it knows: killed at the timeout, a signal).
ENDED_UNDER = "the screening process ended while running it (a crash, a dead CUDA context or past its time limit)"


def _read_log(path):
    """The measurements of an earlier run of the same screening (its log), and the config that
    was running when it ended, if one was: it failed by killing the process."""
    done, running = {}, None
    if not os.path.exists(path):
        return done, running
    with open(path) as fh:
        for line in fh:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line cut short by the process's end
            k = json.dumps(e.get("config"), sort_keys=True)
            if e.get("event") == "start":
                running = e["config"]
            elif e.get("event") == "result":
                done[k] = e["result"]
                running = None
    return done, running


class Measurements:
    """measure(config) for coordinate_search, each config's measurement kept in the screening's
    log (a JSON line before it runs and one after, each flushed to disk) so that a later process
    goes on where an earlier one ended:

      replay  a config the log has a result for is not run again, whatever the deadlines
      blame   a config the log shows started with no result was running when its process ended
              (a crash, a dead CUDA context, a kill at the time limit): it failed, with the
              driver's reason where it wrote one into the log, else ENDED_UNDER
      stop    no new config starts past `deadline` (the screening's share of the budget: stop
              "seconds") nor, once this process has measured one, past `batch_deadline` (this
              process's share of the time: stop "batch"; the driver starts another to go on)

    run_one(config) -> {"status": "ok", "median_us"} or {"status": "failed", "error"}; a result
    with "fatal" (the CUDA context is unusable) is logged and the process exits EXIT_RESUME."""

    def __init__(self, log: str, run_one: Callable[[Dict], Dict], name: Callable[[Dict], str] = str,
                 deadline: Optional[float] = None, batch_deadline: Optional[float] = None,
                 clock: Callable[[], float] = time.time):
        self.done, self.running = _read_log(log)
        self.run_one, self.name, self.deadline, self.batch_deadline, self.clock = run_one, name, deadline, batch_deadline, clock
        self.measured = 0  # configs this process ran
        self._log = open(log, "a")

    def close(self):
        self._log.close()

    def _note(self, event):
        self._log.write(json.dumps(event) + "\n")
        self._log.flush()
        os.fsync(self._log.fileno())

    def __call__(self, config: Dict) -> Dict:
        k = json.dumps(config, sort_keys=True)
        if k in self.done:
            return self.done[k]
        if self.running is not None and json.dumps(self.running, sort_keys=True) == k:
            r = {"status": "failed", "error": ENDED_UNDER}
            self._note({"event": "result", "config": config, "result": r})
            self.done[k], self.running = r, None
            return r
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            raise _Stop("seconds")
        if self.batch_deadline is not None and self.measured and now >= self.batch_deadline:
            raise _Stop("batch")
        self._note({"event": "start", "config": config, "label": self.name(config), "t": round(now, 3)})
        t0 = time.monotonic()
        r = dict(self.run_one(config))
        fatal = r.pop("fatal", False)
        r["seconds"] = round(time.monotonic() - t0, 3)
        self._note({"event": "result", "config": config, "result": r})
        self.done[k] = r
        self.measured += 1
        if fatal:
            sys.exit(EXIT_RESUME)
        return r


class _Case:
    """One case of the task on `device`, as the screening and the side-by-side timing check a
    contender: the problem's own draw under seed 1, the float64 reference's outputs on it (the
    reference, or the kernel at its default config where the file has none, run in float64), the
    outputs' dtypes, and the worker's bound under the precision mode."""

    def __init__(self, t: Dict, device: str, precision: str):
        import torch

        from . import problem as problem_mod
        from . import worker

        self.prob = problem_mod.load(t["problem"])
        mode = worker.check_precision(precision)
        self.flags = worker.precision_flags(mode, worker._tf32_flags())
        matmul_precision = torch.get_float32_matmul_precision()
        model = problem_mod.instantiate(self.prob, 1, inputs=False)[0].to(device)
        try:
            self.accumulation, _, _, kinds = worker._costs(*problem_mod.instantiate(self.prob, 1, meta=True))
        except Exception:
            self.accumulation, kinds = 1.0, set()
        self.policy = worker.precision_policy(mode, self.flags, kinds, device, matmul_precision)
        self.inputs = worker._draw(self.prob, 1, "normal", device)
        with torch.no_grad():
            args = [x.detach().to(dtype=torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in self.inputs]
            with worker._Float64():
                self.ref = [r.detach().to(dtype=torch.float64).contiguous() for r in worker._flat(model.double()(*args))]
            del args
            # The Model as the user runs it (model.double() above changed that one in place).
            self.model = problem_mod.instantiate(self.prob, 1, inputs=False)[0].to(device)
            self.want_types = [o.dtype for o in worker._flat(self.model(*self.inputs))]

    def check(self, out, label: str):
        """GateFailure unless `out` is within the worker's bound of the reference."""
        from . import worker

        worker._compare(out, self.ref, self.want_types, self.inputs, self.accumulation, 16.0, label, self.policy["u_acc"])


def _task_of(task_json: str):
    with open(task_json) as fh:
        t = json.load(fh)
    spec = parse(t["file"], t["fn"])
    knobs = [Knob(**dict(kj)) for kj in t["knobs"]]
    return t, spec, knobs, load_task(t["file"], t["fn"])


def screen(task_json: str, log: str, max_configs: int, top: int, deadline: Optional[float], device: str,
           precision: str = "default", batch_deadline: Optional[float] = None) -> Dict:
    """The coordinate search over the knobs, each config checked on _Case's case and timed
    briefly (Measurements keeps the log). Its stop is "batch" when this process's share of the
    time ran out with configs left: the driver runs it again, and it goes on from the log."""
    import torch

    from . import worker

    t, spec, knobs, task = _task_of(task_json)
    case = _Case(t, device, precision)
    timer = worker.Timer(device)

    def run_one(config):
        r = {"status": "ok"}
        try:
            fn = (lambda *xs: task.run(config, *xs))
            with torch.no_grad(), worker._Flags(case.flags):
                case.check(fn(*case.inputs), "screening case")  # the first call compiles
                tm, _ = timer.time(fn, case.inputs, min_samples=5, max_samples=25, max_seconds=0.3, warmup_seconds=0.02)
            r["median_us"] = tm["median_us"]
        except worker.GateFailure as e:
            r = {"status": "failed", "error": f"{e.gate}/{e.error_class}: {e.message}"[:500]}
        except Exception as e:
            r = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:500]}
            if device.startswith("cuda"):
                try:
                    torch.cuda.synchronize()
                    torch.empty(1024, device=device).zero_()
                    torch.cuda.synchronize()
                except Exception:
                    r["error"] = "the CUDA context is unusable after it: " + r["error"]
                    r["fatal"] = True
        return r

    measure = Measurements(log, run_one, lambda c: label(spec.fn, c, knobs), deadline, batch_deadline)
    try:
        order, cur, stop = coordinate_search(knobs, measure, max_configs)
    finally:
        measure.close()
    default = default_config(knobs)
    passing = [(c, r) for c, r in order if r.get("status") == "ok" and c != default]
    passing.sort(key=lambda cr: cr[1]["median_us"])
    verify = []
    if stop != "batch":
        for c, r in passing[:max(0, top)]:
            verify.append({"label": label(spec.fn, c, knobs), "config": c, "text": config_text(c),
                           "candidate": write_candidate(t["dir"], spec, c, knobs), "screen_us": r["median_us"]})
    return {
        "ok": True, "stop": stop, "device": device, "precision": case.policy, "measured": measure.measured,
        "screened": [{"label": label(spec.fn, c, knobs), "config": c, "text": config_text(c), **r} for c, r in order],
        "current": label(spec.fn, cur, knobs), "verify": verify,
    }


# --- compare: the contenders side by side ---------------------------------------------------------
def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def dsl_dims(prob) -> List[int]:
    """The ksol_run dims of the module's one DSL program, in its task's order, as the module
    path bound them (synth on the problem, shape-only where every op allows it)."""
    from . import problem as problem_mod
    from . import synth

    try:
        syn = synth.synthesize(*problem_mod.instantiate(prob, 0, meta=True))
    except Exception:
        syn = synth.synthesize(*problem_mod.instantiate(prob, 0))
    if not syn.get("program"):
        raise ValueError(f"the reference is not one DSL program ({syn.get('reason', '?')})")
    return [int(syn["dims"][d]) for d in syn["dim_order"]]


def _dsl_contender(run_dir: str, device: str, prob) -> Tuple[Callable, Dict]:
    """The module path's answer in `run_dir` (its report folder) as ksol.load builds it from
    there, the libraries it verified, and what re-running it needs: its kind ("kernel": one DSL
    program, "stitched": DSL pieces around PyTorch calls), and for one program its library and
    dims."""
    from ksol import module as ksol_module
    from ksol import run_dir as rd

    run = rd.read_run(run_dir)
    if run.answer == "pytorch":
        raise ValueError(f"the DSL search returned PyTorch itself: {run.reason}")
    info = {"answer": run.answer, "kernel": run.kernel}
    if run.answer == "kernel":
        info["library"] = rd.library(run, "best")
        info["dims"] = dsl_dims(prob)
    # Called through ctypes, as the worker called the library when it verified and timed it
    # (worker.AbiCandidate): the torch op's extension is not built for the timing.
    return ksol_module.load(run_dir, verify=False, device=device, call_path="ctypes"), info


def compare(task_json: str, contenders: Sequence[Dict], device: str, precision: str = "default", rounds: int = 3) -> Dict:
    """Every contender timed in this one process, side by side: each is checked first on
    _Case's case against the float64 reference (what is timed is what was verified), then the
    contenders are timed in `rounds` rounds, each round over all of them in a rotated order, by
    the worker's timer (cold L2, warm-up) on the same input tensors; a contender's time is the
    median of its rounds' medians. A contender is {"name", "kind"} plus, by kind: "triton"
    {"config"}: the kernel at that config; "dsl" {"dir"}: the module path's answer in its report
    folder; "pytorch": the reference's "eager", "compile" (torch.compile, default mode) or
    "compile_max_autotune". One that fails its check or its build is left out with the reason."""
    import torch

    from . import worker

    t, spec, knobs, task = _task_of(task_json)
    case = _Case(t, device, precision)
    timer = worker.Timer(device)
    # A second per contender and round on a GPU; on the CPU (--emulate: Triton's interpreter) a
    # call is slow and its time no result, so a few calls do.
    timing = ({"max_seconds": 1.0} if device.startswith("cuda") else
              {"min_samples": 3, "max_samples": 10, "max_seconds": 0.2, "warmup_seconds": 0.01})
    fns, recs = {}, []
    for c in contenders:
        rec = {"name": c["name"], "kind": c["kind"]}
        recs.append(rec)
        try:
            if c["kind"] == "triton":
                cfg = dict(c["config"])
                fn = (lambda *xs, cfg=cfg: task.run(cfg, *xs))
            elif c["kind"] == "dsl":
                fn, info = _dsl_contender(c["dir"], device, case.prob)
                rec.update(info)
            elif c["name"] == "eager":
                fn = case.model
            elif c["name"] in ("compile", "compile_max_autotune"):
                if not hasattr(torch, "compile"):
                    raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
                fn = torch.compile(case.model, **({"mode": "max-autotune"} if c["name"] == "compile_max_autotune" else {}))
            else:
                raise ValueError(f"no contender {c['name']!r} of kind {c['kind']!r}")
            with torch.no_grad(), worker._Flags(case.flags):
                case.check(fn(*case.inputs), f"{c['name']}, checked before the side-by-side timing")  # compiles
            fns[c["name"]] = fn
        except worker.GateFailure as e:
            rec["error"] = f"{e.gate}/{e.error_class}: {e.message}"[:500]
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"[:500]
    names = list(fns)
    per = {n: [] for n in names}
    for r in range(max(1, rounds)):
        shift = r % len(names) if names else 0
        for n in names[shift:] + names[:shift]:
            if n not in fns:
                continue
            try:
                with torch.no_grad(), worker._Flags(case.flags):
                    tm, _ = timer.time(fns[n], case.inputs, **timing)
                per[n].append(tm["median_us"])
            except Exception as e:
                del fns[n]
                next(x for x in recs if x["name"] == n)["error"] = f"in a timed call: {type(e).__name__}: {e}"[:500]
    for rec in recs:
        if rec["name"] in fns and per[rec["name"]]:
            rec["rounds_us"] = per[rec["name"]]
            rec["median_us"] = _median(per[rec["name"]])
    return {"ok": True, "device": device, "rounds": max(1, rounds), "precision": case.policy, "contenders": recs}


# --- command line ----------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ksol_torch.triton_task")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="parse a Triton task file, list its configs, write the worker's problem and ModelNew files")
    p.add_argument("file")
    p.add_argument("--fn", required=True, help="the @triton.jit kernel")
    p.add_argument("--dir", required=True, help="where the problem file and the configs' ModelNew files go")
    p.add_argument("--out", help="write the JSON here (not to stdout, which the file's own code may print to)")
    s = sub.add_parser("screen", help="the coordinate search over the knobs on the GPU (one case, a short timing per config)")
    s.add_argument("task", help="prepare's JSON")
    s.add_argument("--log", required=True, help="one line per config measured; a rerun goes on from it")
    s.add_argument("--out", required=True)
    s.add_argument("--configs", type=int, default=48, help="most configs measured")
    s.add_argument("--top", type=int, default=3, help="the fastest passing configs written out for verification")
    s.add_argument("--deadline", type=float, default=0, help="start no config past this Unix time (0: none): stop \"seconds\"")
    s.add_argument("--batch-deadline", type=float, default=0,
                   help="start no config past this Unix time once this process has measured one (0: none): stop \"batch\", "
                        "run it again to go on")
    s.add_argument("--device", default="")
    s.add_argument("--precision", default="default")
    c = sub.add_parser("compare", help="time the contenders side by side in this one process, each checked first")
    c.add_argument("task", help="prepare's JSON")
    c.add_argument("--contenders", required=True, help="a JSON list of {name, kind, config | dir}")
    c.add_argument("--out", required=True)
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--device", default="")
    c.add_argument("--precision", default="default")
    args = ap.parse_args(argv)
    if args.cmd == "prepare":
        try:
            r = prepare(args.file, args.fn, args.dir)
        except ProblemError as e:
            r = {"ok": False, "error": str(e)}
        text = json.dumps(r, indent=1) + "\n"
        if args.out:
            _write(args.out, text)
        else:
            sys.stdout.write(text)
        return 0 if r["ok"] else 2
    # Replies go to --out; the kernel's or Triton's prints go to stderr.
    sys.stdout = sys.stderr
    device = args.device
    if not device:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        if args.cmd == "screen":
            r = screen(args.task, args.log, args.configs, args.top, args.deadline or None, device, args.precision,
                       args.batch_deadline or None)
        else:
            with open(args.contenders) as fh:
                r = compare(args.task, json.load(fh), device, args.precision, args.rounds)
    except ProblemError as e:
        r = {"ok": False, "error": str(e)}
    _write(args.out, json.dumps(r, indent=1) + "\n")
    return 0 if r["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
