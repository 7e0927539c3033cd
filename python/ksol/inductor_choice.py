"""The two decisions of the Inductor path, apart from the GPU so that tests can script the timings:

  keep_if_faster  which verified kernel replacements stay in the compiled model: added one at a
                  time, the largest per-kernel gain first, each kept only if the whole model is
                  verified with it and timed faster than without it; the final set is timed once
                  more against the compiled model and dropped whole unless it is faster.
  choose          which path `ksol optimize FILE.py` returns: the fx lowering's answer or the
                  Inductor path's, by each one's speedup over torch.compile as it measured it.
"""
import dataclasses
from typing import Callable, Dict, List, Optional, Sequence


@dataclasses.dataclass
class Timing:
    median_us: float
    ci_low_us: float = 0.0
    ci_high_us: float = 0.0

    def __post_init__(self):
        self.ci_low_us = self.ci_low_us or self.median_us
        self.ci_high_us = self.ci_high_us or self.median_us


@dataclasses.dataclass
class Candidate:
    name: str            # the kernel it replaces ("g0.triton_poi_fused_add_0")
    gain_us: float       # the Inductor kernel's time minus the replacement's, timed alone


@dataclasses.dataclass
class Selection:
    kept: List[str]
    base: Timing                       # the compiled model
    final: Optional[Timing]            # the compiled model with `kept` in place (None: nothing kept)
    log: List[Dict]                    # one record per candidate tried, and the final check

    @property
    def speedup(self) -> float:
        return self.base.median_us / self.final.median_us if self.final and self.final.median_us > 0 else 1.0


def keep_if_faster(candidates: Sequence[Candidate], time_model: Callable[[List[str]], Timing],
                   verify: Callable[[List[str]], str], min_gain: float = 0.01) -> Selection:
    """The replacements to keep. `time_model(names)` times the whole compiled model with those
    kernels replaced ([] = as Inductor made it); `verify(names)` checks it against the module in
    float64 and returns "" or the failure. A candidate is kept when the model with it (and those
    kept before it) passes and is at least `min_gain` (a fraction) faster than the best so far:
    less is within the noise of two timings of one model. At the end the kept set is timed again
    beside the compiled model, and dropped unless it is still `min_gain` faster."""
    base = time_model([])
    best, kept, log = base, [], []
    for c in sorted(candidates, key=lambda c: -c.gain_us):
        trial = kept + [c.name]
        err = verify(trial)
        if err:
            log.append({"kernel": c.name, "kept": False, "why": f"the whole model failed with it: {err}"})
            continue
        t = time_model(trial)
        rec = {"kernel": c.name, "whole_us": t.median_us, "before_us": best.median_us}
        if t.median_us < best.median_us * (1.0 - min_gain):
            kept, best = trial, t
            rec.update(kept=True, why=f"the whole model {best.median_us:.2f} us, {rec['before_us'] / t.median_us:.3f}x")
        else:
            rec.update(kept=False, why=f"the whole model {t.median_us:.2f} us against {rec['before_us']:.2f} us without it: "
                                       f"not {min_gain:.0%} faster")
        log.append(rec)
    if not kept:
        return Selection([], base, None, log)
    again, final = time_model([]), time_model(kept)
    if final.median_us < again.median_us * (1.0 - min_gain):
        log.append({"final": True, "kept": True, "whole_us": final.median_us, "compiled_us": again.median_us,
                    "why": f"{len(kept)} replacement(s): {again.median_us / final.median_us:.3f}x over the compiled model"})
        return Selection(kept, again, final, log)
    log.append({"final": True, "kept": False, "whole_us": final.median_us, "compiled_us": again.median_us,
                "why": f"timed again, the model with {len(kept)} replacement(s) ({final.median_us:.2f} us) is not {min_gain:.0%} "
                       f"faster than the compiled model ({again.median_us:.2f} us): none kept"})
    return Selection([], again, None, log)


