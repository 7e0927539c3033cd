"""python3 -m ksol_torch import [--no-screen] [--seed N] FILE...   (JSON on stdout)
   python3 -m ksol_torch report RESULTS.json [--json | --table]
   python3 -m ksol_torch synth FILE [--out JSON] [--precision MODE --device DEV]  (the forward as one DSL program, or why not)
   python3 -m ksol_torch stitch FILE [--out JSON]                  (DSL pieces around ops kept as PyTorch calls)
   python3 -m ksol_torch worker                                     (the evaluation worker, on stdin/stdout)

Driven by `ksol import kernelbench` (docs/TORCH.md); usable alone."""
import argparse
import dataclasses
import json
import sys


def _import_one(path: str, args) -> dict:
    from . import problem, screen, trace

    try:
        prob = problem.load(path)
        # Shapes first, on meta tensors (KernelBench inputs run to gigabytes); real values only
        # for the screening, and only where its float64 work fits the limit.
        try:
            model, inputs = problem.instantiate(prob, args.seed, meta=True)
            g = trace.trace(model, inputs)
            shape_mode = "meta"
        except Exception as e:  # an op without a meta kernel: trace on real tensors instead
            model, inputs = problem.instantiate(prob, args.seed)
            g = trace.trace(model, inputs)
            shape_mode = f"real ({type(e).__name__} on meta tensors)"
        pieces = _plan_pieces(prob, args.seed, g)
        vendor = _vendor_plan(prob, args.seed, g, pieces)
        if args.no_screen:
            sc = screen.Screen("skipped", "--no-screen")
        elif g.flops * 3 > args.screen_max_gflop * 1e9 or g.bytes * 6 > args.screen_max_gb * 1e9:
            sc = screen.Screen("skipped", f"{g.flops / 1e9:.3g} GFLOP and {g.bytes / 1e9:.3g} GB per call are too much for "
                                          f"float64 screening on {args.device} (limits --screen-max-gflop "
                                          f"{args.screen_max_gflop:g} for 3 draws, --screen-max-gb {args.screen_max_gb:g})")
        else:
            model, _ = problem.instantiate(prob, args.seed)
            sc = screen.screen(prob, model, g.flops, args.screen_max_gflop * 1e9, device=args.device)
    except problem.ProblemError as e:
        return {"file": path, "ok": False, "error": str(e)}
    except Exception as e:  # the problem's own code failed past loading: this file only, at its line
        line = problem.line_in_file(path, e)
        return {"file": path, "ok": False, "error": f"{path}:{line}:1: error: {type(e).__name__}: {e}"}
    return {
        "file": path, "ok": True, "problem": prob.name, "traced": g.traced, "trace_reason": g.reason, "shapes_from": shape_mode,
        "inputs": g.inputs, "outputs": g.outputs, "parameters": len(g.params), "flops": g.flops, "bytes": g.bytes,
        "ops": [{"name": o.name, "op": o.op, "kind": o.kind, "shape": o.shape, "dtype": o.dtype, "flops": o.flops}
                for o in g.ops],
        "pieces": pieces,
        "vendor_plan": vendor,
        "screen": dataclasses.asdict(sc),
    }


