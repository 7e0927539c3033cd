"""The precision contract (--precision default|strict|tf32): the baselines and the candidate run
under the same TF32 switches, the bound's unit roundoff follows the mode and the module's ops, and
every result names the mode. PyTorch on the CPU: the switches are set and read as on a GPU, and the
policy is computed for a "cuda" device by name; what TF32 does to a GPU's numbers needs a GPU.
Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import os
import unittest
from unittest import mock

import torch

from ksol_torch import problem as problem_mod
from ksol_torch import worker

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEM = os.path.join(HERE, "problems", "01_gemm_relu.py")
ON = ("allow_tf32", (True, True))
OFF = ("allow_tf32", (False, False))
CONV_ONLY = ("allow_tf32", (True, False))  # PyTorch's own defaults: cuDNN may use TF32, matmul not


def cand(name):
    return os.path.join(HERE, "candidates", name)


class Flags:
    """The process's TF32 switches set for a test and put back after it."""

    def __init__(self, flags):
        self.flags = flags

    def __enter__(self):
        self.saved = worker._tf32_flags()
        worker._set_tf32_flags(self.flags)

    def __exit__(self, *exc):
        worker._set_tf32_flags(self.saved)


class Modes(unittest.TestCase):
    def test_the_modes_and_the_refusals(self):
        self.assertEqual([worker.check_precision(m) for m in ("default", "strict", "tf32")], ["default", "strict", "tf32"])
        with self.assertRaisesRegex(ValueError, "bf16 is not supported yet"):
            worker.check_precision("bf16")
        with self.assertRaisesRegex(ValueError, "'fp8': one of default, strict, tf32"):
            worker.check_precision("fp8")

    def test_switches_per_mode_in_either_api(self):
        self.assertEqual(worker.precision_flags("default", CONV_ONLY), CONV_ONLY)
        self.assertEqual(worker.precision_flags("strict", CONV_ONLY), OFF)
        self.assertEqual(worker.precision_flags("tf32", CONV_ONLY), ON)
        new = ("fp32_precision", ("none", "ieee"))
        self.assertEqual(worker.precision_flags("strict", new), ("fp32_precision", ("ieee", "ieee")))
        self.assertEqual(worker.precision_flags("tf32", new), ("fp32_precision", ("tf32", "tf32")))
        self.assertEqual(worker.precision_flags("default", new), new)


