"""The Python evaluation worker: KernelBench-format candidates (a file defining `ModelNew`, its
kernels built with torch.utils.cpp_extension or loaded through ctypes) run against a problem's
`Model`, verified in float64 and timed, through the same line protocol as ksol-worker
(docs/PROTOCOL.md): one JSON object per line each way, `hello`, `eval`, `screen`, `exit`.

    python3 -m ksol_torch worker          # reads requests on stdin

The worker trusts no candidate. Before the candidate's file is run it keeps its own references
to everything it measures and compares with (the timer, the CUDA event methods, synchronize,
the float64 conversion) and a snapshot of the torch namespaces; after loading and after every
call it checks that snapshot, the thread count, and what the call asked PyTorch to compute.
Gates, in order (the result names the first that fails):
  integrity    the candidate replaced a torch or timer function, or started a thread
  correctness  per seed and distribution (the problem's inputs as drawn by get_inputs under the
               seed, on the evaluation device where PyTorch can: normal, then heavy-tailed and
               spiky transforms of them), against the Model in float64 (computed, and compared
               slice by slice, on the GPU while it has room): plain torch.Tensor outputs (no
               subclass, no lazy tensor), not aliasing an input, the reference's shapes and
               dtypes, inputs unchanged, values within the bound; no PyTorch compute op called
               inside the candidate's forward (a fallback to the reference, in a try/except or
               not, is PyTorch doing the work)
  timing       median of timed calls with a 95% CI, the L2 flushed before each on a GPU by reading
               a buffer of twice its size, as the C++ harness does (then the
               GPU held busy by a spin kernel while Python queues the call, so that the host's
               overhead is not timed: the events bracket GPU work only), and the last timed
               call's output verified
The bound per output element: 2 u_out |ref| + u_acc (8 + 2 sqrt(L)) rtol_scale (|ref| + mean|ref|),
with L the accumulation length (the larger of the module's FLOPs over twice its outputs and the
longest sum of one traced op: K, C*R*S, a reduction's or normalization's extent), u_acc the unit
roundoff of the arithmetic the precision mode lets the module's ops use (precision_policy: 2^-24
for float32, 2^-11 where a GEMM or convolution may run in TF32, 2^-8 where matmul may round to
bf16, the C++ harness's policy units); the mean-magnitude term is the normwise part a module
without a magnitude pass needs where outputs cancel.
The precision mode (`precision` in the request: default, strict, tf32) sets PyTorch's TF32
switches for the baselines and the candidate alike, so a candidate is never compared with a
baseline that computed in a slower precision than it was allowed.
Eager and, where this PyTorch has it, torch.compile are timed on the same inputs by the same timer.
The result's phase_seconds says where an evaluation's time went (setup, baselines, load,
correctness, timing, kernelbench); under serve() each phase is logged to stderr as it starts and ends.
"""
import contextlib
import json
import math
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback

# The kernel profile (kernel_profile) profiles one call with torch.profiler; CUPTI left attached after
# it slows later calls (pytorch/pytorch#144455), so the profiler detaches it when it ends.
os.environ.setdefault("TEARDOWN_CUPTI", "1")

import torch  # noqa: E402

from . import abi  # noqa: E402
from . import problem as problem_mod  # noqa: E402

try:
    # PyTorch 2 imports torch._dynamo the first time a dispatch mode is entered (the worker's
    # watch around a candidate's call), and that import replaces torch.manual_seed: imported here,
    # before any snapshot, the replacement is not blamed on the first candidate a fresh worker
    # runs without baselines (torch.compile's baselines used to import it first).
    import torch._dynamo  # noqa: F401
except ImportError:  # PyTorch 1.x has no torch._dynamo
    pass
try:
    # Imported before any snapshot too: the kernel count's first profiler use must not look like
    # a candidate's change to the watched namespaces.
    import torch.profiler  # noqa: F401
except ImportError:  # pragma: no cover
    pass

PROTOCOL = 1

# aten ops a candidate may ask PyTorch for: allocation, views and copies. Anything else inside
# its forward is PyTorch computing what the candidate claims to compute.
ALLOWED_ATEN = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "zero_", "fill_", "view", "_unsafe_view", "reshape", "as_strided", "alias", "detach", "t", "transpose", "permute",
    "expand", "unsqueeze", "squeeze", "slice", "select", "contiguous", "clone", "copy_", "_to_copy", "to",
    "lift_fresh", "lift_fresh_copy", "resize_", "set_", "split", "unbind", "narrow", "_reshape_alias", "view_as",
    "is_contiguous", "stride", "size", "sym_size", "sym_stride", "numel", "_local_scalar_dense", "resolve_conj",
    "resolve_neg", "_conj", "record_stream",
}

# --- what the worker keeps for itself before any candidate code runs -------------------------
_perf_ns = time.perf_counter_ns
_enumerate_threads = threading.enumerate
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_current_frames = sys._current_frames


def _trusted_file(path):
    """PyTorch's own code or the standard library (not third-party packages beside it)."""
    p = os.path.abspath(path)
    if p.startswith(_TORCH_DIR):
        return True
    return p.startswith(_STDLIB_DIR) and "site-packages" not in p and "dist-packages" not in p


def _thread_origin(t):
    """The file that holds a thread's code (its target, else its class's run), or '?'."""
    fn = getattr(t, "_target", None) or type(t).run
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else "?"


# What serve() needs from the evaluation it ran: the threads alive once the baselines were timed.
# Whether phases are logged: under serve(), the worker's stderr is a log file.
_STATE = {"threads_after_baselines": None, "log": False, "phase": None}


def _threads():
    """The live Python threads, to tell later which ones a candidate started."""
    return frozenset(_enumerate_threads())


try:
    from concurrent.futures.thread import _worker as _pool_worker
except ImportError:  # pragma: no cover
    _pool_worker = None


def _executor_of(t):
    """The ThreadPoolExecutor a pool worker thread serves (None for other threads)."""
    if _pool_worker is None or getattr(t, "_target", None) is not _pool_worker:
        return None
    args = getattr(t, "_args", ())
    try:
        return args[0]() if args and callable(args[0]) else None
    except Exception:
        return None


def _new_threads(before):
    """Threads alive now that were not in `before` and are not PyTorch's: (name, where) pairs.
    A new thread is PyTorch's (torch.compile starts compile workers lazily, thread pools that
    existed before grow on demand) only when it is not a worker of a pool started since, and both
    its target and every frame it is running now are PyTorch's code or the standard library's; a target of the candidate's, or any frame of its code on the thread's
    stack (a wrapper such as torch.no_grad() around its function included), makes it the
    candidate's. A target without Python code (a C function through ctypes) counts too."""
    frames = _current_frames()
    pools = {id(e) for e in map(_executor_of, before) if e is not None}
    out = []
    for t in _enumerate_threads():
        if t in before or not t.is_alive():
            continue
        origin = _thread_origin(t)
        where = origin
        trusted = origin != "?" and _trusted_file(origin)
        ex = _executor_of(t)
        if ex is not None and id(ex) not in pools:
            trusted, where = False, "a thread pool started during the evaluation"
        f = frames.get(t.ident)
        while trusted and f is not None:
            if not _trusted_file(f.f_code.co_filename):
                trusted, where = False, f"{f.f_code.co_filename}:{f.f_lineno}"
            f = f.f_back
        if not trusted:
            out.append((t.name, where))
    return out


_to = torch.Tensor.to
_cuda = torch.cuda.is_available()
if _cuda:
    _Event = torch.cuda.Event
    _record = vars(torch.cuda.Event)["record"]
    _elapsed = vars(torch.cuda.Event)["elapsed_time"]
    _sync = torch.cuda.synchronize
    _spin = torch.cuda._sleep  # a kernel that keeps the GPU busy for a number of clock cycles

_WATCHED = {
    "torch": torch, "torch.nn.functional": torch.nn.functional, "torch.Tensor": torch.Tensor,
    "torch.nn.Module": torch.nn.Module, "torch.cuda": torch.cuda, "torch.testing": torch.testing,
    "torch.linalg": torch.linalg, "torch.fft": torch.fft, "torch._C._TensorBase": torch._C._TensorBase, "time": time,
    "threading": threading,
}
if _cuda:
    _WATCHED["torch.cuda.Event"] = torch.cuda.Event
    _WATCHED["torch._C._CudaEventBase"] = torch._C._CudaEventBase


def _snapshot():
    """The functions, classes and descriptors of the watched namespaces. Plain state (flags,
    counters, caches such as torch.cuda's lazily set ones) changes in normal use and is left out;
    what the worker calls is not."""
    return {(name, k): v for name, ns in _WATCHED.items() for k, v in list(vars(ns).items())
            if callable(v) or isinstance(v, (type, staticmethod, classmethod, property)) or hasattr(v, "__get__")}


def _log(line):
    """A line in the worker's log (its stderr) while it serves requests; nothing under tests."""
    if _STATE["log"]:
        try:
            _write(2, f"[ksol worker] {line}\n".encode())
        except OSError:
            pass


_write = os.write


class _Phases:
    """Seconds spent in each phase of one evaluation (setup, baselines, load, correctness,
    timing, kernelbench: result["phase_seconds"]), and a log line as each starts and ends, so a
    phase that never ends (an evaluation past its timeout) shows where the time went."""

    def __init__(self, name):
        self.name, self.seconds, self.current, self.t0 = name, {}, None, 0

    def start(self, phase):
        self.end()
        self.current, self.t0 = phase, _perf_ns()
        _STATE["phase"] = phase
        _log(f"{self.name}: {phase} ...")

    def end(self):
        if self.current is not None:
            dt = (_perf_ns() - self.t0) / 1e9
            self.seconds[self.current] = round(self.seconds.get(self.current, 0.0) + dt, 3)
            _log(f"{self.name}: {self.current} {dt:.2f} s")
            self.current = None


