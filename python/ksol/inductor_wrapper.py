"""Inductor's output code read into what it does: the Triton kernels it defines and, in order, the
buffers `call` allocates, the kernels it launches (each argument bound to a kernel parameter,
with its shape and strides), the vendor and ATen calls it makes (extern_kernels.mm, convolution,
fallbacks) and what it frees and returns.

The output code is the Python module torch.compile writes for one graph (torch._inductor's
PythonWrapperCodegen, captured by inductor_capture.py, or a file from TORCH_COMPILE_DEBUG=1):

    triton_poi_fused_add_relu_0 = async_compile.triton('triton_poi_fused_add_relu_0', '''
    ...
    @triton_heuristics.pointwise(size_hints={'x': 8192}, triton_meta={...}, inductor_meta={...})
    @triton.jit
    def triton_poi_fused_add_relu_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
        ...
    ''', device_str='cuda')
    ...
    def call(self, args):              # a method of Runner (graph partitions), or a function
        arg0_1, arg1_1 = args
        args.clear()
        assert_size_stride(arg0_1, (64, 128), (128, 1))
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((64, 128), (128, 1), torch.float32)
            # Topologically Sorted Source Nodes: [add, relu], Original ATen: [aten.add, aten.relu]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_relu_0.run(arg0_1, arg1_1, buf0, 8192, stream=stream0)
        return (buf0, )

Each kernel's comment block is its provenance: the source nodes (the Dynamo graph's node names),
the ATen ops, and the "Graph fragment": the ATen graph nodes the kernel computes, with the shape
and strides of each value, which inductor_region.py turns back into PyTorch.

The file is parsed with Python's own parser, and every statement is matched against the forms
Inductor writes. A statement of any other form is an error that says what it is and where
(WrapperFormatError, `file:line: error: ...`): a form this reader does not know is never skipped,
since a launch it did not understand would make every later buffer's meaning wrong.
`describe()` prints the result in a text form the tests compare against.
"""
import ast
import dataclasses
import re
from typing import Any, Dict, List, Optional, Tuple

# Inductor's dtype abbreviations (torch._prims_common's dtype_abbrs) -> torch dtype names.
DTYPE_ABBRS = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64", "i32": "int32",
               "i16": "int16", "i8": "int8", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "b8": "bool",
               "c64": "complex64", "c128": "complex128", "c32": "complex32", "f8e4m3fn": "float8_e4m3fn",
               "f8e5m2": "float8_e5m2"}
# Triton signature types of pointers -> torch dtype names.
TRITON_PTR_DTYPES = {"*fp32": "float32", "*fp64": "float64", "*fp16": "float16", "*bf16": "bfloat16", "*i64": "int64",
                     "*i32": "int32", "*i16": "int16", "*i8": "int8", "*u8": "uint8", "*i1": "bool"}


class WrapperFormatError(Exception):
    """Output code of a form this reader does not know: `where:line: error: what`."""

    def __init__(self, where: str, line: int, message: str):
        super().__init__(f"{where}:{line}: error: {message}")
        self.where, self.line, self.message = where, line, message


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    shape: Tuple[Any, ...]     # ints; a str where the size is symbolic (dynamic shapes)
    stride: Tuple[Any, ...]
    dtype: str = ""            # torch dtype name ("float32"); "" where the code does not say
    device: str = ""           # "cuda", "cuda:0", "cpu"; "" where the code does not say
    offset: Any = 0

    def text(self) -> str:
        dt = next((k for k, v in DTYPE_ABBRS.items() if v == self.dtype), self.dtype or "?")
        off = f"+{self.offset}" if self.offset not in (0, "0") else ""
        return f"{dt}[{', '.join(map(str, self.shape))}][{', '.join(map(str, self.stride))}]{off}"

    @property
    def static(self) -> bool:
        return all(isinstance(e, int) for e in self.shape + self.stride) and isinstance(self.offset, int)

    def contiguous(self) -> bool:
        """Row-major and dense (size-1 dims may have any stride), with no offset."""
        if not self.static or self.offset != 0:
            return False
        want = 1
        for n, s in zip(reversed(self.shape), reversed(self.stride)):
            if n != 1 and s != want:
                return False
            want *= n
        return True

    def numel(self) -> int:
        n = 1
        for e in self.shape:
            n *= int(e)
        return n


@dataclasses.dataclass(frozen=True)
class Ref:
    """A name in an fx node's arguments (`%arg0_1`)."""
    name: str

    def __repr__(self):
        return "%" + self.name


@dataclasses.dataclass
class FragmentNode:
    name: str
    op: str                        # "placeholder" or "call_function"
    target: str                    # "aten.add.Tensor"; the placeholder's own name
    args: tuple = ()
    kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    spec: Optional[TensorSpec] = None   # None for a value that is not one tensor (var_mean's tuple)
    line: int = 0


@dataclasses.dataclass
class Fragment:
    """The ATen graph nodes a kernel computes, as its comment block prints them (torch._inductor
    utils.get_kernel_metadata): each read as a placeholder (named by the fx node that made it, or
    by the buffer where none did), the call_function nodes in topological order, and the writes."""
    nodes: List[FragmentNode]
    returns: List[str]

    def placeholders(self) -> List[FragmentNode]:
        return [n for n in self.nodes if n.op == "placeholder"]

    def calls(self) -> List[FragmentNode]:
        return [n for n in self.nodes if n.op == "call_function"]


