"""python3 -m ksol_torch import [--no-screen] [--seed N] FILE...   (JSON on stdout)
   python3 -m ksol_torch report RESULTS.json [--json]

Driven by `ksol import kernelbench` (docs/TORCH.md); usable alone."""
import argparse
import dataclasses
import json
import sys


def _import_one(path: str, args) -> dict:
    from . import lower, problem, screen, trace

    try:
        prob = problem.load(path)
        model, inputs = problem.instantiate(prob, args.seed)
        g = trace.trace(model, inputs)
        pieces = lower.lower(g)
        sc = screen.screen(prob, model, g.flops, args.screen_max_gflop * 1e9) if not args.no_screen else \
            screen.Screen("skipped", "--no-screen")
    except problem.ProblemError as e:
        return {"file": path, "ok": False, "error": str(e)}
    return {
        "file": path, "ok": True, "problem": prob.name, "traced": g.traced, "trace_reason": g.reason,
        "inputs": g.inputs, "outputs": g.outputs, "parameters": len(g.params), "flops": g.flops, "bytes": g.bytes,
        "ops": [{"name": o.name, "op": o.op, "kind": o.kind, "shape": o.shape, "dtype": o.dtype, "flops": o.flops}
                for o in g.ops],
        "pieces": [{"id": p.id, "family": p.family, "dsl": p.dsl, "reason": p.reason, "ops": [o.op for o in p.ops],
                    "inputs": p.inputs, "outputs": p.outputs, "flops": p.flops, "bytes": p.bytes} for p in pieces],
        "screen": dataclasses.asdict(sc),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m ksol_torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="trace, cost, lower and screen KernelBench-format problem files")
    imp.add_argument("files", nargs="+")
    imp.add_argument("--seed", type=int, default=0, help="seed for parameters and example inputs")
    imp.add_argument("--no-screen", action="store_true", help="skip the degenerate-output screening")
    imp.add_argument("--json-out", help="write the JSON here instead of to stdout")
    imp.add_argument("--screen-max-gflop", type=float, default=20.0,
                     help="skip screening above this many GFLOP for all draws together (float64 on the CPU)")
    rep = sub.add_parser("report", help="KernelBench-compatible summary of a results file")
    rep.add_argument("results")
    rep.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
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

    s = report.summarize(json.load(open(args.results)))
    print(json.dumps(s, indent=1) if args.json else report.format_summary(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
