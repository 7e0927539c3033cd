"""Cutting a module's forward into DSL pieces around the ops that stay PyTorch calls, and running
the whole again with each piece replaced by a kernel (re-stitching).

`split(model, inputs)` traces the forward (torch.fx), first rewrites the ops no family takes whole
into the ops of their definition (`decompose`: group_norm, batch_norm, global pools and others
whose windows tile their input in long rows, softmax and logsumexp over non-trailing dims, some
losses) and folds the linear chains it can into their weights (average pools and means after
convolutions, sums, means and average pools over a linear layer's features: weight preparation
in float64 on each call), groups the ops the DSL expresses into maximal chains (an elementwise
chain, a row-wise chain, a reduction over leading or
middle dims, a GEMM, a convolution or a pool with its elementwise epilogue) and writes each
chain as one DSL program with synth.py, on the tensors it reads there. A chain is a piece only when nothing outside it reads its intermediate values (one
output) and synth accepts it; a refused chain gives way to the longest run from its start that
synth accepts, then the longest from the next op, and so on; an op that starts no accepted run
stays a PyTorch call, with synth's reason. A Python number among the forward's inputs is first
written into the graph as a constant where get_inputs gives it unchanged in every draw
(synth.fold_scalar_inputs); the stitched module then runs with that constant. Convolutions the
conv family does not take (grouped, strided transposed, 3-D; a 1-D or 2-D transposed one at stride 1
is the conv family's by its flipped filter), pools over overlapping or padded windows and
argmax/argmin are direct pieces (a loop nest per output element); ops on 0-d values, layout changes
and the like stay PyTorch or vendor calls. `split(..., vendor=True)` is the vendor-call plan: every
convolution and GEMM stays PyTorch's call (cuDNN, cuBLAS), as torch.compile keeps its extern calls,
and the pieces are the ops around them (a pool that reads no padding takes the elementwise ops
before it as its prologue); a convolution read only by elementwise ops or pools leaves its bias
to that piece and, 2-D or 3-D, runs channels-last (ChannelsLastConv): a piece writes its image
permuted to [N, *spatial, C], and the piece after it reads its output through the permutation back.

`compiled(plan, runner)` is the module again, as generated torch.fx code built once: the kept ops
run as traced, and each piece's output comes from one call of `runner(piece, tensors)`, with the
piece's ABI tensor table (its inputs in order, then its parameters, as synth.py lays them out). The tests run the pieces
with a float64 DSL evaluator and check the stitched whole against the module in float64; on a
GPU the runner is the piece's compiled library.
"""
import dataclasses
import operator
from typing import Callable, Collection, Dict, List, Optional, Sequence

import torch
import torch.fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from . import synth
from .trace import _canonical as _canon, kind_of, symbolic_trace

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
    program_fallback: Optional[str] = None  # synth's program on CUDA cores where `program`'s schedule may be refused


@dataclasses.dataclass
class Plan:
    gm: torch.fx.GraphModule
    pieces: List[Piece]
    kept: List[Dict]            # {"node", "op", "reason"} for every op left to PyTorch ("vendor": true: a vendor call by the plan)
    constants: List[Dict] = dataclasses.field(default_factory=list)  # numbers written as constants (synth.fold_scalar_inputs)

    def summary(self) -> Dict:
        return {"pieces": [{"id": p.id, "nodes": p.nodes, "inputs": p.inputs, "params": p.params, "family": p.family,
                            "program": p.program, "tensors": p.tensors, "dims": p.dims, "dim_order": p.dim_order,
                            "shape": p.shape, **({"program_fallback": p.program_fallback} if p.program_fallback else {})}
                           for p in self.pieces],
                "kept": self.kept, "constants": self.constants}