@dataclasses.dataclass
class Provenance:
    source_nodes: List[str]              # the Dynamo graph's nodes (Topologically Sorted Source Nodes)
    aten: List[str]                      # Original ATen
    mapping: Dict[str, List[str]]        # source node -> ATen nodes
    fragment: Optional[Fragment]
    sorted: bool = True                  # "Unsorted" where the nodes come from several graphs


@dataclasses.dataclass
class Kernel:
    name: str
    kind: str                     # "triton", or the async_compile method for others ("cpp_pybinding", "cuda", ...)
    source: str                   # the kernel's source as the wrapper holds it
    line: int                     # where its definition starts in the wrapper
    heuristic: str = ""           # triton_heuristics.<pointwise|reduction|persistent_reduction|template|...>
    params: List[str] = dataclasses.field(default_factory=list)       # runtime parameters, constexprs left out
    constexprs: List[str] = dataclasses.field(default_factory=list)
    signature: Dict[str, str] = dataclasses.field(default_factory=dict)  # triton_meta's: param -> "*fp32", "i32", ...
    size_hints: Dict[str, Any] = dataclasses.field(default_factory=dict)
    mutated: List[str] = dataclasses.field(default_factory=list)     # inductor_meta's mutated_arg_names
    meta: Dict[str, Any] = dataclasses.field(default_factory=dict)   # other inductor_meta entries kept (grid_type, num_load, ...)
    reduction_hint: str = ""
    provenance: Optional[Provenance] = None

    @property
    def short(self) -> str:
        """poi, red, per, tem, ...: the kind Inductor's kernel names start with."""
        m = re.match(r"triton_([a-z]+)_", self.name)
        return m.group(1) if m else self.kind


def param_role(name: str) -> str:
    """What a Triton kernel parameter is, from the names Inductor gives them: "in", "out",
    "inout" (a buffer the kernel updates in place), "size" (xnumel, r0_numel, ...), "workspace", or
    "scalar" (a symbolic size ks0, a seed, an offset)."""
    if re.fullmatch(r"in_out_ptr\d+", name):
        return "inout"
    if re.fullmatch(r"in_ptr\d+|arg_\w+", name):
        return "in"
    if re.fullmatch(r"out_ptr\d+", name):
        return "out"
    if re.fullmatch(r"[xyz]?r?\d*_?numel|[xyzr]\d*_?numel|\w+numel", name):
        return "size"
    if re.fullmatch(r"ws_ptr|workspace_?\w*|semaphore\w*", name):
        return "workspace"
    return "scalar"


@dataclasses.dataclass
class Value:
    """One argument of a launch or an extern call: a name (a buffer, input or stream), a view of
    one (reinterpret_tensor), or a literal."""
    name: str = ""                        # the buffer or input the value reads
    view: Optional[TensorSpec] = None     # reinterpret_tensor(name, shape, stride, offset)
    literal: Any = None                   # an int, float, str, None or tuple, when there is no name
    text: str = ""                        # the expression as written

    @property
    def is_name(self) -> bool:
        return bool(self.name)


@dataclasses.dataclass
class Bound:
    """A launch argument bound to its kernel parameter, with the tensor it is when it is one."""
    param: str
    role: str
    value: Value
    spec: Optional[TensorSpec]            # the tensor's shape/strides/dtype where known


@dataclasses.dataclass
class Step:
    line: int


@dataclasses.dataclass
class Alloc(Step):
    name: str
    spec: TensorSpec


@dataclasses.dataclass
class Alias(Step):
    """`buf1 = buf0` (Inductor reusing a buffer), or `buf1 = reinterpret_tensor(buf0, ...)`."""
    name: str
    of: str
    view: Optional[TensorSpec] = None


@dataclasses.dataclass
class Launch(Step):
    kernel: str
    args: List[Bound]
    stream: str
    source_nodes: List[str]
    aten: List[str]
    index: int = 0                        # the launch's position among all launches of the graph

    def inputs(self) -> List[Bound]:
        return [b for b in self.args if b.role in ("in", "inout")]

    def outputs(self) -> List[Bound]:
        return [b for b in self.args if b.role in ("out", "inout")]


@dataclasses.dataclass
class Extern(Step):
    """A call Inductor leaves to a library: extern_kernels.mm/addmm/bmm/convolution/..., or an ATen
    fallback (aten.<op>.<overload>). `out` names the buffers it writes into (out=...); `result`
    the name it assigns its return value to."""
    op: str
    args: List[Value]
    kwargs: Dict[str, Value]
    result: str
    source_nodes: List[str]
    aten: List[str]

    @property
    def out(self) -> List[str]:
        v = self.kwargs.get("out")
        return [v.name] if v is not None and v.name else []


@dataclasses.dataclass
class Item(Step):
    """`buf4 = buf3[0]`: an element of a fallback's tuple result (`index`: one index per level)."""
    name: str
    of: str
    index: Tuple[Any, ...]


