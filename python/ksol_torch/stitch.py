"""Cutting a module's forward into DSL pieces around the ops that stay PyTorch calls, and running
the whole again with each piece replaced by a kernel (re-stitching).

`split(model, inputs)` traces the forward (torch.fx), groups the ops the DSL expresses into
maximal chains (an elementwise chain, a row-wise chain over the last dim, a 2-D GEMM or a 2-D
convolution with its elementwise epilogue) and writes each chain as one DSL program with synth.py, on the tensors it
reads there. A chain is a piece only when nothing outside it reads its intermediate values (one
output) and synth accepts it; a refused chain gives way to the longest run from its start that
synth accepts, then the longest from the next op, and so on; an op that starts no accepted run
stays a PyTorch call, with synth's reason. A Python number among the forward's inputs is first
written into the graph as a constant where get_inputs gives it unchanged in every draw
(synth.fold_scalar_inputs); the stitched module then runs with that constant. Convolutions the
DSL has no form for (grouped, transposed, 1-D, 3-D), pooling, reductions to scalars, layout
changes and the like stay PyTorch or vendor calls.

`compiled(plan, runner)` is the module again, as generated torch.fx code built once: the kept ops
run as traced, and each piece's output comes from one call of `runner(piece, tensors)`, with the
piece's ABI tensor table (its inputs in order, then its parameters, as synth.py lays them out). The tests run the pieces
with a float64 DSL evaluator and check the stitched whole against the module in float64; on a
GPU the runner is the piece's compiled library.
"""
import dataclasses
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from . import synth
from .trace import _canonical as _canon, kind_of

_ROWWISE = synth.ROWWISE
_GEMM = synth.GEMM


@dataclasses.dataclass
class Piece:
    id: int
    nodes: List[str]            # fx node names, in order; the last one is the piece's output
    inputs: List[str]           # fx names of the tensors it reads (placeholders, outputs of other pieces or kept ops)
    params: List[str]           # the module's state_dict keys it reads, in its ABI order
    program: str                # the DSL program
    family: str
    tensors: List[Dict]         # synth's ABI table
    dims: Dict[str, int]
    dim_order: List[str]        # the program's dims in the ABI's order (the dims array)
    shape: List[int]            # the output's shape in the module (a row-wise program's [R, C] is this, rows merged)


@dataclasses.dataclass
class Plan:
    gm: torch.fx.GraphModule
    pieces: List[Piece]
    kept: List[Dict]            # {"node", "op", "reason"} for every op left to PyTorch
    constants: List[Dict] = dataclasses.field(default_factory=list)  # numbers written as constants (synth.fold_scalar_inputs)

    def summary(self) -> Dict:
        return {"pieces": [{"id": p.id, "nodes": p.nodes, "inputs": p.inputs, "params": p.params, "family": p.family,
                            "program": p.program, "tensors": p.tensors, "dims": p.dims, "dim_order": p.dim_order,
                            "shape": p.shape}
                           for p in self.pieces],
                "kept": self.kept, "constants": self.constants}


