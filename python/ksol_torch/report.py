"""KernelBench-compatible summary of a set of problem results.

Each result: {"problem": str, "correct": bool, "ksol_us": float|None, "eager_us": float,
"compile_us": float|None, "fell_back": bool, "reason": str, "degenerate": bool, "precision": str}
(optionally "kb": the same timings under KernelBench's own protocol). "precision" is the mode the
baselines and candidates ran under ("default", "strict", "tf32", with the arithmetic its bound
allowed after a colon), or "unstated" for results written before the modes existed.

fast_p against a baseline is KernelBench's metric: the fraction of all problems whose result is
correct and more than p times faster than the baseline (fast_0 is the correctness rate), at p in
PS, against eager, torch.compile and the better of the two ("best"). Problems named after a
KernelBench level (level1/..., level2/...) are also summarized per level. Degenerate problems are
reported apart and left out of the headline figures."""
import math
import os
from typing import Dict, List, Optional

PS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile", "best")


def _base_us(r: Dict, baseline: str) -> Optional[float]:
    """A result's time for a baseline ("eager_us", "compile_us", or "best_us": the better of the
    two that were timed)."""
    if baseline == "best_us":
        return min([x for x in (r.get("eager_us"), r.get("compile_us")) if x], default=None)
    return r.get(baseline)


def _speedup(r: Dict, baseline: str) -> Optional[float]:
    b, k = _base_us(r, baseline), r.get("ksol_us")
    if not r.get("correct") or not b or not k or k <= 0:
        return None
    return b / k


def fast_p(results: List[Dict], baseline: str, p: float) -> float:
    if not results:
        return 0.0
    n = sum(1 for r in results if (s := _speedup(r, baseline)) is not None and s > p)
    return n / len(results)


def geomean(xs: List[float]) -> Optional[float]:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _level(problem: str) -> Optional[str]:
    """A problem's KernelBench level ("level1/5_x" -> "level1"), or None."""
    head = str(problem).split("/", 1)[0]
    return head if "/" in str(problem) and head.startswith("level") else None


def summarize(results: List[Dict], by_level: bool = True) -> Dict:
    main = [r for r in results if not r.get("degenerate")]
    out = {"problems": len(results), "degenerate": [r["problem"] for r in results if r.get("degenerate")],
           "degenerate_why": {r["problem"]: r["degenerate_why"] for r in results if r.get("degenerate") and r.get("degenerate_why")},
           "screened": sum(1 for r in results if r.get("degenerate") or r.get("screen") not in (None, "skipped")),
           "screen_skipped": sum(1 for r in results if r.get("screen") == "skipped"),
           "counted": len(main), "correct": sum(1 for r in main if r.get("correct")),
           "fell_back": [{"problem": r["problem"], "reason": r.get("reason", "")} for r in main if r.get("fell_back")],
           "precisions": sorted({_mode(r.get("precision")) for r in results})}
    out["correctness_rate"] = out["correct"] / len(main) if main else 0.0
    for key in BASELINES:
        out[f"{key}_timed"] = any(_base_us(r, f"{key}_us") for r in main)
    # ksol's own kernel returned: correct and faster than the better of eager and torch.compile.
    out["own_kernel"] = sum(1 for r in main if (x := _speedup(r, "best_us")) is not None and x > 1.0 and not r.get("fell_back"))
    out["own_kernel_rate"] = out["own_kernel"] / len(main) if main else 0.0
    for base in (f"{k}_us" for k in BASELINES):
        key = base.replace("_us", "")
        out[f"fast_p_vs_{key}"] = {str(p): fast_p(main, base, p) for p in PS}
        out[f"geomean_speedup_vs_{key}_correct"] = geomean([s for r in main if (s := _speedup(r, base)) is not None])
        # As delivered: a problem ksol could not beat returns the better of eager and
        # torch.compile, so it counts at that baseline's speed, never below it.
        delivered = []
        for r in main:
            s = _speedup(r, base)
            if s is None or r.get("fell_back"):
                times = [x for x in (r.get("eager_us"), r.get("compile_us")) if x]
                s = _base_us(r, base) / min(times) if _base_us(r, base) and times else None
            delivered.append(s)
        out[f"geomean_speedup_vs_{key}_delivered"] = geomean([s for s in delivered if s])
    kb = [dict(r["kb"], problem=r["problem"]) for r in main if r.get("kb")]
    if kb:
        # KernelBench's protocol (allclose at 1e-2, mean of timed calls, no L2 flush) beside ksol's.
        out["kernelbench_protocol"] = {"problems": len(kb), "correct": sum(1 for r in kb if r.get("correct")),
                                       "fast_p_vs_eager": {str(p): fast_p(kb, "eager_us", p) for p in PS},
                                       "geomean_speedup_vs_eager_correct": geomean([x for r in kb if (x := _speedup(r, "eager_us")) is not None])}
    levels = sorted({lv for r in results if (lv := _level(r.get("problem", "")))})
    if by_level and levels:
        out["levels"] = {lv: summarize([r for r in results if _level(r.get("problem", "")) == lv], by_level=False) for lv in levels}
    return out


