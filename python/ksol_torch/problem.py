"""Loading a KernelBench-format problem file, with errors that name file, line and column."""
import ast
import contextlib
import dataclasses
import os
import traceback
from typing import Any, Callable, List

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class ProblemError(Exception):
    """An error in a problem file, printed as `file:line:col: error: message`."""

    def __init__(self, path: str, line: int, col: int, message: str):
        super().__init__(f"{path}:{line}:{col}: error: {message}")
        self.path, self.line, self.col, self.message = path, line, col, message


@dataclasses.dataclass
class Problem:
    path: str
    name: str                       # file name without .py
    model_cls: Any
    get_inputs: Callable[[], List[Any]]
    get_init_inputs: Callable[[], List[Any]]
    namespace: dict


def line_in_file(path: str, exc: BaseException) -> int:
    """The innermost traceback line that lies in `path` (1 if none does)."""
    line = 1
    for fr in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(fr.filename) == os.path.abspath(path):
            line = fr.lineno or line
    return line


def _def_line(tree: ast.AST, name: str) -> int:
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.lineno
    return 1


def call(problem: Problem, fn_name: str, *args):
    """Calls one of the problem's functions; an exception becomes a ProblemError at its line."""
    fn = getattr(problem, fn_name) if fn_name != "Model" else problem.model_cls
    try:
        return fn(*args)
    except Exception as e:  # the user's code: any failure is reported against the file
        raise ProblemError(problem.path, line_in_file(problem.path, e), 1,
                           f"{fn_name}() raised {type(e).__name__}: {e}") from e


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def load(path: str) -> Problem:
    import torch.nn as nn  # imported here so the error for a missing torch comes from the caller

    try:
        src = _read(path)
    except OSError as e:
        raise ProblemError(path, 1, 1, f"cannot read: {e.strerror}") from e
    try:
        tree = ast.parse(src, filename=path)
        code = compile(tree, path, "exec")
    except SyntaxError as e:
        raise ProblemError(path, e.lineno or 1, e.offset or 1, f"syntax error: {e.msg}") from e
    ns = {"__name__": "ksol_problem", "__file__": os.path.abspath(path)}
    try:
        exec(code, ns)  # a problem file is code the user asked us to run, as KernelBench does
    except Exception as e:
        raise ProblemError(path, line_in_file(path, e), 1, f"running the file raised {type(e).__name__}: {e}") from e
    missing = [n for n in REQUIRED if n not in ns]
    if missing:
        raise ProblemError(path, 1, 1, "missing " + ", ".join(missing) +
                           ": a KernelBench problem defines Model (an nn.Module), get_inputs() and get_init_inputs()")
    model_cls = ns["Model"]
    if not (isinstance(model_cls, type) and issubclass(model_cls, nn.Module)):
        raise ProblemError(path, _def_line(tree, "Model"), 1, "Model must be a subclass of torch.nn.Module")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(ns[fn]):
            raise ProblemError(path, _def_line(tree, fn), 1, f"{fn} must be a function")
    name = os.path.splitext(os.path.basename(path))[0]
    return Problem(path, name, model_cls, ns["get_inputs"], ns["get_init_inputs"], ns)


_FACTORIES = ("rand", "randn", "randint", "zeros", "ones", "empty", "full", "arange", "linspace", "eye",
              "rand_like", "randn_like", "zeros_like", "ones_like", "empty_like", "full_like", "randperm")


@contextlib.contextmanager
def meta_tensors():
    """Tensors created inside are shape-only ("meta"): KernelBench problems allocate gigabytes, and
    tracing needs shapes, not values. torch >= 2.0 has a device context; older ones get their
    factory functions wrapped for the duration."""
    import torch

    try:
        ctx = torch.device("meta")
        ctx.__enter__
        with ctx:
            yield
        return
    except AttributeError:
        pass
    saved = {}

    def wrap(fn):
        def f(*a, **k):
            k["device"] = "meta"
            return fn(*a, **k)
        return f

    for name in _FACTORIES:
        if hasattr(torch, name):
            saved[name] = getattr(torch, name)
            setattr(torch, name, wrap(saved[name]))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


def instantiate(problem: Problem, seed: int = 0, meta: bool = False, inputs: bool = True):
    """The module (parameters drawn from `seed`) and its example inputs, as KernelBench builds
    them; with `meta`, shape-only tensors (nothing allocated, nothing computed); without
    `inputs`, the module alone (None for the inputs: get_inputs is not called, so a problem's
    gigabytes of example inputs are not drawn for a caller that draws its own)."""
    if meta:
        with meta_tensors():
            return instantiate(problem, seed, False, inputs)
    import torch

    torch.manual_seed(seed)
    init = call(problem, "get_init_inputs")
    if not isinstance(init, (list, tuple)):
        raise ProblemError(problem.path, _def_line(ast.parse(_read(problem.path)), "get_init_inputs"), 1,
                           f"get_init_inputs() must return a list, not {type(init).__name__}")
    model = call(problem, "Model", *init)
    model.eval()
    if not inputs:
        return model, None
    torch.manual_seed(seed + 1)
    return model, as_inputs(problem, call(problem, "get_inputs"))


def as_inputs(problem: Problem, xs) -> list:
    """What get_inputs returned, as a list; anything but a list or tuple is an error at its def."""
    if not isinstance(xs, (list, tuple)):
        raise ProblemError(problem.path, _def_line(ast.parse(_read(problem.path)), "get_inputs"), 1,
                           f"get_inputs() must return a list, not {type(xs).__name__}")
    return list(xs)