_VIEWS = ("view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "getitem", "getattr", "detach", "clone", "dropout")


def _vendor_plan(prob, seed: int, g, pieces: list):
    """The vendor-call plan `ksol optimize --plan auto` tries beside the module's own (stitch.py's
    `vendor`): the ops it leaves to cuDNN and cuBLAS and its pieces ({"family", "ops"}), or None
    where there is none to try (no convolution or GEMM, no piece around them, or the own plan's
    pieces)."""
    from . import stitch
    from .trace import _canonical

    if not g.traced:
        return None
    try:
        _, _, plan = _meta_then_real(prob, seed, lambda m, i: stitch.split(m, i, vendor=True))
    except Exception:
        return None
    vendor = [k["op"] for k in plan.kept if k.get("vendor")]
    own = [r["nodes"] for r in pieces if r.get("dsl")]
    if not vendor or not plan.pieces or [p.nodes for p in plan.pieces] == own:
        return None
    nodes = {n.name: n for n in plan.gm.graph.nodes}
    return {"vendor": vendor,
            "pieces": [{"family": p.family, "ops": [o for o in (_canonical(nodes[n], plan.gm) for n in p.nodes) if o not in _VIEWS]}
                       for p in plan.pieces]}


def _plan_pieces(prob, seed: int, g) -> list:
    """The pieces `ksol import` reports: stitch.py's plan, the one `ksol optimize` runs (its DSL
    pieces and, in graph order, each op it keeps as a PyTorch call with the reason), with the
    trace's FLOPs and bytes per op. Where the forward cannot be traced or stitched, lower.py's
    cut of the trace (one opaque op for an untraceable forward)."""
    from . import lower, stitch
    from .trace import _canonical

    def from_lower():
        return [{"id": p.id, "family": p.family, "dsl": p.dsl, "reason": p.reason,
                 "ops": [o.op for o in p.ops if o.kind != "view"], "views": [o.op for o in p.ops if o.kind == "view"],
                 "inputs": p.inputs, "outputs": p.outputs, "flops": p.flops, "bytes": p.bytes} for p in lower.lower(g)]

    if not g.traced:
        return from_lower()
    try:
        _, _, plan = _meta_then_real(prob, seed, stitch.split)
    except Exception:  # the plan needs what the trace did not: keep the trace's cut
        return from_lower()
    cost = {o.name: o for o in g.ops}
    order = {n.name: i for i, n in enumerate(plan.gm.graph.nodes)}
    nodes = {n.name: n for n in plan.gm.graph.nodes}
    rows = []
    for p in plan.pieces:
        ops = [_canonical(nodes[n], plan.gm) for n in p.nodes]
        rows.append((order[p.nodes[0]], {"family": p.family, "dsl": True, "reason": "", "nodes": p.nodes,
                                         "ops": [o for o in ops if o not in _VIEWS], "views": [o for o in ops if o in _VIEWS],
                                         "inputs": p.inputs, "outputs": [p.nodes[-1]]}))
    for k in plan.kept:
        view = k["op"] in _VIEWS
        family = "view" if view else "weights" if k["op"] in stitch.WEIGHT_PREP else "torch"
        rows.append((order[k["node"]], {"family": family, "dsl": False, "reason": k["reason"],
                                        "nodes": [k["node"]], "ops": [] if view else [k["op"]], "views": [k["op"]] if view else [],
                                        "inputs": [a.name for a in nodes[k["node"]].all_input_nodes], "outputs": [k["node"]]}))
    out = []
    for i, (_, r) in enumerate(sorted(rows, key=lambda t: t[0])):
        r["id"] = i
        # A decomposed op's nodes are not the trace's: their costs stay in the problem's totals.
        r["flops"] = sum(cost[n].flops for n in r["nodes"] if n in cost)
        r["bytes"] = sum(cost[n].out_bytes for n in r["nodes"] if n in cost)
        out.append(r)
    return out


def _meta_then_real(prob, seed: int, fn):
    """fn(model, inputs) on shape-only (meta) tensors, or on real ones where an op has no meta
    kernel (or the trace needs values): (model, inputs, its result)."""
    from . import problem

    try:
        model, inputs = problem.instantiate(prob, seed, meta=True)
        return model, inputs, fn(model, inputs)
    except Exception:
        model, inputs = problem.instantiate(prob, seed)
        return model, inputs, fn(model, inputs)


def _products(precision, device) -> dict:
    """synth's conv_products and gemm_products (worker.conv_products, worker.matmul_products),
    after the problem's file has run (it may set PyTorch's switches)."""
    from . import worker

    return {"conv_products": worker.conv_products(precision, device), "gemm_products": worker.matmul_products(precision, device)}


def _synth_one(path: str, seed: int, precision=None, device: str = "cuda") -> dict:
    """The module's forward as one DSL program (synth.py), with its costs from the trace; a
    convolution's products in TF32 where `precision` on `device` lets cuDNN use TF32."""
    from . import problem, synth, trace

    try:
        prob = problem.load(path)
        model, inputs, g = _meta_then_real(prob, seed, trace.trace)
        out = synth.synthesize(model, inputs, **_products(precision, device))
        if not out.get("program"):
            out["stitch"] = _stitch_summary(model, inputs)
            if out["stitch"].get("pieces"):
                st = out["stitch"]
                out["reason"] += (f"; cut around the ops kept as PyTorch calls ({', '.join(st['kept']) or 'none'}) it is "
                                  f"{len(st['pieces'])} DSL piece(s) ({', '.join(st['pieces'])}), evaluated stitched back "
                                  "together with the kept calls (each piece searched in turn, the module evaluated whole)")
    except problem.ProblemError as e:
        return {"file": path, "ok": False, "error": str(e)}
    except Exception as e:
        line = problem.line_in_file(path, e)
        return {"file": path, "ok": False, "error": f"{path}:{line}:1: error: {type(e).__name__}: {e}"}
    out.update({"file": path, "ok": True, "problem": prob.name, "flops": g.flops, "bytes": g.bytes,
                "inputs": g.inputs, "outputs": g.outputs})
    return out


def _stitch_summary(model, inputs) -> dict:
    """The families of the DSL pieces stitch.py cuts the forward into, and the ops it keeps."""
    from . import stitch

    try:
        plan = stitch.split(model, inputs)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    views = ("view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "getitem", "getattr")
    return {"pieces": [p.family for p in plan.pieces],
            "kept": [k["op"] for k in plan.kept if k["op"] not in views and k["op"] not in stitch.WEIGHT_PREP],
            "weight_prep": [k["op"] for k in plan.kept if k["op"] in stitch.WEIGHT_PREP]}


def _stitch_one(path: str, seed: int, precision=None, device: str = "cuda", vendor: bool = False) -> dict:
    """The forward cut into DSL pieces around the ops that stay PyTorch calls (stitch.py); their
    convolutions' products as _synth_one's; `vendor`: stitch.split's vendor-call plan."""
    from . import problem, stitch

    try:
        prob = problem.load(path)
        products = _products(precision, device)
        _, _, plan = _meta_then_real(prob, seed, lambda m, i: stitch.split(m, i, vendor=vendor, **products))
    except problem.ProblemError as e:
        return {"file": path, "ok": False, "error": str(e)}
    except Exception as e:
        line = problem.line_in_file(path, e)
        return {"file": path, "ok": False, "error": f"{path}:{line}:1: error: {type(e).__name__}: {e}"}
    out = {"file": path, "ok": True, "problem": prob.name, "ops_in_pieces": stitch.fraction_in_pieces(plan), "vendor": vendor}
    out.update(plan.summary())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ksol_torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="trace, cost, lower and screen KernelBench-format problem files")
    imp.add_argument("files", nargs="+")
    imp.add_argument("--seed", type=int, default=0, help="seed for parameters and example inputs")
    imp.add_argument("--no-screen", action="store_true", help="skip the degenerate-output screening")
    imp.add_argument("--screen-max-gb", type=float, default=2.0,
                     help="skip screening when a float64 call would touch more than this many GB")
    imp.add_argument("--device", default="cpu", help="where the float64 screening runs (cpu, or cuda on a GPU host)")
    imp.add_argument("--json-out", help="write the JSON here instead of to stdout")
    imp.add_argument("--screen-max-gflop", type=float, default=20.0,
                     help="skip screening above this many GFLOP for all draws together (float64 on the CPU)")
    rep = sub.add_parser("report", help="KernelBench-compatible summary of a results file")
    rep.add_argument("results")
    rep.add_argument("--json", action="store_true")
    rep.add_argument("--table", action="store_true", help="a line per problem after the summary")
    sub.add_parser("worker", help="evaluate KernelBench-format candidates (ModelNew) through ksol-worker's line protocol")
    syn = sub.add_parser("synth", help="the module's whole forward as one ksol DSL program, or why not (JSON)")
    syn.add_argument("file")
    syn.add_argument("--seed", type=int, default=0)
    syn.add_argument("--out", help="write the JSON here (not to stdout, which the problem's own code may print to)")
    sti = sub.add_parser("stitch", help="the forward cut into DSL pieces around ops kept as PyTorch calls (JSON)")
    sti.add_argument("file")
    sti.add_argument("--seed", type=int, default=0)
    sti.add_argument("--out", help="write the JSON here (not to stdout)")
    sti.add_argument("--vendor", action="store_true",
                     help="the vendor-call plan: every convolution and GEMM stays PyTorch's call (cuDNN, cuBLAS), the "
                          "ops around them are the pieces")
    for p in (syn, sti):
        p.add_argument("--precision", choices=("default", "strict", "tf32"),
                       help="the precision mode candidates will run under: convolutions (GEMMs) multiply in TF32 where "
                            "it lets cuDNN (matmul) use TF32 on --device (unset: IEEE float32 products)")
        p.add_argument("--device", default="cuda", help="where candidates will run (cuda, or cpu for the emulator)")
    args = ap.parse_args(argv)
    if args.cmd in ("synth", "stitch"):
        r = _synth_one(args.file, args.seed, args.precision, args.device) if args.cmd == "synth" else \
            _stitch_one(args.file, args.seed, args.precision, args.device, args.vendor)
        text = json.dumps(r, indent=1) + "\n"
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
        return 0 if r["ok"] else 2
    if args.cmd == "worker":
        from . import allocator

        allocator.set_default()  # before the worker's first CUDA allocation (allocator.py)
        from . import worker

        return worker.serve()
    if args.cmd == "import":
        try:
            import torch  # noqa: F401
        except ImportError:
            print("error: PyTorch is not importable by " + sys.executable + " (setup.sh installs python3-torch)",
                  file=sys.stderr)
            return 3
        out = []
        for f in args.files:
            out.append(_import_one(f, args))
            print(f"  {f}: {'ok' if out[-1]['ok'] else 'error'}", file=sys.stderr, flush=True)
        text = json.dumps(out, indent=1) + "\n"
        if args.json_out:
            with open(args.json_out + ".tmp", "w") as fh:
                fh.write(text)
            import os
            os.replace(args.json_out + ".tmp", args.json_out)
        else:
            sys.stdout.write(text)
        return 0 if all(o["ok"] for o in out) else 2
    from . import report

    with open(args.results) as fh:
        doc = json.load(fh)
    # ksol eval-module's or ksol optimize FILE.py's JSON (one document or a list), or results
    # already in report's form.
    docs = [doc] if isinstance(doc, dict) else doc
    is_doc = bool(docs) and isinstance(docs[0], dict) and "results" in docs[0]
    is_opt = is_doc and any("stop_reason" in r for d in docs for r in d.get("results", []))
    rs = report.from_optimize_module(docs) if is_opt else report.from_eval_module(docs) if is_doc else doc
    s = report.summarize(rs)
    print(json.dumps(s, indent=1) if args.json else report.format_summary(s))
    if args.table and not args.json:
        print(report.format_table(rs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