def _error_text(e: BaseException) -> str:
    """An exception that escaped an evaluation, as the reply's error: its type and message, the
    phase it happened in and the innermost line of ksol's own code on its way ("at worker.py:LINE
    in _evaluate"), so that an out-of-memory error, say, says which step asked for the memory. The
    whole traceback goes to the worker's log and the reply's "trace"."""
    where = []
    if _STATE.get("phase"):
        where.append(f"in phase {_STATE['phase']}")
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.dirname(os.path.abspath(f.filename)) == here]
    if frames:
        f = frames[-1]
        where.append(f"at {os.path.basename(f.filename)}:{f.lineno} in {f.name}")
    return f"{type(e).__name__} ({', '.join(where)}): {e}" if where else f"{type(e).__name__}: {e}"


class GateFailure(Exception):
    def __init__(self, gate, error_class, message):
        super().__init__(message)
        self.gate, self.error_class, self.message = gate, error_class, message


def _check_integrity(snap, threads, when):
    now = _snapshot()
    for key, v in snap.items():
        if now.get(key, None) is not v:
            raise GateFailure("integrity", "patched_function",
                              f"{key[0]}.{key[1]} was replaced or removed {when}: the worker's timer, comparisons and "
                              "PyTorch must stay as they were")
    new = _new_threads(threads)
    if new:
        raise GateFailure("integrity", "thread_started", f"the candidate started a thread {when}: " +
                          ", ".join(f"{n} ({o})" for n, o in new[:4]))


class _InMode:
    """A context manager around the torch mode in self.mode."""

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


# True while the Timer flushes the L2 between timed calls: its read is the harness's, not the candidate's.
_FLUSHING = [False]


class _Watch(_InMode):
    """Records the aten ops called inside the candidate's forward that are not allocation,
    views or copies (a TorchDispatchMode, entered only around the call)."""

    def __init__(self, allow=frozenset()):
        from torch.utils._python_dispatch import TorchDispatchMode

        calls = self.calls = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name not in ALLOWED_ATEN and name not in allow and not _FLUSHING[0]:
                    calls.append(name)
                return func(*args, **(kwargs or {}))

        self.mode = Mode()


class _Float64(_InMode):
    """Keeps a reference forward in float64: casts to a narrower float type inside it (x.float(),
    x.to(torch.bfloat16), a dtype= argument) become float64, so a module written with fp32 math
    and bf16 outputs is compared against its float64 function, not a rounded copy."""

    def __init__(self):
        from torch.overrides import TorchFunctionMode

        narrow = (torch.float32, torch.float16, torch.bfloat16)
        casts = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                if func in casts:
                    return args[0]
                if kwargs.get("dtype") in narrow:
                    kwargs["dtype"] = torch.float64
                args = tuple(torch.float64 if a in narrow else a for a in args)
                return func(*args, **kwargs)

        self.mode = Mode()


# --- inputs ------------------------------------------------------------------------------------
DISTRIBUTIONS = ("normal", "heavy", "spiky")


# Elements of a draw transformed at a time (_transform): its float64 temporaries stay 512 MB each
# whatever the tensor's size (KernelBench's GroupNorm, a 7.5 GB input, ran out of an H100's memory
# asking for 14.00 GiB: one whole-tensor float64 temporary).
_TRANSFORM_SLICE = 1 << 26


