"""Cutting a traced graph into pieces: a GEMM with its elementwise epilogue, a map/reduce/
normalize chain, an elementwise chain, or an op that stays a PyTorch or vendor call. `ksol import`
reports stitch.py's plan (what `ksol optimize` runs); this cut of the op graph serves where the
forward cannot be traced, and the costs per piece.

Fusion rule: an elementwise or rowwise op joins the piece of the op that produced its main
input when that producer has no other user (so the intermediate never needs to exist) and is the
piece's last op. A rowwise op may take an elementwise prologue but not a GEMM (the DSL has no
GEMM-then-reduce family). Views join their producer's piece at no cost.
"""
import dataclasses
from typing import Dict, List, Optional

import torch

from .trace import Graph, OpNode

# Rowwise ops the DSL's map/reduce/normalize families express (docs/DSL.md).
_DSL_ROWWISE = {"softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "mean", "max", "amax", "min", "amin",
                "logsumexp", "norm", "normalize", "cumsum", "cumprod"}


@dataclasses.dataclass
class Piece:
    id: int
    family: str              # gemm, conv, rowwise, elementwise, view, torch
    ops: List[OpNode]
    dsl: bool                # expressible in the ksol DSL today
    reason: str              # why not, when dsl is False
    inputs: List[str] = dataclasses.field(default_factory=list)
    outputs: List[str] = dataclasses.field(default_factory=list)
    flops: float = 0.0
    bytes: float = 0.0


def _elem_size(dtype: Optional[str]) -> int:
    if not dtype:
        return 4
    try:
        return torch.empty((), dtype=getattr(torch, dtype)).element_size()
    except (AttributeError, TypeError):
        return 4


def lower(g: Graph) -> List[Piece]:
    by_name: Dict[str, OpNode] = {o.name: o for o in g.ops}
    piece_of: Dict[str, Piece] = {}
    pieces: List[Piece] = []

    def new_piece(family: str, op: OpNode) -> Piece:
        p = Piece(len(pieces), family, [op], False, "")
        pieces.append(p)
        piece_of[op.name] = p
        return p

    def chain_producer(op: OpNode) -> Optional[OpNode]:
        """The latest op among this op's inputs (the chain it continues), if any."""
        prods = [by_name[i] for i in op.inputs if i in by_name]
        if not prods:
            return None
        order = {o.name: k for k, o in enumerate(g.ops)}
        return max(prods, key=lambda o: order[o.name])

    def can_join(prod: Optional[OpNode], families) -> Optional[Piece]:
        if prod is None or prod.users != 1:
            return None
        p = piece_of.get(prod.name)
        if p is None or p.family not in families or p.ops[-1] is not prod:
            return None
        return p

    for op in g.ops:
        prod = chain_producer(op)
        if op.kind == "view":
            p = piece_of.get(prod.name) if prod is not None else None
            if p is not None and p.ops[-1] is prod:
                p.ops.append(op)
                piece_of[op.name] = p
            else:
                new_piece("view", op)
            continue
        if op.kind in ("gemm", "conv"):
            new_piece(op.kind, op)
            continue
        # An elementwise op may end any piece; a rowwise op may take an elementwise prologue.
        joinable = {"elementwise": ("gemm", "conv", "elementwise", "rowwise", "view"), "rowwise": ("elementwise", "view")}
        if op.kind in joinable:
            p = can_join(prod, joinable[op.kind])
            if p is None:
                new_piece(op.kind, op)
                continue
            if op.kind == "rowwise" or p.family == "view":
                p.family = op.kind
            p.ops.append(op)
            piece_of[op.name] = p
            continue
        new_piece("torch", op)

    # Inputs, outputs, cost and DSL coverage of each piece.
    inside_users: Dict[str, int] = {}
    for o in g.ops:
        for i in o.inputs:
            if i in by_name and piece_of[i] is piece_of[o.name]:
                inside_users[i] = inside_users.get(i, 0) + 1
    shapes = {t["name"]: (t["shape"], t["dtype"]) for t in g.inputs}
    shapes.update({k: (v["shape"], v["dtype"]) for k, v in g.params.items()})
    for p in pieces:
        names = {o.name for o in p.ops}
        ins: List[str] = []
        for o in p.ops:
            for i in o.inputs:
                if i not in names and i not in ins:
                    ins.append(i)
        p.inputs = ins
        p.outputs = [o.name for o in p.ops if o.users > inside_users.get(o.name, 0) or o is p.ops[-1]]
        p.flops = sum(o.flops for o in p.ops)
        b = 0.0
        for i in ins:
            if i in by_name:
                b += by_name[i].out_bytes
            elif i in shapes:
                shape, dt = shapes[i]
                n = 1
                for d in shape:
                    n *= d
                b += n * _elem_size(dt)
        b += sum(by_name[o].out_bytes for o in p.outputs)
        p.bytes = b
        ops = [o.op for o in p.ops if o.kind != "view"]
        if p.family == "gemm":
            p.dsl = p.ops[0].op in ("linear", "matmul", "mm", "bmm", "addmm", "einsum")
            p.reason = "" if p.dsl else f"{p.ops[0].op} is not a DSL GEMM form"
        elif p.family == "elementwise":
            p.dsl = True
        elif p.family == "rowwise":
            bad = [o for o in ops if o not in _DSL_ROWWISE and by_name_kind(p, o) == "rowwise"]
            p.dsl = not bad
            p.reason = "" if p.dsl else f"{', '.join(sorted(set(bad)))} has no DSL family yet"
        elif p.family == "conv":
            p.reason = "in this cut of the op graph a convolution stays a cuDNN call (stitch.py's plan lowers 1-D and 2-D ones)"
        elif p.family == "view":
            p.reason = "moves no data"
        else:
            p.reason = f"{', '.join(ops)} stays a PyTorch call"
    return pieces


def by_name_kind(p: Piece, op_name: str) -> str:
    for o in p.ops:
        if o.op == op_name:
            return o.kind
    return ""
