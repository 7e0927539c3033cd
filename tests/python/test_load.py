"""ksol.load on run folders whose kernels are host libraries built to ksol's C ABI (the CPU's
stand-in for a run's CUDA kernels, as --emulate's are): one program for the whole forward, a
stitched piece around a kept PyTorch call, a run that returned PyTorch. The module is verified
against the original on load; a wrong library is caught; other shapes fall back to PyTorch."""
import os
import shutil
import warnings

import ksol
from fixtures import TempDir, build_library, item_not_lowered, item_one_program, item_stitched, needs_cc, needs_torch, torch, \
    write_run
from ksol.serialize import write_problem

if torch is not None:
    class LinearReLU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class CumsumReLUScale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(16))

        def forward(self, x):
            return torch.relu(torch.cumsum(x, dim=0)) * self.scale  # over the rows: kept as a PyTorch call

    class TanhCumsumReLUScale(CumsumReLUScale):
        def forward(self, x):
            return super().forward(torch.tanh(x))  # two pieces: the tanh, and relu(.) * scale

    class LinearReLUScale(CumsumReLUScale):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.relu(self.fc(x)) * self.scale  # own plan: one GEMM program; vendor-call plan: the linear kept


@needs_torch
@needs_cc
class LoadOneProgram(TempDir):
    def make_run(self, *flags, emulated=True):
        torch.manual_seed(0)
        self.net = LinearReLU().eval()
        files = write_problem(self.net, [torch.randn(8, 32)], self.path("run"), "LinearReLU")
        write_run(self.path("run"), files.path, item_one_program(), emulated=emulated)
        with open(self.path("run", "best.cu"), "w") as fh:
            fh.write("// the run's CUDA (the library below stands in for its build)\n")
        os.makedirs(self.path("run", "lib"))
        build_library("linear_relu.c", self.path("run", "lib", "best.so"), *flags)
        return self.path("run")

    def test_loads_verifies_and_runs_the_library(self):
        m = ksol.load(self.make_run())
        self.assertIsInstance(m, ksol.KsolModule)
        self.assertTrue(m.uses_ksol_kernels)
        self.assertEqual(m.ksol_result.answer, "kernel")
        v = m.ksol_verification
        self.assertEqual(len(v["cases"]), 9)  # three fresh seeds x normal, heavy, spiky
        self.assertLess(v["worst_error_over_tolerance"], 1.0)
        self.assertEqual(len(v["seeds"]), 3)
        x = torch.randn(8, 32)
        with torch.no_grad():
            want = self.net(x)
        y = m(x)
        self.assertEqual(y.grad_fn, None)
        self.assertTrue(torch.allclose(y, want, rtol=1e-5, atol=1e-6))
        self.assertIn("ksol returned its kernel gemm_model_f32_64x64x16_simt", repr(m))

    def test_a_wrong_library_fails_verification(self):
        run = self.make_run("-DKSOL_WRONG")
        with self.assertRaises(ksol.VerificationError) as c:
            ksol.load(run, seeds=[5, 6, 7])
        e = c.exception
        self.assertEqual((e.gate, e.error_class), ("correctness", "wrong_result"))
        self.assertIn("does not match the original (fp32, seeds [5, 6, 7]): output 0: ", str(e))
        self.assertIn("elements out of tolerance; worst at flat index 3", str(e))
        self.assertIsNone(ksol.load(run, verify=False).ksol_verification)  # verify=False: loaded as it is

    def test_other_shapes_and_training_mode_run_pytorch(self):
        m = ksol.load(self.make_run())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(tuple(m(torch.randn(3, 32)).shape), (3, 16))
            m.train()
            m(torch.randn(8, 32))
        self.assertEqual(len(w), 2)
        self.assertIn("built for inputs (float32 [8, 32]), not (float32 [3, 32])", str(w[0].message))
        self.assertIn("training mode", str(w[1].message))

    def test_a_missing_library(self):
        run = self.make_run()
        shutil.rmtree(os.path.join(run, "lib"))
        with self.assertRaises(ksol.RunDirError) as c:
            ksol.load(run)
        self.assertIn("the library of best is not there", str(c.exception))

    def test_cuda_kernels_need_a_gpu(self):
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU")
        with self.assertRaises(ksol.NoGPUError) as c:
            ksol.load(self.make_run(emulated=False))
        self.assertIn("the run's kernels are CUDA libraries and this process sees no CUDA device", str(c.exception))


