"""The Inductor path's command (python3 -m ksol.inductor_path): `parse` on the hand-written output
code of tests/python/inductor/ (its text form and the regions' problem files), its error for a
form it does not know, `optimize` where this machine cannot run it (it says why and the fx path's
answer stands), the choice written into both reports; and, on a GPU with PyTorch 2 and Triton,
a real capture: every kernel of a small module's output code read, bound and recorded."""
import json
import os
import subprocess
import sys
import unittest

from fixtures import ROOT, TempDir, item_one_program, needs_torch, torch, write_run
from ksol import inductor_path as ip
from test_inductor_wrapper import fixture, text_of


def read(path):
    with open(path) as fh:
        return fh.read()


def load(path):
    return json.loads(read(path))


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "ksol.inductor_path", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


class Parse(TempDir):
    def test_parse_prints_the_program_and_regions(self):
        r = run("parse", fixture("extern_mm_epilogue"), "--regions", self.path("regions"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("extern addmm(arg2_1, arg0_1, arg1_1 as f32[256, 64][1, 256], alpha=1, beta=1, out=buf0)\n", r.stdout)
        self.assertIn("region triton_poi_fused_gelu_1\n", r.stdout)
        self.assertEqual(sorted(os.listdir(self.path("regions"))), ["triton_poi_fused_gelu_1.py", "triton_poi_fused_mul_relu_0.py"])

    def test_parse_says_why_a_kernel_has_no_region(self):
        r = run("parse", fixture("layer_norm"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no region: triton_red_fused_native_layer_norm_1: out_ptr0 (buf4) stores the fragment's write 0", r.stdout)

    def test_parse_error(self):
        path = self.write("bad.py", text_of("pointwise_fusion").replace("            del arg0_1\n", "            hook(arg0_1)\n"))
        r = run("parse", path)
        self.assertEqual(r.returncode, 1)
        line = [i for i, l in enumerate(read(path).splitlines(), 1) if "hook(arg0_1)" in l][0]
        self.assertEqual(r.stderr.strip(), f"{path}:{line}: error: a call this reader does not know: hook(arg0_1)")


class Choice(TempDir):
    def test_choice_written_into_both_reports(self):
        folder = self.path("run")
        write_run(folder, "/p/Net.py", item_one_program(use_baseline=True))
        with open(os.path.join(folder, "report.md"), "w") as fh:
            fh.write("# report\n")
        os.makedirs(os.path.join(folder, "inductor"))
        ind = {"path": "inductor", "status": "ok", "answer": "inductor+ksol", "answer_us": 80.0, "compiled_us": 100.0}
        with open(os.path.join(folder, "inductor", ip.REPORT), "w") as fh:
            json.dump(ind, fh)
        results = os.path.join(folder, "results.json")
        choice = ip.choose_paths(results, ind)
        ip.record_choice(results, os.path.join(folder, "inductor"), choice)
        doc = load(results)
        self.assertEqual(doc["path"]["chosen"], "inductor")
        self.assertEqual(doc["path"]["inductor_report"], "inductor/inductor.json")
        self.assertEqual(doc["path"]["fx"]["answer"], "compile")
        self.assertEqual(load(os.path.join(folder, "inductor", ip.REPORT))["choice"]["chosen"], "inductor")
        md = read(os.path.join(folder, "report.md"))
        self.assertIn("## Path\n\nReturned: **inductor** (inductor: inductor+ksol 80.00 us, 1.250x over torch.compile", md)
        self.assertIn("| fx | compile | 100.00 | 100.00 | 1.000x |", md)


@needs_torch
class OptimizeWithoutWhatItNeeds(TempDir):
    @unittest.skipIf(torch is not None and hasattr(torch, "compile") and torch.cuda.is_available(),
                     "this machine can run the Inductor path: the skip is what is tested here")
    def test_skipped_with_the_reason_and_fx_chosen(self):
        problem = os.path.join(ROOT, "tests", "torch", "problems", "02_softmax.py")
        folder = self.path("run")
        write_run(folder, problem, item_one_program(use_baseline=True))
        r = run("optimize", problem, "--report", os.path.join(folder, "inductor"), "--fx-results", os.path.join(folder, "results.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = load(os.path.join(folder, "inductor", ip.REPORT))
        self.assertEqual(doc["status"], "skipped")
        self.assertTrue(doc["reason"].startswith("the Inductor path needs PyTorch 2 with Triton and a GPU: "), doc["reason"])
        path = load(os.path.join(folder, "results.json"))["path"]
        self.assertEqual(path["chosen"], "fx")
        self.assertIn("inductor: the Inductor path needs PyTorch 2 with Triton and a GPU", path["why"])
        self.assertEqual(json.loads(r.stdout.strip().splitlines()[-1])["status"], "skipped")


@needs_torch
class CaptureOnTheGPU(unittest.TestCase):
    """A real torch.compile capture: needs PyTorch 2 with Triton and a CUDA device."""

    def setUp(self):
        from ksol import inductor_capture as ic
        why = ic.available()
        if why:
            self.skipTest(f"the Inductor capture needs PyTorch 2 with Triton and a GPU: {why}")

    def test_capture_bind_record(self):
        from ksol import inductor_capture as ic
        from ksol import inductor_region as ir

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(256, 128)

            def forward(self, x, b):
                return torch.softmax(torch.relu(self.fc(x)) * 0.5 + b, dim=-1), torch.sigmoid(x).sum(0)

        model = Net().cuda().eval()
        inputs = [torch.randn(64, 256, device="cuda"), torch.randn(128, device="cuda")]
        cap = ic.capture(model, inputs, "Net")
        self.assertGreaterEqual(len(cap.graphs), 1)
        bound = 0
        for g in cap.graphs:
            for launch in g.program.launches():
                try:
                    region = ir.bind(g.program, launch)
                except ir.RegionError:
                    continue
                recs = ic.record(cap, g, launch, inputs)
                self.assertEqual(len(recs), 1)
                ns = {}
                exec(compile(ir.problem_source(region, "Net"), "region.py", "exec"), ns)
                with torch.no_grad():
                    got = ns["Model"]()(*[recs[0].inputs[p.param] for p in region.inputs])
                got = list(got) if isinstance(got, (list, tuple)) else [got]
                for p, t in zip(region.outputs, got):
                    self.assertEqual(ic.compare(t.reshape(recs[0].outputs[p.param].shape).contiguous(), recs[0].outputs[p.param],
                                                region.accumulation), "", launch.kernel)
                bound += 1
        self.assertGreater(bound, 0)


if __name__ == "__main__":
    unittest.main()