@dataclasses.dataclass
class PathResult:
    """What one path returned, in its own process's timings: `answer` is what it would return
    (fx: "kernel", "stitched", "stitched-vendor", "eager", "compile", "compile_max_autotune"; inductor: "inductor+ksol"
    for the compiled model with replaced kernels, "compile" for it unchanged), `answer_us` that
    answer's median, `compile_us` torch.compile's (default mode) median as the same path timed it."""
    path: str
    ok: bool
    answer: str = ""
    answer_us: float = 0.0
    compile_us: float = 0.0
    reason: str = ""

    @property
    def speedup(self) -> float:
        """Over torch.compile (default mode), as this path measured both."""
        return self.compile_us / self.answer_us if self.ok and self.answer_us > 0 and self.compile_us > 0 else 0.0

    def text(self) -> str:
        if not self.ok:
            return f"{self.path}: {self.reason or 'did not run'}"
        return f"{self.path}: {self.answer} {self.answer_us:.2f} us, {self.speedup:.3f}x over torch.compile ({self.compile_us:.2f} us)"


@dataclasses.dataclass
class Choice:
    path: str                   # "fx" or "inductor" ("" when neither gave an answer)
    why: str
    fx: Optional[PathResult]
    inductor: Optional[PathResult]

    def to_json(self) -> Dict:
        def one(p):
            return None if p is None else {"ok": p.ok, "answer": p.answer, "answer_us": p.answer_us, "compile_us": p.compile_us,
                                            "speedup_vs_compile": p.speedup, "reason": p.reason}
        return {"chosen": self.path, "why": self.why, "fx": one(self.fx), "inductor": one(self.inductor)}


def choose(fx: Optional[PathResult], inductor: Optional[PathResult]) -> Choice:
    """The path whose answer is faster relative to torch.compile as that path timed it: the two ran
    in different processes, so their absolute times are not compared, their ratios to the same
    baseline are. A tie goes to the fx path (its answer needs no torch.compile where it loads)."""
    ran = [p for p in (fx, inductor) if p is not None and p.ok and p.speedup > 0]
    if not ran:
        parts = [p.text() for p in (fx, inductor) if p is not None]
        return Choice("", "neither path gave a timed answer (" + "; ".join(parts) + ")", fx, inductor)
    if len(ran) == 1:
        other = inductor if ran[0] is fx else fx
        why = f"{ran[0].text()}; " + (other.text() if other is not None else "the other path was not run")
        return Choice(ran[0].path, why, fx, inductor)
    f, i = ran
    if i.speedup > f.speedup:
        return Choice("inductor", f"{i.text()} against {f.text()}", fx, inductor)
    return Choice("fx", f"{f.text()} against {i.text()}" + (" (a tie goes to fx)" if i.speedup == f.speedup else ""), fx, inductor)


def fx_result(item: Dict, emulated: bool = False) -> PathResult:
    """The fx path's answer from its results item (src/cli/optimize_module.cpp's results.json)."""
    base = item.get("baseline_us", {}) or {}
    compile_us = float(base.get("compile", 0.0) or 0.0)
    if emulated:
        return PathResult("fx", False, reason="--emulate: the times are the CPU emulator's")
    if not item.get("use_baseline", True):
        if item.get("stop_reason") == "stitched":  # "stitched-vendor": the vendor-call plan's (--plan)
            return PathResult("fx", True, "stitched-vendor" if item.get("plan") == "vendor" else "stitched",
                              float(item.get("stitched", {}).get("median_us", 0.0)), compile_us)
        best = item.get("best") or {}
        return PathResult("fx", True, "kernel", float(best.get("score_us", 0.0)), compile_us)
    name = item.get("best_baseline", "") or ""
    us = float(base.get(name, 0.0) or 0.0)
    if not name or us <= 0:
        return PathResult("fx", False, reason=item.get("reason", "") or "no baseline was timed")
    return PathResult("fx", True, name, us, compile_us, reason=item.get("reason", ""))