class Policy(unittest.TestCase):
    """The bound's unit roundoff per mode: the C++ harness's policy units (src/task/task.cpp)."""

    def arith(self, mode, flags, kinds, device="cuda", mm="highest"):
        return worker.precision_policy(mode, flags, kinds, device, mm)["arithmetic"]

    def test_units_are_the_harness_policy_units(self):
        self.assertEqual(worker.U_ACC, {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8})

    def test_default_follows_pytorchs_switches_per_op(self):
        self.assertEqual(self.arith("default", CONV_ONLY, {"conv", "elementwise"}), "tf32")  # cuDNN's TF32
        self.assertEqual(self.arith("default", CONV_ONLY, {"gemm", "elementwise"}), "fp32")  # matmul IEEE
        self.assertEqual(self.arith("default", ON, {"gemm"}), "tf32")  # the file set matmul precision "high"
        self.assertEqual(self.arith("default", ON, {"gemm"}, mm="medium"), "bf16")
        self.assertEqual(self.arith("default", ON, {"elementwise", "rowwise"}), "fp32")  # TF32 touches no such op
        self.assertEqual(self.arith("default", ("fp32_precision", ("none", "ieee")), {"conv"}), "tf32")

    def test_strict_and_tf32(self):
        self.assertEqual(self.arith("strict", OFF, {"gemm", "conv"}), "fp32")
        self.assertEqual(self.arith("tf32", ON, {"gemm"}), "tf32")
        self.assertEqual(self.arith("tf32", ON, {"elementwise"}), "fp32")
        self.assertEqual(self.arith("tf32", ON, set()), "tf32")  # a failed trace: GEMMs and convolutions may be in it

    def test_no_tf32_off_cuda(self):
        p = worker.precision_policy("tf32", ON, {"gemm"}, "cpu")
        self.assertEqual((p["mode"], p["arithmetic"], p["u_acc"]), ("tf32", "fp32", 2.0 ** -24))
        self.assertIn("no TF32 on cpu", p["why"])

    def test_convolution_products_follow_the_mode_and_the_device(self):
        # What synth writes a convolution's products in: TF32 where the mode's switches let cuDNN
        # use it on a CUDA device (the baselines then do), IEEE float32 otherwise.
        with Flags(CONV_ONLY):
            self.assertEqual(worker.conv_products("default", "cuda"), "tf32")
            self.assertEqual(worker.conv_products("tf32", "cuda:0"), "tf32")
            self.assertEqual(worker.conv_products("strict", "cuda"), "fp32")
            self.assertEqual(worker.conv_products("default", "cpu"), "fp32")
            self.assertEqual(worker.conv_products(None, "cuda"), "fp32")
            with self.assertRaisesRegex(ValueError, "'fp8': one of default, strict, tf32"):
                worker.conv_products("fp8", "cuda")
        with Flags(OFF):  # a problem file that turned cuDNN's TF32 off
            self.assertEqual(worker.conv_products("default", "cuda"), "fp32")
            self.assertEqual(worker.conv_products("tf32", "cuda"), "tf32")

    def test_matmul_products_follow_the_mode_and_the_device(self):
        with Flags(CONV_ONLY):  # PyTorch's defaults: matmul stays IEEE
            self.assertEqual(worker.matmul_products("default", "cuda"), "fp32")
            self.assertEqual(worker.matmul_products("tf32", "cuda"), "tf32")
            self.assertEqual(worker.matmul_products("strict", "cuda"), "fp32")
            self.assertEqual(worker.matmul_products("tf32", "cpu"), "fp32")
            self.assertEqual(worker.matmul_products(None, "cuda"), "fp32")
        with Flags(ON):  # a problem file that set matmul precision "high"
            self.assertEqual(worker.matmul_products("default", "cuda"), "tf32")

    def test_the_bound_scales_with_the_unit(self):
        # An error of 1e-4 relative on a 32-term dot product: out of float32's bound, inside TF32's.
        ref = torch.linspace(1.0, 2.0, 1000, dtype=torch.float64)
        got = (ref * (1 + 1e-4)).float()
        with self.assertRaisesRegex(worker.GateFailure, "out of tolerance"):
            worker._compare_values(got, ref, 32.0, 16.0, 0, "test", worker.U_ACC["fp32"])
        ratio = worker._compare_values(got, ref, 32.0, 16.0, 0, "test", worker.U_ACC["tf32"])
        self.assertLess(ratio, 1.0)
        # The default unit is float32's, as before the modes.
        with self.assertRaises(worker.GateFailure):
            worker._compare_values(got, ref, 32.0, 16.0, 0, "test")