def _mode(precision) -> str:
    """The mode of a result's precision ("default: tf32" -> "default")."""
    return str(precision or "unstated").split(":")[0]


def precision_of(doc: Dict, result: Optional[Dict] = None) -> str:
    """A result's precision as "mode: arithmetic" from a ksol JSON: the result's own policy (the
    worker's), else the document's; "unstated" where neither has one."""
    for p in ((result or {}).get("precision"), doc.get("precision")):
        if isinstance(p, dict) and p.get("mode"):
            return p["mode"] + (f": {p['arithmetic']}" if p.get("arithmetic") else "")
        if isinstance(p, str) and p:
            return p
    return "unstated"


def _name(path: str) -> str:
    """A problem's name: its file's stem, after its KernelBench level where it has one
    (level1/5 and level2/5 are different problems)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    level = os.path.basename(os.path.dirname(path))
    return f"{level}/{stem}" if level.startswith("level") else stem


def _best_compile(times: Dict) -> Optional[float]:
    """torch.compile's time: the faster of its modes that were timed (default, and max-autotune
    on GEMM and convolution problems), as a user would pick; None when neither ran."""
    ts = [times.get(k) for k in ("compile", "compile_max_autotune")]
    ts = [t for t in ts if isinstance(t, (int, float)) and t > 0]
    return min(ts) if ts else None


def from_eval_module(docs) -> List[Dict]:
    """Results in the form above from `ksol eval-module --json-out` files (one document, or a list
    of them, one per problem): a problem's result is its fastest candidate that passed every gate;
    none passing, or none faster than the better of eager and torch.compile, is a fall-back, with
    the reason (the first candidate's failure, or the speeds)."""
    if isinstance(docs, dict):
        docs = [docs]
    out = []
    for d in docs:
        res = d.get("results", [])
        ok = [r for r in res if r.get("status") == "ok" and r.get("timing", {}).get("median_us")]
        base = next((r.get("baselines") for r in res if r.get("baselines")), {}) or {}
        eager = base.get("eager", {}).get("median_us")
        comp = _best_compile({k: v.get("median_us") for k, v in base.items() if isinstance(v, dict)})
        name = os.path.splitext(os.path.basename(d.get("problem", "?")))[0]
        r = {"problem": name, "correct": bool(ok), "eager_us": eager, "compile_us": comp, "degenerate": False,
             "ksol_us": min(x["timing"]["median_us"] for x in ok) if ok else None, "fell_back": False, "reason": "",
             "precision": precision_of(d, (ok or res or [None])[0])}
        kb = next((x.get("kernelbench") for x in ok + res if isinstance(x.get("kernelbench"), dict) and "correct" in x["kernelbench"]), None)
        if kb:
            r["kb"] = {"correct": kb["correct"], "ksol_us": kb.get("mean_us"), "eager_us": kb.get("eager_mean_us"), "compile_us": None}
        best_base = min([x for x in (eager, comp) if x], default=None)
        if not ok:
            first = res[0] if res else {}
            r["fell_back"] = True
            r["reason"] = (f"no candidate passed: {first.get('failed_gate', '')}/{first.get('error_class', '')}: "
                           f"{first.get('message', '')}")[:300]
        elif best_base and r["ksol_us"] >= best_base:
            r["fell_back"] = True
            r["reason"] = f"the best candidate ({r['ksol_us']:.2f} us) is not faster than eager/torch.compile ({best_base:.2f} us)"
        out.append(r)
    return out


def from_optimize_module(docs) -> List[Dict]:
    """Results in the form above from `ksol optimize FILE.py --json-out` files (one per problem):
    correct when the search returned a verified kernel (its time is ksol's), a fall-back when the
    forward is not one DSL program or nothing verified beat the better of eager and torch.compile."""
    if isinstance(docs, dict):
        docs = [docs]
    out = []
    for d in docs:
        item = (d.get("results") or [{}])[0]
        base = item.get("baseline_us", {}) or {}
        name = _name(d.get("problem", "?"))
        best = item.get("best") or {}
        if item.get("stop_reason") == "stitched":
            # DSL pieces around kept PyTorch calls, evaluated as one module.
            st = item.get("stitched") or {}
            best = {"score_us": st.get("median_us")} if st.get("status") == "ok" else {}
        verified = bool(best.get("score_us")) and item.get("stop_reason") != "not_lowered"
        r = {"problem": name, "correct": verified, "ksol_us": best.get("score_us") if verified else None,
             "eager_us": base.get("eager") or None, "compile_us": _best_compile(base), "degenerate": False,
             "fell_back": bool(item.get("use_baseline", True)), "reason": "", "form": _form(item),
             "compile_mode": "max-autotune" if _best_compile(base) and _best_compile(base) == base.get("compile_max_autotune") else "default",
             "candidates": item.get("candidates", 0), "seconds": item.get("seconds"), "precision": precision_of(d)}
        if isinstance(item.get("kernels"), dict) and item["kernels"]:
            # The kernels one call launches (counted on a GPU): ksol's answer, and torch.compile's mode that was faster.
            k = item["kernels"]
            r["kernels"] = {"ksol": k.get("ksol"), "eager": k.get("eager"),
                            "compile": k.get("compile_max_autotune" if r["compile_mode"] == "max-autotune" else "compile")}
        kb = item.get("kernelbench")
        if isinstance(kb, dict) and "correct" in kb:
            # KernelBench's protocol on what ksol verified (nothing verified: not correct under it either).
            r["kb"] = {"correct": bool(kb["correct"]) and verified, "ksol_us": kb.get("mean_us"),
                       "eager_us": kb.get("eager_mean_us"), "compile_us": None}
        sc = item.get("screen") or {}
        if sc.get("degenerate"):
            # The worker's screening (screen.py) found the outputs degenerate: reported apart.
            r["degenerate"] = True
            r["degenerate_why"] = f"{sc.get('verdict')}: {sc.get('detail', '')}"
        elif sc:
            r["screen"] = sc.get("verdict")
        if item.get("stop_reason") == "not_lowered":
            r["reason"] = "not one DSL program: " + item.get("reason", "")
        elif item.get("stop_reason") == "killed":
            r["reason"] = item.get("reason", "killed")
        elif item.get("stop_reason") == "stitched" and r["fell_back"]:
            r["reason"] = "stitched: " + item.get("reason", "")
        elif not verified:
            r["reason"] = "no candidate passed every gate"
        elif r["fell_back"]:
            r["reason"] = f"the best verified kernel ({best['score_us']:.2f} us) is not faster than the best baseline"
        _returned_path(d.get("path"), r)
        out.append(r)
    return out


def _returned_path(path, r: Dict) -> None:
    """Where `--path best` returned the Inductor path's answer with ksol's kernels in it
    (results.json's "path": chosen "inductor", answer "inductor+ksol"), that answer is the
    problem's: its speedup over the compiled model as the Inductor path measured both, applied to
    torch.compile's time here (the two paths ran in different processes, so ratios carry over,
    times do not). Any other choice leaves the fx path's result as it is."""
    if not isinstance(path, dict) or path.get("chosen") != "inductor":
        return
    ind = path.get("inductor") or {}
    sp, comp = float(ind.get("speedup_vs_compile") or 0.0), r.get("compile_us")
    if ind.get("answer") != "inductor+ksol" or sp <= 0 or not comp:
        return
    r.update(correct=True, ksol_us=comp / sp, fell_back=False, form="inductor+ksol", reason="",
             path="inductor")
    r.pop("kernels", None)  # counted on the fx path's answer, not this one
    r.pop("kb", None)  # KernelBench's protocol ran on the fx path's kernel, not this answer


def _form(item: Dict) -> str:
    """How the forward was taken: one DSL program, DSL pieces stitched around kept calls, or none."""
    stop = item.get("stop_reason")
    if stop == "not_lowered":
        return "not lowered"
    if stop == "stitched":
        ps = item.get("pieces", [])
        kept = sum(1 for p in ps if p.get("keep"))
        return f"stitched ({len(ps) - kept} piece(s)" + (f", {kept} kept as PyTorch's)" if kept else ")")
    if stop == "killed":
        return "killed"
    return "one DSL program"


def format_table(results: List[Dict]) -> str:
    """A line per problem: how it was taken, ksol's verified time, eager's and torch.compile's,
    the speedups, what is returned and why."""
    def us(x):
        return f"{x:.1f}" if x else "-"

    def ratio(a, b):
        return f"{a / b:.3f}x" if a and b else "-"

    def kernels(k):
        k = k or {}
        return "/".join("-" if k.get(x) is None else str(k[x]) for x in ("ksol", "compile")) if k else "-"

    head = ["problem", "form", "precision", "cands", "ksol us", "eager us", "compile us", "vs eager", "vs compile", "kernels", "returned", "why"]
    rows = []
    for r in results:
        best_base = min([x for x in (r.get("eager_us"), r.get("compile_us")) if x], default=None)
        if r.get("degenerate"):
            returned = "degenerate (apart)"
        elif r.get("fell_back"):
            returned = ("nothing timed" if not best_base else "eager" if best_base == r.get("eager_us")
                        else f"compile ({r.get('compile_mode', 'default')})")
        else:
            returned = "ksol"
        k = r.get("ksol_us")
        rows.append([r["problem"][:48], r.get("form", ""), r.get("precision", "unstated"), str(r.get("candidates", "")), us(k), us(r.get("eager_us")),
                     us(r.get("compile_us")) + ("*" if r.get("compile_mode") == "max-autotune" else ""),
                     ratio(r.get("eager_us"), k), ratio(r.get("compile_us"), k), kernels(r.get("kernels")), returned,
                     (r.get("degenerate_why") or r.get("reason") or "")[:160]])
    widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(x) for x in rows]
    lines.append("ksol us: the verified kernel's (or stitched module's) median, cold L2; compile us: the faster of torch.compile's "
                 "modes (* max-autotune); vs: baseline time over ksol's; kernels: the GPU kernels one call launches, ksol's / "
                 "torch.compile's (counted on a GPU); precision: the mode the baselines and ksol ran under, and the arithmetic its "
                 "bound allowed")
    return "\n".join(lines)