@dataclasses.dataclass
class Write(Step):
    """A buffer written by the wrapper itself: `ws.zero_()` (a workspace zeroed), or
    `dst.copy_(src, non_blocking)` (a device copy)."""
    name: str
    how: str                              # "zero" or "copy"
    src: str = ""


@dataclasses.dataclass
class Free(Step):
    names: List[str]


@dataclasses.dataclass
class Return(Step):
    values: List[Value]


@dataclasses.dataclass
class Program:
    """A parsed wrapper: its kernels by name, the graph's inputs (with the shapes its asserts and
    get_args() give), the steps of `call` in order, and the shape of every buffer."""
    where: str
    kernels: Dict[str, Kernel]
    inputs: List[str]
    input_specs: Dict[str, TensorSpec]
    steps: List[Step]
    specs: Dict[str, TensorSpec]          # every tensor name's spec where the code gives one
    aliases: Dict[str, str]               # a reused buffer's name -> the buffer it is (root)
    partitioned: bool = False             # `call` is a method of Runner (graph partitions)

    def launches(self) -> List[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def externs(self) -> List[Extern]:
        return [s for s in self.steps if isinstance(s, Extern)]

    def outputs(self) -> List[Value]:
        ret = [s for s in self.steps if isinstance(s, Return)]
        return ret[-1].values if ret else []

    def root(self, name: str) -> str:
        while name in self.aliases:
            name = self.aliases[name]
        return name


# --- literal values in kernel decorators and fx node arguments ------------------------------------
def _literal(node: ast.AST, where: str, line0: int) -> Any:
    """A decorator argument's value: Python literals, with names and attributes as dotted strings
    (ReductionHint.INNER), calls as a dict with "__call__" (DeviceProperties(...)), set() as a set."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        vals = [_literal(e, where, line0) for e in node.elts]
        return vals if isinstance(node, ast.List) else tuple(vals)
    if isinstance(node, ast.Set):
        return {_literal(e, where, line0) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {_literal(k, where, line0) if k is not None else "**": _literal(v, where, line0) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _literal(node.operand, where, line0)
        if isinstance(v, (int, float)):
            return -v
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _dotted(node) or ast.unparse(node)
    if isinstance(node, ast.Call):
        fn = _dotted(node.func)
        if fn == "set" and not node.args and not node.keywords:
            return set()
        out = {"__call__": fn}
        out.update({k.arg: _literal(k.value, where, line0) for k in node.keywords if k.arg})
        if node.args:
            out["__args__"] = [_literal(a, where, line0) for a in node.args]
        return out
    if isinstance(node, ast.BinOp):
        return ast.unparse(node)
    raise WrapperFormatError(where, line0 + getattr(node, "lineno", 1) - 1, f"a value of a form this reader does not know: {ast.unparse(node)[:120]}")


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of attributes on a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


# --- the kernels' sources ---------------------------------------------------------------------------
def parse_triton_kernel(name: str, source: str, where: str, line: int) -> Kernel:
    """A Triton kernel's parameters and Inductor's metadata from its source."""
    k = Kernel(name=name, kind="triton", source=source, line=line)
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise WrapperFormatError(where, line + (e.lineno or 1), f"kernel {name}'s source does not parse: {e.msg}") from None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not fns:
        raise WrapperFormatError(where, line, f"kernel {name}'s source defines no function {name}")
    fn = fns[0]
    jit = [d for d in fn.decorator_list if _dotted(d if not isinstance(d, ast.Call) else d.func) in ("triton.jit", "jit")]
    if not jit:
        raise WrapperFormatError(where, line + fn.lineno, f"kernel {name} is not decorated with @triton.jit")
    for arg in fn.args.args:
        ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        (k.constexprs if "constexpr" in ann else k.params).append(arg.arg)
    for d in fn.decorator_list:
        if not isinstance(d, ast.Call):
            continue
        fname = _dotted(d.func)
        if not fname.startswith("triton_heuristics."):
            continue
        k.heuristic = fname.split(".", 1)[1]
        kw = {a.arg: a.value for a in d.keywords if a.arg}
        if "size_hints" in kw:
            k.size_hints = _literal(kw["size_hints"], where, line)
        if "reduction_hint" in kw:
            k.reduction_hint = str(_literal(kw["reduction_hint"], where, line)).split(".")[-1]
        tm = _literal(kw["triton_meta"], where, line) if "triton_meta" in kw else {}
        im = _literal(kw["inductor_meta"], where, line) if "inductor_meta" in kw else {}
        sig = tm.get("signature", {}) if isinstance(tm, dict) else {}
        k.signature = {str(a): str(t) for a, t in sig.items()} if isinstance(sig, dict) else {}
        if isinstance(im, dict):
            k.mutated = [str(a) for a in im.get("mutated_arg_names", []) or []]
            k.meta = {key: im[key] for key in ("grid_type", "kernel_name", "num_load", "num_store", "num_reduction", "no_x_dim")
                      if key in im}
    if not k.heuristic:
        raise WrapperFormatError(where, line + fn.lineno, f"kernel {name} has no @triton_heuristics decorator: "
                                                          "not a kernel Inductor generated")
    # The signature lists constexprs too: they are not launch arguments.
    for p in k.params:
        if k.signature and p not in k.signature:
            raise WrapperFormatError(where, line + fn.lineno, f"kernel {name}'s parameter {p} is not in its triton_meta signature")
    return k


# --- comments: provenance ---------------------------------------------------------------------------
_SOURCE_NODES = re.compile(r"#\s*(Topologically Sorted |Unsorted )?Source Nodes: \[(?P<src>[^\]]*)\], Original ATen: \[(?P<aten>[^\]]*)\]")
_SPEC = re.compile(r"^(?P<dt>\w+)\[(?P<shape>[^\]]*)\]\[(?P<stride>[^\]]*)\](?P<dev>.*)$")
_NODE = re.compile(r"^%(?P<name>\w+) : (?:Tensor \"(?P<ann>[^\"]*)\")?(?:\[num_users=\d+\])?\s*=\s*"
                   r"(?P<op>PlaceHolder|call_function)\[target=(?P<target>[^\]]+)\]"
                   r"(?:\(args = (?P<args>.*), kwargs = (?P<kwargs>\{.*\})\))?$")


def _dims(text: str) -> Tuple[Any, ...]:
    out = []
    for e in (s.strip() for s in text.split(",")):
        if not e:
            continue
        out.append(int(e) if re.fullmatch(r"-?\d+", e) else e)
    return tuple(out)


def parse_spec(text: str) -> TensorSpec:
    """`f32[64, 128][128, 1]cuda:0` -> TensorSpec."""
    m = _SPEC.match(text.strip())
    if not m:
        raise ValueError(f"not a tensor annotation: {text!r}")
    dt = m.group("dt")
    return TensorSpec(_dims(m.group("shape")), _dims(m.group("stride")), DTYPE_ABBRS.get(dt, dt), m.group("dev"))


def _fx_args(text: str):
    """fx's printing of a node's args or kwargs, read back: `%name` becomes Ref(name), kwargs'
    bare keys are quoted, a device printed bare (`device: cuda:0`, as a factory's kwargs have it)
    becomes its string, dtypes and other names stay dotted strings."""
    t = re.sub(r"%(\w+)", r"__ref__('\1')", text)
    t = re.sub(r"(?<![\w'\".])((?:cuda|cpu|meta|xpu|mps):\d+)\b", r"'\1'", t)  # before the keys: [cuda:0, cuda:1]
    t = re.sub(r"([{,]\s*)([A-Za-z_]\w*)\s*:(?!:)", r"\1'\2':", t)
    tree = ast.parse(t, mode="eval")

    def ev(n):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "__ref__":
            return Ref(n.args[0].value)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, (ast.List, ast.Tuple)):
            vals = [ev(e) for e in n.elts]
            return vals if isinstance(n, ast.List) else tuple(vals)
        if isinstance(n, ast.Dict):
            return {ev(k): ev(v) for k, v in zip(n.keys, n.values)}
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, (ast.Name, ast.Attribute)):
            return _dotted(n) or ast.unparse(n)
        if isinstance(n, ast.Call):
            return ast.unparse(n)   # device(type='cuda', index=0) and the like: kept as text
        raise ValueError(f"an argument of a form this reader does not know: {ast.unparse(n)}")
    return ev(tree.body)


def parse_fragment(lines: List[Tuple[int, str]], where: str) -> Fragment:
    """The lines after `# Graph fragment:` (each without its `#   `), with their line numbers."""
    nodes, returns = [], []
    for ln, text in lines:
        text = text.strip()
        if text.startswith("return"):
            returns = [r.strip().lstrip("%") for r in text[len("return"):].split(",") if r.strip()]
            continue
        m = _NODE.match(text)
        if not m:
            raise WrapperFormatError(where, ln, f"a graph fragment line of a form this reader does not know: {text[:160]}")
        spec = None
        if m.group("ann"):
            try:
                spec = parse_spec(m.group("ann"))
            except ValueError as e:
                raise WrapperFormatError(where, ln, str(e)) from None
        if m.group("op") == "PlaceHolder":
            nodes.append(FragmentNode(m.group("name"), "placeholder", m.group("target"), spec=spec, line=ln))
            continue
        target = m.group("target")
        target = target[len("torch.ops."):] if target.startswith("torch.ops.") else target
        try:
            args = _fx_args(m.group("args") or "()")
            kwargs = _fx_args(m.group("kwargs") or "{}")
        except (SyntaxError, ValueError) as e:
            raise WrapperFormatError(where, ln, f"the arguments of fragment node %{m.group('name')} do not parse: {e}") from None
        if not isinstance(args, tuple):
            args = (args,)
        nodes.append(FragmentNode(m.group("name"), "call_function", target, args, kwargs, spec, ln))
    return Fragment(nodes, returns)


def parse_kernel_comments(block: List[Tuple[int, str]], where: str) -> Optional[Provenance]:
    """A kernel's comment block (the lines above its definition) -> Provenance, or None where it
    has none (Inductor writes it unless comments are turned off)."""
    src, aten, sorted_, mapping, frag_lines = [], [], True, {}, None
    section = ""
    for ln, text in block:
        body = text.strip()
        m = _SOURCE_NODES.match(body)
        if m:
            src = [s.strip() for s in m.group("src").split(",") if s.strip()]
            aten = [s.strip() for s in m.group("aten").split(",") if s.strip()]
            sorted_ = m.group(1) != "Unsorted "
            section = ""
            continue
        if body.startswith("# Source node to ATen node mapping:"):
            section = "mapping"
            continue
        if body.startswith("# Graph fragment:"):
            section, frag_lines = "fragment", []
            continue
        if body.startswith("# kernel path:") or body == "#":
            section = ""
            continue
        inner = body[1:].strip() if body.startswith("#") else body
        if section == "mapping" and "=>" in inner:
            a, b = inner.split("=>", 1)
            mapping[a.strip()] = [s.strip() for s in b.split(",") if s.strip()]
        elif section == "fragment":
            frag_lines.append((ln, inner))
    if not src and not aten and frag_lines is None:
        return None
    return Provenance(src, aten, mapping, parse_fragment(frag_lines, where) if frag_lines is not None else None, sorted_)


# --- the wrapper ------------------------------------------------------------------------------------
_ALLOC = re.compile(r"^empty_strided(_(?P<dev>cuda|cpu|xpu|mtia|cpu_pinned))?$")


class _Reader:
    def __init__(self, text: str, where: str):
        self.text, self.where = text, where
        self.lines = text.splitlines()
        self.kernels: Dict[str, Kernel] = {}
        self.steps: List[Step] = []
        self.specs: Dict[str, TensorSpec] = {}
        self.aliases: Dict[str, str] = {}
        self.inputs: List[str] = []
        self.input_specs: Dict[str, TensorSpec] = {}
        self.streams = set()
        self.launches = 0

    def fail(self, node_or_line, message: str):
        line = node_or_line if isinstance(node_or_line, int) else getattr(node_or_line, "lineno", 0)
        raise WrapperFormatError(self.where, line, message)

    def src(self, node: ast.AST) -> str:
        return (ast.get_source_segment(self.text, node) or ast.unparse(node)).strip()

    def comments_above(self, lineno: int) -> List[Tuple[int, str]]:
        """The comment lines right above line `lineno` (1-based), top to bottom."""
        out, i = [], lineno - 2
        while i >= 0 and self.lines[i].strip().startswith("#"):
            out.append((i + 1, self.lines[i]))
            i -= 1
        return list(reversed(out))

    # -- module level
    def read(self) -> Program:
        try:
            tree = ast.parse(self.text)
        except SyntaxError as e:
            raise WrapperFormatError(self.where, e.lineno or 1, f"not Python: {e.msg}") from None
        call_fn, partitioned, get_args = None, False, None
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Delete)):
                continue
            if isinstance(node, ast.Try) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body):
                continue
            if isinstance(node, ast.Assign):
                self.module_assign(node)
                continue
            if isinstance(node, ast.Expr):
                v = node.value
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    continue  # the compile-time autotuning block, kept as a string
                if isinstance(v, ast.Call) and _dotted(v.func) in ("async_compile.wait", "atexit.register", "triton.set_allocator"):
                    continue
                self.fail(node, f"a module-level expression this reader does not know: {self.src(node)[:160]}")
            if isinstance(node, ast.ClassDef):
                if node.name != "Runner":
                    self.fail(node, f"class {node.name}: the output code defines a class this reader does not know")
                meths = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
                if "call" not in meths:
                    self.fail(node, "class Runner has no call method")
                call_fn, partitioned = meths["call"], True
                continue
            if isinstance(node, ast.FunctionDef):
                if node.name == "call":
                    call_fn = node
                elif node.name == "get_args":
                    get_args = node
                elif node.name in ("benchmark_compiled_module", "_proton_finalize_and_postprocess"):
                    pass
                elif re.fullmatch(r"partition_\d+", node.name):
                    self.fail(node, f"{node.name}: the graph is split into partitions (CUDA graphs: mode='reduce-overhead'); "
                                    "compile in the default mode")
                else:
                    self.fail(node, f"def {node.name}: the output code defines a function this reader does not know "
                                    "(a subgraph of control flow, or a newer form)")
                continue
            if isinstance(node, ast.If) and "__name__" in self.src(node.test):
                continue
            self.fail(node, f"a module-level statement this reader does not know: {self.src(node).splitlines()[0][:160]}")
        if call_fn is None:
            raise WrapperFormatError(self.where, 1, "no call function: not Inductor's Python output code (a C++ wrapper, "
                                                    "cpp_wrapper=True, is not read)")
        if get_args is not None:
            self.read_get_args(get_args)
        self.read_call(call_fn)
        return Program(self.where, self.kernels, self.inputs, self.input_specs, self.steps, self.specs, self.aliases, partitioned)

    def module_assign(self, node: ast.Assign):
        v = node.value
        if isinstance(v, ast.Call) and _dotted(v.func).startswith("async_compile."):
            how = _dotted(v.func).split(".", 1)[1]
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                self.fail(node, "a kernel definition assigned to something other than one name")
            name = node.targets[0].id
            src_arg = v.args[1] if len(v.args) > 1 else None
            if not (isinstance(src_arg, ast.Constant) and isinstance(src_arg.value, str)):
                self.fail(node, f"kernel {name}: async_compile.{how} without its source as a string")
            source = src_arg.value
            if how == "triton":
                k = parse_triton_kernel(name, source, self.where, node.lineno)
            elif how in ("cpp_pybinding", "cpp", "cuda", "rocm", "halide", "mps", "cutlass", "cutedsl"):
                k = Kernel(name=name, kind=how, source=source, line=node.lineno)
            else:
                self.fail(node, f"kernel {name}: async_compile.{how}, a kind of kernel this reader does not know")
            k.provenance = parse_kernel_comments(self.comments_above(node.lineno), self.where)
            self.kernels[name] = k
            return
        # The header: aliases of torch functions, constants, AsyncCompile(), the Runner and its call.
        if isinstance(v, (ast.Attribute, ast.Name, ast.Constant)):
            return
        if isinstance(v, ast.Call) and _dotted(v.func) in ("AsyncCompile", "Runner", "functools.partial", "os.path.join"):
            return
        self.fail(node, f"a module-level assignment this reader does not know: {self.src(node)[:160]}")

    def read_get_args(self, fn: ast.FunctionDef):
        """The inputs' dtypes and devices: `arg0_1 = rand_strided((..), (..), device='cuda:0', dtype=torch.float32)`."""
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and _dotted(st.value.func) == "rand_strided":
                name = st.targets[0].id if isinstance(st.targets[0], ast.Name) else ""
                c = st.value
                try:
                    shape, stride = _literal(c.args[0], self.where, 1), _literal(c.args[1], self.where, 1)
                except (IndexError, WrapperFormatError):
                    continue
                kw = {k.arg: _literal(k.value, self.where, 1) for k in c.keywords if k.arg}
                self.input_specs[name] = TensorSpec(tuple(shape), tuple(stride), str(kw.get("dtype", "")).replace("torch.", ""),
                                                    str(kw.get("device", "")))

    # -- call()
    def read_call(self, fn: ast.FunctionDef):
        body = list(fn.body)
        if body and isinstance(body[0], ast.Assign) and isinstance(body[0].value, ast.Name) and body[0].value.id == "args":
            t = body[0].targets[0]
            names = [e for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if not all(isinstance(e, ast.Name) for e in names):
                self.fail(body[0], "the inputs are unpacked into something other than names")
            self.inputs = [e.id for e in names]
            body = body[1:]
        for name in self.inputs:
            if name in self.input_specs:
                self.specs[name] = self.input_specs[name]
        self.block(body)

    def block(self, stmts):
        for st in stmts:
            self.statement(st)

    def statement(self, st: ast.stmt):
        if isinstance(st, ast.With):
            for item in st.items:
                f = _dotted(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else ""
                if f not in ("torch.cuda._DeviceGuard", "torch.cuda.device", "torch.xpu._DeviceGuard", "torch.cuda.stream"):
                    self.fail(st, f"a with-block this reader does not know: {self.src(item.context_expr)[:120]}")
            self.block(st.body)
            return
        if isinstance(st, ast.Delete):
            names = [t.id for t in st.targets if isinstance(t, ast.Name)]
            if len(names) != len(st.targets):
                self.fail(st, f"a del of something other than names: {self.src(st)}")
            self.steps.append(Free(st.lineno, names))
            return
        if isinstance(st, ast.Return):
            v = st.value
            elts = v.elts if isinstance(v, (ast.Tuple, ast.List)) else ([] if v is None else [v])
            self.steps.append(Return(st.lineno, [self.value(e) for e in elts]))
            return
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            self.call_expr(st, st.value, result="")
            return
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
                self.fail(st, f"an assignment to something other than one name: {self.src(st)[:160]}")
            self.assign(st, st.targets[0].id, st.value)
            return
        if isinstance(st, ast.Pass):
            return
        kind = type(st).__name__
        what = {"If": "a branch (control flow, or asserts on dynamic sizes)", "For": "a loop", "While": "a loop"}.get(kind, kind)
        self.fail(st, f"{what} in call(), which this reader does not know: {self.src(st).splitlines()[0][:160]}")

    def assign(self, st, name: str, v: ast.AST):
        if isinstance(v, ast.Name):
            self.aliases[name] = v.id
            if v.id in self.specs:
                self.specs[name] = self.specs[v.id]
            self.steps.append(Alias(st.lineno, name, v.id))
            return
        if isinstance(v, ast.Subscript):
            idx, base = [], v
            while isinstance(base, ast.Subscript) and isinstance(base.slice, ast.Constant):
                idx.append(base.slice.value)
                base = base.value
            if isinstance(base, ast.Name) and idx:
                self.steps.append(Item(st.lineno, name, base.id, tuple(reversed(idx))))
                return
        if isinstance(v, ast.Call):
            f = _dotted(v.func)
            m = _ALLOC.match(f)
            if m:
                self.steps.append(Alloc(st.lineno, name, self.alloc_spec(st, v, m.group("dev") or "")))
                self.specs[name] = self.steps[-1].spec
                return
            if f == "reinterpret_tensor":
                val = self.value(v)
                self.aliases[name] = val.name
                self.specs[name] = val.view
                self.steps.append(Alias(st.lineno, name, val.name, val.view))
                return
            if f == "get_raw_stream":
                self.streams.add(name)
                return
            self.call_expr(st, v, result=name)
            return
        self.fail(st, f"an assignment this reader does not know: {self.src(st)[:160]}")

    def alloc_spec(self, st, c: ast.Call, dev: str) -> TensorSpec:
        try:
            shape = _literal(c.args[0], self.where, 1)
            stride = _literal(c.args[1], self.where, 1)
        except IndexError:
            self.fail(st, f"an allocation without shape and strides: {self.src(c)}")
        kw = {k.arg: _literal(k.value, self.where, 1) for k in c.keywords if k.arg}
        dtype = kw.get("dtype") or (_literal(c.args[2], self.where, 1) if len(c.args) > 2 else "")
        device = kw.get("device") or dev
        if isinstance(device, dict):  # device(type='cuda', index=0)
            device = str(device.get("type", "")) + (f":{device['index']}" if device.get("index") is not None else "")
        return TensorSpec(tuple(shape), tuple(stride), str(dtype).replace("torch.", ""), str(device))

    def call_expr(self, st, c: ast.Call, result: str):
        f = _dotted(c.func)
        if f in ("assert_size_stride", "assert_alignment", "torch._C._dynamo.guards.assert_size_stride"):
            if f.endswith("assert_size_stride") and len(c.args) >= 3 and isinstance(c.args[0], ast.Name):
                name = c.args[0].id
                shape, stride = _literal(c.args[1], self.where, 1), _literal(c.args[2], self.where, 1)
                old = self.specs.get(name)
                self.specs[name] = TensorSpec(tuple(shape), tuple(stride), old.dtype if old else "", old.device if old else "")
                if name in self.inputs and name not in self.input_specs:
                    self.input_specs[name] = self.specs[name]
            return
        if f in ("args.clear", "torch.cuda.set_device", "run_intermediate_hooks", "torch.cuda.synchronize", "nvtx._device_range_end"):
            return
        method = f.rsplit(".", 1)[-1] if "." in f else ""
        owner = f[:-len(method) - 1] if method else ""
        if method == "zero_" and owner.isidentifier() and not c.args:
            self.steps.append(Write(st.lineno, owner, "zero"))
            return
        if method == "copy_" and owner.isidentifier() and c.args and isinstance(c.args[0], ast.Name):
            self.steps.append(Write(st.lineno, owner, "copy", c.args[0].id))
            return
        if f.endswith(".run") and f[:-4] in self.kernels:
            self.launch(st, f[:-4], c)
            return
        if f in self.kernels:  # a C++ or CUDA-template kernel: called directly
            self.launch(st, f, c)
            return
        if f.startswith("extern_kernels.") or f.startswith("aten.") or f.startswith("torch.ops."):
            op = f.split(".", 1)[1] if f.startswith("extern_kernels.") else f[len("torch.ops."):] if f.startswith("torch.ops.") else f
            prov = self.launch_comment(st.lineno)
            self.steps.append(Extern(st.lineno, op, [self.value(a) for a in c.args],
                                     {k.arg: self.value(k.value) for k in c.keywords if k.arg}, result, prov[0], prov[1]))
            return
        if f.endswith(".run"):
            self.fail(st, f"{f[:-4]}.run: a launch of a kernel the output code does not define")
        self.fail(st, f"a call this reader does not know: {self.src(c)[:160]}")

    def launch_comment(self, lineno: int) -> Tuple[List[str], List[str]]:
        """The source nodes and ATen ops of the comment above a launch or an extern call (the line
        getting the stream may stand between them)."""
        i = lineno - 2
        while i >= 0:
            text = self.lines[i].strip()
            m = _SOURCE_NODES.match(text)
            if m:
                return ([s.strip() for s in m.group("src").split(",") if s.strip()],
                        [s.strip() for s in m.group("aten").split(",") if s.strip()])
            if not (text.startswith("#") or re.fullmatch(r"stream\w* = get_raw_stream\(\w*\)", text)):
                break
            i -= 1
        return [], []

    def launch(self, st, kname: str, c: ast.Call):
        k = self.kernels[kname]
        kw = {a.arg: a.value for a in c.keywords if a.arg}
        unknown = sorted(set(kw) - {"stream", "grid", "triton_meta"})
        if unknown:
            self.fail(st, f"{kname}.run with keyword arguments this reader does not know: {', '.join(unknown)}")
        stream = ""
        if "stream" in kw:
            stream = kw["stream"].id if isinstance(kw["stream"], ast.Name) else self.src(kw["stream"])
        args = [self.value(a) for a in c.args]
        if k.kind == "triton":
            params = k.params
            if len(args) != len(params):
                self.fail(st, f"{kname} is launched with {len(args)} arguments, but its kernel takes {len(params)} "
                              f"({', '.join(params)})")
        else:
            params = [f"arg{i}" for i in range(len(args))]
        bound = []
        for p, v in zip(params, args):
            role = param_role(p) if k.kind == "triton" else ("tensor" if v.is_name else "scalar")
            if k.kind == "triton" and p in k.mutated and role == "in":
                role = "inout"
            spec = v.view if v.view is not None else (self.specs.get(v.name) if v.is_name else None)
            if role in ("in", "out", "inout") and not v.is_name:
                self.fail(st, f"{kname}: parameter {p} ({role}) is given {v.text}, not a buffer")
            if spec is not None and k.signature.get(p, "") in TRITON_PTR_DTYPES and not spec.dtype:
                spec = dataclasses.replace(spec, dtype=TRITON_PTR_DTYPES[k.signature[p]])
            bound.append(Bound(p, role, v, spec))
        src, aten = self.launch_comment(st.lineno)
        self.steps.append(Launch(st.lineno, kname, bound, stream, src, aten, self.launches))
        self.launches += 1

    def value(self, node: ast.AST) -> Value:
        text = self.src(node)
        if isinstance(node, ast.Name):
            return Value(name=node.id, text=text)
        if isinstance(node, ast.Call) and _dotted(node.func) == "reinterpret_tensor":
            if len(node.args) < 3 or not isinstance(node.args[0], ast.Name):
                self.fail(node, f"reinterpret_tensor of a form this reader does not know: {text[:120]}")
            base = node.args[0].id
            shape, stride = _literal(node.args[1], self.where, 1), _literal(node.args[2], self.where, 1)
            offset = _literal(node.args[3], self.where, 1) if len(node.args) > 3 else 0
            old = self.specs.get(base)
            return Value(name=base, view=TensorSpec(tuple(shape), tuple(stride), old.dtype if old else "",
                                                    old.device if old else "", offset), text=text)
        try:
            return Value(literal=_literal(node, self.where, 1), text=text)
        except WrapperFormatError:
            self.fail(node, f"an argument of a form this reader does not know: {text[:120]}")


def parse(text: str, where: str = "<output code>") -> Program:
    """Inductor's Python output code -> Program; WrapperFormatError for any form it does not know."""
    return _Reader(text, where).read()


def parse_file(path: str) -> Program:
    with open(path, encoding="utf-8") as fh:
        return parse(fh.read(), path)


# --- the text form ----------------------------------------------------------------------------------
def _val(v: Value, specs: Dict[str, TensorSpec]) -> str:
    if v.view is not None:
        return f"{v.name} as {v.view.text()}"
    if v.is_name:
        return v.name
    return repr(v.literal)


def describe(p: Program) -> str:
    """The program as text: one line per input, allocation, launch (each bound argument on a line of
    its own), extern call, free and return. The tests' golden form."""
    out = []
    for name in p.inputs:
        s = p.input_specs.get(name)
        out.append(f"input {name} {s.text() if s else '?'}")
    for st in p.steps:
        if isinstance(st, Alloc):
            out.append(f"alloc {st.name} {st.spec.text()} {st.spec.device}".rstrip())
        elif isinstance(st, Alias):
            out.append(f"alias {st.name} = {st.of}" + (f" as {st.view.text()}" if st.view else ""))
        elif isinstance(st, Item):
            out.append(f"item {st.name} = {st.of}" + "".join(f"[{i!r}]" for i in st.index))
        elif isinstance(st, Write):
            out.append(f"write {st.name} " + ("zero" if st.how == "zero" else f"copy of {st.src}"))
        elif isinstance(st, Launch):
            k = p.kernels[st.kernel]
            out.append(f"launch {st.kernel} ({k.heuristic or k.kind}) [{', '.join(st.source_nodes)}] [{', '.join(st.aten)}]")
            for b in st.args:
                if b.role in ("in", "out", "inout", "tensor"):
                    out.append(f"  {b.role} {b.param} = {_val(b.value, p.specs)} {b.spec.text() if b.spec else '?'}")
                else:
                    out.append(f"  {b.role} {b.param} = {_val(b.value, p.specs)}")
        elif isinstance(st, Extern):
            args = ", ".join([_val(a, p.specs) for a in st.args] + [f"{k}={_val(v, p.specs)}" for k, v in st.kwargs.items()])
            out.append(f"extern {st.op}({args})" + (f" -> {st.result}" if st.result else ""))
        elif isinstance(st, Free):
            out.append("free " + ", ".join(st.names))
        elif isinstance(st, Return):
            out.append("return " + ", ".join(_val(v, p.specs) for v in st.values))
    return "\n".join(out) + "\n"


def describe_kernel(k: Kernel) -> str:
    """A kernel's parameters and provenance as text (`python3 -m ksol.inductor_path parse`)."""
    out = [f"kernel {k.name} ({k.kind}{', ' + k.heuristic if k.heuristic else ''}) line {k.line}"]
    if k.params:
        out.append("  params " + ", ".join(f"{p}:{k.signature.get(p, '?')}:{param_role(p)}" for p in k.params))
    if k.size_hints:
        out.append("  size_hints " + ", ".join(f"{a}={b}" for a, b in k.size_hints.items()))
    if k.mutated:
        out.append("  mutated " + ", ".join(k.mutated))
    pv = k.provenance
    if pv:
        out.append(f"  source nodes [{', '.join(pv.source_nodes)}] aten [{', '.join(pv.aten)}]")
        if pv.fragment:
            for n in pv.fragment.nodes:
                spec = n.spec.text() if n.spec else "(not one tensor)"
                if n.op == "placeholder":
                    out.append(f"  read %{n.name} {spec}")
                else:
                    out.append(f"  %{n.name} = {n.target}{n.args!r}{' ' + repr(n.kwargs) if n.kwargs else ''} {spec}")
            out.append("  writes " + ", ".join("%" + r for r in pv.fragment.returns))
    return "\n".join(out) + "\n"