def _transform(x: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    """The problem's own draw, reshaped into a distribution: `normal` keeps it; `heavy` gives each
    element Pareto tails of index 3 (values in the hundreds) with its sign; `spiky` zeros 2%,
    scales 1% to magnitudes of 10-1000 and shrinks the rest by 10. Runs where `x` lies, with `gen`
    (a generator of that device). A tensor of more than _TRANSFORM_SLICE elements is transformed
    slice by slice (in row-major order, the generator drawing each slice's numbers in turn) into
    a new tensor, so it needs its own size (and a contiguous copy of a non-contiguous `x`) plus one
    slice's float64 temporaries; a smaller one whole, written in place where it can be (about 4x
    its float64 size at most). On the host a whole tensor's values are the ones the plain
    expressions (sign * (u^(-1/3) - 1); where(u < .02, 0, where(u < .03, sign * 10 * 100^r, 0.1 * x)))
    give, bit for bit: every step is the same IEEE operation, a product with the sign is exact."""
    if dist == "normal" or not x.is_floating_point():
        return x
    if x.numel() > _TRANSFORM_SLICE:
        return _transform_sliced(torch.empty(x.shape, dtype=x.dtype, device=x.device), x, dist, gen)
    return _transform_whole(x, dist, gen)


def _transform_sliced(out: torch.Tensor, x: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    """_transform of `x` slice by slice into `out` (contiguous, x's shape and type, on any device):
    one slice's float64 temporaries at a time, on x's device."""
    flat_in, flat_out = x.reshape(-1), out.view(-1)
    for s in range(0, x.numel(), _TRANSFORM_SLICE):
        flat_out[s:s + _TRANSFORM_SLICE] = _transform_whole(flat_in[s:s + _TRANSFORM_SLICE], dist, gen)
    return out


def _case_generator(device, seed: int, dist: str) -> torch.Generator:
    """The generator of a case's transform on `device`: seeded from (seed, dist)."""
    return torch.Generator(device=device).manual_seed(seed * 7919 + DISTRIBUTIONS.index(dist))


def _transform_whole(x: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    """_transform of `x` in one piece."""
    f64 = torch.float64
    u = torch.rand(x.shape, generator=gen, dtype=f64, device=x.device)
    sign = torch.where(x >= 0, 1.0, -1.0)  # +-1 exactly (NaN counts as negative, as before)
    if dist == "heavy":
        u.pow_(-1.0 / 3.0).sub_(1.0).mul_(sign)
        return u.to(x.dtype)
    zero, spike = u < 0.02, u < 0.03
    del u
    mag = torch.pow(torch.tensor(100.0, dtype=f64, device=x.device), torch.rand(x.shape, generator=gen, dtype=f64, device=x.device))
    mag.mul_(10.0).mul_(sign)
    del sign
    y = torch.where(spike, mag, _to(x, dtype=f64, copy=True).mul_(0.1))
    del mag, spike
    return y.masked_fill_(zero, 0.0).to(x.dtype)


def _device_context(device):
    """torch.device(device) as a context manager, under which factory calls (get_inputs's
    torch.rand) make their tensors on that device: PyTorch >= 2.0 has it. None on the host (the
    draw is the host's anyway) and where this PyTorch has no such context."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return None
    return dev if hasattr(dev, "__enter__") and hasattr(dev, "__exit__") else None


def _get_inputs(prob, seed: int, device: str):
    """get_inputs after torch.manual_seed(seed) (which seeds the GPUs' generators too), drawn on
    `device` where this PyTorch can (_device_context): a GPU draws gigabytes in milliseconds
    where the host takes tens of seconds. Elsewhere, or when get_inputs fails on the device (it
    goes through numpy, say), drawn on the host as before. Tensors are left where they were made;
    the same seed gives the same values on the same device, and a GPU's differ from the host's."""
    ctx = _device_context(device)
    if ctx is not None:
        torch.manual_seed(seed)
        try:
            with ctx:
                return problem_mod.as_inputs(prob, problem_mod.call(prob, "get_inputs"))
        except Exception as e:
            # Drawn on the host below, as PyTorch without the context does: slower, the same checks.
            _log(f"get_inputs failed on {device} ({type(e).__name__}: {str(e)[:200]}); drawn on the host")
    torch.manual_seed(seed)
    return problem_mod.as_inputs(prob, problem_mod.call(prob, "get_inputs"))


def _draw(prob, seed: int, dist: str, device: str):
    """The inputs of one correctness case, on `device`: get_inputs under `seed` (_get_inputs),
    each floating tensor transformed into `dist` where it was drawn, with one generator per
    device seeded from (seed, dist)."""
    raw = _get_inputs(prob, seed, device)
    gens = {}
    out = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            if dist != "normal" and x.is_floating_point() and x.device not in gens:
                gens[x.device] = _case_generator(x.device, seed, dist)
            out.append(_transform(x, dist, gens.get(x.device)).to(device))
        else:
            out.append(x)
    return out


def _draw_into(dst, prob, seed: int, dist: str, device: str) -> None:
    """_draw's case written into the tensors of `dst` (the same values, copied with copy_): the
    heavy and spiky transforms go slice by slice straight into them, and each drawn tensor is let
    go once it is written. For those two draws the device holds one tensor of the draw's size
    less than _draw's list of transformed copies (a 16 GB input: 32 GB, not 48); the normal draw
    needs the same as before (the draw and `dst`)."""
    raw = _get_inputs(prob, seed, device)
    gens = {}
    for k in range(len(raw)):
        x, raw[k] = raw[k], None
        if not isinstance(x, torch.Tensor):
            continue
        t = dst[k]
        if dist == "normal" or not x.is_floating_point():
            t.copy_(x)
            continue
        if x.device not in gens:
            gens[x.device] = _case_generator(x.device, seed, dist)
        if x.numel() > _TRANSFORM_SLICE and t.is_contiguous() and tuple(t.shape) == tuple(x.shape) and t.dtype == x.dtype:
            _transform_sliced(t, x, dist, gens[x.device])
        else:
            t.copy_(_transform(x, dist, gens[x.device]))
        del x


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [out]


# The float64 reference stays on the GPU while free memory is at least _ROOM times its size plus _SLACK.
_ROOM, _SLACK = 2, 2 << 30


def _place_reference(outs, device, also=0):
    """Where the float64 reference outputs (computed on `device`) are held for the comparisons:
    on the GPU while its free memory (the driver's, plus what PyTorch's allocator holds unused) is
    at least _ROOM times their size plus `also` (the case's input copies, made after this) plus
    _SLACK bytes, room for the candidate's outputs, its workspace and the comparison's slices
    beside them; else on the host (copies of the same values)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return [_to(t, device="cpu") for t in outs]
    need = sum(t.numel() * t.element_size() for t in outs)
    try:
        free, _ = torch.cuda.mem_get_info(dev)
        free += torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
    except Exception:
        free = 0
    if free >= _ROOM * need + also + _SLACK:
        return outs
    return [_to(t, device="cpu") for t in outs]


# Inputs of at least this many bytes wait on the host while the correctness cases run (_park).
_PARK_BYTES = 1 << 30


def _park(inputs):
    """`inputs` as they are, or, on a GPU where their tensors hold _PARK_BYTES or more, copies of
    them on the host (the same values, copied back later with copy_)."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not any(x.is_cuda for x in tensors) or sum(x.numel() * x.element_size() for x in tensors) < _PARK_BYTES:
        return inputs
    return [_to(x, device="cpu") if isinstance(x, torch.Tensor) else x for x in inputs]


# Elements compared at a time when an input's copy from before the call lies on the host.
_EQUAL_SLICE = 1 << 26


def _before_call(inputs):
    """Copies of `inputs`' tensors for the check that the call left them as they were: on the
    device, or on the host where the copies would take more than half of the GPU's free memory
    (a 16 GB input beside the case's other copies and the candidate's own buffers)."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    size = sum(x.numel() * x.element_size() for x in tensors)
    host = False
    if size >= _PARK_BYTES and any(x.is_cuda for x in tensors):
        try:
            free = torch.cuda.mem_get_info(next(x for x in tensors if x.is_cuda).device)[0]
        except Exception:
            free = 0
        host = size * 2 > free
    return [(_to(x, device="cpu") if host and x.is_cuda else x.clone()) if isinstance(x, torch.Tensor) else x for x in inputs]


def _unchanged(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal(a, b), where `a` may be a host copy of the device tensor `b`: compared slice by
    slice on b's device, so no whole copy of either is made."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device == b.device and a.numel() <= _EQUAL_SLICE:
        return torch.equal(a, b)
    fa, fb = a.reshape(-1), b.reshape(-1)
    for s in range(0, fa.numel(), _EQUAL_SLICE):
        if not torch.equal(fa[s:s + _EQUAL_SLICE].to(b.device), fb[s:s + _EQUAL_SLICE]):
            return False
    return True


def _out_of_memory():
    """PyTorch's out-of-memory exception (torch.OutOfMemoryError from 2.5, torch.cuda's before)."""
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def _is_out_of_memory(e):
    """An allocation that failed on the GPU: PyTorch's own error, or a library's (cuBLAS, cuDNN)
    reported as a RuntimeError."""
    text = str(e)
    return isinstance(e, _out_of_memory()) or (isinstance(e, RuntimeError) and
                                                 ("out of memory" in text or "ALLOC_FAILED" in text))


class _Reference:
    """The problem's Model in float64, the correctness gate's reference, run where the candidate
    runs (a GPU's float64 is fast enough for large problems). When a case's float64 forward does
    not fit in the GPU's memory (the inputs' float64 copies, the intermediates and the outputs of a
    problem with gigabyte tensors), the model moves to the host and runs there, for that case and
    the rest of the evaluation: the same weights and function in float64, slower, never skipped.
    The model is built here, before any candidate code runs. Called on a case's inputs, it returns
    the float64 outputs, held where _place_reference says (`place`), else where computed."""

    def __init__(self, prob, seed, device):
        self.device = device
        self.model = problem_mod.instantiate(prob, seed, inputs=False)[0].double().to(device)
        self.on_host = False
        self.why = ""  # the GPU's failure, where it runs on the host

    @staticmethod
    def _forward(model, inputs, device):
        with torch.no_grad():
            args = [(_to(x.detach(), device=device, dtype=torch.float64) if x.is_floating_point() else _to(x.detach(), device=device))
                    if isinstance(x, torch.Tensor) else x for x in inputs]
            with _Float64():
                outs = _flat(model(*args))
            del args
            return [_to(t.detach(), dtype=torch.float64).contiguous() for t in outs]

    def __call__(self, inputs, place=True):
        if not self.on_host:
            failed = None
            try:
                outs = self._forward(self.model, inputs, self.device)
            except Exception as e:
                if not str(self.device).startswith("cuda") or not _is_out_of_memory(e):
                    raise
                failed = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if failed is None:
                if not place:
                    return outs
                copies = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
                return _place_reference(outs, self.device, also=copies)
            # Outside the handler, so that the failed forward's tensors are gone before the cache
            # is emptied.
            self.model.to("cpu")
            self.on_host, self.why = True, failed
            torch.cuda.empty_cache()
            _log(f"the float64 reference does not fit in the GPU's memory ({failed}): it runs on the host")
            try:
                return self._forward(self.model, inputs, "cpu")
            except Exception as e:
                raise RuntimeError(f"the float64 reference ran out of GPU memory ({failed}) and failed on the host: "
                                   f"{type(e).__name__}: {e}") from e
        return self._forward(self.model, inputs, "cpu")


# --- precision modes ---------------------------------------------------------------------------
# The modes `ksol optimize FILE.py` and `ksol eval-module` take (--precision). Each fixes PyTorch's
# TF32 switches for the baselines and the candidate alike:
#   default  the switches as PyTorch leaves them once the problem's file has run (cuDNN may use
#            TF32 for float32 convolutions; matmul is IEEE unless the file called
#            torch.set_float32_matmul_precision)
#   strict   TF32 off for cuDNN and matmul: IEEE float32 everywhere
#   tf32     TF32 on for cuDNN and matmul
# bf16 is refused: a module cast to bf16 is another module, with other inputs and another
# reference; the front end lowers float32 modules only.
PRECISIONS = ("default", "strict", "tf32")

# Unit roundoff of the arithmetic an op may use, as the C++ harness's precision policy has it
# (src/task/task.cpp, policy_unit_roundoff: fp32 2^-24, tf32 2^-11; tolerance_for's bf16 bound
# 2^-8 for float32 data rounded to bf16 inside a GEMM, which matmul precision "medium" allows).
# The tensor-core k-step term (L/16) of bf16/fp16 tensor-math tasks is for 16-bit inputs; a
# float32 module's reference has float32 inputs, so its bound has none.
U_ACC = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8}


def check_precision(mode):
    """`mode` if it is one of PRECISIONS, else ValueError saying what is supported."""
    if mode == "bf16":
        raise ValueError("precision bf16 is not supported yet: the front end lowers float32 modules only, and a module "
                         "cast to bf16 would be another module; use default, strict or tf32")
    if mode not in PRECISIONS:
        raise ValueError(f"precision {mode!r}: one of {', '.join(PRECISIONS)}")
    return mode


def precision_flags(mode, default_flags):
    """PyTorch's TF32 switches under `mode`, in the API `default_flags` (_tf32_flags()) uses:
    default_flags themselves for "default"."""
    api, _ = default_flags
    if mode == "default":
        return default_flags
    on = mode == "tf32"
    if api == "allow_tf32":
        return (api, (on, on))
    return (api, ("tf32", "tf32") if on else ("ieee", "ieee"))


def _tf32_allowed(flags):
    """(cuDNN convolutions, matmul) may use TF32 under these switches. In the fp32_precision API,
    "none" for cuDNN is PyTorch's default, which lets cuDNN use TF32."""
    api, (conv, mm) = flags
    if api == "allow_tf32":
        return bool(conv), bool(mm)
    return conv in ("tf32", "none"), mm == "tf32"


def conv_products(mode, device):
    """The arithmetic a lowered float32 convolution's products may use under `mode` on `device`:
    "tf32" where the mode's switches (as the problem's file left them, for "default") let cuDNN use
    TF32 for float32 convolutions on a CUDA device, which is then what eager and torch.compile do
    and what precision_policy's bound allows; "fp32" otherwise, and for mode None."""
    if mode is None or not str(device).startswith("cuda"):
        return "fp32"
    return "tf32" if _tf32_allowed(precision_flags(check_precision(mode), _tf32_flags()))[0] else "fp32"


def matmul_products(mode, device):
    """conv_products for a float32 GEMM: "tf32" where the mode's switches let matmul use TF32 on a
    CUDA device (--precision tf32, or default when the problem's file set matmul precision
    "high" or "medium"), "fp32" otherwise."""
    if mode is None or not str(device).startswith("cuda"):
        return "fp32"
    return "tf32" if _tf32_allowed(precision_flags(check_precision(mode), _tf32_flags()))[1] else "fp32"


def precision_policy(mode, flags, kinds, device, matmul_precision="highest"):
    """What a module's ops may compute in under `mode` with the switches `flags`, and the unit
    roundoff of its bound: {"mode", "arithmetic": fp32 | tf32 | bf16, "u_acc", "why"}. TF32 exists
    only on CUDA devices, and only for GEMMs and convolutions (`kinds`: trace.py's op kinds; empty
    when the trace failed, which counts as having both). matmul_precision "medium" may round a
    float32 GEMM's inputs to bf16."""
    kinds = set(kinds) or {"gemm", "conv"}
    conv_tf32, mm_tf32 = _tf32_allowed(flags)
    arithmetic, why = "fp32", "IEEE float32"
    if not str(device).startswith("cuda"):
        why = f"IEEE float32 (no TF32 on {device})"
    elif mode != "strict":
        uses = [k for k, on in (("gemm", mm_tf32), ("conv", conv_tf32)) if on and k in kinds]
        if "gemm" in kinds and mode == "default" and matmul_precision == "medium":
            arithmetic, why = "bf16", "matmul precision 'medium' may round float32 GEMM inputs to bf16"
        elif uses:
            arithmetic, why = "tf32", "TF32 allowed for " + " and ".join({"gemm": "matmul", "conv": "cuDNN convolutions"}[k] for k in uses)
    return {"mode": mode, "arithmetic": arithmetic, "u_acc": U_ACC[arithmetic], "why": why}


# --- comparison ----------------------------------------------------------------------------------
def _unit(dtype):
    return {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}.get(dtype, 0.0)


def _compare(got, ref, want_types, inputs, accumulation, rtol_scale, label, u_acc=U_ACC["fp32"]):
    g, r = _flat(got), _flat(ref)
    if len(g) != len(r):
        raise GateFailure("correctness", "wrong_result", f"{len(g)} outputs, the reference has {len(r)} ({label})")
    worst = 0.0
    in_ptrs = {x.data_ptr() for x in inputs if isinstance(x, torch.Tensor) and x.numel()}
    for k, (o, w) in enumerate(zip(g, r)):
        if type(o) is not torch.Tensor:
            raise GateFailure("correctness", "tensor_subclass",
                              f"output {k} is a {type(o).__module__}.{type(o).__name__}, not a plain torch.Tensor ({label})")
        if o.numel() and o.data_ptr() in in_ptrs:
            raise GateFailure("correctness", "output_aliases_input", f"output {k} is an input's memory ({label})")
        if tuple(o.shape) != tuple(w.shape) or o.dtype != want_types[k]:
            raise GateFailure("correctness", "wrong_shape",
                              f"output {k} is {o.dtype} {tuple(o.shape)}; the reference's is {want_types[k]} {tuple(w.shape)} ({label})")
        worst = max(worst, _compare_values(o, w, accumulation, rtol_scale, k, label, u_acc))
    return worst


# Elements per slice of a comparison: its float64 temporaries stay a few hundred MB each, whatever
# the output's size (a 6 GB output compared whole would need ten times its float64 size).
_CHUNK = 1 << 25


def _compare_values(o, ref64, accumulation, rtol_scale, k, label, u_acc=U_ACC["fp32"], floor_frac=1.0):
    """Output `o` against its float64 reference, on the reference's device (the GPU's, where
    _place_reference kept it there), slice by slice: NaN and Inf where the reference has them,
    finite where it is finite, then every element within the bound. The checks, their order and
    their messages are the whole tensor's; on one slice (up to _CHUNK elements) every number is
    too, bit for bit; over several, mean|ref| is the sum of the slices' sums over the count.
    The rule is the C++ harness's compare_output with the reference as its own magnitude and a
    floor of `floor_frac` times the mean magnitude (a module has no magnitude reference, so the
    whole mean; tests/golden/tolerance/cases.json holds cases both implementations must agree on).
    Returns the worst error over tolerance."""
    dev = ref64.device
    got = o.detach().reshape(-1)
    ref = ref64.reshape(-1)
    n = ref.numel()
    spans = [(s, min(n, s + _CHUNK)) for s in range(0, n, _CHUNK)]

    def got64(s, e):
        return _to(got[s:e], device=dev, dtype=torch.float64)

    bad_special, got_not_finite, mag_sum, mag_count = 0, False, 0.0, 0
    for s, e in spans:
        g, r = got64(s, e), ref[s:e]
        fin = torch.isfinite(r)
        bad_special += int((~fin & ~((g == r) | (torch.isnan(g) & torch.isnan(r)))).sum().item())
        got_not_finite = got_not_finite or bool((fin & ~torch.isfinite(g)).any().item())
        mag = r[fin].abs()
        mag_sum += mag.sum().item()
        mag_count += mag.numel()
    if bad_special:
        raise GateFailure("correctness", "wrong_result", f"output {k}: {bad_special} NaN/Inf elements differ from the reference ({label})")
    if got_not_finite:
        raise GateFailure("correctness", "wrong_result", f"output {k}: NaN or Inf where the reference is finite ({label})")
    mean = mag_sum / mag_count if mag_count else 0.0  # the mean |ref| over finite elements
    u_out = _unit(o.dtype)
    growth = (8.0 + 2.0 * math.sqrt(max(1.0, accumulation))) * rtol_scale

    def ratio_of(s, e):
        g, r = got64(s, e), ref[s:e]
        fin = torch.isfinite(r)
        bound = 2 * u_out * r.abs() + u_acc * growth * (r.abs() + floor_frac * mean)
        err = (g - r).abs()
        return g, r, bound, torch.where(fin, err / torch.clamp(bound, min=1e-300), torch.zeros_like(err))

    nbad, maxes = 0, []
    for s, e in spans:
        ratio = ratio_of(s, e)[3]
        maxes.append(ratio.max())
        nbad += (ratio > 1).sum()
    if not spans:
        return 0.0
    maxes = torch.stack(maxes).tolist()
    worst = max(maxes)
    nbad = int(nbad)
    if nbad:
        j = next((j for j, m in enumerate(maxes) if m == worst or m != m), 0)  # the first worst element's slice
        s, e = spans[j]
        g, r, bound, ratio = ratio_of(s, e)
        i = int(torch.argmax(ratio).item())
        raise GateFailure("correctness", "wrong_result",
                          f"output {k}: {nbad} of {n} elements out of tolerance; worst at flat index {s + i}: "
                          f"got {g[i].item():.9g}, want {r[i].item():.9g} "
                          f"(allowed {bound[i].item():.3g}) ({label})")
    return worst


# --- timing ------------------------------------------------------------------------------------
def _median_ci(xs):
    s = sorted(xs)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    h = 1.96 * math.sqrt(n) / 2
    lo, hi = max(0, int(math.floor(n / 2 - h))), min(n - 1, int(math.ceil(n / 2 + h)))
    return med, s[lo], s[hi]


SPIN_CYCLES = 1_000_000


class Timer:
    def __init__(self, device):
        self.device = device
        if device.startswith("cuda"):
            l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
            # Flushed by reading, as the C++ harness does (docs/HARNESS.md, gate 4): a buffer that
            # nothing writes again leaves the L2 full of clean lines, so no write-back of the
            # flush competes with the timed call. Writing it (zero_) left the L2 full of dirty
            # lines, whose write-back the timed call paid for: on an H200 the row kernels then
            # timed 3-8% above ksol eval, and within 1% of it once the flush read
            # (docs/results/2026-12-01-h200-rows-s10.txt).
            self.flush = torch.zeros(2 * l2 // 4, dtype=torch.float32, device=device)

    def time(self, fn, args, min_samples=10, max_samples=100, max_seconds=2.0, warmup_seconds=0.1):
        t0 = _perf_ns()
        n = 0
        while n < 3 or (_perf_ns() - t0) < warmup_seconds * 1e9:
            fn(*args)
            n += 1
        samples = []
        t0 = _perf_ns()
        out = None
        while len(samples) < max_samples and (len(samples) < min_samples or (_perf_ns() - t0) < max_seconds * 1e9):
            out = None  # the previous call's output goes before the next is made (outside the timed span)
            us, out = self.sample(fn, args)
            samples.append(us)
        med, lo, hi = _median_ci(samples)
        return {"median_us": med, "ci_low_us": lo, "ci_high_us": hi, "samples": len(samples), "raw_us": samples}, out

    def sample(self, fn, args):
        """One timed call: its time in microseconds (on a GPU, the L2 flushed before it and the
        events bracketing GPU work only) and its output."""
        if not self.device.startswith("cuda"):
            s = _perf_ns()
            out = fn(*args)
            return (_perf_ns() - s) / 1000.0, out
        _FLUSHING[0] = True
        try:
            torch.sum(self.flush)  # reads the whole buffer: the L2 holds only its clean lines
        finally:
            _FLUSHING[0] = False
        # About 0.5 ms at H200 clocks: longer than the Python between the two records
        # (allocating outputs, a ctypes call, torch.compile's guards), so the GPU meets
        # the timed work already queued instead of idling inside the timed span.
        _spin(SPIN_CYCLES)
        a, b = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(a)
        out = fn(*args)
        _record(b)
        _sync()
        return _elapsed(a, b) * 1000.0, out


# --- one evaluation ----------------------------------------------------------------------------------
def _costs(model, inputs):
    """The module's FLOPs and compulsory bytes (trace.py, on meta-free real tensors), its
    accumulation length (the larger of FLOPs over twice the outputs and the longest accumulation
    of one op, a normalization's extent included; 1 where the trace fails) and the kinds of op in
    it (gemm, conv, elementwise, ...)."""
    from . import trace

    try:
        g = trace.trace(model, inputs)
        outs = sum(o.numel() for o in _flat(model(*inputs)) if isinstance(o, torch.Tensor)) or 1
        return max(1.0, g.flops / (2.0 * outs), g.accumulation), float(g.flops), float(g.bytes), {o.kind for o in g.ops}
    except Exception:
        return 1.0, 0.0, 0.0, set()


def _load_model_new(req, prob, seeds, model, device, snap, threads):
    """The candidate's file, run in a namespace of its own, then ModelNew built as the Model was
    (same seed, same init inputs), with the Model's parameters where their names match."""
    try:
        ns = {"__name__": "ksol_candidate", "__file__": req["candidate"]}
        with open(req["candidate"]) as fh:
            src = fh.read()
        exec(compile(src, req["candidate"], "exec"), ns)
    except Exception as e:
        raise GateFailure("load", "candidate_error", f"{req['candidate']}: {type(e).__name__}: {e}")
    _check_integrity(snap, threads, "while the candidate's file ran")
    if "ModelNew" not in ns:
        raise GateFailure("load", "candidate_error", f"{req['candidate']} defines no ModelNew")
    torch.manual_seed(seeds[0])
    init = problem_mod.call(prob, "get_init_inputs")
    cand = ns["ModelNew"](*init).to(device)
    try:
        cand.load_state_dict(model.state_dict(), strict=False)
    except Exception:
        pass
    _check_integrity(snap, threads, "while ModelNew was built")
    return cand


# --- candidates built to ksol's C ABI ------------------------------------------------------------
class AbiCandidate(torch.nn.Module):
    """A shared library exporting ksol_run (include/ksol/abi.h), called on the module's tensors
    through abi.call_module: the tensor table is the forward's tensor inputs, then the Model's
    parameters and buffers in state_dict order, then the outputs, allocated with the reference's
    shapes and dtypes; `dims` are passed as given; the stream is PyTorch's current one.
    Non-contiguous inputs are made contiguous first (a copy, which the dispatch watch allows)."""

    def __init__(self, so_path, params, out_specs, dims):
        super().__init__()
        self.lib = abi.Library(so_path)
        self.params = [p.contiguous() for p in params]
        self.out_specs = out_specs
        self.dims = [int(d) for d in dims]

    def forward(self, *inputs):
        return abi.call_module(self.lib, inputs, self.params, self.out_specs, self.dims)


def _abi_candidate(so_path, dims, expect_shapes, model, inputs0):
    """A library built to ksol's ABI as the module's candidate: the tensor table is the forward's
    inputs, the Model's parameters and buffers, then the outputs (the reference's shapes and
    dtypes). With `expect_shapes` (the task's tensors at these dims, in order: the library was
    generated for that task) the module's table must match it."""
    with torch.no_grad():
        specs = [(tuple(t.shape), t.dtype) for t in _flat(model(*inputs0))]
    try:
        cand = AbiCandidate(so_path, list(model.state_dict().values()), specs, dims or [])
    except (OSError, AttributeError) as e:
        raise GateFailure("load", "candidate_error", f"{so_path}: {e}")
    if expect_shapes:
        table = [tuple(x.shape) for x in inputs0 if isinstance(x, torch.Tensor)]
        table += [tuple(p.shape) for p in model.state_dict().values()] + [sh for sh, _ in specs]
        want = [(e["name"], tuple(e["shape"])) for e in expect_shapes]
        if len(want) != len(table) or any(not abi.same_layout(w[1], t) for w, t in zip(want, table)):
            raise GateFailure("load", "binding",
                              "the module's tensors (inputs, parameters, outputs) are " + ", ".join(str(list(t)) for t in table) +
                              "; the task's at these dims are " + ", ".join(f"{n} {list(sh)}" for n, sh in want))
    return cand


# Kernels kept by name in a profile (kernel_profile), the slowest first; the rest summed.
_PROFILE_KERNELS = 12


def _kernel_rows(launches) -> list:
    """(name, us) launches as rows {"name", "calls", "us"} by name (shown to its first 120
    characters), the slowest first: _PROFILE_KERNELS rows, then the others as one
    "(N other kernels)" row."""
    by = {}  # name: [calls, us]
    for name, us in launches:
        row = by.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += us
    rows = sorted(by.items(), key=lambda kv: -kv[1][1])
    out = [{"name": k[:120], "calls": c, "us": round(t, 2)} for k, (c, t) in rows[:_PROFILE_KERNELS]]
    if len(rows) > _PROFILE_KERNELS:
        rest = rows[_PROFILE_KERNELS:]
        out.append({"name": f"({len(rest)} other kernels)", "calls": sum(c for _, (c, _) in rest),
                    "us": round(sum(t for _, (_, t) in rest), 2)})
    return out


def kernel_profile(fn, args, device):
    """The GPU kernels one call of fn(*args) launches (torch.profiler's CUDA activity: memory
    copies and sets left out): {"count": launches, "us": _kernel_rows of their device times}, or
    None where they cannot be counted (no GPU, no profiler). One profiled call: where the time
    goes, not a timing."""
    if not _cuda or not str(device).startswith("cuda"):
        return None
    try:
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(*args)
            torch.cuda.synchronize()
        cuda = torch.autograd.DeviceType.CUDA
        ks = [e for e in prof.events() if e.device_type == cuda and not e.name.startswith(("Memcpy", "Memset"))]
        # No kernel at all means the profiler saw no GPU activity (CUPTI taken by another tool),
        # not a module that launches none.
        if not ks:
            return None
        out = _kernel_rows((e.name, e.time_range.elapsed_us()) for e in ks)
        return {"count": len(ks), "us": out}
    except Exception:
        return None


def _time_compiled(timer, model, inputs, options, keep=None):
    """torch.compile(model, **options), compiled by a first call, then timed like eager; the
    compile's seconds beside the timing, or why it could not run. `keep` (a list) receives the
    compiled module."""
    if not hasattr(torch, "compile"):
        # Not a failure of this run: this PyTorch never has it (a later run may reuse the answer).
        return {"error": f"torch {torch.__version__} has no torch.compile", "unavailable": True}
    try:
        t = _perf_ns()
        compiled = torch.compile(model, **options)
        compiled(*inputs)  # compiles
        seconds = (_perf_ns() - t) / 1e9
        out, _ = timer.time(compiled, inputs)
        out["compile_seconds"] = seconds
        if options:
            out["options"] = options
        if keep is not None:
            keep.append(compiled)
        return out
    except Exception as e:
        return {"error": f"torch.compile({', '.join(f'{k}={v!r}' for k, v in options.items())}) failed: {type(e).__name__}: {e}"[:500]}


def _screen(prob, seeds, device, ref_out):
    """screen.Judge's verdict on the float64 reference outputs of one draw per seed."""
    from . import screen as screen_mod

    judge = screen_mod.Judge()
    try:
        for s in seeds:
            inputs = _draw(prob, s, "normal", device)
            judge.add(ref_out(inputs))
            del inputs
        v = judge.verdict()
    except Exception as e:
        v = screen_mod.Screen("skipped", f"the float64 reference failed: {type(e).__name__}: {e}"[:300], judge.draws)
    return {"verdict": v.verdict, "detail": v.detail, "draws": v.draws,
            "degenerate": v.verdict in screen_mod.DEGENERATE}


def _vendor_plan(pieces) -> bool:
    """Whether a request's pieces are the vendor-call plan's (stitch.split's `vendor`): each says so."""
    return any(isinstance(p, dict) and p.get("vendor") for p in pieces)


def _stitched_candidate(pieces, model, inputs, plan=None):
    """The module with its DSL pieces (stitch.py) computed by their libraries, each called with
    its ABI table (its inputs, its parameters, its output); the ops the plan keeps run as PyTorch
    calls. The request's pieces must be the plan's, node for node (the libraries were built for
    those programs). Returns the candidate and the aten ops the kept calls make, which the
    dispatch watch then allows: those calls are ksol's, declared in the plan, not the pieces'.
    `plan`: the module's split, where the caller made it already (a screen builds many
    candidates of one module; the vendor-call plan's where its pieces say "vendor"). A piece given
    as {"nodes", "keep": true} stays PyTorch calls;
    at least one piece must be a library, or the candidate is the module itself."""
    from . import stitch as stitch_mod

    plan = plan or stitch_mod.split(model, inputs, vendor=_vendor_plan(pieces))
    want = [p.nodes for p in plan.pieces]
    got = [list(p.get("nodes", [])) for p in pieces]
    if got != want:
        raise GateFailure("load", "binding", f"the request's pieces {got} are not the module's {want}")
    if pieces and all(spec.get("keep") for spec in pieces):
        raise GateFailure("load", "binding", "every piece is kept as PyTorch calls: no candidate to evaluate")
    libs = {}
    for piece, spec in zip(plan.pieces, pieces):
        if spec.get("keep"):  # PyTorch's own calls of the piece's ops: no library
            continue
        try:
            libs[piece.id] = (abi.Library(spec["so"]), [int(d) for d in spec.get("dims", [])])
        except (OSError, AttributeError) as e:
            raise GateFailure("load", "candidate_error", f"{spec['so']}: {e}")

    # What is timed: the stitched module as generated code, built once (stitch.compiled). The
    # aten ops it asks of PyTorch on the example inputs are the kept calls' (the pieces are native
    # code, and their output allocations and reshapes are allowed anyway).
    cand = abi.stitched_module(plan, libs)
    with torch.no_grad(), _Watch() as rec:
        cand(*inputs)
    return cand, frozenset(rec.calls)


def _keeping_tf32_flags(fn):
    """fn, after which PyTorch's TF32 switches are as they were before it, whatever happened in it."""

    def run(req):
        saved = _tf32_flags()
        try:
            return fn(req)
        finally:
            _set_tf32_flags(saved)

    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def _device_broken():
    """Why the GPU no longer works after a candidate ran, or "" (always, without one): as
    ksol-worker checks, so that the next candidate is not blamed for this one's illegal access."""
    if not _cuda:
        return ""
    try:
        torch.cuda.synchronize()
        torch.empty(1024, device="cuda").zero_()
        torch.cuda.synchronize()
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}" or "the device is unusable"


@_keeping_tf32_flags
def evaluate(req):
    """One evaluation (the module docstring's gates); PyTorch's TF32 switches are as they were
    after it, whatever happened in it."""
    return _evaluate(req)


def _evaluate(req):
    device = req.get("device") or ("cuda" if _cuda else "cpu")
    seeds = [int(s) for s in req.get("seeds", [1, 2, 3])]
    if len(seeds) < 3:
        raise ValueError("the correctness gate needs at least 3 seeds")
    rtol_scale = float(req.get("rtol_scale", 16.0))
    mode = check_precision(req.get("precision", "default"))
    phases = _Phases(os.path.basename(str(req["problem"])))
    phases.start("setup")
    prob = problem_mod.load(req["problem"])
    # The mode's switches, for the baselines and the candidate alike; "default" is PyTorch's as
    # the problem's file left them (it may have called torch.set_float32_matmul_precision).
    flags = precision_flags(mode, _tf32_flags())
    matmul_precision = torch.get_float32_matmul_precision()
    # The modules alone: every input below is drawn on the device (_get_inputs), none on the host.
    model = problem_mod.instantiate(prob, seeds[0], inputs=False)[0].to(device)
    # Costs from the module as the user runs it (its dtypes: bf16 bytes are 2), traced on shape-only
    # tensors where every op has a meta kernel, else on the example inputs (instantiate's: seed + 1).
    try:
        accumulation, flops, nbytes, kinds = _costs(*problem_mod.instantiate(prob, seeds[0], meta=True))
    except Exception:
        accumulation, flops, nbytes, kinds = 1.0, 0.0, 0.0, set()
    if flops == 0 and nbytes == 0:
        example = [x.to(device) if isinstance(x, torch.Tensor) else x for x in _get_inputs(prob, seeds[0] + 1, device)]
        accumulation, flops, nbytes, kinds = _costs(problem_mod.instantiate(prob, seeds[0], inputs=False)[0].to(device), example)
        del example
    accumulation = float(req.get("accumulation") or accumulation)
    policy = precision_policy(mode, flags, kinds, device, matmul_precision)
    u_acc = policy["u_acc"]
    result = {"status": "ok", "gates": [], "accumulation": accumulation, "flops": flops, "bytes": nbytes, "device": device,
              "precision": policy, "phase_seconds": phases.seconds}

    # The float64 reference runs where the candidate does, its outputs then held there while the
    # GPU has room (_place_reference); on the host where it does not fit (_Reference).
    ref_out = _Reference(prob, seeds[0], device)

    def out_types(inputs):
        with torch.no_grad():
            return [t.dtype for t in _flat(model(*inputs))]

    # Baselines first, before any candidate code runs: eager and torch.compile on the problem's inputs.
    phases.start("baselines")
    timer = Timer(device)
    inputs0 = _draw(prob, seeds[0], "normal", device)
    base = {}
    if req.get("baselines", True):
        # max-autotune too on GEMM and convolution problems ("auto"), or when asked (true); its
        # compile time is reported beside its timing.
        ma = req.get("max_autotune", "auto")
        want_ma = ma is True or (ma == "auto" and bool(kinds & {"gemm", "conv"}))
        fns = {"eager": [model], "compile": [], "compile_max_autotune": []}
        with torch.no_grad(), _Flags(flags):
            base["eager"] = timer.time(model, inputs0)[0]  # its output is not kept: GPU memory the cases need
            base["compile"] = _time_compiled(timer, model, inputs0, {}, fns["compile"])
            if want_ma:
                base["compile_max_autotune"] = _time_compiled(timer, model, inputs0, {"mode": "max-autotune"}, fns["compile_max_autotune"])
            if req.get("count_kernels"):
                # After every timing: a profiler session must not precede any baseline's samples.
                for name, fn in fns.items():
                    if fn and name in base and (k := kernel_profile(fn[0], inputs0, device)) is not None:
                        base[name]["kernels"], base[name]["kernel_us"] = k["count"], k["us"]
        fns = None
    result["baselines"] = base
    # torch.compile's compile workers (a thread pool it starts on first use, and keeps) are
    # PyTorch's, started by ksol's own baseline code: serve() looks for threads left behind
    # relative to this point, not to the start of the request.
    _STATE["threads_after_baselines"] = _threads()
    if req.get("baselines_only"):
        if req.get("screen", True):
            # The screening for degenerate problems (screen.py), on the GPU: the float64 reference
            # on the problem's own inputs under each seed (get_inputs as written, no transform).
            phases.start("screen")
            result["screen"] = _screen(prob, seeds, device, ref_out)
        phases.end()
        return result  # ksol optimize FILE.py: eager and torch.compile, before any candidate

    phases.start("load")
    # A candidate is verified and timed under the baselines' switches (a stitched candidate's kept
    # calls run in them too), and held to the mode's bound: under strict no op may use TF32, under
    # default and tf32 the ops the switches let use it are judged by TF32's unit roundoff.
    _set_tf32_flags(flags)  # put back by evaluate(), whatever happens

    snap, threads = _snapshot(), _threads()
    cand = keep = None
    kept_ops = frozenset()  # aten ops a stitched candidate's kept PyTorch calls make (ksol's code, not the candidate's)
    try:
        if req.get("candidate_so"):
            cand = _abi_candidate(req["candidate_so"], req.get("dims", []), req.get("expect_shapes"), model, inputs0)
            _check_integrity(snap, threads, "while the candidate's library loaded")
        elif req.get("stitch"):
            cand, kept_ops = _stitched_candidate(req["stitch"], model, inputs0)
            _check_integrity(snap, threads, "while the pieces' libraries loaded")
        else:
            cand = _load_model_new(req, prob, seeds, model, device, snap, threads)

        def call(inputs, label):
            try:
                with torch.no_grad(), _Watch(kept_ops) as w:
                    out = cand(*inputs)
            except Exception as e:
                _check_integrity(snap, threads, f"during a call ({label})")
                raise GateFailure("launch", "candidate_error", f"the candidate raised {type(e).__name__}: {e} ({label})")
            _check_integrity(snap, threads, f"during a call ({label})")
            if w.calls:
                names = sorted(set(w.calls))
                raise GateFailure("correctness", "pytorch_fallback",
                                  f"the candidate's forward asked PyTorch to compute ({', '.join(names[:8])}): PyTorch did the work "
                                  f"it claims to do ({label})")
            return out

        # Correctness: the same input tensors rewritten with each case's values, so a candidate
        # that caches by tensor identity or address answers the previous case.
        phases.start("correctness")
        keep = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs0]
        want_types = out_types(inputs0)
        # The first draw, which the timing gate copies back into `keep`, waits on the host while
        # the cases run where its tensors are large: gigabytes the float64 reference needs.
        inputs0 = _park(inputs0)
        worst = 0.0
        cases = []
        for seed in seeds:
            for dist in DISTRIBUTIONS:
                ref = out = before = None  # the last case's tensors go before this case's are made
                _draw_into(keep, prob, seed, dist, device)
                ref = ref_out(keep)
                if any(not torch.isfinite(r).all() for r in ref) and dist != "normal":
                    cases.append(f"seed {seed}, {dist}: skipped (the reference is not finite on these inputs)")
                    continue
                before = _before_call(keep)
                label = f"seed {seed}, {dist}"
                out = call(keep, label)
                for k, (a, b) in enumerate(zip(before, keep)):
                    if isinstance(a, torch.Tensor) and not _unchanged(a, b):
                        raise GateFailure("correctness", "input_mutated", f"input {k} changed during the call ({label})")
                worst = max(worst, _compare(out, ref, want_types, keep, accumulation, rtol_scale, label, u_acc))
                cases.append(label)
        result["correctness"] = {"cases": cases, "worst_error_over_tolerance": worst}
        result["gates"].append({"gate": "correctness", "ok": True})
        ref = out = before = None

        # Timing, then the last timed call's output against the reference. The watch stays on
        # (PyTorch may not do the work in timed calls either); the integrity check runs after
        # the loop, outside the timed region.
        if req.get("time", True):
            phases.start("timing")
            for k, x in enumerate(inputs0):
                if isinstance(x, torch.Tensor):
                    keep[k].copy_(x)
            try:
                with torch.no_grad(), _Watch(kept_ops) as w:
                    tm, last = timer.time(cand, keep)
            except Exception as e:
                _check_integrity(snap, threads, "during the timed calls")
                raise GateFailure("timing", "candidate_error", f"the candidate raised {type(e).__name__}: {e} in a timed call")
            _check_integrity(snap, threads, "during the timed calls")
            if w.calls:
                raise GateFailure("timing", "pytorch_fallback",
                                  f"timed calls asked PyTorch to compute ({', '.join(sorted(set(w.calls))[:8])})")
            _compare(last, ref_out(keep), want_types, keep, accumulation, rtol_scale, "the last timed call", u_acc)
            result["timing"] = tm
            result["gates"].append({"gate": "timing", "ok": True})
            for name, b in base.items():
                if "median_us" in b:
                    b["speedup"] = b["median_us"] / tm["median_us"]
    except GateFailure as f:
        result.update({"status": "failed", "failed_gate": f.gate, "error_class": f.error_class, "message": f.message})
        result["gates"].append({"gate": f.gate, "ok": False, "error_class": f.error_class, "message": f.message})
    finally:
        ref = out = before = last = None  # GPU memory the protocol below may need
        if ref_out.on_host:  # said in the result, not only in the worker's log
            result["reference"] = {"device": "cpu", "why": f"the float64 reference ran out of GPU memory: {ref_out.why}"}
        # KernelBench's own protocol beside ksol's, where the candidate ran and was not caught
        # cheating (a wrong result is reported under both protocols).
        if req.get("kernelbench", True) and cand is not None and (result["status"] == "ok" or result.get("error_class") == "wrong_result"):
            phases.start("kernelbench")
            try:
                result["kernelbench"] = _kernelbench_protocol(prob, model, cand, device, seeds[0], flags)
                _check_integrity(snap, threads, "during KernelBench's protocol")
            except GateFailure as f:
                result.update({"status": "failed", "failed_gate": f.gate, "error_class": f.error_class, "message": f.message})
                result["gates"].append({"gate": f.gate, "ok": False, "error_class": f.error_class, "message": f.message})
            except Exception as e:
                result["kernelbench"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        if req.get("count_kernels") and cand is not None and result["status"] == "ok":
            # What one call launches, for the report beside torch.compile's count (not a gate),
            # after everything timed.
            try:
                k = kernel_profile(cand, keep if keep is not None else inputs0, device)
                _check_integrity(snap, threads, "while its kernels were counted")
                if k is not None:
                    result["kernels"], result["kernel_us"] = k["count"], k["us"]
            except GateFailure as f:
                result.update({"status": "failed", "failed_gate": f.gate, "error_class": f.error_class, "message": f.message})
                result["gates"].append({"gate": f.gate, "ok": False, "error_class": f.error_class, "message": f.message})
        _restore(snap)
        phases.end()
    return result


class _Culprit(Exception):
    """Candidate `index` of a screen left the worker unusable (a broken device, a thread that lives
    on): the reply names it, and the worker exits (the coordinator screens the others again in a
    fresh one)."""

    def __init__(self, index, message):
        super().__init__(message)
        self.index, self.message = index, message


@_keeping_tf32_flags
def screen(req):
    """Times a batch of built candidates on the module's inputs, interleaved: the search's cheap
    first answer, which can only reject (nothing is checked here; what survives is evaluated in
    full, every gate, by evaluate()). Each candidate is a library built to ksol's ABI ({"so",
    "dims", "expect_shapes"}, as an eval request's candidate_so) or a stitched module ({"stitch":
    pieces}, as an eval request's stitch). All run under the precision mode's switches on the
    inputs the timing gate uses (the first seed's normal draw), timed by the timing gate's timer:
    `warmup_calls` calls each, then round robin for `warmup_seconds`, then up to `rounds` rounds of
    `samples_per_round` samples each, none started after `max_seconds` of sampling; after the first
    round a candidate slower than `drop_above` times the fastest gets no more samples ("dropped"),
    except the first, the search's reference. Each candidate's calls are followed by a device
    synchronization and the integrity check (outside the timed span), so a fault or a replaced
    function is its own: a replaced function fails it and is put back; a broken device or a thread
    that lives on makes the reply fatal, naming it ("candidate"). Returns {"results": one per
    candidate, in order: status ok with median_us, ci_low_us, ci_high_us, min_us, samples (the raw
    times) and dropped, or status failed with error_class and message}, phase_seconds}. PyTorch's
    TF32 switches are as they were after it."""
    return _screen_batch(req)


def _screen_batch(req):
    device = req.get("device") or ("cuda" if _cuda else "cpu")
    seeds = [int(s) for s in req.get("seeds", [1, 2, 3])]
    mode = check_precision(req.get("precision", "default"))
    rounds = max(1, int(req.get("rounds", 5)))
    per_round = max(1, int(req.get("samples_per_round", 2)))
    warmup_calls = max(1, int(req.get("warmup_calls", 2)))
    warmup_seconds = float(req.get("warmup_seconds", 0.05))
    max_seconds = float(req.get("max_seconds", 10.0))
    drop_above = float(req.get("drop_above", 3.0))
    specs = req.get("candidates") or []
    phases = _Phases(os.path.basename(str(req["problem"])) + " (screen)")
    phases.start("setup")
    prob = problem_mod.load(req["problem"])
    flags = precision_flags(mode, _tf32_flags())
    model = problem_mod.instantiate(prob, seeds[0], inputs=False)[0].to(device)
    inputs0 = _draw(prob, seeds[0], "normal", device)
    timer = Timer(device)
    _set_tf32_flags(flags)  # put back by screen()
    results = [None] * len(specs)

    def failed(k, error_class, message):
        results[k] = {"status": "failed", "error_class": error_class, "message": message[:2000]}

    snap, threads = _snapshot(), _threads()
    live = []  # (index, candidate)
    samples = {}

    def device_sync():
        if _cuda and str(device).startswith("cuda"):
            _sync()  # a candidate's asynchronous fault surfaces here, on its own calls

    def check(k, when):
        """The worker's own functions and threads after candidate k ran: a replaced function fails
        it and is put back at once (the next candidate is not blamed); a thread that lives on makes
        the worker unusable, so the reply names k and the worker exits."""
        try:
            _check_integrity(snap, threads, when)
        except GateFailure as f:
            if f.error_class == "thread_started":
                raise _Culprit(k, f.message)
            _restore(snap)
            raise

    @contextlib.contextmanager
    def blamed(k, where):
        """What goes wrong inside is candidate k's: a gate's failure fails it, an exception fails
        it and, where the device broke, makes it the reply's culprit."""
        try:
            yield
        except GateFailure as f:
            failed(k, f.error_class, f.message)
        except _Culprit:
            raise
        except Exception as e:
            failed(k, "candidate_error", f"the candidate raised {type(e).__name__}{where}: {e}")
            if _device_broken():
                raise _Culprit(k, f"the device is unusable after the candidate ran: {type(e).__name__}: {e}")

    try:
        phases.start("load")
        plan, plan_error = None, ""
        if any(spec.get("stitch") is not None for spec in specs):
            # The module's split, once for every stitched candidate; its failure is ksol's, not theirs.
            from . import stitch as stitch_mod

            try:
                plan = stitch_mod.split(model, inputs0, vendor=any(_vendor_plan(spec["stitch"]) for spec in specs
                                                                    if spec.get("stitch") is not None))
            except Exception as e:
                plan_error = f"the module could not be split into its pieces: {type(e).__name__}: {e}"
        for k, spec in enumerate(specs):
            # Named in the log before its first calls: a hang there is blamed on it (the
            # coordinator reads the log's tail after a timeout).
            _log(f"screen: candidate {k}")
            with blamed(k, ""):
                if spec.get("stitch") is not None:
                    if plan is None:
                        failed(k, "worker_error", plan_error)
                        continue
                    cand, kept = _stitched_candidate(spec["stitch"], model, inputs0, plan)
                    device_sync()
                else:
                    cand, kept = _abi_candidate(spec["so"], spec.get("dims", []), spec.get("expect_shapes"), model, inputs0), frozenset()
                check(k, "while the candidate's library loaded")
                # Its first calls under the dispatch watch: a library that asks PyTorch to compute
                # would be refused by the correctness gate; it is not timed either.
                with torch.no_grad(), _Watch(kept) as w:
                    for _ in range(warmup_calls):
                        cand(*inputs0)
                device_sync()
                check(k, "during a call")
                if w.calls:
                    failed(k, "pytorch_fallback", "the candidate's forward asked PyTorch to compute (" +
                           ", ".join(sorted(set(w.calls))[:8]) + ")")
                    continue
                live.append((k, cand))
                samples[k] = []

        phases.start("timing")

        def one_round(count):
            for k, cand in live:
                if results[k] is not None or k in dropped:
                    continue
                with blamed(k, " in a timed call"):
                    with torch.no_grad():
                        for _ in range(count):
                            us, _ = timer.sample(cand, inputs0)
                            samples[k].append(us)
                    check(k, "during its timed calls")  # outside the timed span

        dropped = set()
        t0 = _perf_ns()
        while (_perf_ns() - t0) < warmup_seconds * 1e9 and live:
            one_round(1)  # clocks up, every candidate's first-call work done
        for k in samples:
            samples[k] = []
        t0 = _perf_ns()
        for r in range(rounds):
            if r > 0 and (_perf_ns() - t0) > max_seconds * 1e9:
                break
            one_round(per_round)
            if r == 0:
                # The first candidate is the search's reference (its best so far): every ratio is
                # taken to it, so it keeps its samples whatever the others do.
                meds = {k: _median_ci(v)[0] for k, v in samples.items() if v and results[k] is None}
                fastest = min(meds.values(), default=0.0)
                dropped |= {k for k, m in meds.items() if k != 0 and fastest > 0 and m > drop_above * fastest}
        for k, _ in live:
            if results[k] is not None:
                continue
            xs = samples[k]
            if not xs:
                failed(k, "no_samples", "no time")
                continue
            med, lo, hi = _median_ci(xs)
            results[k] = {"status": "ok", "median_us": med, "ci_low_us": lo, "ci_high_us": hi, "min_us": min(xs),
                          "samples": xs, "dropped": k in dropped}
    finally:
        live = None
        _restore(snap)
        phases.end()
    return {"results": results, "phase_seconds": phases.seconds}


def verify_module(prob, cand, device, seeds, rtol_scale=16.0, precision="strict"):
    """The correctness gate alone, in this process, on a candidate already built: the ksol
    package's check of a module it loads from a run folder (python/ksol). For each seed and
    distribution the inputs are drawn as evaluate() draws them, and the candidate's outputs must
    be plain tensors of the reference's shapes and dtypes, not an input's memory, leave the inputs
    unchanged, and lie within the bound the run verified them under (the module docstring's, with
    `rtol_scale` and the precision mode's unit roundoff), against the problem's Model in float64.
    The candidate runs under the mode's TF32 switches, as candidates do in evaluate(). Raises
    GateFailure at the first case that fails; returns the cases, the worst error over the
    tolerance and the precision policy."""
    mode = check_precision(precision)
    flags = precision_flags(mode, _tf32_flags())
    matmul_precision = torch.get_float32_matmul_precision()
    model = problem_mod.instantiate(prob, seeds[0], inputs=False)[0].to(device)
    ref_out = _Reference(prob, seeds[0], device)
    # The accumulation length as evaluate() finds it: traced on shape-only tensors, else on an example.
    try:
        accumulation, flops, nbytes, kinds = _costs(*problem_mod.instantiate(prob, seeds[0], meta=True))
    except Exception:
        accumulation, flops, nbytes, kinds = 1.0, 0.0, 0.0, set()
    if flops == 0 and nbytes == 0:
        example = [x.to(device) if isinstance(x, torch.Tensor) else x for x in _get_inputs(prob, seeds[0] + 1, device)]
        accumulation, _, _, kinds = _costs(model, example)
        del example
    policy = precision_policy(mode, flags, kinds, device, matmul_precision)
    cases, worst = [], 0.0
    for seed in seeds:
        for dist in DISTRIBUTIONS:
            label = f"seed {seed}, {dist}"
            inputs = _draw(prob, seed, dist, device)
            with torch.no_grad():
                ref = ref_out(inputs, place=False)
                if any(not torch.isfinite(r).all() for r in ref) and dist != "normal":
                    cases.append(f"{label}: skipped (the reference is not finite on these inputs)")
                    continue
                want_types = [t.dtype for t in _flat(model(*inputs))]
                before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
                try:
                    with _Flags(flags):
                        out = cand(*inputs)
                except Exception as e:
                    raise GateFailure("launch", "candidate_error", f"the candidate raised {type(e).__name__}: {e} ({label})")
            for k, (a, b) in enumerate(zip(before, inputs)):
                if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                    raise GateFailure("correctness", "input_mutated", f"input {k} changed during the call ({label})")
            worst = max(worst, _compare(out, ref, want_types, inputs, accumulation, rtol_scale, label, policy["u_acc"]))
            cases.append(label)
    return {"cases": cases, "worst_error_over_tolerance": worst, "accumulation": accumulation, "precision": policy}


def _tf32_flags():
    """PyTorch's TF32 switches for cuDNN and matmul, to put back later. From PyTorch 2.9 reading
    the old switches raises where something set the new fp32_precision API: then the new one's
    values are kept."""
    try:
        return ("allow_tf32", (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32))
    except RuntimeError:
        return ("fp32_precision", (torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision))


def _set_tf32_flags(flags):
    """Sets the switches that differ from `flags`. A switch already as asked is not written again:
    writing matmul.allow_tf32 = True would turn matmul precision "medium" into "high"."""
    if _tf32_flags() == flags:
        return
    api, (conv, mm) = flags
    if api == "allow_tf32":
        if torch.backends.cudnn.allow_tf32 != conv:
            torch.backends.cudnn.allow_tf32 = conv
        if torch.backends.cuda.matmul.allow_tf32 != mm:
            torch.backends.cuda.matmul.allow_tf32 = mm
    else:
        torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision = conv, mm


def _strict_fp32():
    """Candidates run in strict float32: TF32 off for cuDNN and matmul, in the API in use."""
    api, _ = _tf32_flags()
    _set_tf32_flags((api, (False, False) if api == "allow_tf32" else ("ieee", "ieee")))


class _Flags:
    """A context that sets the TF32 switches (`flags`, or strict float32 when None) and puts the
    previous ones back."""

    def __init__(self, flags=None):
        self.flags = flags

    def __enter__(self):
        self.saved = _tf32_flags()
        if self.flags is None:
            _strict_fp32()
        else:
            _set_tf32_flags(self.flags)

    def __exit__(self, *exc):
        _set_tf32_flags(self.saved)


def _kernelbench_protocol(prob, model, cand, device, seed, flags=None, trials=5, runs=100):
    """KernelBench's protocol, reported beside ksol's stricter one: correct when torch.allclose
    (atol = rtol = 1e-2) holds against the Model in its own precision on `trials` draws of
    get_inputs; time is the mean of `runs` calls after 3 warm-up calls, CUDA events around each
    and no L2 flush. The eager Model and the candidate run under the same TF32 switches `flags`
    (the precision mode's; None: the switches as they are)."""
    def timed(fn, inputs):
        for _ in range(3):
            fn(*inputs)
        times = []
        for _ in range(runs):
            if device.startswith("cuda"):
                a, b = _Event(enable_timing=True), _Event(enable_timing=True)
                _record(a)
                fn(*inputs)
                _record(b)
                _sync()
                times.append(_elapsed(a, b) * 1000.0)
            else:
                t0 = _perf_ns()
                fn(*inputs)
                times.append((_perf_ns() - t0) / 1000.0)
        return sum(times) / len(times)

    if flags is None:
        flags = _tf32_flags()
    user = _Flags(flags)
    correct = True
    with torch.no_grad():
        for t in range(trials):
            inputs = want = got = None  # the last trial's go before this one's are drawn
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in _get_inputs(prob, seed + 1000 + t, device)]
            with user:
                want = _flat(model(*inputs))
            with user:
                got = _flat(cand(*inputs))
            if len(want) != len(got) or any(type(g) is not torch.Tensor or g.shape != w.shape or
                                             not torch.allclose(g.float(), w.float(), atol=1e-2, rtol=1e-2)
                                             for g, w in zip(got, want)):
                correct = False
                break
        want = got = None
        with user:
            out = {"correct": correct, "trials": trials, "runs": runs, "eager_mean_us": timed(model, inputs)}
        with user:
            out["mean_us"] = timed(cand, inputs) if correct else None
    return out


def _restore(snap):
    """Puts back whatever a candidate replaced, so the next evaluation in this process starts
    from the same PyTorch (a thread it started cannot be undone: see serve())."""
    for (name, k), v in snap.items():
        ns = _WATCHED[name]
        if vars(ns).get(k, None) is not v:
            try:
                setattr(ns, k, v)
            except (AttributeError, TypeError):
                pass


def _versions():
    """What the baselines' times depend on besides the module and the GPU: PyTorch's CUDA, cuDNN,
    Triton and the driver, and the environment variables that change PyTorch's kernels."""
    v = {"python": sys.version.split()[0], "cuda": getattr(torch.version, "cuda", None)}
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        v["cudnn"] = None
    try:
        import triton

        v["triton"] = triton.__version__
    except Exception:
        v["triton"] = None
    if _cuda:
        try:
            v["driver"] = torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None
        except Exception:
            v["driver"] = None
    v["env"] = {k: os.environ[k] for k in sorted(os.environ)
                if k in ("NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES")
                or k.startswith(("TORCHINDUCTOR_", "TORCH_CUDNN", "CUBLASLT_", "CUDNN_", "PYTORCH_"))}
    return v


def exit_with_parent(poll_s: float = 1.0, code: int = 4):
    """Ends this process within `poll_s` of its parent's death. A coordinator that is killed
    outright (SIGKILL: a deadline's, an out-of-memory killer's) closes no pipe the worker is not
    reading while it evaluates, and a minutes-long evaluation would hold the GPU's memory for
    whatever runs next; a coordinator that is only signalled stays alive, finishes the evaluation
    in flight and closes the worker itself. A daemon thread, started before any request (the
    thread checks count it as the worker's own)."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(code)

    threading.Thread(target=watch, name="ksol-parent-watch", daemon=True).start()


def serve(stdin=sys.stdin, stdout=None):
    # Ctrl-C reaches the whole process group: the coordinator finishes the evaluation in flight,
    # then closes this worker (end of input), which must not die under it and have the
    # candidate blamed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()
    _STATE["log"] = True
    # Replies go to the real stdout; anything a candidate prints goes to stderr instead.
    out = stdout or os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            out.write(json.dumps({"ok": False, "error": "request is not JSON"}) + "\n")
            out.flush()
            continue
        rid, op = req.get("id", 0), req.get("op")
        if op == "hello":
            rep = {"id": rid, "ok": True, "protocol": PROTOCOL, "gpu": _cuda, "kind": "python",
                   "torch": torch.__version__, "device": {"name": torch.cuda.get_device_name(0)} if _cuda else None,
                   "versions": _versions()}
            if not _cuda:
                rep["reason"] = "no CUDA device visible to PyTorch: candidates run on the CPU"
        elif op == "exit":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return 0
        elif op == "screen":
            before = _threads()
            try:
                _STATE["phase"] = None
                rep = {"id": rid, "ok": True, "result": screen(req)}
            except _Culprit as e:
                # As ksol-worker does: the device is unusable, and the reply names the candidate
                # that broke it; the worker exits, and the coordinator screens the rest afresh.
                out.write(json.dumps({"id": rid, "ok": False, "fatal": True, "candidate": e.index, "error": e.message[:500]}) + "\n")
                out.flush()
                os._exit(3)
            except Exception as e:
                rep = {"id": rid, "ok": False, "error": _error_text(e), "trace": traceback.format_exc()[-2000:]}
                broken = _device_broken()
                if broken:
                    rep["fatal"] = True
                    rep["error"] += f"; the CUDA context is unusable after it: {broken}"[:500]
                    out.write(json.dumps(rep) + "\n")
                    out.flush()
                    os._exit(3)
            if _new_threads(before):
                rep["fatal"] = True
                rep["ok"] = False
                rep["error"] = "a candidate started a thread that lives on in the worker; the worker exits"
                out.write(json.dumps(rep) + "\n")
                out.flush()
                os._exit(3)
        elif op == "eval":
            before = _threads()
            _STATE["threads_after_baselines"] = None
            try:
                _STATE["phase"] = None
                rep = {"id": rid, "ok": True, "result": evaluate(req)}
            except Exception as e:
                rep = {"id": rid, "ok": False, "error": _error_text(e), "trace": traceback.format_exc()[-2000:]}
                _log(f"the evaluation raised {rep['error'][:300]}\n{rep['trace']}")
            failed = not rep.get("ok") or rep.get("result", {}).get("status") != "ok"
            broken = _device_broken() if failed else ""
            if broken:
                rep["fatal"] = True
                rep["error"] = f"the CUDA context is unusable after the candidate ran: {broken}"[:500]
                out.write(json.dumps(rep) + "\n")
                out.flush()
                os._exit(3)
            known = before | (_STATE["threads_after_baselines"] or frozenset())
            # A baselines-only request runs no candidate code: whatever it leaves is PyTorch's.
            ran_candidate = not req.get("baselines_only")
            if rep.get("result", {}).get("error_class") == "thread_started" or (ran_candidate and _new_threads(known)):
                # A candidate's thread lives on in this process: answer, then stop, so that the
                # next evaluation runs in a fresh worker (the reply says so). Threads PyTorch
                # starts itself (torch.compile's compile workers) are not the candidate's: only
                # the candidate's own code is watched (evaluate's integrity checks).
                rep["fatal"] = True
                rep["error"] = "the candidate started a thread that lives on in the worker; the worker exits"
                out.write(json.dumps(rep) + "\n")
                out.flush()
                os._exit(3)
        else:
            rep = {"id": rid, "ok": False, "error": f"unknown op '{op}'"}
        out.write(json.dumps(rep) + "\n")
        out.flush()
    return 0
