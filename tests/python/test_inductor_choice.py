"""The Inductor path's two decisions (python/ksol/inductor_choice.py) against scripted timings: which
kernel replacements stay in the compiled model (each only if the whole model is verified with it
and gets faster), and which path `ksol optimize FILE.py` returns. No PyTorch, no GPU."""
import unittest

from fixtures import item_not_lowered, item_one_program, item_stitched
from ksol import inductor_choice as ch


class Scripted:
    """time_model and verify from tables: the whole model's time per set of replaced kernels,
    and the sets that fail the float64 gate. Every call is logged."""

    def __init__(self, times, failing=(), again=None):
        self.times, self.failing, self.again, self.calls = times, failing, again or {}, []

    def time_model(self, names):
        key = frozenset(names)
        self.calls.append(("time", sorted(names)))
        seen = sum(1 for c in self.calls if c == ("time", sorted(names)))
        if seen > 1 and key in self.again:
            return ch.Timing(self.again[key])
        return ch.Timing(self.times[key])

    def verify(self, names):
        self.calls.append(("verify", sorted(names)))
        return "correctness: output 0 out of tolerance" if any(n in self.failing for n in names) else ""


def cands(**gains):
    return [ch.Candidate(n, g) for n, g in gains.items()]


class KeepIfFaster(unittest.TestCase):
    def test_each_kept_only_if_the_whole_model_gets_faster(self):
        s = Scripted({frozenset(): 100.0, frozenset({"a"}): 90.0, frozenset({"a", "b"}): 89.95, frozenset({"a", "c"}): 80.0})
        sel = ch.keep_if_faster(cands(a=12.0, b=8.0, c=5.0), s.time_model, s.verify)
        self.assertEqual(sel.kept, ["a", "c"])
        self.assertEqual((sel.base.median_us, sel.final.median_us), (100.0, 80.0))
        self.assertAlmostEqual(sel.speedup, 1.25)
        self.assertEqual([(r.get("kernel"), r["kept"]) for r in sel.log], [("a", True), ("b", False), ("c", True), (None, True)])
        self.assertEqual(sel.log[1]["why"], "the whole model 89.95 us against 90.00 us without it: not 1% faster")
        # The largest gain first; the final set timed again beside the compiled model.
        self.assertEqual([c for c in s.calls if c[0] == "verify"], [("verify", ["a"]), ("verify", ["a", "b"]), ("verify", ["a", "c"])])
        self.assertEqual(s.calls[-2:], [("time", []), ("time", ["a", "c"])])

    def test_a_replacement_that_fails_the_gate_is_not_timed(self):
        s = Scripted({frozenset(): 100.0, frozenset({"b"}): 50.0}, failing={"a"})
        sel = ch.keep_if_faster(cands(a=30.0, b=10.0), s.time_model, s.verify)
        self.assertEqual(sel.kept, ["b"])
        self.assertEqual(sel.log[0], {"kernel": "a", "kept": False, "why": "the whole model failed with it: correctness: output 0 out "
                                                                            "of tolerance"})
        self.assertNotIn(("time", ["a"]), s.calls)

    def test_slower_whole_model_keeps_none(self):
        s = Scripted({frozenset(): 100.0, frozenset({"a"}): 104.0})
        sel = ch.keep_if_faster(cands(a=3.0), s.time_model, s.verify)
        self.assertEqual((sel.kept, sel.final, sel.speedup), ([], None, 1.0))

    def test_the_final_check_drops_a_gain_that_does_not_hold(self):
        # Faster once (noise), not when timed again beside the compiled model.
        s = Scripted({frozenset(): 100.0, frozenset({"a"}): 95.0}, again={frozenset({"a"}): 99.8})
        sel = ch.keep_if_faster(cands(a=3.0), s.time_model, s.verify)
        self.assertEqual(sel.kept, [])
        self.assertEqual(sel.log[-1]["why"], "timed again, the model with 1 replacement(s) (99.80 us) is not 1% faster than the "
                                             "compiled model (100.00 us): none kept")

    def test_min_gain(self):
        s = Scripted({frozenset(): 100.0, frozenset({"a"}): 99.0})
        self.assertEqual(ch.keep_if_faster(cands(a=1.0), s.time_model, s.verify, min_gain=0.005).kept, ["a"])
        s = Scripted({frozenset(): 100.0, frozenset({"a"}): 99.0})
        self.assertEqual(ch.keep_if_faster(cands(a=1.0), s.time_model, s.verify, min_gain=0.02).kept, [])

    def test_no_candidates(self):
        s = Scripted({frozenset(): 100.0})
        sel = ch.keep_if_faster([], s.time_model, s.verify)
        self.assertEqual((sel.kept, sel.base.median_us, sel.log), ([], 100.0, []))


