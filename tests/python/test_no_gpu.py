"""Without a GPU, ksol.optimize runs the real `ksol optimize` (build/ksol), which traces, lowers
and compiles the module, then stops with exit status 77 and says why in its first line: the
package raises NoGPUError with that reason, notice and JSON. The example script ends the same
way, with ksol's exit status."""
import os
import subprocess
import sys

import ksol
from fixtures import ROOT, TempDir, needs_torch, torch

# The ksol under test: the build folder's (ctest sets KSOL_TEST_BIN_DIR to it), else the tree's build/.
KSOL = os.path.join(os.environ.get("KSOL_TEST_BIN_DIR") or os.path.join(ROOT, "build"), "ksol")


def skip_unless_no_gpu(test):
    if not os.path.exists(KSOL):
        test.skipTest(f"needs {KSOL} (./setup.sh builds it)")
    if torch.cuda.is_available():
        test.skipTest("this machine has a GPU: the no-GPU path does not run")


if torch is not None:
    class Softsign(torch.nn.Module):
        def forward(self, x):
            return x / (1 + torch.abs(x))


@needs_torch
class NoGPU(TempDir):
    def test_optimize_raises_no_gpu_after_ksol_checked_the_module(self):
        skip_unless_no_gpu(self)
        with self.assertRaises(ksol.NoGPUError) as c:
            ksol.optimize(Softsign(), [torch.randn(64, 256)], budget_seconds=5, run_dir=self.path("run"), ksol_bin=KSOL)
        e = c.exception
        self.assertEqual(e.exit_status, 77)
        self.assertEqual(e.reason, "no CUDA device visible to PyTorch: candidates run on the CPU")
        self.assertTrue(e.notice.startswith("ksol optimize: no GPU (no CUDA device visible to PyTorch"), e.notice)
        self.assertEqual((e.details["gpu"], e.details["lowered"], e.details["family"]), (False, True, "elementwise"))
        self.assertEqual(e.run_dir, self.path("run"))
        self.assertTrue(str(e).startswith("no GPU (no CUDA device visible to PyTorch: candidates run on the CPU): ksol traced "
                                          "Softsign and its forward is one DSL program (elementwise) that compiles, but timing"), e)
        self.assertTrue(os.path.exists(self.path("run", "Softsign.py")))
        with open(self.path("run", "ksol.log")) as fh:
            self.assertIn("seed elementwise_model_f32", fh.read())

    def test_the_example_stops_with_ksols_no_gpu_status(self):
        skip_unless_no_gpu(self)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PATH=os.path.dirname(KSOL) + os.pathsep + os.environ["PATH"])
        p = subprocess.run([sys.executable, os.path.join(ROOT, "python", "examples", "optimize_module.py")], cwd=self.tmp,
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 77, p.stdout + p.stderr)
        self.assertIn("no GPU (no CUDA device visible to PyTorch", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


class NoGPUMessage(TempDir):
    def test_pieces_left_as_pytorch_calls_are_not_counted_as_compiled(self):
        from ksol.optimize import _no_gpu
        doc = {"reason": "no CUDA device", "lowered": False,
               "pieces": [{"nodes": ["relu"], "family": "elementwise", "kernel": "elementwise_model_f32_t256_v4_i1"},
                          {"nodes": ["max_pool2d"], "family": "direct", "kernel": "", "keep": True, "why": "does not compile"}]}
        e = _no_gpu(doc, "", self.path("run"), "Net")
        self.assertIn("it was cut into 1 DSL piece(s) that compile", str(e))