@needs_torch
@needs_cc
class LoadStitched(TempDir):
    def test_the_piece_around_the_kept_call(self):
        torch.manual_seed(0)
        net = CumsumReLUScale().eval()
        files = write_problem(net, [torch.randn(8, 16)], self.path("run"), "CumsumReLUScale")
        piece = {"nodes": ["relu", "mul"], "so": build_library("relu_scale_piece.c", self.path("piece.so")), "dims": [8, 16],
                 "family": "elementwise", "kernel": "elementwise_model_f32_t256_v1_i1", "program": "..."}
        write_run(self.path("run"), files.path, item_stitched([piece]), emulated=True)
        m = ksol.load(self.path("run"))
        self.assertEqual(m.ksol_result.answer, "stitched")
        self.assertEqual(len(m.ksol_verification["cases"]), 9)
        x = torch.randn(8, 16)
        with torch.no_grad():
            self.assertTrue(torch.allclose(m(x), net(x), rtol=1e-6, atol=0))
        self.assertIn("_ksol_piece0", m.stitched.code)

        # A plan that is not the run's (the module changed since) is refused.
        piece["nodes"] = ["relu"]
        write_run(self.path("run"), files.path, item_stitched([piece]), emulated=True)
        with self.assertRaises(ksol.RunDirError) as c:
            ksol.load(self.path("run"))
        self.assertIn("the module's plan has pieces [['relu', 'mul']], the run's are [['relu']]", str(c.exception))


    def test_the_vendor_call_plans_piece(self):
        # The run returned the vendor-call plan's stitched module: the linear cuBLAS's through
        # PyTorch, relu(.) * scale the piece; the module is split that way (its own plan is one
        # GEMM program, whose pieces a run without "plan": "vendor" would have).
        torch.manual_seed(0)
        net = LinearReLUScale().eval()
        files = write_problem(net, [torch.randn(8, 32)], self.path("run"), "LinearReLUScale")
        piece = {"nodes": ["relu", "mul"], "so": build_library("relu_scale_piece.c", self.path("piece.so")), "dims": [8, 16],
                 "family": "elementwise", "kernel": "elementwise_model_f32_t256_v1_i1", "program": "...", "vendor": True}
        item = item_stitched([piece])
        item["plan"] = "vendor"
        write_run(self.path("run"), files.path, item, emulated=True)
        m = ksol.load(self.path("run"))
        self.assertTrue(m.ksol_result.vendor)
        x = torch.randn(8, 32)
        with torch.no_grad():
            self.assertTrue(torch.allclose(m(x), net(x), rtol=1e-5, atol=1e-6))
        self.assertIn("_ksol_piece0", m.stitched.code)
        del item["plan"]
        write_run(self.path("run"), files.path, item, emulated=True)
        with self.assertRaises(ksol.RunDirError) as c:
            ksol.load(self.path("run"))
        self.assertIn("the run's are [['relu', 'mul']]", str(c.exception))

    def test_a_piece_kept_as_pytorch_calls(self):
        # The run kept the tanh as PyTorch's (its calls were faster): no library is loaded for it.
        torch.manual_seed(0)
        net = TanhCumsumReLUScale().eval()
        files = write_problem(net, [torch.randn(8, 16)], self.path("run"), "TanhCumsumReLUScale")
        kept = {"nodes": ["tanh"], "family": "elementwise", "keep": True}
        piece = {"nodes": ["relu", "mul"], "so": build_library("relu_scale_piece.c", self.path("piece.so")), "dims": [8, 16],
                 "family": "elementwise", "kernel": "elementwise_model_f32_t256_v1_i1", "program": "..."}
        write_run(self.path("run"), files.path, item_stitched([kept, piece]), emulated=True)
        m = ksol.load(self.path("run"))
        self.assertEqual(m.ksol_result.answer, "stitched")
        self.assertEqual(len(m.ksol_kernels), 1)
        x = torch.randn(8, 16)
        with torch.no_grad():
            self.assertTrue(torch.allclose(m(x), net(x), rtol=1e-6, atol=0))
        code = m.stitched.code
        self.assertIn("_ksol_piece1", code)
        self.assertNotIn("_ksol_piece0", code)
        self.assertIn("torch.tanh", code)


@needs_torch
class LoadPyTorch(TempDir):
    def test_the_original_with_the_reason(self):
        files = write_problem(CumsumReLUScale(), [torch.randn(8, 16)], self.path("run"), "CumsumReLUScale")
        write_run(self.path("run"), files.path, item_not_lowered())
        with self.assertLogs("ksol", "WARNING") as logs:
            m = ksol.load(self.path("run"))
        self.assertNotIsInstance(m, ksol.KsolModule)
        self.assertEqual(m.ksol_result.answer, "pytorch")
        self.assertIn("ksol returned PyTorch itself (compile, 20.0 us): cumsum has no DSL form", logs.output[0])