class Choose(unittest.TestCase):
    def test_the_larger_speedup_over_torch_compile_wins(self):
        fx = ch.PathResult("fx", True, "compile", 100.0, 100.0)
        ind = ch.PathResult("inductor", True, "inductor+ksol", 80.0, 100.0)
        c = ch.choose(fx, ind)
        self.assertEqual(c.path, "inductor")
        self.assertEqual(c.why, "inductor: inductor+ksol 80.00 us, 1.250x over torch.compile (100.00 us) against fx: compile 100.00 us, "
                                "1.000x over torch.compile (100.00 us)")

    def test_ratios_not_times_are_compared(self):
        # The fx path's process timed everything 10% slower; its kernel is still 1.3x its torch.compile.
        fx = ch.PathResult("fx", True, "kernel", 85.0, 110.5)
        ind = ch.PathResult("inductor", True, "inductor+ksol", 80.0, 100.0)
        self.assertEqual(ch.choose(fx, ind).path, "fx")

    def test_a_tie_goes_to_fx(self):
        c = ch.choose(ch.PathResult("fx", True, "compile", 100.0, 100.0), ch.PathResult("inductor", True, "compile", 101.0, 101.0))
        self.assertEqual(c.path, "fx")
        self.assertTrue(c.why.endswith("(a tie goes to fx)"))

    def test_eager_faster_than_compile_is_fx_s_answer(self):
        c = ch.choose(ch.PathResult("fx", True, "eager", 90.0, 100.0), ch.PathResult("inductor", True, "compile", 100.0, 100.0))
        self.assertEqual(c.path, "fx")

    def test_one_path_failed(self):
        fx = ch.PathResult("fx", True, "stitched", 50.0, 60.0)
        ind = ch.PathResult("inductor", False, reason="capture: no Inductor graph")
        c = ch.choose(fx, ind)
        self.assertEqual((c.path, c.why), ("fx", "fx: stitched 50.00 us, 1.200x over torch.compile (60.00 us); inductor: capture: "
                                                 "no Inductor graph"))
        c = ch.choose(None, ch.PathResult("inductor", True, "compile", 10.0, 10.0))
        self.assertEqual((c.path, c.why.split("; ")[1]), ("inductor", "the other path was not run"))

    def test_neither(self):
        c = ch.choose(ch.PathResult("fx", False, reason="no baseline was timed"), ch.PathResult("inductor", False, reason="no GPU"))
        self.assertEqual((c.path, c.why), ("", "neither path gave a timed answer (fx: no baseline was timed; inductor: no GPU)"))
        self.assertEqual(c.to_json()["chosen"], "")

    def test_fx_results_items(self):
        r = ch.fx_result(item_one_program(score_us=80.0))
        self.assertEqual((r.ok, r.answer, r.answer_us, r.compile_us), (True, "kernel", 80.0, 100.0))
        r = ch.fx_result(item_one_program(use_baseline=True))
        self.assertEqual((r.answer, r.answer_us), ("compile", 100.0))
        r = ch.fx_result(item_stitched([], median_us=50.0))
        self.assertEqual((r.answer, r.answer_us, r.compile_us, r.speedup), ("stitched", 50.0, 0.0, 0.0))  # compile not timed
        vendor = dict(item_stitched([], median_us=50.0), plan="vendor")
        self.assertEqual(ch.fx_result(vendor).answer, "stitched-vendor")
        r = ch.fx_result(item_not_lowered())
        self.assertEqual((r.answer, r.answer_us, r.speedup), ("compile", 20.0, 1.0))
        self.assertFalse(ch.fx_result(item_one_program(), emulated=True).ok)


if __name__ == "__main__":
    unittest.main()