def _lowerable(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if n.op not in ("call_module", "call_function", "call_method"):
        return False
    op = _canon(n, gm)
    k = kind_of(op)
    if op in ("getitem", "getattr"):  # the values of a max or min over a dim
        src = n.args[0] if n.args else None
        return isinstance(src, torch.fx.Node) and _canon(src, gm) in ("max", "min") and n.args[1] in (0, "values")
    return k == "elementwise" or (k == "rowwise" and (op in _ROWWISE or op in synth.REDUCTIONS)) or (k == "gemm" and op in _GEMM) or op == "conv2d" or \
        op in ("view", "reshape", "flatten", "contiguous", "clone", "detach", "squeeze", "unsqueeze", "dropout")


def _anchor(n: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    op = _canon(n, gm)
    return "gemm" if op in _GEMM else "rowwise" if op in _ROWWISE or op in synth.REDUCTIONS else "conv" if op == "conv2d" else ""


def split(model: nn.Module, inputs: List, draw: Optional[Callable[[Sequence[int]], List[List]]] = None) -> Plan:
    """The plan for `model` on `inputs` (see the module's docstring); `draw` draws get_inputs again
    (synth.fold_scalar_inputs). Raises what torch.fx raises when the forward cannot be traced."""
    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    constants, refused = synth.fold_scalar_inputs(gm, model, inputs, draw)
    values = _values(gm, inputs)
    calls = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    # Chains: a lowerable op continues the current chain when it reads the chain's last value;
    # a GEMM or a 2-D convolution always starts one (those families are the op and its
    # epilogue), a row-wise op after either too.
    chains: List[List[torch.fx.Node]] = []
    cur: List[torch.fx.Node] = []
    for n in calls:
        if not _lowerable(n, gm):
            if cur:
                chains.append(cur)
            cur = []
            continue
        a = _anchor(n, gm)
        starts = not cur or cur[-1] not in n.all_input_nodes or a in ("gemm", "conv") or \
            (a == "rowwise" and any(_anchor(c, gm) in ("gemm", "conv") for c in cur))
        if starts:
            if cur:
                chains.append(cur)
            cur = [n]
        else:
            cur.append(n)
    if cur:
        chains.append(cur)

    pieces: List[Piece] = []
    in_piece = set()
    reasons: Dict[str, str] = {}
    for chain in chains:
        for seg in _one_output(chain):
            # The longest run from each start that synth accepts becomes a piece; an op that no
            # run from it is accepted with stays a PyTorch call, with synth's reason.
            i = 0
            while i < len(seg):
                found = None
                why_first = ""
                for j in range(len(seg), i, -1):
                    piece, why = _piece(gm, seg[i:j], values, len(pieces), refused)
                    if piece is not None:
                        found = (j, piece)
                        break
                    why_first = why_first or why
                    if j == i + 1:
                        why_first = why
                if found:
                    pieces.append(found[1])
                    in_piece.update(seg[i:found[0]])
                    i = found[0]
                else:
                    reasons[seg[i].name] = why_first
                    i += 1
    kept = []
    for n in calls:
        if n in in_piece:
            continue
        op = _canon(n, gm)
        why = reasons.get(n.name) or (f"{op} has no DSL form: it stays a PyTorch call" if not _lowerable(n, gm) else
                                      f"{op} alone is not worth a kernel of its own")
        kept.append({"node": n.name, "op": op, "reason": why})
    return Plan(gm, pieces, kept, constants)


def _values(gm: torch.fx.GraphModule, inputs: List) -> Dict[str, object]:
    """Every node's value on `inputs`, by name (the tensors each piece is written on)."""
    out: Dict[str, object] = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            out[n.name] = v
            return v

    with torch.no_grad():
        Rec(gm).run(*inputs)
    return out


def _one_output(chain: List[torch.fx.Node]) -> List[List[torch.fx.Node]]:
    """Cuts a chain after every value something outside it reads, so each part has one output."""
    parts, cur = [], []
    members = set(chain)
    for i, n in enumerate(chain):
        cur.append(n)
        outside = any(u not in members for u in n.users)
        if outside and i < len(chain) - 1:
            parts.append(cur)
            cur = []
            members = set(chain[i + 1:])
    if cur:
        parts.append(cur)
    return parts


def _sub(gm: torch.fx.GraphModule, seg: List[torch.fx.Node]):
    """The segment as a GraphModule of its own: its outside tensors become placeholders (in
    first-use order), the parameters it reads get_attr nodes."""
    g = torch.fx.Graph()
    env: Dict[torch.fx.Node, torch.fx.Node] = {}
    ext: List[torch.fx.Node] = []
    members = set(seg)
    for n in seg:
        for a in n.all_input_nodes:
            if a not in members and a.op != "get_attr" and a not in ext:
                ext.append(a)
    for a in ext:
        env[a] = g.placeholder(a.name)

    def arg(x):
        if x not in env:
            if x.op != "get_attr":
                raise synth.Unsupported(f"{x.name} is read before it is made")
            env[x] = g.get_attr(x.target)
        return env[x]

    for n in seg:
        env[n] = g.node_copy(n, arg)
    g.output(env[seg[-1]])
    return torch.fx.GraphModule(gm, g), ext


def _piece(gm, seg, values, pid, refused: Dict[str, str]):
    members = set(seg)
    for n in seg[:-1]:
        if any(u not in members for u in n.users):
            return None, f"{n.name} is read outside the piece"
    try:
        sub, ext = _sub(gm, seg)
    except synth.Unsupported as e:
        return None, str(e)
    ins = [values.get(a.name) for a in ext]
    for a, v in zip(ext, ins):
        if not isinstance(v, torch.Tensor):
            return None, refused.get(a.name, f"the chain reads {a.name}, which is not a tensor")
    if not ins:
        return None, "the chain reads no tensor"
    if not any(_canon(n, gm) not in ("view", "reshape", "flatten", "contiguous", "clone", "detach", "squeeze", "unsqueeze", "dropout",
                                     "getitem", "getattr")
               for n in seg):
        return None, "views alone move no data"
    r = synth.synthesize(sub, ins)
    if not r.get("program"):
        return None, r.get("reason", "not one DSL program")
    out = values.get(seg[-1].name)
    return Piece(pid, [n.name for n in seg], [a.name for a in ext], list(sub.state_dict().keys()), r["program"], r["family"],
                 r["tensors"], r["dims"], r["dim_order"], list(out.shape) if isinstance(out, torch.Tensor) else []), ""


class _PieceCall(nn.Module):
    """One piece inside a compiled stitched module: its ABI tensors in, its output out."""

    def __init__(self, piece: Piece, runner: Callable):
        super().__init__()
        self.piece = piece
        self.runner = runner

    def forward(self, *tensors):
        return self.runner(self.piece, list(tensors)).reshape(self.piece.shape)


def compiled(plan: Plan, runner: Callable) -> torch.fx.GraphModule:
    """The stitched module as generated Python code (torch.fx), built once: each piece's nodes
    replaced by one call of its runner, the kept ops as traced. What the worker times: no
    interpreter walks the graph on each call. Shares the module's parameters with `plan.gm`."""
    g = torch.fx.Graph()
    vm: Dict[torch.fx.Node, torch.fx.Node] = {}
    g.output(g.graph_copy(plan.gm.graph, vm))
    old = {n.name: n for n in plan.gm.graph.nodes}
    gm = torch.fx.GraphModule(plan.gm, g)
    cur = {name: vm[n] for name, n in old.items() if n in vm}  # each value's node now (a piece's output: its call)
    for i, p in enumerate(plan.pieces):
        last = cur[p.nodes[-1]]
        name = f"_ksol_piece{i}"
        gm.add_submodule(name, _PieceCall(p, runner))
        with g.inserting_before(last):
            args = [cur[n] for n in p.inputs] + [g.get_attr(k) for k in p.params]
            call = g.call_module(name, tuple(args))
        last.replace_all_uses_with(call)
        for n in reversed(p.nodes):
            g.erase_node(cur[n])
        cur[p.nodes[-1]] = call
    g.lint()
    gm.recompile()
    return gm


def fraction_in_pieces(plan: Plan) -> float:
    """The share of the forward's ops (views aside) that run inside DSL pieces."""
    total = len(plan.kept) + sum(len(p.nodes) for p in plan.pieces)
    return sum(len(p.nodes) for p in plan.pieces) / total if total else 0.0
