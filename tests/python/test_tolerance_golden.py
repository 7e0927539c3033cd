"""The Python worker's comparator (ksol_torch.worker._compare_values) against
tests/golden/tolerance/cases.json, the cases the C++ harness's compare_output agrees on
(tests/golden/test_tolerance_golden.cpp): one rule on both sides."""
import json
import math
import os
import re
import unittest

try:
    import torch
    from ksol_torch import worker
    SKIP = ""
except ImportError as e:  # the package's tests run without PyTorch too
    torch = None
    SKIP = f"needs PyTorch and ksol_torch: {e}"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def number(v):
    return float(v) if not isinstance(v, str) else {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]


@unittest.skipIf(bool(SKIP), SKIP)
class ToleranceGolden(unittest.TestCase):
    def test_the_workers_comparator_gives_every_cases_verdict(self):
        with open(os.path.join(ROOT, "tests", "golden", "tolerance", "cases.json")) as fh:
            cases = json.load(fh)["cases"]
        self.assertGreaterEqual(len(cases), 8)
        for c in cases:
            with self.subTest(c["name"]):
                self.assertEqual(c["out_dtype"], "f32")
                self.assertEqual(c["c_out"], 2.0)  # the worker's output term is fixed at 2 ulps
                got = torch.tensor([number(v) for v in c["got"]], dtype=torch.float32)
                ref = torch.tensor([number(v) for v in c["ref"]], dtype=torch.float64)
                run = lambda: worker._compare_values(got, ref, c["accumulation"], c["rtol_scale"], 0, "golden",
                                                     u_acc=c["u_acc"], floor_frac=c["floor_frac"])
                want = c["expect"]
                if want["ok"]:
                    self.assertLessEqual(run(), 1.0)
                    continue
                with self.assertRaises(worker.GateFailure) as f:
                    run()
                self.assertEqual((f.exception.gate, f.exception.error_class), ("correctness", "wrong_result"))
                if want["special"]:
                    self.assertRegex(f.exception.message, r"NaN|Inf")
                else:
                    m = re.search(r"(\d+) of (\d+) elements out of tolerance", f.exception.message)
                    self.assertIsNotNone(m, f.exception.message)
                    self.assertEqual(int(m.group(1)), want["bad"], f.exception.message)


if __name__ == "__main__":
    unittest.main()