class SameSwitches(unittest.TestCase):
    """Baselines and candidate under the same switches, whatever the mode."""

    def seen_in(self, mode, start):
        seen = []
        real = worker.Timer.time

        def spy(timer, fn, args):
            seen.append(worker._tf32_flags())
            return real(timer, fn, args)
        with Flags(start), mock.patch.object(worker.Timer, "time", spy):
            r = worker.evaluate({"problem": PROBLEM, "candidate": cand("gemm_relu_numpy.py"), "device": "cpu",
                                 "seeds": [1, 2, 3], "precision": mode})
            self.assertEqual(worker._tf32_flags(), start)  # put back after the evaluation
        self.assertEqual(r["status"], "ok", r.get("message"))
        return r, seen

    def test_every_mode(self):
        for mode, want in (("default", ON), ("strict", OFF), ("tf32", ON)):
            r, seen = self.seen_in(mode, ON)
            # eager, then the candidate (torch.compile too where PyTorch has it): one set of switches
            self.assertGreaterEqual(len(seen), 2)
            self.assertEqual(set(seen), {want}, mode)
            self.assertEqual(r["precision"]["mode"], mode)
        r, seen = self.seen_in("tf32", OFF)
        self.assertEqual(set(seen), {ON})

    def test_strict_candidates_see_no_tf32_and_default_ones_see_the_users(self):
        with Flags(ON):
            r = worker.evaluate({"problem": PROBLEM, "candidate": cand("gemm_relu_needs_fp32.py"), "device": "cpu",
                                 "seeds": [1, 2, 3], "precision": "strict"})
            self.assertEqual(r["status"], "ok", r.get("message"))
            self.assertTrue(r["kernelbench"]["correct"], r["kernelbench"])
            r = worker.evaluate({"problem": PROBLEM, "candidate": cand("gemm_relu_needs_fp32.py"), "device": "cpu",
                                 "seeds": [1, 2, 3], "baselines": False})
            self.assertIn("called with TF32 allowed", r["message"])
            self.assertEqual(worker._tf32_flags(), ON)
            # An evaluation that raises puts the switches back too.
            with mock.patch.object(worker, "_snapshot", side_effect=RuntimeError("boom")):
                with self.assertRaises(RuntimeError):
                    worker.evaluate({"problem": PROBLEM, "candidate": cand("gemm_relu_numpy.py"), "device": "cpu",
                                     "seeds": [1, 2, 3], "precision": "strict"})
            self.assertEqual(worker._tf32_flags(), ON)

    def test_kernelbench_protocol_runs_both_under_the_modes_switches(self):
        seen = {"model": set(), "cand": set()}
        out = torch.zeros(2)

        def model(*_):
            seen["model"].add(worker._tf32_flags())
            return out

        def candidate(*_):
            seen["cand"].add(worker._tf32_flags())
            return out.clone()
        with Flags(OFF):
            r = worker._kernelbench_protocol(problem_mod.load(PROBLEM), model, candidate, "cpu", 1, flags=ON, trials=2, runs=2)
            self.assertTrue(r["correct"], r)
            self.assertEqual(seen, {"model": {ON}, "cand": {ON}})
            self.assertEqual(worker._tf32_flags(), OFF)

    def test_matmul_precision_medium_survives_the_switches(self):
        saved = torch.get_float32_matmul_precision()
        try:
            torch.set_float32_matmul_precision("medium")
            worker._set_tf32_flags(worker._tf32_flags())
            self.assertEqual(torch.get_float32_matmul_precision(), "medium")
        finally:
            torch.set_float32_matmul_precision(saved)


class ResultsNameTheMode(unittest.TestCase):
    def test_baselines_only_and_refusals(self):
        r = worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True, "screen": False,
                             "precision": "tf32"})
        self.assertEqual(r["precision"]["mode"], "tf32")
        self.assertEqual(r["precision"]["arithmetic"], "fp32")  # the CPU has no TF32
        r = worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True, "screen": False})
        self.assertEqual(r["precision"]["mode"], "default")
        with self.assertRaisesRegex(ValueError, "bf16 is not supported yet"):
            worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True, "precision": "bf16"})

    def test_verify_module_names_its_mode(self):
        prob = problem_mod.load(PROBLEM)
        model = problem_mod.instantiate(prob, 1, inputs=False)[0]
        out = worker.verify_module(prob, model, "cpu", [1, 2, 3], precision="default")
        self.assertEqual(out["precision"]["mode"], "default")

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU: TF32 exists only there")
    def test_a_convolution_on_the_gpu(self):
        conv = os.path.join(HERE, "problems", "03_conv_bn_relu.py")
        got = {}
        for mode in ("default", "strict", "tf32"):
            r = worker.evaluate({"problem": conv, "device": "cuda", "seeds": [1, 2, 3], "baselines_only": True, "screen": False,
                                 "precision": mode})
            got[mode] = r["precision"]["arithmetic"]
            self.assertGreater(r["baselines"]["eager"]["median_us"], 0)
        self.assertEqual(got, {"default": "tf32", "strict": "fp32", "tf32": "tf32"})

if __name__ == "__main__":
    unittest.main()