def _lowerable(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if n.op not in ("call_module", "call_function", "call_method"):
        return False
    op = _canon(n, gm)
    k = kind_of(op)
    if op == "permute":  # a channels-last convolution's output or image, read or written by a piece through the permutation
        return _channels_last_output(n, gm) or _channels_last_image(n, gm)
    if op in ("getitem", "getattr"):  # the values of a max or min over a dim
        src = n.args[0] if n.args else None
        return isinstance(src, torch.fx.Node) and _canon(src, gm) in ("max", "min") and n.args[1] in (0, "values")
    return k == "elementwise" or (k == "rowwise" and (op in _ROWWISE or op in synth.REDUCTIONS)) or (k == "gemm" and op in _GEMM) or op in synth.CONVS or op in synth.WINDOWS or \
        op in ("view", "reshape", "flatten", "contiguous", "clone", "detach", "squeeze", "unsqueeze", "dropout")


def _is_channels_last_conv(n, gm: torch.fx.GraphModule) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_module" and isinstance(gm.get_submodule(n.target), ChannelsLastConv)


def _channels_last_output(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether `n` is the permutation of a channels-last convolution's output back to [N, K, ...]."""
    return bool(n.args) and _is_channels_last_conv(n.args[0], gm)


def _channels_last_image(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether `n` is the permutation of a channels-last convolution's image to [N, ..., C], which
    only that convolution reads (a piece writes it contiguous: the layout conversion)."""
    return len(n.users) == 1 and all(_is_channels_last_conv(u, gm) and u.args[0] is n for u in n.users)


def _is_window(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether n is a pool, argmax or argmin (a window op that is not a convolution)."""
    return _anchor(n, gm) == "conv" and _canon(n, gm) not in VENDOR_OPS


def _anchor(n: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    op = _canon(n, gm)
    return "gemm" if op in _GEMM else "rowwise" if op in _ROWWISE or op in synth.REDUCTIONS else "conv" if op in synth.CONVS or op in synth.WINDOWS else ""


# A group_norm whose groups hold more than this many elements is decomposed into its statistics
# and elementwise ops (decompose). A group that long is more than a block's shared memory holds
# (227 KB of float32 on sm_90), so the layer_norm form reads it three times and writes it, and the
# affine reads and writes it again; the statistics read it twice, and the ops after them, a pool
# among them, read it once where they use it. A shorter group can be the layer_norm's cached row,
# read once.
GROUP_STATS_ROW = 227 * 1024 // 4


# The ops the vendor-call plan leaves to PyTorch's vendor libraries (cuDNN, cuBLAS).
VENDOR_OPS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "paddedconv",
              "channelslastconv") + _GEMM


def split(model: nn.Module, inputs: List, draw: Optional[Callable[[Sequence[int]], List[List]]] = None,
          conv_products: str = "fp32", gemm_products: str = "fp32", vendor: bool = False,
          keep_layout: Collection[str] = ()) -> Plan:
    """The plan for `model` on `inputs` (see the module's docstring); `draw` draws get_inputs again
    (synth.fold_scalar_inputs); `conv_products` and `gemm_products` are synth.synthesize's, for
    every piece. `vendor`: the vendor-call plan, where every convolution and GEMM (VENDOR_OPS)
    stays PyTorch's call (cuDNN, cuBLAS) and the pieces are the ops around them; a convolution
    whose reader no piece takes through the channels-last permutation is planned again in the
    module's layout (`keep_layout`: those convolutions' node names). Raises what torch.fx raises
    when the forward cannot be traced."""
    gm = symbolic_trace(model)
    state = model.state_dict()
    gm._ksol_constants = {n.target for n in gm.graph.nodes if n.op == "get_attr" and n.target not in state}
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    decompose(gm, vendor=vendor, keep_layout=keep_layout)  # the new ops get their shapes from _values' run
    constants, refused = synth.fold_scalar_inputs(gm, model, inputs, draw)
    values = _values(gm, inputs)
    calls = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    # Chains: a lowerable op continues the current chain when it reads the chain's last value;
    # a GEMM or a convolution always starts one (those families are the op and its epilogue), a
    # row-wise op after a GEMM too. After a convolution a row-wise op stays in the chain: a
    # reduction over its channels is the conv family's epilogue (synth), and any other row-wise
    # op is refused there and starts the next piece of the chain.
    # A pool (or argmax, argmin) continues the chain: no program holds it with a GEMM, a
    # convolution or a row-wise op, so the pieces cut from the chain end before it, and the
    # elementwise ops right before it that the piece before them refused as its epilogue are the
    # pool's prologue (the direct family reads its window through them). A GEMM before a pool
    # does not make a row-wise op after the pool start a chain: the ops between them may be its
    # prologue.
    vendored = {n for n in calls if vendor and _canon(n, gm) in VENDOR_OPS}
    chains: List[List[torch.fx.Node]] = []
    cur: List[torch.fx.Node] = []
    for n in calls:
        if n in vendored or not _lowerable(n, gm):
            if cur:
                chains.append(cur)
            cur = []
            continue
        a = _anchor(n, gm)
        window = _is_window(n, gm)
        since_window = cur[max((i + 1 for i, c in enumerate(cur) if _is_window(c, gm)), default=0):]
        starts = not cur or cur[-1] not in n.all_input_nodes or (a in ("gemm", "conv") and not window) or \
            (a == "rowwise" and any(_anchor(c, gm) == "gemm" for c in since_window))
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
                    piece, why = _piece(gm, seg[i:j], values, len(pieces), refused, conv_products, gemm_products)
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
        if op in WEIGHT_PREP:
            how = "a permutation of the parameter's values" if op == "transposedfilterflip" else "float64 over the parameter's values"
            kept.append({"node": n.name, "op": op, "reason": "weight preparation: " + WEIGHT_PREP[op] + f" ({how}, each call)"})
            continue
        if n in vendored:
            if op == "channelslastconv":
                op = gm.get_submodule(n.target).op
                kept.append({"node": n.name, "op": op, "layout": "channels_last", "vendor": True,
                             "reason": f"the vendor-call plan: {op} stays PyTorch's call (cuDNN), channels-last, the piece "
                                       "after it reading that layout"})
                continue
            lib = "cuBLAS" if op in _GEMM else "cuDNN"
            kept.append({"node": n.name, "op": op, "reason": f"the vendor-call plan: {op} stays PyTorch's call ({lib})",
                         "vendor": True})
            continue
        if op == "permute" and vendor and _channels_last_output(n, gm):
            # A channels-last convolution's output that no piece reads through its permutation:
            # the plan again with that convolution in the module's layout.
            source = gm.get_submodule(n.args[0].target).source
            return split(model, inputs, draw, conv_products, gemm_products, vendor, {*keep_layout, source})
        if op == "permute" and vendor and _channels_last_image(n, gm):
            kept.append({"node": n.name, "op": op, "reason": "a channels-last convolution's image as a view: the convolution's "
                                                             "call converts it (PyTorch's copy); no piece writes it: " + (reasons.get(n.name) or "none took it")})
            continue
        if op in ("view", "reshape", "flatten", "squeeze", "unsqueeze") and all(a.op == "get_attr" for a in n.all_input_nodes):
            kept.append({"node": n.name, "op": op, "reason": "a view of a parameter (no data moves): the pieces read it"})
            continue
        why = reasons.get(n.name) or (f"{op} has no DSL form: it stays a PyTorch call" if not _lowerable(n, gm) else
                                      f"{op} alone is not worth a kernel of its own")
        kept.append({"node": n.name, "op": op, "reason": why})
    return Plan(gm, pieces, kept, constants)


def _shape(n) -> Optional[List[int]]:
    tm = n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None
    return list(tm.shape) if tm is not None and hasattr(tm, "shape") else None


def _norm_args(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> Optional[Dict]:
    """A group_norm or batch_norm node's operands: x, and for the rest the state_dict keys of its
    weight, bias, running mean and variance (None where absent), eps, groups and whether it
    normalizes by the batch's statistics; None where they are not the module's own tensors."""
    def key(v):
        if v is None:
            return None
        return v.target if isinstance(v, torch.fx.Node) and v.op == "get_attr" else False

    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        t = n.target
        out = {"x": n.args[0], "eps": mod.eps, "weight": f"{t}.weight" if getattr(mod, "weight", None) is not None else None,
               "bias": f"{t}.bias" if getattr(mod, "bias", None) is not None else None}
        if op == "group_norm":
            out.update(groups=mod.num_groups, batch_stats=True, mean=None, var=None)
        else:
            running = mod.track_running_stats and mod.running_mean is not None
            out.update(batch_stats=mod.training or not running, mean=f"{t}.running_mean" if running else None,
                       var=f"{t}.running_var" if running else None)
        return out
    a = synth._arg
    if op == "group_norm":
        out = {"x": n.args[0], "groups": a(n, 1, "num_groups"), "weight": key(a(n, 2, "weight")), "bias": key(a(n, 3, "bias")),
               "eps": a(n, 4, "eps", 1e-5), "batch_stats": True, "mean": None, "var": None}
    else:
        out = {"x": n.args[0], "mean": key(a(n, 1, "running_mean")), "var": key(a(n, 2, "running_var")),
               "weight": key(a(n, 3, "weight")), "bias": key(a(n, 4, "bias")), "batch_stats": bool(a(n, 5, "training", False)),
               "eps": a(n, 7, "eps", 1e-5)}
        if not out["batch_stats"] and (out["mean"] is None or out["var"] is None):
            return None
    if any(v is False for v in out.values()) or not isinstance(out["x"], torch.fx.Node):
        return None
    return out


def _tuple(v, n: int):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    if isinstance(v, (tuple, list)) and len(v) == n and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


def _pool_windows(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str, sh: List[int]) -> Optional[tuple]:
    """A pooling node's windows as ('max' or 'mean', window per spatial dim) where they tile its
    input exactly: kernel equal to stride, no padding, dilation 1, no ceil mode or indices, every
    spatial extent a multiple of its window (an adaptive pool: every input extent a multiple of
    the output's); None otherwise."""
    spatial = len(sh) - 2
    if spatial < 1 or (op[-2].isdigit() and int(op[-2]) != spatial):
        return None  # an unbatched image ([C, H, W] under a 2-D pool), or a pool of another rank
    kind = "max" if "max" in op else "mean"
    a = synth._arg
    if op.startswith("adaptive"):
        out = gm.get_submodule(n.target).output_size if n.op == "call_module" else a(n, 1, "output_size")
        if isinstance(out, (tuple, list)):
            out = tuple(sh[2 + i] if o is None else o for i, o in enumerate(out))
        out = _tuple(out, spatial)
        if out is None or any(o <= 0 or d % o for d, o in zip(sh[2:], out)):
            return None
        return kind, tuple(d // o for d, o in zip(sh[2:], out))
    if n.op == "call_module":
        m = gm.get_submodule(n.target)
        k, st, pad = m.kernel_size, m.stride, m.padding
        dil, ceil = getattr(m, "dilation", 1), m.ceil_mode
        extra = getattr(m, "return_indices", False) or getattr(m, "divisor_override", None) is not None
    else:
        k, st, pad = a(n, 1, "kernel_size"), a(n, 2, "stride"), a(n, 3, "padding", 0)
        if kind == "max":
            dil, ceil, extra = a(n, 4, "dilation", 1), a(n, 5, "ceil_mode", False), a(n, 6, "return_indices", False)
        else:
            dil, ceil, extra = 1, a(n, 4, "ceil_mode", False), a(n, 6, "divisor_override") is not None
    k = _tuple(k, spatial)
    st = k if st is None or st == [] or st == () else _tuple(st, spatial)
    if k is None or st != k or _tuple(pad, spatial) != (0,) * spatial or _tuple(dil, spatial) != (1,) * spatial or ceil or extra:
        return None
    if any(d % w for d, w in zip(sh[2:], k)):
        return None
    return kind, k


def _loss(g: torch.fx.Graph, gm: torch.fx.GraphModule, n: torch.fx.Node, op: str) -> Optional[torch.fx.Node]:
    """A loss as the ops of its definition, inserted before `n`, each reading the one before it
    (so that they stay one chain): the pointwise terms, then the reduction. Returns the loss's
    node, or None where its arguments are not lowered (size_average/reduce, swap, a p other than 1
    or 2)."""
    import operator
    a = synth._arg
    mod = gm.get_submodule(n.target) if n.op == "call_module" else None
    legacy = (3, 5) if op == "cross_entropy" else (2, 3)  # size_average's and reduce's positions
    if mod is None and (a(n, legacy[0], "size_average") is not None or a(n, legacy[1], "reduce") is not None) and op != "triplet_margin_loss":
        return None

    def reduced(v, reduction, batch=None):
        if reduction == "mean":
            return g.call_method("mean", (v,))
        if reduction == "sum":
            return g.call_method("sum", (v,))
        if reduction == "batchmean":
            return g.call_function(operator.truediv, (g.call_method("sum", (v,)), batch))
        return v if reduction == "none" else None

    with g.inserting_before(n):
        if op in ("cross_entropy", "crossentropyloss"):
            # Class-index targets of a [N, C] input, no class weights, no label smoothing: the
            # row's logsumexp (one row-wise pass over the input) less the target's logit, taken
            # by a gather; a target equal to ignore_index counts nothing and is not counted in
            # the mean (its index multiplied by 0, its term 0).
            x, t = n.args[0], n.args[1] if len(n.args) > 1 else n.kwargs.get("target")
            if mod is not None:
                weight, ignore, reduction, smoothing = mod.weight, mod.ignore_index, mod.reduction, mod.label_smoothing
            else:
                weight, ignore = a(n, 2, "weight"), a(n, 4, "ignore_index", -100)
                reduction, smoothing = a(n, 6, "reduction", "mean"), a(n, 7, "label_smoothing", 0.0)
            sx, st = _shape(x), _shape(t)
            tm = t.meta.get("tensor_meta") if isinstance(t, torch.fx.Node) else None
            if weight is not None or smoothing != 0.0 or not isinstance(ignore, int) or reduction not in ("mean", "sum", "none") \
                    or not sx or len(sx) != 2 or st != sx[:1] or tm is None or tm.dtype != torch.int64:
                return None
            # The pass over the logits first: the small ops after it are queued while it runs.
            lse = g.call_function(torch.logsumexp, (x, 1))
            valid = g.call_function(operator.ne, (t, ignore))
            idx = g.call_function(operator.mul, (t, valid))
            picked = g.call_method("squeeze", (g.call_function(torch.gather, (x, 1, g.call_method("unsqueeze", (idx, 1)))), 1))
            # where, not a product with valid: an ignored row's logits may be infinite or NaN.
            v = g.call_function(torch.where, (valid, g.call_function(operator.sub, (lse, picked)), 0.0))
            if reduction == "mean":
                return g.call_function(operator.truediv, (g.call_method("sum", (v,)), g.call_method("sum", (valid,))))
            return reduced(v, reduction)
        if op == "smooth_l1_loss":
            x, t = n.args[0], n.args[1] if len(n.args) > 1 else n.kwargs.get("target")
            reduction = mod.reduction if mod is not None else a(n, 4, "reduction", "mean")
            beta = mod.beta if mod is not None else a(n, 5, "beta", 1.0)
            if not isinstance(beta, (int, float)) or beta <= 0 or reduction not in ("mean", "sum", "none"):
                return None
            # With m = min(|d|, beta): 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2, both
            # m * (m * 0.5 / beta - 1) + |d|.
            ad = g.call_function(torch.abs, (g.call_function(operator.sub, (x, t)),))
            m = g.call_method("clamp", (ad,), {"max": float(beta)})
            v = g.call_function(operator.sub, (g.call_function(operator.mul, (m, 0.5 / beta)), 1.0))
            v = g.call_function(operator.add, (g.call_function(operator.mul, (v, m)), ad))
            return reduced(v, reduction)
        if op == "kl_div":
            x, t = n.args[0], n.args[1] if len(n.args) > 1 else n.kwargs.get("target")
            reduction = mod.reduction if mod is not None else a(n, 4, "reduction", "mean")
            log_target = mod.log_target if mod is not None else a(n, 5, "log_target", False)
            sh = _shape(x)
            if not sh or reduction not in ("mean", "sum", "batchmean", "none"):
                return None
            if log_target:
                e = g.call_function(torch.exp, (t,))
                v = g.call_function(operator.mul, (g.call_function(operator.sub, (t, x)), e))
            else:
                # t * (log t - x), 0 where t is 0 (PyTorch's xlogy): log of t clamped to the
                # smallest normal float, where t * log t is 0 to within 1e-36 anyway.
                lt = g.call_function(torch.log, (g.call_method("clamp", (t,), {"min": 1.1754943508222875e-38}),))
                v = g.call_function(operator.mul, (g.call_function(operator.sub, (lt, x)), t))
            return reduced(v, reduction, sh[0] if sh else 1)
        # triplet margin loss: relu(|a - p + eps|_p - |a - n + eps|_p + margin) over the rows.
        if mod is not None:
            margin, p, eps, swap, reduction = mod.margin, mod.p, mod.eps, mod.swap, mod.reduction
        else:
            margin, p, eps = a(n, 3, "margin", 1.0), a(n, 4, "p", 2.0), a(n, 5, "eps", 1e-6)
            swap, reduction = a(n, 6, "swap", False), a(n, 9, "reduction", "mean")
        if swap or p not in (1, 2, 1.0, 2.0) or reduction not in ("mean", "sum", "none") or len(n.args) < 3:
            return None
        anchor, pos, neg = n.args[0], n.args[1], n.args[2]

        def distance(u):
            d = g.call_function(operator.add, (g.call_function(operator.sub, (anchor, u)), float(eps)))
            return g.call_method("norm", (d,), {"p": p, "dim": -1})
        d1 = distance(pos)
        v = g.call_function(operator.sub, (d1, distance(neg)))
        v = g.call_function(torch.relu, (g.call_function(operator.add, (v, float(margin))),))
        return reduced(v, reduction)


# The fewest elements a row of a full reduction's first pass has (decompose): shorter rows leave
# the row-wise program's threads idle.
_MIN_ROW = 1024


def _over_ones(n: torch.fx.Node, op: str, gm: torch.fx.GraphModule) -> bool:
    """Whether `n` is a sum, mean, max, min, amax, amin or logsumexp over dims that each have one
    element (a max or min over a dim read only for its values)."""
    if op not in ("sum", "mean", "amax", "amin", "max", "min", "logsumexp"):
        return False
    x = n.args[0] if n.args else None
    sh = _shape(x)
    if not sh:
        return False
    try:
        red = synth._reduced_dims(n, op, len(sh))
    except synth.Unsupported:
        return False
    if red is None or not red[0] or any(sh[d] != 1 for d in red[0]):
        return False
    if _dtype(x) != torch.float32:  # an integer sum is int64, a bool's too: not its input's type
        return False
    if op in ("max", "min") and synth._arg(n, 1, "dim") is not None:  # (values, indices): every use must take the values
        return all(u.op == "call_function" and _canon(u, gm) == "getitem" and u.args[1] == 0 and _shape(u) is not None
                   for u in n.users) and len(n.users) > 0
    return _shape(n) is not None


def _dtype(n) -> Optional[torch.dtype]:
    meta = n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None
    return getattr(meta, "dtype", None)


def _channels_first(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> Optional[tuple]:
    """(x, op) where `n` is a float32 sum, mean, amax or amin over the channels (dim 1) and more
    dims of a 2-D convolution's output, x, reached from the convolution (groups 1, at most
    synth.CONV_REDUCTION_FILTERS channels, read by that chain alone) through ops of one user each
    that keep its shape (its elementwise epilogue); else None. Over the channels first, that part
    is the conv program's epilogue (synth), and the convolution's output is never made."""
    x = n.args[0] if n.args else None
    sh = _shape(x)
    if not isinstance(x, torch.fx.Node) or not sh or len(sh) != 4 or op not in ("sum", "mean", "amax", "amin"):
        return None
    if _dtype(x) != torch.float32 or _dtype(n) != torch.float32:
        return None
    try:
        red = synth._reduced_dims(n, op, 4)
    except synth.Unsupported:  # a dtype argument: the reduction stays as written
        return None
    if red is None or 1 not in red[0] or len(red[0]) < 2 or sh[1] > synth.CONV_REDUCTION_FILTERS:
        return None
    y = x
    while _canon(y, gm) != "conv2d":
        if y.op not in ("call_module", "call_function", "call_method") or len(y.users) != 1 or not y.args or \
                not isinstance(y.args[0], torch.fx.Node) or _shape(y.args[0]) != sh:
            return None
        y = y.args[0]
    groups = gm.get_submodule(y.target).groups if y.op == "call_module" else synth._arg(y, 6, "groups", 1)
    if len(y.users) != 1 or groups != 1:
        return None
    return x, op


def _full_reduction(n: torch.fx.Node, op: str):
    """(x, op, trailing dims) where `n` is a sum, mean, amax or amin of every element of a float32
    tensor of two or more dims, to one 0-d float32 value (no dtype argument), and its trailing dims
    hold at least _MIN_ROW elements and leave its first dim out; else None. (In a narrower type the
    rows' values would be rounded to it between the two reductions.)"""
    import math
    x = n.args[0] if n.args else None
    sh = _shape(x)
    if not sh or len(sh) < 2 or op not in ("sum", "mean", "amax", "amin", "max", "min"):
        return None
    if _dtype(x) != torch.float32 or _dtype(n) != torch.float32:
        return None
    if op in ("max", "min") and (len(n.args) > 1 or n.kwargs):  # a max over a dim gives values and indices
        return None
    try:
        red = synth._reduced_dims(n, op, len(sh))
    except synth.Unsupported:  # a dtype argument: the reduction stays as written
        return None
    if red is None or red[1] or red[0] != list(range(len(sh))):
        return None
    for k in range(len(sh) - 1, 0, -1):
        if math.prod(sh[k:]) >= _MIN_ROW:
            return x, {"max": "amax", "min": "amin"}.get(op, op), tuple(range(k, len(sh)))
    return None


class AvgPoolFold(nn.Module):
    """A convolution's filter with the average pool that follows it folded in: the pool's mean of
    k outputs (stride s, dilation d) is one convolution at stride s * pool stride whose filter
    averages the k shifted copies of the filter, W'[t] = mean over a of W[t - a * s] (tap
    positions r * d + a * s = t, summed where several meet): a transposed convolution of each
    [tap...] filter slice by a box of the pool's window, at stride d and dilation s. It runs in
    float64 on the filter alone (K x C x taps values), so the folded filter carries one float32
    rounding, and on every call, so it follows the module's weights."""

    ksol_leaf = True

    def __init__(self, window: Sequence[int], conv_stride: Sequence[int], conv_dilation: Sequence[int]):
        super().__init__()
        self.window, self.conv_stride, self.conv_dilation = tuple(window), tuple(conv_stride), tuple(conv_dilation)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        import math
        import torch.nn.functional as F
        k, c = w.shape[0], w.shape[1]
        v = w.to(torch.float64).reshape(k * c, 1, *w.shape[2:])
        box = v.new_full((1, 1, *self.window), 1.0 / math.prod(self.window))
        f = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[len(self.window) - 1]
        y = f(v, box, stride=self.conv_dilation, dilation=self.conv_stride)
        return y.reshape(k, c, *y.shape[2:]).to(w.dtype)


class TransposedAvgPoolFold(nn.Module):
    """A transposed convolution's filter with the average pool after it folded in, where the
    pool's stride is the convolution's: y[m] = mean over a of o[m*s + a], and o[q] sums x[i] w[t]
    over i*s - p + t*d = q, so y[m] = sum over j of x[m + j] V[j] with V[j] the mean over the
    window of the w[t] where j*s = a + p - t*d: a convolution at stride 1 (PaddedConv) whose
    filter, per spatial dim, is w's taps times a [L, T] matrix (`maps`, the j from the lowest
    reached, each entry the window's count of t over its extent). The filter is [K, C/g, L...]
    from w's [C, K/g, T...], computed in float64 on each call (one product by the maps'
    Kronecker product)."""

    ksol_leaf = True

    def __init__(self, maps: Sequence[torch.Tensor], groups: int):
        super().__init__()
        self.groups = groups
        self.out_taps = tuple(m.shape[0] for m in maps)
        # The per-dim maps as one [L0*L1*L2, T0*T1*T2] matrix (their Kronecker product), on the
        # filter's device: one matrix product per call, no copy.
        k = maps[0].to(torch.float64)
        for m in maps[1:]:
            k = torch.kron(k, m.to(torch.float64))
        self.register_buffer("map", k, persistent=False)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        g, c, kg = self.groups, w.shape[0], w.shape[1]
        v = w.to(torch.float64).reshape(g, c // g, kg, -1).transpose(1, 2).reshape(g * kg * (c // g), -1)
        v = torch.matmul(v, self.map.to(v.device).t())
        return v.reshape(g * kg, c // g, *self.out_taps).to(w.dtype)


class PaddedConv(nn.Module):
    """A convolution at stride 1 of the image zero-padded by `lo` before and `hi` after each
    spatial extent (hi < 0 drops positions no output reads): TransposedAvgPoolFold's convolution,
    whose padding is not symmetric. synth lowers it as the direct family's convolution with the
    image read at m + u - lo."""

    ksol_leaf = True

    def __init__(self, lo: Sequence[int], hi: Sequence[int], groups: int):
        super().__init__()
        self.lo, self.hi, self.groups = tuple(lo), tuple(hi), groups

    def forward(self, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
        import torch.nn.functional as F
        pads = []
        for lo, hi in zip(reversed(self.lo), reversed(self.hi)):
            pads += [lo, hi]
        conv = (F.conv1d, F.conv2d, F.conv3d)[len(self.lo) - 1]
        return conv(F.pad(x, pads), w, b, groups=self.groups)


class ChannelsLastConv(nn.Module):
    """The vendor-call plan's convolution in the channels-last layout (cuDNN's NHWC kernels, which
    torch.compile picks for its extern convolutions where they are faster). The image comes as
    [N, *spatial, C] (the graph permutes it there, and a piece writes that copy through
    shared-memory tiles: synth._permuted_input; where none does, PyTorch's view, converted here),
    the filter is converted on each call, no bias (the piece after it adds it), and the output is
    returned as it is laid out, [N, *spatial, K] contiguous, which the graph permutes back to
    [N, K, *spatial] for the piece that reads it through that permutation. `op` is the F
    function's name (conv2d, conv3d, conv_transpose2d, conv_transpose3d), `kw` its arguments."""

    ksol_leaf = True

    def __init__(self, op: str, kw: Dict, source: str):
        super().__init__()
        self.op, self.kw, self.source = op, dict(kw), source  # source: the convolution's node in the traced forward

    def forward(self, xl: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F
        fmt = torch.channels_last if xl.dim() == 4 else torch.channels_last_3d
        x = xl.permute(0, xl.dim() - 1, *range(1, xl.dim() - 1)).contiguous(memory_format=fmt)  # no copy where xl is contiguous
        y = getattr(F, self.op)(x, w.contiguous(memory_format=fmt), None, **self.kw)
        return y.permute(0, *range(2, y.dim()), 1).contiguous()


class TransposedFilterFlip(nn.Module):
    """A stride-1 transposed convolution's filter as a convolution's: with groups 1 and no output
    padding, y[q] = sum of x[i] w[c, k, t] over i - p + t*d = q is the convolution at stride 1 and
    padding d*(T-1) - p of x by w[c, k, T-1-u] as [K, C, U...] (i = q + u*d - (d*(T-1) - p)). The
    filter [C, K, T...] comes back transposed and flipped along every tap dim: a permutation of
    its values, no arithmetic."""

    ksol_leaf = True

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w.transpose(0, 1).flip(tuple(range(2, w.dim()))).contiguous()


class FeatureReduceFold(nn.Module):
    """A sum or mean over a linear layer's output features folded into its weights: the sum over
    n of x . W[n] + b[n] is x . (sum of W's rows) + sum of b. Returns, in float64 then cast back,
    the [K] vector of W's [N, K] rows summed (dim 0; `dim` 1 for a [K, N] matrix operand) or, for
    a bias or a per-feature term, its one value as a [1] tensor; divided by N for a mean."""

    ksol_leaf = True

    def __init__(self, dim: int, mean: bool):
        super().__init__()
        self.dim, self.mean = dim, mean

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        v = w.to(torch.float64)
        v = v.mean(self.dim) if self.mean else v.sum(self.dim)
        return v.reshape(-1).to(w.dtype)


class FeaturePoolFold(nn.Module):
    """An average pool over a linear layer's output features folded into its weights: pooled
    feature j is the mean of features j*s .. j*s + k - 1, so its weight row (and bias) is the
    mean of theirs. Returns, in float64 then cast back, the folded [K, N'] matrix (`transpose`:
    the operand of x @ W') or the [N'] bias."""

    ksol_leaf = True

    def __init__(self, window: int, stride: int, transpose: bool):
        super().__init__()
        self.window, self.stride, self.transpose = window, stride, transpose

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        v = w.to(torch.float64).unfold(0, self.window, self.stride).mean(-1)
        if self.transpose:
            v = v.t().contiguous()
        return v.to(w.dtype)


class GlobalPoolFold(nn.Module):
    """The mean over every output position of a convolution (transposed or not, groups 1) folded
    into a product of its image's sums: a tap t adds x[i] w[t] to one output position for each
    input position i of its box R_t (the i whose output, or whose read, lies inside the image:
    a box per spatial dim), so the mean is sum over c, t of B[n, c, t] w[k, c, t] / |O| + b[k]
    with B[n, c, t] the sum of x[n, c] over R_t. `mask` is the [I0*I1*I2, T0*T1*T2] indicator of
    the boxes (a constant of the shapes): B is x viewed [N*C, I...] times it. Called with no
    argument it returns the mask; with the filter, the filter as [C*T..., K] over |O| (float64,
    each call), which multiplies B viewed [N, C*T...]."""

    ksol_leaf = True

    def __init__(self, mask: torch.Tensor, transposed: bool, outputs: int):
        super().__init__()
        self.transposed, self.outputs = transposed, outputs
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, w: Optional[torch.Tensor] = None) -> torch.Tensor:
        if w is None:
            return self.mask
        v = w.to(torch.float64).reshape(w.shape[0], w.shape[1], -1)  # [C, K, T] transposed, [K, C, T] not
        v = v.permute(0, 2, 1) if self.transposed else v.permute(1, 2, 0)
        return (v.reshape(-1, v.shape[-1]) / self.outputs).to(w.dtype)


# Weight preparation: ops on a module's parameters alone, before the pieces read them. They run on
# every call: a result kept while PyTorch's version counter stays the same would go stale after a
# write through `.data` (an optimizer or an EMA update of that style), which bumps no counter.
WEIGHT_PREP = {"avgpoolfold": "the average pool after a convolution folded into its filter",
               "transposedavgpoolfold": "the average pool after a transposed convolution folded into its filter",
               "transposedfilterflip": "a stride-1 transposed convolution's filter flipped into a convolution's",
               "featurereducefold": "the sum or mean over a linear layer's features folded into its weights",
               "featurepoolfold": "the average pool over a linear layer's features folded into its weights",
               "globalpoolfold": "the mean over a convolution's output positions folded into its image's sums and its filter"}


def _conv_operands(y: torch.fx.Node, gm: torch.fx.GraphModule, spatial: int) -> Optional[Dict]:
    """A conv{spatial}d's or conv_transpose{spatial}d's operands (nn module or F call): its input
    node "x", the state keys of its weight "w" and bias "bias" (None where it has none), "stride",
    "padding" and "dilation" as tuples, "groups", and "transposed"; None where it is neither, its
    padding is not zeros or a string, a transposed one has an output_size, or the weight or bias is
    not a float32 parameter."""
    a = synth._arg
    yop = _canon(y, gm) if y.op in ("call_module", "call_function") else ""
    if yop not in (f"conv{spatial}d", f"conv_transpose{spatial}d"):
        return None
    transposed = yop.startswith("conv_transpose")
    if y.op == "call_module":
        c = gm.get_submodule(y.target)
        if c.padding_mode != "zeros" or isinstance(c.padding, str) or (transposed and (len(y.args) > 1 or y.kwargs)):
            return None  # transposed: an output_size argument
        out = {"x": a(y, 0, "input"), "w": f"{y.target}.weight", "bias": f"{y.target}.bias" if c.bias is not None else None,
               "stride": c.stride, "padding": c.padding, "dilation": c.dilation, "groups": c.groups}
    else:
        wn, bn = a(y, 1, "weight"), a(y, 2, "bias")
        out = {"x": a(y, 0, "input"), "w": _param_key(wn, gm), "bias": _param_key(bn, gm) if bn is not None else None,
               "stride": a(y, 3, "stride", 1), "padding": a(y, 4, "padding", 0),
               "dilation": a(y, 7 if transposed else 5, "dilation", 1), "groups": a(y, 6, "groups", 1)}
        if out["w"] is None or (bn is not None and out["bias"] is None) or isinstance(out["padding"], str):
            return None
    state = dict(gm.named_parameters())
    state.update(dict(gm.named_buffers()))
    for key in ("w", "bias"):
        if out[key] is not None and (out[key] not in state or state[out[key]].dtype != torch.float32):
            return None
    for key in ("stride", "padding", "dilation"):
        out[key] = _tuple(out[key], spatial)
        if out[key] is None:
            return None
    if not isinstance(out["x"], torch.fx.Node) or not isinstance(out["groups"], int):
        return None
    out["transposed"] = transposed
    return out


def _avg_pool_args(n: torch.fx.Node, gm: torch.fx.GraphModule, spatial: int) -> Optional[tuple]:
    """An avg_pool{spatial}d's (kernel, stride, padding) as tuples where it divides by its window's
    size over whole windows (floor mode, no divisor_override); None otherwise."""
    a = synth._arg
    if n.op == "call_module":
        m = gm.get_submodule(n.target)
        k, st, pad, ceil = m.kernel_size, m.stride, m.padding, m.ceil_mode
        extra = getattr(m, "divisor_override", None) is not None
    else:
        k, st, pad, ceil = a(n, 1, "kernel_size"), a(n, 2, "stride"), a(n, 3, "padding", 0), a(n, 4, "ceil_mode", False)
        extra = a(n, 6, "divisor_override") is not None
    k, pad = _tuple(k, spatial), _tuple(pad, spatial)
    st = k if st is None or st == [] or st == () else _tuple(st, spatial)
    if k is None or st is None or pad is None or ceil or extra:
        return None
    return k, st, pad


def _fold_feature_pool(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> bool:
    """An avg_pool1d over the features of nn.Linear's or F.linear's output (a [.., C, N] output, or
    a [B, N] one unsqueezed to [B, 1, N]), read by nothing else, with no padding, floor mode and
    the window's size as divisor: rewritten as x @ W' + b' with W' and b' the window means of the
    weight's rows and of the bias (FeaturePoolFold), unsqueezed as the pool's output was.
    Returns whether it was."""
    import operator
    a = synth._arg
    if op != "avg_pool1d" or not n.args or not isinstance(n.args[0], torch.fx.Node):
        return False
    pool = _avg_pool_args(n, gm, 1)
    if pool is None or pool[2] != (0,):
        return False
    k, st, _ = pool
    u = n.args[0]
    y, unsq = u, False
    if _canon(u, gm) == "unsqueeze" and len(u.users) == 1 and u.args and isinstance(u.args[0], torch.fx.Node):
        d = a(u, 1, "dim")
        ys = _shape(u.args[0])
        if ys and len(ys) == 2 and d in (1, -2):
            y, unsq = u.args[0], True
    if _canon(y, gm) != "linear" or len(y.users) != 1 or _dtype(y) != torch.float32:
        return False
    ops = _linear_operands(y, gm)
    if ops is None:
        return False
    x, w, bias = ops
    ys = _shape(y)
    if not isinstance(x, torch.fx.Node) or not ys or (not unsq and len(ys) != 3) or _dtype(x) != torch.float32 or \
            ys[-1] < k[0]:
        return False
    g = gm.graph
    i = sum(1 for m in g.nodes if m.op == "call_module" and m.target.startswith("_ksol_feature_pool"))
    first = next(m for m in g.nodes if m.op not in ("placeholder", "get_attr"))
    with g.inserting_before(first):
        gm.add_submodule(f"_ksol_feature_pool{i}_w", FeaturePoolFold(k[0], st[0], True))
        wt = g.call_module(f"_ksol_feature_pool{i}_w", (g.get_attr(w),))
        bt = None
        if bias is not None:
            gm.add_submodule(f"_ksol_feature_pool{i}_b", FeaturePoolFold(k[0], st[0], False))
            bt = g.call_module(f"_ksol_feature_pool{i}_b", (g.get_attr(bias),))
    # The pool's [B, 1, N'] squeezed back to [B, N'] right after it is the product itself.
    sq = next(iter(n.users)) if unsq and len(n.users) == 1 else None
    if sq is not None and not (_canon(sq, gm) == "squeeze" and len(sq.args) == 2 and sq.args[1] in (1, -2) and not sq.kwargs):
        sq = None
    with g.inserting_before(n):
        r = g.call_function(torch.matmul, (x, wt))
        if bt is not None:
            r = g.call_function(operator.add, (r, bt))
        if unsq and sq is None:
            r = g.call_method("unsqueeze", (r, 1))
    if sq is not None:
        _replace(sq, r)
        g.erase_node(n)
    else:
        _replace(n, r)
    if unsq:
        g.erase_node(u)
    g.erase_node(y)
    return True


def _param_key(v, gm: torch.fx.GraphModule) -> Optional[str]:
    """The state key a get_attr node reads where it is a float32 parameter or buffer."""
    if not isinstance(v, torch.fx.Node) or v.op != "get_attr":
        return None
    state = dict(gm.named_parameters())
    state.update(dict(gm.named_buffers()))
    t = state.get(v.target)
    return v.target if t is not None and t.dtype == torch.float32 else None


def _linear_operands(y: torch.fx.Node, gm: torch.fx.GraphModule):
    """An nn.Linear's or F.linear's input node and the state keys of its weight and bias (None
    where it has none), or None where the weight or bias is not a float32 parameter."""
    a = synth._arg
    if y.op == "call_module":
        mod = gm.get_submodule(y.target)
        return a(y, 0, "input"), f"{y.target}.weight", f"{y.target}.bias" if mod.bias is not None else None
    x, wn, bn = a(y, 0, "input"), a(y, 1, "weight"), a(y, 2, "bias")
    w, bias = _param_key(wn, gm), _param_key(bn, gm) if bn is not None else None
    if w is None or (bn is not None and bias is None):
        return None
    return x, w, bias


def _fold_feature_reduction(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> bool:
    """A sum or mean over the last dim of a linear layer's output (nn.Linear, F.linear, or a
    matmul by a parameter or its transpose), through products and quotients by numbers or 0-d
    tensors and sums and differences with numbers or per-feature parameters, read by nothing
    else: rewritten as the rows' dot product with the folded weight (FeatureReduceFold), the
    constants' own reductions added and the scalings applied after it. Returns whether it was."""
    import operator
    a = synth._arg
    if op not in ("sum", "mean") or n.op not in ("call_function", "call_method") or not n.args:
        return False
    y = n.args[0]
    ys = _shape(y)
    dim, keep = a(n, 1, "dim"), a(n, 2, "keepdim", False)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if not isinstance(y, torch.fx.Node) or not ys or len(ys) < 2 or not isinstance(dim, int) or dim % len(ys) != len(ys) - 1 or \
            a(n, 3, "dtype") is not None or _dtype(y) != torch.float32:
        return False
    mean, feats = op == "mean", ys[-1]
    steps = []  # from the reduction inward: ("scale", op, c) and ("term", sign, c, key), replayed outward
    while True:
        if len(y.users) != 1:
            return False
        yop = _canon(y, gm) if y.op in ("call_function", "call_method") else ""
        if yop not in ("mul", "div", "truediv", "add", "sub") or len(y.args) != 2 or y.kwargs:
            break
        u, c = y.args
        if yop in ("mul", "add") and not isinstance(u, torch.fx.Node):
            u, c = c, u
        if not isinstance(u, torch.fx.Node):
            return False
        cs = _shape(c) if isinstance(c, torch.fx.Node) else None
        if isinstance(c, bool):
            return False
        number = isinstance(c, (int, float))
        if yop in ("mul", "div", "truediv"):
            if not (number or (cs == [] and _dtype(c) == torch.float32)):
                return False
            steps.append(("scale", yop, c))
        else:
            key = _param_key(c, gm) if not number else None
            if not number and (key is None or cs not in ([feats], [1, feats], [], [1])):
                return False
            steps.append(("term", -1.0 if yop == "sub" else 1.0, c, key))
        y = u
    yop = _canon(y, gm) if y.op in ("call_module", "call_function", "call_method") else ""
    x, w, w_dim, bias = None, None, 0, None
    if not _shape(y) or len(_shape(y)) < 2:
        return False  # a 1-D layer output: the per-feature terms' [1, N] would have widened it
    if yop == "linear":
        ops = _linear_operands(y, gm)
        if ops is None:
            return False
        x, w, bias = ops
    elif yop in ("matmul", "mm") and len(y.args) == 2 and not y.kwargs:
        x, bn_ = y.args
        if _param_key(bn_, gm) is not None:
            w, w_dim = bn_.target, 1
        elif isinstance(bn_, torch.fx.Node) and (_canon(bn_, gm) in ("t", "T") or
                                                 (bn_.target is getattr and len(bn_.args) == 2 and bn_.args[1] == "T")) \
                and _param_key(bn_.args[0], gm) is not None and len(bn_.users) == 1:
            w = bn_.args[0].target
    if x is None or w is None or not isinstance(x, torch.fx.Node) or _dtype(x) != torch.float32:
        return False
    state = dict(gm.named_parameters())
    if w not in state or state[w].dim() != 2 or (bias and bias not in state):
        return False
    g = gm.graph
    i = sum(1 for m in g.nodes if m.op == "call_module" and m.target.startswith("_ksol_feature_fold"))
    names = []

    def prep(key_node, dim):
        name = f"_ksol_feature_fold{i}_{len(names)}"
        names.append(name)
        gm.add_submodule(name, FeatureReduceFold(dim, mean))
        return g.call_module(name, (key_node,))

    # The weights' folds go before the forward's first op, so that the ops on x follow each other
    # (a chain continues only through the value just made).
    first = next(m for m in g.nodes if m.op not in ("placeholder", "get_attr"))
    with g.inserting_before(first):
        wv = prep(g.get_attr(w), w_dim)
        bv = prep(g.get_attr(bias), 0) if bias is not None else None
        # A per-feature term's own sum or mean, beside the weights'.
        own = {id(st): prep(g.get_attr(st[3]), -1) for st in steps
               if st[0] == "term" and isinstance(st[2], torch.fx.Node) and (_shape(st[2]) or [0])[-1] == feats}
    with g.inserting_before(n):
        r = g.call_method("sum", (g.call_function(operator.mul, (x, wv)), -1), {"keepdim": keep})
        if bv is not None:
            r = g.call_function(operator.add, (r, bv))
        for st in reversed(steps):  # innermost first, as the forward applied them
            if st[0] == "scale":
                r = g.call_function(operator.mul if st[1] == "mul" else operator.truediv, (r, st[2]))
                continue
            sign, c = st[1], st[2]
            if id(st) in own:
                v = own[id(st)]
            elif isinstance(c, torch.fx.Node):
                v = c if mean else g.call_function(operator.mul, (c, float(feats)))  # one value, N times in a sum
            else:
                v = c * (1 if mean else feats)
            r = g.call_function(operator.sub if sign < 0 else operator.add, (r, v))
    old = n.args[0]
    _replace(n, r)
    # The chain from the reduction's input down to the linear layer (each read by the next alone).
    dead = [old]
    while dead:
        d = dead.pop()
        if d.users:
            continue
        ins = [v for v in d.all_input_nodes]
        g.erase_node(d)
        dead.extend(v for v in ins if v.op not in ("placeholder", "get_attr"))
    return True


def _stride_one_transposed(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> Optional[Dict]:
    """A 1-D or 2-D transposed convolution at stride 1 that is a convolution (TransposedFilterFlip):
    groups 1, no output padding or output_size, its padding at most the taps' reach d*(T-1) along
    each dim, the filter (and bias) float32 tensors of the module (parameters or buffers, read by
    get_attr). Returns its operands (_conv_operands) with "padding" the convolution's, d*(T-1) - p,
    or None."""
    if op not in ("conv_transpose1d", "conv_transpose2d"):
        return None
    spatial = int(op[-2])
    conv = _conv_operands(n, gm, spatial)
    if conv is None or conv["groups"] != 1 or any(s != 1 for s in conv["stride"]):
        return None
    if n.op == "call_module":
        out_pad = gm.get_submodule(n.target).output_padding
    else:
        out_pad = synth._arg(n, 5, "output_padding", 0)
    out_pad = _tuple(out_pad, spatial)
    if out_pad is None or any(out_pad):
        return None
    state = dict(gm.named_parameters())
    state.update(dict(gm.named_buffers()))
    taps = state[conv["w"]].shape[2:]
    pad = tuple(d * (t - 1) - p for d, t, p in zip(conv["dilation"], taps, conv["padding"]))
    if len(taps) != spatial or any(v < 0 for v in pad):
        return None
    conv["padding"] = pad
    return conv


def _conv_of_pool(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> Optional[Dict]:
    """An average pool that reads a convolution's output and nothing else does, foldable into it
    (AvgPoolFold): the pool's window and stride, no padding, floor mode, the window's size as the
    divisor; the convolution of the pool's rank, zero padding, its filter (and bias) the module's
    float32 parameters. Returns the conv's operands (x, weight key, bias key, stride, padding,
    dilation, groups) and the pool's (window, stride), or None."""
    if not op.startswith("avg_pool") or op.startswith("adaptive") or not n.args or not isinstance(n.args[0], torch.fx.Node):
        return None
    y = n.args[0]
    spatial = int(op[-2])
    if len(y.users) != 1:
        return None
    pool = _avg_pool_args(n, gm, spatial)
    out = _conv_operands(y, gm, spatial)
    if pool is None or pool[2] != (0,) * spatial or out is None:
        return None
    k, st, _ = pool
    transposed = out["transposed"]
    state = {**dict(gm.named_parameters()), **dict(gm.named_buffers())}
    out.update(window=k, pool_stride=st)
    if transposed:
        # Folded where the pool's stride is the convolution's (upsampling, then averaging what
        # the upsampling made): a convolution at stride 1 over the image (TransposedAvgPoolFold).
        xs, ys, ps = _shape(out["x"]), _shape(y), _shape(n)
        if out["stride"] != st or not xs or not ys or not ps or len(xs) != spatial + 2:
            return None
        taps = list(state[out["w"]].shape[2:])
        maps, lo, hi = [], [], []
        for i in range(spatial):
            s_, p_, d_, kp, T, I = out["stride"][i], out["padding"][i], out["dilation"][i], k[i], taps[i], xs[2 + i]
            jmin, jmax = -(((T - 1) * d_ - p_) // s_), (kp - 1 + p_) // s_
            if jmax < jmin:
                return None  # every pooled position falls between the taps: no filter to fold
            m = torch.zeros(jmax - jmin + 1, T, dtype=torch.float64, device=state[out["w"]].device)
            for t in range(T):
                for a_ in range(kp):
                    j, r = divmod(a_ + p_ - t * d_, s_)
                    if r == 0:
                        m[j - jmin, t] += 1.0 / kp
            maps.append(m)
            lo.append(-jmin)
            hi.append(ps[2 + i] - I + jmin + (jmax - jmin + 1) - 1)
        out.update(maps=maps, lo=lo, hi=hi)
    return out


def _sink_scalars(n: torch.fx.Node, gm: torch.fx.GraphModule, spatial: int, shifts: bool = False,
                  drops: bool = False) -> None:
    """An average pool of x * c or x / c (the product read by the pool alone; c a number or a
    tensor of one value per pooling window: a 0-d parameter, a per-channel [C, 1, 1]) becomes the
    pool of x times c: the mean is linear, so the pool can meet the convolution before it. With
    `shifts` (a pool without padding, whose windows hold only the image's positions) x + c and
    x - c move after it too (a batch_norm's affine in eval mode). `drops`: n's output lacks the
    spatial dims (a mean over them without keepdim), so a tensor c moved after it is viewed
    without them ([C, 1, 1] as [1, C])."""
    import math
    import operator
    g = gm.graph
    # Every op moved keeps the pool input's shape (c broadcasts to it without widening it), so the
    # nodes decompose wrote along the way, whose shapes _values gives later, have it too.
    full = _shape(n.args[0]) if n.args and isinstance(n.args[0], torch.fx.Node) else None

    def constant_over_windows(c, x) -> bool:
        if isinstance(c, bool):
            return False
        if isinstance(c, (int, float)):
            return math.isfinite(c) and c != 0  # x * 0 or x / 0 pooled: inf and nan would not move with it
        cs, xs = _shape(c), full
        if not isinstance(c, torch.fx.Node) or cs is None or xs is None or len(cs) > len(xs) or _dtype(c) != torch.float32:
            return False
        cs = [1] * (len(xs) - len(cs)) + cs
        return all(d == 1 for d in cs[len(xs) - spatial:]) and all(a in (1, b) for a, b in zip(cs, xs))

    while n.args and isinstance(n.args[0], torch.fx.Node):
        m = n.args[0]
        op = _canon(m, gm) if m.op in ("call_function", "call_method") else ""
        ops = ("mul", "div", "truediv") + (("add", "sub") if shifts else ())
        if op not in ops or len(m.users) != 1 or len(m.args) != 2 or m.kwargs:
            return
        x, c = m.args
        if op in ("mul", "add") and isinstance(c, torch.fx.Node) and constant_over_windows(x, c) and \
                not constant_over_windows(c, x):
            x, c = c, x
        if op in ("add", "sub") and isinstance(c, (int, float)) and not isinstance(c, bool):
            pass  # a shift by any finite number moves (0 too)
        elif not isinstance(x, torch.fx.Node) or not constant_over_windows(c, x):
            return
        if not isinstance(x, torch.fx.Node) or (isinstance(c, float) and not math.isfinite(c)):
            return
        fn = {"mul": operator.mul, "add": operator.add, "sub": operator.sub}.get(op, operator.truediv)
        n.replace_input_with(m, x)
        at = n
        kept = ([1] * (len(full) - len(_shape(c))) + _shape(c))[:len(full) - spatial] if isinstance(c, torch.fx.Node) else None
        if drops and kept is not None and kept != _shape(c):
            with g.inserting_after(n):
                c = at = g.call_method("reshape", (c, *kept))
            _shaped(c, kept)
        with g.inserting_after(at):
            y = g.call_function(fn, (n, c))
        n.replace_all_uses_with(y, delete_user_cb=lambda u: u is not y)
        if "tensor_meta" in n.meta:
            y.meta["tensor_meta"] = n.meta["tensor_meta"]
        g.erase_node(m)


def _shaped(n: torch.fx.Node, shape: List[int]) -> None:
    """Gives a new float32 node the shape it will have (ShapeProp's metadata), before _values runs."""
    from torch.fx.passes.shape_prop import _extract_tensor_metadata
    n.meta["tensor_meta"] = _extract_tensor_metadata(torch.empty(shape, dtype=torch.float32, device="meta"))


# The operator module's in-place forms, where a forward calls them (operator.iadd(x, y)); torch.fx
# records `x += y` on a traced value as an add, and cannot trace `x[i] = v`.
_IN_PLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
                       operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor, operator.ilshift,
                       operator.irshift, operator.setitem}


def _mutates(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether `n` writes into a tensor it is given: an in-place method or function (x.add_(y),
    torch.relu_(x)), an operator's in-place form, an out= argument, or inplace=True (an argument
    or a module's attribute, nn.ReLU(inplace=True))."""
    def in_place(name) -> bool:  # add_, relu_, __iadd__; not __init__-like dunders
        return isinstance(name, str) and ((name.endswith("_") and not name.startswith("_")) or
                                           (name.startswith("__i") and name.endswith("__")))
    if n.op == "call_method":
        return in_place(n.target)
    if n.op == "call_function":
        return n.target in _IN_PLACE_OPERATORS or in_place(getattr(n.target, "__name__", "")) or \
            bool(n.kwargs.get("inplace")) or n.kwargs.get("out") is not None
    if n.op == "call_module":
        return bool(getattr(gm.get_submodule(n.target), "inplace", False))
    return False


# Ops whose result shares its input's memory (or may): a copy read through them alone still
# reaches the output as that memory.
_VIEWS = ("view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t", "expand",
          "contiguous", "getitem", "narrow", "select", "split", "chunk", "unbind", "clone", "detach", "view_as",
          "expand_as", "movedim", "as_strided")


def _reaches_output_as_view(n: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether the forward returns `n`'s value or a view of it (through _VIEWS alone)."""
    todo, seen = [n], set()
    while todo:
        m = todo.pop()
        for u in m.users:
            if u.op == "output":
                return True
            if u not in seen and u.op in ("call_function", "call_method") and _canon(u, gm) in _VIEWS:
                seen.add(u)
                todo.append(u)
    return False


def _drop_copies(gm: torch.fx.GraphModule) -> bool:
    """Where the forward writes into no tensor (_mutates), x.clone() and x.detach() hold x's values
    for good: their readers read x instead. A kept clone is a copy PyTorch makes in a pass of its
    own over memory, and a chain that reads a value and its copy becomes one piece that reads the
    value once. Kept: a copy the forward returns (or a view of it: the output would be its source's
    memory, an input's or another output's), a clone with arguments (memory_format) or whose
    strides are not its source's (a clone of an expanded or otherwise non-dense tensor is a dense
    one, which a view after it may need). Returns whether anything changed."""
    g = gm.graph
    if any(_mutates(n, gm) for n in g.nodes):
        return False
    changed = False
    for n in list(g.nodes):
        op = _canon(n, gm) if n.op in ("call_function", "call_method") else ""
        if op not in ("clone", "detach") or not n.args or not isinstance(n.args[0], torch.fx.Node) or \
                _reaches_output_as_view(n, gm):
            continue
        if op == "clone":
            tm, src = n.meta.get("tensor_meta"), n.args[0].meta.get("tensor_meta")
            if n.kwargs or len(n.args) > 1 or tm is None or src is None or \
                    tuple(getattr(tm, "stride", ())) != tuple(getattr(src, "stride", (None,))):
                continue
        n.replace_all_uses_with(n.args[0])
        g.erase_node(n)
        changed = True
    return changed


def _replace(n: torch.fx.Node, y: torch.fx.Node) -> None:
    """`n`'s uses read `y` instead, which computes the same tensor: it takes n's shape, so that an
    op after it is rewritten in the same pass (the other new nodes get theirs from _values)."""
    if "tensor_meta" in n.meta:
        y.meta["tensor_meta"] = n.meta["tensor_meta"]
    n.replace_all_uses_with(y)
    n.graph.erase_node(n)


# The largest indicator matrix GlobalPoolFold keeps (elements): an image of I0*I1*I2 positions
# under a filter of T0*T1*T2 taps.
_MAX_POOL_MASK = 1 << 26


def _fold_global_pool(n: torch.fx.Node, gm: torch.fx.GraphModule, op: str) -> bool:
    """A mean over every spatial dim of a convolution's output (nn.Conv*/ConvTranspose* or F.conv*,
    groups 1, zero padding, batched; its output read by this chain alone), through products and
    quotients by numbers or tensors constant over the spatial dims (moved after the mean):
    rewritten as GlobalPoolFold's two products, B = x viewed [N*C, I...] @ mask, then B viewed
    [N, C*T...] @ the folded filter + bias, viewed as the mean's output. Returns whether it was."""
    import math
    import operator
    a = synth._arg
    if op != "mean" or n.op not in ("call_function", "call_method") or not n.args or not isinstance(n.args[0], torch.fx.Node):
        return False
    ys = _shape(n.args[0])
    dims, keep = a(n, 1, "dim"), a(n, 2, "keepdim", False)
    if not ys or len(ys) < 3 or a(n, 3, "dtype") is not None or not isinstance(dims, (list, tuple)) or \
            sorted(d % len(ys) for d in dims) != list(range(2, len(ys))):
        return False
    spatial = len(ys) - 2
    _sink_scalars(n, gm, spatial, shifts=True, drops=not keep)
    y = n.args[0]
    conv = _conv_operands(y, gm, spatial) if len(y.users) == 1 and _dtype(y) == torch.float32 else None
    if conv is None:
        return False
    x, w, bias, transposed = conv["x"], conv["w"], conv["bias"], conv["transposed"]
    stride, padding, dilation = conv["stride"], conv["padding"], conv["dilation"]
    xs = _shape(x)
    state = {**dict(gm.named_parameters()), **dict(gm.named_buffers())}
    if conv["groups"] != 1 or not xs or len(xs) != len(ys) or _dtype(x) != torch.float32:
        return False
    taps = list(state[w].shape[2:])
    if math.prod(xs[2:]) * math.prod(taps) > _MAX_POOL_MASK:
        return False
    mask = None
    for j in range(spatial):
        I, O, T, s_, p_, d_ = xs[2 + j], ys[2 + j], taps[j], stride[j], padding[j], dilation[j]
        e = torch.zeros(I, T, dtype=torch.float32, device=state[w].device)
        for t in range(T):
            for i in range(I):
                if transposed:
                    q = i * s_ - p_ + t * d_  # the output position i's tap t writes
                    e[i, t] = 1.0 if 0 <= q < O else 0.0
                else:
                    q, r = divmod(i + p_ - t * d_, s_)  # the output position that reads i through tap t
                    e[i, t] = 1.0 if r == 0 and 0 <= q < O else 0.0
        mask = e if mask is None else torch.kron(mask, e)
    g = gm.graph
    i = sum(1 for m in g.nodes if m.op == "call_module" and m.target.startswith("_ksol_global_pool"))
    name = f"_ksol_global_pool{i}"
    gm.add_submodule(name, GlobalPoolFold(mask, transposed, math.prod(ys[2:])))
    first = next(m for m in g.nodes if m.op not in ("placeholder", "get_attr"))
    nb, ch, k = xs[0], xs[1], ys[1]
    with g.inserting_before(first):
        mk = g.call_module(name, ())
        wf = g.call_module(name, (g.get_attr(w),))
    with g.inserting_before(n):
        b_ = g.call_function(torch.matmul, (g.call_method("reshape", (x, nb * ch, math.prod(xs[2:]))), mk))
        r = g.call_function(torch.matmul, (g.call_method("reshape", (b_, nb, ch * math.prod(taps))), wf))
        if bias is not None:
            r = g.call_function(operator.add, (r, g.get_attr(bias)))
        r = g.call_method("reshape", (r, *( [nb, k] + [1] * spatial if keep else [nb, k])))
    _replace(n, r)
    g.erase_node(y)
    return True


def decompose(gm: torch.fx.GraphModule, flip: bool = False, vendor: bool = False, keep_layout: Collection[str] = ()) -> bool:
    """Rewrites, in place, the ops no DSL family takes whole into the ops of their definition,
    each of which one does (first, where the forward writes into no tensor, clone and detach are
    read as their input: _drop_copies): the smooth L1 (Huber), KL divergence and triplet margin losses into
    pointwise terms and a reduction; cross entropy with class-index targets into the rows'
    logsumexp (row-wise), a gather of the targets' logits (kept) and the mean of the differences;
    an average pool after a convolution into that convolution with the pool folded into its
    filter (AvgPoolFold), after a transposed one at its stride into a stride-1 convolution
    (TransposedAvgPoolFold, PaddedConv), a scaling between them moved after the pool; a sum or
    mean over a linear layer's features into a dot product with its folded weights
    (FeatureReduceFold), an average pool over them into the layer with its rows averaged
    (FeaturePoolFold); a sum, mean, amax or amin over a 2-D convolution's channels and more dims
    into one over the channels first (the conv's epilogue), then the rest; after those, a mean over
    every spatial dim of a convolution's output into the image's sums over each tap's box times the
    filter (GlobalPoolFold); a pooling whose windows tile its input (kernel = stride, no padding)
    into reductions over the window dims of a view of its input where the rows are long (a global
    pool, a 1-D window of 32 or more, an adaptive pool; smaller windows stay pools: the direct family); group_norm into a layer_norm over each group's
    [C/G, ...] elements (a row-wise program over the input viewed as [N, G, C/G*...]) and the
    per-channel affine (elementwise), or, where a group holds more than GROUP_STATS_ROW elements,
    into its mean and 1/sqrt(var + eps) (row-wise over that view), spread to [N, C, 1...], and the
    normalization and the affine as elementwise ops on the input; batch_norm with the batch's statistics into means over the
    spatial dims (row-wise) and over the batch (a column reduction), twice (the mean, then the
    variance of the deviations, biased as PyTorch normalizes by it), then the normalization and the
    affine (elementwise); batch_norm with running statistics into its elementwise form; a
    float32 reduction over dims of one element into its input; a float32 sum, mean, max or min of
    every element into one over the trailing dims, then one over the rows. The
    running statistics a training-mode batch_norm updates are not part of the forward's output,
    so the rewritten graph leaves them as they were. Returns whether anything changed; the caller
    propagates shapes again. Last, a 1-D or 2-D transposed convolution at stride 1 that none of
    those folded into the convolution by its flipped filter (TransposedFilterFlip), and the
    rewrites run again (`flip`: that second run), where a reduction over the new convolution's
    channels goes first; the folds that read a filter parameter (AvgPoolFold, GlobalPoolFold) do
    not take a flipped filter. `vendor` (stitch.split's vendor-call plan): no flip."""
    import math
    import operator
    g = gm.graph
    changed = _drop_copies(gm)
    for n in list(g.nodes):
        if n.op not in ("call_module", "call_function", "call_method"):
            continue
        op = _canon(n, gm)
        if _over_ones(n, op, gm):
            # A reduction over dims of one element is its input (squeezed where keepdim is off); of
            # a max or min over a dim, the values are (the indices, all 0, are not taken).
            x, (dims, keep) = n.args[0], synth._reduced_dims(n, op, len(_shape(n.args[0])))
            uses = [u for u in n.users] if op in ("max", "min") and synth._arg(n, 1, "dim") is not None else [n]
            for u in uses:
                with g.inserting_before(u):
                    y = x if keep else g.call_method("reshape", (x, tuple(_shape(u))))
                if y is x:
                    u.replace_all_uses_with(x)
                    g.erase_node(u)
                else:
                    _replace(u, y)
            if n in g.nodes and not n.users:
                g.erase_node(n)
            changed = True
            continue
        if _fold_feature_reduction(n, gm, op) or _fold_feature_pool(n, gm, op):
            changed = True
            continue
        first = _channels_first(n, gm, op)
        if first is not None:
            # Over a convolution's channels first (kept as a dim of 1, which the reduction then
            # takes as it took the channels): the conv program's epilogue reduces over its filters.
            x, red = first
            with g.inserting_before(n):
                t = g.call_method(red, (x, 1), {"keepdim": True})
            n.replace_input_with(x, t)
            changed = True
            continue
        full = _full_reduction(n, op)
        if full is not None:
            # Over the trailing dims (rows of at least _MIN_ROW elements: a row-wise program that
            # takes the elementwise ops before it, whatever they broadcast along the rows), then
            # over the rows' values: one pass over the tensor and a small second reduction, where
            # one program over the tensor as one row would need every operand of its length.
            x, red, trailing = full
            with g.inserting_before(n):
                y = g.call_method(red, (x, trailing))
                y = g.call_method(red, (y,))
            _replace(n, y)
            changed = True
            continue
        flip_of = _stride_one_transposed(n, gm, op) if flip else None
        if flip_of is not None:
            # conv_transpose(x, W, b) at stride 1 = conv(x, W flipped, b) padded by d*(T-1) - p
            # (TransposedFilterFlip): the conv family's program, with its epilogues.
            import torch.nn.functional as F
            name = f"_ksol_tflip{sum(1 for m in g.nodes if m.op == 'call_module' and m.target.startswith('_ksol_tflip'))}"
            gm.add_submodule(name, TransposedFilterFlip())
            with g.inserting_before(n):
                w = g.call_module(name, (g.get_attr(flip_of["w"]),))
                b = g.get_attr(flip_of["bias"]) if flip_of["bias"] is not None else None
                conv_fn = (F.conv1d, F.conv2d)[int(op[-2]) - 1]
                y = g.call_function(conv_fn, (flip_of["x"], w, b), {
                    "stride": 1, "padding": flip_of["padding"], "dilation": flip_of["dilation"], "groups": 1})
            _replace(n, y)
            changed = True
            continue
        if op.startswith("avg_pool") and op[-2].isdigit():
            pool = _avg_pool_args(n, gm, int(op[-2]))
            _sink_scalars(n, gm, int(op[-2]), shifts=pool is not None and pool[2] == (0,) * int(op[-2]))
        fold = _conv_of_pool(n, gm, op) if kind_of(op) == "pool" else None
        if fold is not None and fold["transposed"]:
            # avg_pool(conv_transpose(x, W, b)) at the conv's stride = a convolution at stride 1
            # of x, padded (PaddedConv), by W folded (TransposedAvgPoolFold).
            conv = n.args[0]
            i = sum(1 for m in g.nodes if m.op == "call_module" and m.target.startswith("_ksol_tavgpool_fold"))
            gm.add_submodule(f"_ksol_tavgpool_fold{i}", TransposedAvgPoolFold(fold["maps"], fold["groups"]))
            gm.add_submodule(f"_ksol_padded_conv{i}", PaddedConv(fold["lo"], fold["hi"], fold["groups"]))
            with g.inserting_before(n):
                w = g.call_module(f"_ksol_tavgpool_fold{i}", (g.get_attr(fold["w"]),))
                b = g.get_attr(fold["bias"]) if fold["bias"] is not None else None
                y = g.call_module(f"_ksol_padded_conv{i}", (fold["x"], w, b))
            _replace(n, y)
            g.erase_node(conv)
            changed = True
            continue
        if fold is not None:
            # avg_pool(conv(x, W, b)) = conv(x, W', b) at the two strides' product (AvgPoolFold):
            # the conv's output, pool-window times the pool's, is never made.
            import torch.nn.functional as F
            conv = n.args[0]
            name = f"_ksol_avgpool_fold{sum(1 for m in g.nodes if m.op == 'call_module' and m.target.startswith('_ksol_avgpool_fold'))}"
            gm.add_submodule(name, AvgPoolFold(fold["window"], fold["stride"], fold["dilation"]))
            with g.inserting_before(n):
                w = g.call_module(name, (g.get_attr(fold["w"]),))
                b = g.get_attr(fold["bias"]) if fold["bias"] is not None else None
                conv_fn = (F.conv1d, F.conv2d, F.conv3d)[len(fold["window"]) - 1]
                y = g.call_function(conv_fn, (fold["x"], w, b), {
                    "stride": tuple(s * p for s, p in zip(fold["stride"], fold["pool_stride"])), "padding": fold["padding"],
                    "dilation": (1,) * len(fold["window"]), "groups": fold["groups"]})
            _replace(n, y)
            g.erase_node(conv)
            changed = True
            continue
        if kind_of(op) == "pool":
            sh = _shape(n.args[0]) if n.args and isinstance(n.args[0], torch.fx.Node) else None
            win = _pool_windows(n, gm, op, sh) if sh else None
            if win is None:
                continue
            kind, k = win
            # A pool of small windows stays a pool: the direct family makes each output in one
            # pass with its epilogue, where reductions over its window dims would be rows of a few
            # elements, one pass per window dim. Reduced: a global pool (one reduction over the
            # spatial dims), a 1-D pool of 32 or more elements a window (rows long enough for a
            # row-wise program), and an adaptive pool, which the direct family does not take.
            if not op.startswith("adaptive") and list(k) != sh[2:] and not (len(k) == 1 and k[0] >= 32):
                continue
            # [N, C, D, H, W] viewed as [N, C, D/kd, kd, H/kh, kh, W/kw, kw]; each window dim reduced
            # from the last: the first a row-wise reduction, the others column reductions.
            view, window_dims = list(sh[:2]), []
            for d, w in zip(sh[2:], k):
                view += [d // w, w] if w > 1 else [d]  # a window of 1 along a dim is no reduction
                if w > 1:
                    window_dims.append(len(view) - 1)
            red = "amax" if kind == "max" else "mean"
            with g.inserting_before(n):
                if list(k) == sh[2:]:  # one window (a global pool): one reduction over the spatial dims
                    y = g.call_method(red, (n.args[0], tuple(range(2, len(sh)))), {"keepdim": True})
                else:
                    y = g.call_method("reshape", (n.args[0], *view))
                    for d in reversed(window_dims):
                        y = g.call_method(red, (y, d))
            _replace(n, y)
            changed = True
            continue
        if op in ("smooth_l1_loss", "kl_div", "tripletmarginloss", "triplet_margin_loss", "cross_entropy", "crossentropyloss"):
            y = _loss(g, gm, n, op)
            if y is None:
                continue
            _replace(n, y)
            changed = True
            continue
        if op in ("softmax", "log_softmax", "logsumexp"):
            x = n.args[0] if n.args else None
            sh = _shape(x)
            if not sh:
                continue
            if op == "logsumexp":
                red = synth._reduced_dims(n, op, len(sh))
                dims, keep = red if red else (None, False)
            else:
                d = gm.get_submodule(n.target).dim if n.op == "call_module" else synth._arg(n, 1, "dim")
                dims, keep = ([d % len(sh)] if isinstance(d, int) else None), True
            # Over consecutive dims with more than one element after them (over the trailing dims
            # the row-wise family takes the op whole): the max and the sum of exp(x - max) are
            # column reductions, the rest elementwise; exp(x - max) is computed for each.
            if not dims or dims != list(range(dims[0], dims[-1] + 1)) or math.prod(sh[dims[-1] + 1:]) == 1:
                continue
            red = tuple(dims) if len(dims) > 1 else dims[0]
            with g.inserting_before(n):
                m = g.call_method("amax", (x, red), {"keepdim": True})
                e = g.call_function(torch.exp, (g.call_function(operator.sub, (x, m)),))
                s_ = g.call_method("sum", (e, red), {"keepdim": True})
                if op == "logsumexp":
                    y = g.call_function(operator.add, (m, g.call_function(torch.log, (s_,))))
                    if not keep:
                        y = g.call_method("squeeze", (y, red))
                else:
                    t = g.call_function(operator.sub, (x, m))
                    y = g.call_function(operator.truediv, (g.call_function(torch.exp, (t,)), s_)) if op == "softmax" else \
                        g.call_function(operator.sub, (t, g.call_function(torch.log, (s_,))))
            _replace(n, y)
            changed = True
            continue
        if op not in ("group_norm", "batch_norm"):
            continue
        args = _norm_args(n, gm, op)
        sh = _shape(args["x"]) if args else None
        if args is None or not sh or len(sh) < 2 or (op == "group_norm" and (not isinstance(args["groups"], int) or
                                                                            sh[1] % args["groups"] != 0)):
            continue
        x, c, rank = args["x"], sh[1], len(sh)
        chan = [c] + [1] * (rank - 2)  # a per-channel tensor, broadcast along the spatial dims

        # The per-channel tensors (and 1/sqrt(var + eps) of running statistics) go before the
        # forward's first op, so that the ops on x follow each other: stitch's chains continue
        # only through the value just made, and x's may be a conv's or a GEMM's epilogue.
        first = next(m for m in g.nodes if m.op not in ("placeholder", "get_attr"))
        with g.inserting_before(first):
            ch = {k: g.call_method("reshape", (g.get_attr(args[k]), *chan)) for k in ("mean", "var", "weight", "bias")
                  if args[k] is not None and (k in ("weight", "bias") or not args["batch_stats"])}
            if not args["batch_stats"] and op == "batch_norm":
                inv = g.call_function(torch.rsqrt, (g.call_function(operator.add, (ch["var"], args["eps"])),))
                _shaped(inv, chan)
            for v in ch.values():
                _shaped(v, chan)  # their shapes now: a pool after them may move past them

        def per_channel(k):
            return ch[k]

        with g.inserting_before(n):

            if op == "group_norm":
                grps = args["groups"]
                grp = sh[1] // grps * int(torch.Size(sh[2:]).numel())
                xr = g.call_method("reshape", (x, sh[0], grps, grp))
                if grp > GROUP_STATS_ROW:
                    # Long groups: their statistics alone (two row-wise reductions, [N, G, 1]
                    # each), spread to [N, C, 1...] (PyTorch's copies of N * C values), then the
                    # normalization as elementwise ops on x, which a pool or the ops after it take.
                    mean = g.call_method("mean", (xr, -1), {"keepdim": True})
                    d = g.call_function(operator.sub, (xr, mean))
                    var = g.call_method("mean", (g.call_function(operator.mul, (d, d)), -1), {"keepdim": True})
                    rstd = g.call_function(torch.rsqrt, (g.call_function(operator.add, (var, args["eps"])),))
                    spread = [g.call_method("reshape", (g.call_method("expand", (s, sh[0], grps, sh[1] // grps)), sh[0], *chan))
                              for s in (mean, rstd)]
                    y = g.call_function(operator.mul, (g.call_function(operator.sub, (x, spread[0])), spread[1]))
                else:
                    y = g.call_function(torch.nn.functional.layer_norm, (xr, [grp]), {"eps": args["eps"]})
                    y = g.call_method("reshape", (y, *sh))
            elif args["batch_stats"]:
                spatial = tuple(range(2, rank))

                def batch_mean(v):
                    if spatial:
                        v = g.call_method("mean", (v, spatial), {"keepdim": True})
                    return g.call_method("mean", (v, 0), {"keepdim": True})
                d = g.call_function(operator.sub, (x, batch_mean(x)))
                var = batch_mean(g.call_function(operator.mul, (d, d)))
                y = g.call_function(operator.mul, (d, g.call_function(torch.rsqrt, (g.call_function(operator.add, (var, args["eps"])),))))
            else:
                d = g.call_function(operator.sub, (x, per_channel("mean")))
                y = g.call_function(operator.mul, (d, inv))
            if args["weight"] is not None:
                y = g.call_function(operator.mul, (y, per_channel("weight")))
            if args["bias"] is not None:
                y = g.call_function(operator.add, (y, per_channel("bias")))
        _replace(n, y)
        changed = True
    # The means over every spatial dim, the global pools' among them (written above), folded.
    for n in list(g.nodes):
        if n.op in ("call_function", "call_method") and _fold_global_pool(n, gm, _canon(n, gm)):
            changed = True
    # The stride-1 transposed convolutions no fold above took (a global pool's folds the
    # transposed one whole): each the convolution by its flipped filter, then the rewrites again,
    # which may take the new convolutions (a reduction over their channels first).
    # Not in the vendor-call plan, where cuDNN runs the transposed convolution as it is.
    if not flip and not vendor and any(n.op in ("call_module", "call_function") and _stride_one_transposed(n, gm, _canon(n, gm))
                                       for n in g.nodes):
        decompose(gm, flip=True)
        changed = True
    # The vendor-call plan's convolutions leave their bias to the ops after them (the add joins
    # their piece) and run channels-last, as torch.compile does with its extern convolutions:
    # PyTorch adds a cuDNN convolution's bias in a pass of its own over the output, and cuDNN's
    # NHWC kernels are the faster ones; those named in `keep_layout` stay in the module's layout.
    if vendor:
        for n in list(g.nodes):
            if n.op in ("call_module", "call_function") and _vendor_conv(n, gm, n.name not in keep_layout):
                changed = True
    if changed:
        g.lint()
        gm.recompile()
    return changed


def _vendor_conv(n: torch.fx.Node, gm: torch.fx.GraphModule, channels_last: bool) -> bool:
    """The vendor-call plan's convolution `n`, where each of its readers is an elementwise op or a
    pool (the ops a piece starts with that read it at its own index or through a window's prologue):
    conv(x, W, b) becomes conv(x, W) + b viewed per channel (the add joins that piece), and a 2-D
    or 3-D one, with `channels_last`, runs in that layout (ChannelsLastConv) on its image permuted
    to [N, *spatial, C], its output permuted back for the piece. False, leaving the graph as it
    is, elsewhere."""
    import torch.nn.functional as F
    op = _canon(n, gm)
    if op not in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        return False
    spatial = int(op[-2])
    ops = _conv_operands(n, gm, spatial)
    if ops is None or not n.users or \
            not all(_lowerable(u, gm) and kind_of(_canon(u, gm)) in ("elementwise", "pool") for u in n.users):
        return False
    sh = _shape(n)
    channels_last = channels_last and spatial in (2, 3)
    if not sh or len(sh) != spatial + 2 or (ops["bias"] is None and not channels_last):
        return False
    kw = {"stride": ops["stride"], "padding": ops["padding"], "dilation": ops["dilation"], "groups": ops["groups"]}
    if ops["transposed"]:
        out_pad = gm.get_submodule(n.target).output_padding if n.op == "call_module" else synth._arg(n, 5, "output_padding", 0)
        kw["output_padding"] = _tuple(out_pad, spatial)
        if kw["output_padding"] is None:
            return False
    g = gm.graph
    bias = None
    if ops["bias"] is not None:
        chan = [sh[1]] + [1] * spatial
        first = next(m for m in g.nodes if m.op not in ("placeholder", "get_attr"))
        with g.inserting_before(first):
            bias = g.call_method("reshape", (g.get_attr(ops["bias"]), *chan))
        _shaped(bias, chan)
    fn = ("conv_transpose" if ops["transposed"] else "conv") + f"{spatial}d"
    with g.inserting_before(n):
        w = g.get_attr(ops["w"])
        if channels_last:
            name = f"_ksol_channels_last{sum(1 for m in g.nodes if m.op == 'call_module' and m.target.startswith('_ksol_channels_last'))}"
            gm.add_submodule(name, ChannelsLastConv(fn, kw, n.name))
            # The image permuted to [N, *spatial, C]: a piece of its own writes it so (its reads
            # and writes through shared-memory tiles), the layout cuDNN's NHWC kernels read.
            xl = g.call_method("permute", (ops["x"], (0, *range(2, spatial + 2), 1)))
            xs = _shape(ops["x"])
            if xs:
                _shaped(xl, [xs[0], *xs[2:], xs[1]])
            yp = g.call_module(name, (xl, w))
            y = g.call_method("permute", (yp, (0, spatial + 1, *range(1, spatial + 1))))
            _shaped(yp, [sh[0], *sh[2:], sh[1]])
        else:
            y = g.call_function(getattr(F, fn), (ops["x"], w, None), kw)
        z = g.call_function(operator.add, (y, bias)) if bias is not None else y
    _shaped(y, sh)
    _replace(n, z)
    return True


def _values(gm: torch.fx.GraphModule, inputs: List) -> Dict[str, object]:
    """Every node's value on `inputs`, by name (the tensors each piece is written on); each node's
    shape is propagated on the way (ShapeProp), so that the nodes decompose wrote have theirs
    without a forward run of their own (a KernelBench forward on real tensors takes minutes)."""
    out: Dict[str, object] = {}

    class Rec(ShapeProp):
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
    sub = torch.fx.GraphModule(gm, g)
    # A tensor the forward makes from a constant (fx's _tensor_constant<i>) is not the model's
    # state; GraphModule copies it in as a buffer, which would make it a parameter of the piece's
    # table. It stays a constant of the code (synth folds one value into a number).
    for name in getattr(gm, "_ksol_constants", ()):
        if name in sub._buffers:
            setattr(sub, name, sub._buffers.pop(name))
    return sub, ext


def _piece(gm, seg, values, pid, refused: Dict[str, str], conv_products: str = "fp32", gemm_products: str = "fp32"):
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
    r = synth.synthesize(sub, ins, conv_products=conv_products, gemm_products=gemm_products)
    if not r.get("program"):
        return None, r.get("reason", "not one DSL program")
    out = values.get(seg[-1].name)
    return Piece(pid, [n.name for n in seg], [a.name for a in ext], list(sub.state_dict().keys()), r["program"], r["family"],
                 r["tensors"], r["dims"], r["dim_order"], list(out.shape) if isinstance(out, torch.Tensor) else [],
                 r.get("program_fallback")), ""


class _PieceCall(nn.Module):
    """One piece inside a compiled stitched module: its ABI tensors in, its output out."""

    def __init__(self, piece: Piece, runner: Callable):
        super().__init__()
        self.piece = piece
        self.runner = runner

    def forward(self, *tensors):
        return self.runner(self.piece, list(tensors)).reshape(self.piece.shape)


def compiled(plan: Plan, runner: Callable, keep: Collection[int] = ()) -> torch.fx.GraphModule:
    """The stitched module as generated Python code (torch.fx), built once: each piece's nodes
    replaced by one call of its runner, the kept ops as traced. What the worker times: no
    interpreter walks the graph on each call. Shares the module's parameters with `plan.gm`.
    The pieces whose ids are in `keep` stay PyTorch calls too (their nodes as traced): where
    PyTorch's own call of a piece (cuBLAS, cuDNN) is faster than every schedule of its program."""
    g = torch.fx.Graph()
    vm: Dict[torch.fx.Node, torch.fx.Node] = {}
    g.output(g.graph_copy(plan.gm.graph, vm))
    old = {n.name: n for n in plan.gm.graph.nodes}
    gm = torch.fx.GraphModule(plan.gm, g)
    cur = {name: vm[n] for name, n in old.items() if n in vm}  # each value's node now (a piece's output: its call)
    for i, p in enumerate(plan.pieces):
        if p.id in keep:
            continue
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