def _versus_lines(s: Dict) -> List[str]:
    """fast_p and the geomean speedups against each baseline, and ksol's own kernels."""
    lines = [f"ksol's own kernel returned (correct, faster than the better of eager and torch.compile): {s.get('own_kernel', 0)} of "
             f"{s['counted']} ({s.get('own_kernel_rate', 0.0) * 100:.1f}%)"]
    for key in BASELINES:
        name = "the better of eager and torch.compile" if key == "best" else key
        if not s.get(f"{key}_timed", True):
            lines.append(f"vs {name}: not timed")
            continue
        fp = s[f"fast_p_vs_{key}"]
        gc, gd = s[f"geomean_speedup_vs_{key}_correct"], s[f"geomean_speedup_vs_{key}_delivered"]
        line = f"vs {name}: " + ", ".join(f"fast_{p} {v * 100:.1f}%" for p, v in fp.items())
        line += f"; geomean speedup {gc:.3f}x over correct" if gc else "; no correct result"
        if gd:
            line += f", {gd:.3f}x as delivered"
        lines.append(line)
    return lines


def format_summary(s: Dict) -> str:
    skipped = f", skipped: {s['screen_skipped']}" if s.get("screen_skipped") else ""
    lines = [f"problems {s['problems']} (screened for degenerate outputs: {s.get('screened', 0)}{skipped}; degenerate, reported apart: "
             f"{len(s['degenerate'])}); counted {s['counted']}",
             f"correct {s['correct']} ({s['correctness_rate'] * 100:.1f}%)"]
    modes = s.get("precisions") or ["unstated"]
    lines.insert(1, f"precision: {', '.join(modes)} (baselines and ksol under the same mode per problem)" if len(modes) == 1 else
                 f"precision: mixed ({', '.join(modes)}): problems ran under different modes, so these figures pool unlike runs")
    lines += _versus_lines(s)
    for lv, ls in (s.get("levels") or {}).items():
        lines.append(f"{lv}: {ls['counted']} counted, correct {ls['correct']} ({ls['correctness_rate'] * 100:.1f}%)")
        lines += ["  " + x for x in _versus_lines(ls)]
    if s.get("kernelbench_protocol"):
        k = s["kernelbench_protocol"]
        g = k["geomean_speedup_vs_eager_correct"]
        lines.append(f"KernelBench's protocol: correct {k['correct']} of {k['problems']}; vs eager: " +
                     ", ".join(f"fast_{p} {v * 100:.1f}%" for p, v in k["fast_p_vs_eager"].items()) +
                     (f"; geomean speedup {g:.3f}x over correct" if g else ""))
    for f in s["fell_back"]:
        lines.append(f"fell back: {f['problem']}: {f['reason']}")
    for d in s["degenerate"]:
        why = s.get("degenerate_why", {}).get(d)
        lines.append(f"degenerate: {d}" + (f": {why}" if why else ""))
    return "\n".join(lines)
