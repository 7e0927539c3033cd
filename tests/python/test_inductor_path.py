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

import time
import types
from unittest import mock

from fixtures import ROOT, TempDir, build_library, item_one_program, item_stitched, needs_cc, needs_torch, torch, write_run
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


# The ksol under test: the build folder's (ctest sets KSOL_TEST_BIN_DIR to it), else the tree's build/.
KSOL = os.path.join(os.environ.get("KSOL_TEST_BIN_DIR") or os.path.join(ROOT, "build"), "ksol")

# An interpreter for `ksol optimize` (KSOL_PYTHON) that scripts what needs a GPU: the worker (a GPU,
# eager 30 us and torch.compile 20 us), the front end (the module is not one DSL program) and the
# Inductor path's search (SCRIPTED_INDUCTOR: its answer's and the compiled model's times); the
# choice between the paths is the real one. With SCRIPTED_CLOBBER, results.json is left unreadable
# after it. The worker marks its exit in SCRIPTED_WORKER_GONE, and the Inductor path fails unless
# it has exited first. Everything else goes to the real interpreter.
FAKE_PYTHON = """#!{python}
import json, os, sys

argv = sys.argv[1:]
if argv[:3] == ["-m", "ksol_torch", "worker"]:
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "hello":
            body = {{"ok": True, "protocol": 1, "gpu": True, "device": {{"name": "scripted"}}}}
        elif req["op"] == "eval" and req.get("baselines_only"):
            body = {{"ok": True, "result": {{"baselines": {{"eager": {{"median_us": 30.0}}, "compile": {{"median_us": 20.0}}}},
                                              "precision": {{"mode": req["precision"]}}}}}}
        elif req["op"] == "exit":
            open(os.environ["SCRIPTED_WORKER_GONE"], "w").close()
            print(json.dumps({{"id": req["id"], "ok": True}}), flush=True)
            sys.exit(0)
        else:
            body = {{"ok": False, "error": "the scripted worker has no " + req["op"]}}
        body["id"] = req["id"]
        print(json.dumps(body), flush=True)
    sys.exit(0)
if argv[:3] == ["-m", "ksol_torch", "synth"]:
    with open(argv[argv.index("--out") + 1], "w") as fh:
        json.dump({{"ok": True, "reason": "scripted: not one DSL program"}}, fh)
    sys.exit(0)
if argv[:3] == ["-m", "ksol.inductor_path", "optimize"]:
    if not os.path.exists(os.environ["SCRIPTED_WORKER_GONE"]):
        sys.exit("scripted: the fx path's worker still runs (and holds GPU memory) while the Inductor path runs")
    from ksol import inductor_path as ip
    answer, answer_us, compiled_us = os.environ["SCRIPTED_INDUCTOR"].split(",")

    def optimize(problem, report, *args):
        doc = {{"path": "inductor", "status": "ok", "answer": answer, "answer_us": float(answer_us),
               "compiled_us": float(compiled_us), "reason": "scripted"}}
        ip._write(os.path.join(report, ip.REPORT), doc)
        return doc

    ip.optimize = optimize
    rc = ip.main(argv[2:])
    if os.environ.get("SCRIPTED_CLOBBER"):
        with open(argv[argv.index("--fx-results") + 1], "w") as fh:
            fh.write("{{")
    sys.exit(rc)
os.execv({python!r}, [{python!r}] + argv)
"""


@needs_torch
class AnswerLine(TempDir):
    """`ksol optimize FILE.py --path best` with a scripted GPU: the line it prints states the path
    that results.json returns, and results.json read back after the Inductor path must be read."""

    def optimize(self, inductor, clobber=False):
        if not os.path.exists(KSOL):
            self.skipTest(f"needs {KSOL} (./setup.sh builds it)")
        fake = self.write("python", FAKE_PYTHON.format(python=sys.executable), mode=0o755)
        problem = self.write("Net.py", NET)
        env = dict(os.environ, KSOL_PYTHON=fake, SCRIPTED_INDUCTOR=inductor, SCRIPTED_WORKER_GONE=self.path("worker-gone"))
        env.pop("SCRIPTED_CLOBBER", None)
        if clobber:
            env["SCRIPTED_CLOBBER"] = "1"
        return subprocess.run([KSOL, "optimize", problem, "--report", self.path("run"), "--budget-seconds", "5"], capture_output=True,
                              text=True, env=env, cwd=self.tmp, timeout=300)

    def test_the_inductor_paths_answer_where_it_won(self):
        r = self.optimize("inductor+ksol,10,20")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(load(self.path("run", "results.json"))["path"]["chosen"], "inductor")
        self.assertTrue(os.path.exists(self.path("worker-gone")), "the fx path's worker was not asked to exit")
        self.assertEqual(r.stdout.splitlines()[-1], "result: inductor path chosen: inductor+ksol 10.00 us, 2.000x over torch.compile "
                                                    "(fx path: compile 20.00 us, 1.000x over torch.compile); precision default")

    def test_the_fx_paths_answer_where_it_won(self):
        r = self.optimize("compile,25,20")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(load(self.path("run", "results.json"))["path"]["chosen"], "fx")
        self.assertEqual(r.stdout.splitlines()[-1], "result: compile, 20.000000 us; fx path chosen: compile 20.00 us, 1.000x over "
                                                    "torch.compile (inductor path: compile 25.00 us, 0.800x over torch.compile); "
                                                    "precision default")

    def test_results_json_unreadable_after_the_inductor_path_is_an_error(self):
        r = self.optimize("inductor+ksol,10,20", clobber=True)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        results = os.path.join("run", "results.json")
        self.assertIn(f"error: {self.path(results)}: cannot be read back after the Inductor path wrote the choice between the "
                      "paths there: [json.exception.parse_error.101] parse error", r.stderr)
        self.assertEqual(r.stdout, "")


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


NET = """import torch


class Model(torch.nn.Module):
    def forward(self, x, b):
        return torch.relu(x + b) * 2.0 + torch.sigmoid(x)


def get_inputs():
    return [torch.randn(64, 128), torch.randn(128)]


def get_init_inputs():
    return []
"""


@needs_torch
@needs_cc
class ScriptedCapture(TempDir):
    """run_path, everything after the capture, on the CPU: the capture is scripted in Python (the
    pointwise fixture's program, a module holding a kernel object that computes the kernel in
    PyTorch and waits 2 ms, and a `compiled` that calls it as `call` does), and the search is a
    host library built to the ABI and a results.json as `ksol optimize` leaves them."""

    def setUp(self):
        super().setUp()
        self.problem = self.write("Net.py", NET)

    def capture(self, recompiles_on=None):
        """`recompiles_on`: an input x on which the compiled model runs another graph, computed in
        eager PyTorch without the kernel object, as a model that recompiled would."""
        from ksol import inductor_capture as ic
        from ksol import inductor_wrapper as iw

        text = text_of("pointwise_fusion")
        module = types.ModuleType("graph_0")

        class InductorKernel:
            def run(self, in_ptr0, in_ptr1, out_ptr0, xnumel, stream=None):
                time.sleep(0.002)
                out_ptr0.copy_(torch.relu(in_ptr0 + in_ptr1) * 2.0 + torch.sigmoid(in_ptr0))

        module.triton_poi_fused_add_mul_relu_sigmoid_0 = InductorKernel()

        def compiled(x, b):
            if recompiles_on is not None and torch.equal(x, recompiles_on):
                return torch.relu(x + b) * 2.0 + torch.sigmoid(x)
            buf0 = torch.empty(64, 128)
            module.triton_poi_fused_add_mul_relu_sigmoid_0.run(x, b, buf0, 8192, stream=None)
            return buf0

        return ic.Capture(compiled, [ic.Graph(0, module, text, iw.parse(text, "graph-0.py"))], 0.0)

    def search_with(self, *flags):
        def search(problem_file, run_dir, seconds):
            os.makedirs(os.path.join(run_dir, "lib"))
            build_library("inductor_pointwise.c", os.path.join(run_dir, "lib", "best.so"), *flags)
            write_run(run_dir, problem_file, item_one_program(score_us=1.0, speedup=2.0), gpu="none")
            return {"exit_status": 0, "run_dir": run_dir, "seconds": seconds}
        return search

    def run_path(self, *flags, search=None, recompiles_on=None, fx_item=None):
        env = ip._Env(self.problem, "default", device="cpu")
        doc = {"path": "inductor", "problem": self.problem, "status": "failed", "kernels": [], "graphs": []}
        report = self.path("inductor")
        os.makedirs(report, exist_ok=True)
        with mock.patch.object(ip, "_log"):
            return ip.run_path(env, self.capture(recompiles_on), doc, report, search or self.search_with(*flags), 10.0,
                               fx_item=fx_item), report

    def test_one_kernel_that_is_the_fx_paths_one_program_is_not_searched_again(self):
        searched = []

        def search(problem_file, run_dir, seconds):
            searched.append(problem_file)
            return {"exit_status": 1, "run_dir": run_dir, "seconds": 0.0}

        searched_fx = dict(item_one_program(), trajectory=[{"status": "ok", "score_us": 80.0}])
        doc, report = self.run_path(search=search, fx_item=searched_fx)
        self.assertEqual(searched, [])
        (k,) = doc["kernels"]
        self.assertEqual((k["kernel"], k["status"]), ("triton_poi_fused_add_mul_relu_sigmoid_0", "not searched"))
        self.assertEqual((doc["status"], doc["answer"], doc["kept"], doc["speedup_vs_compile"]), ("ok", "compile", [], 1.0))
        self.assertEqual(doc["answer_us"], doc["compiled_us"])
        self.assertGreater(doc["compiled_us"], 0.0)
        self.assertIn("the fx path searched as one DSL program", doc["reason"])
        self.assertEqual(load(os.path.join(report, ip.REPORT))["reason"], doc["reason"])

    def test_a_kernel_is_searched_where_the_fx_path_verified_no_schedule(self):
        failed = dict(item_one_program(), trajectory=[{"status": "failed", "error": "CUDA out of memory"}])
        doc, _ = self.run_path(fx_item=failed)
        (k,) = doc["kernels"]
        self.assertEqual((k["status"], doc["answer"]), ("verified", "inductor+ksol"), k.get("reason"))

    def test_the_models_inputs_wait_on_the_host_while_the_searches_run(self):
        # The searches run in processes of their own and need the GPU's memory (a 16 GB input held
        # here left a kernel's search too little): the inputs go to the host before the first
        # search and come back after the last, before the whole model is timed again.
        moves, seen, real = [], [], ip._moved

        def moved(torch_, values, device):
            moves.append(device)
            return real(torch_, values, device)

        def search(problem_file, run_dir, seconds):
            seen.append(list(moves))
            return self.search_with()(problem_file, run_dir, seconds)

        with mock.patch.object(ip, "_moved", side_effect=moved):
            doc, _ = self.run_path(search=search)
        self.assertEqual(seen, [["cpu"]])
        self.assertEqual(moves, ["cpu", "cpu"])  # back to env.device, which is the host here
        (k,) = doc["kernels"]
        self.assertEqual((k["status"], doc["answer"]), ("verified", "inductor+ksol"), k.get("reason"))

    def test_a_kernel_is_searched_where_the_fx_path_stitched_pieces(self):
        doc, _ = self.run_path(fx_item=item_stitched([{"nodes": ["add"], "family": "elementwise"}]))
        (k,) = doc["kernels"]
        self.assertEqual((k["status"], doc["answer"]), ("verified", "inductor+ksol"), k.get("reason"))

    def test_a_faster_verified_replacement_is_kept(self):
        doc, report = self.run_path()
        (k,) = doc["kernels"]
        self.assertEqual((k["status"], k["family"], k["kept"]), ("verified", "elementwise", True), k.get("reason"))
        self.assertLess(k["replacement_us"], k["inductor_us"])
        self.assertEqual((doc["status"], doc["answer"], doc["kept"]), ("ok", "inductor+ksol", ["g0.triton_poi_fused_add_mul_relu_sigmoid_0"]))
        self.assertGreater(doc["speedup_vs_compile"], 1.0)
        self.assertEqual(load(os.path.join(report, ip.REPORT))["answer"], "inductor+ksol")
        for f in ("graph-0.py", "graph-0.txt", "kernels/g0-triton_poi_fused_add_mul_relu_sigmoid_0.py"):
            self.assertTrue(os.path.exists(os.path.join(report, f)), f)

    def test_a_recompile_on_one_case_of_the_gate_is_caught_with_that_case(self):
        # The model runs the replacement on every case but one (seed 2, heavy), where it takes
        # another graph: that case's outputs are right, and the other cases ran the replacement.
        from ksol_torch import problem, worker
        x = worker._draw(problem.load(self.problem), 2, "heavy", "cpu")[0]
        doc, _ = self.run_path(recompiles_on=x)
        (k,) = doc["kernels"]
        self.assertEqual((k["status"], k["kept"]), ("verified", False))
        self.assertEqual((doc["answer"], doc["kept"]), ("compile", []))
        (entry,) = doc["selection"]
        self.assertEqual(entry["why"], "the whole model failed with it: launch: the candidate raised ReplacementNotRun: "
                                       "g0.triton_poi_fused_add_mul_relu_sigmoid_0: the compiled model did not run its "
                                       "replacement during this call (it recompiled, or took another graph) (seed 2, heavy)")

    def test_a_crashed_search_reads_no_earlier_runs_results(self):
        # An earlier run with the same report folder left a verified answer for this kernel.
        first, report = self.run_path()
        self.assertEqual(first["kept"], ["g0.triton_poi_fused_add_mul_relu_sigmoid_0"])
        stem = "g0-triton_poi_fused_add_mul_relu_sigmoid_0"
        self.assertTrue(os.path.exists(os.path.join(report, "kernels", stem, "results.json")))

        def crash(problem_file, run_dir, seconds):
            return {"exit_status": -11, "run_dir": run_dir, "seconds": 0.1, "log": run_dir + ".log"}

        doc, _ = self.run_path(search=crash)
        (k,) = doc["kernels"]
        self.assertEqual(k["status"], "search failed")
        log = os.path.join(report, "kernels", stem + ".log")
        self.assertTrue(k["reason"].startswith(f"the search was killed by signal 11 (its log: {log}) and left no results: "),
                        k["reason"])
        self.assertEqual((doc["answer"], doc["kept"], doc["reason"]), ("compile", [], "no kernel got a verified replacement"))
        self.assertFalse(os.path.exists(os.path.join(report, "kernels", stem)))

    def test_a_replacement_that_differs_from_the_inductor_kernel_is_refused(self):
        doc, _ = self.run_path("-DRELU_ONLY")
        (k,) = doc["kernels"]
        self.assertEqual(k["status"], "replacement differs")
        self.assertTrue(k["reason"].startswith("out_ptr0 (launch 0) against the Inductor kernel: "), k["reason"])
        self.assertEqual((doc["answer"], doc["kept"], doc["reason"]), ("compile", [], "no kernel got a verified replacement"))


@needs_torch
class CompareWithTheKernel(unittest.TestCase):
    """A replacement's outputs against the Inductor kernel's: NaN by position, infinities exactly."""

    def test_nan_and_inf_where_the_kernel_has_them(self):
        from ksol import inductor_capture as ic
        nan, inf = float("nan"), float("inf")
        want = torch.tensor([1.0, nan, inf, -inf, 2.0])
        self.assertEqual(ic.compare(want.clone(), want, 1), "")
        self.assertEqual(ic.compare(torch.tensor([1.0, 0.0, inf, -inf, 2.0]), want, 1), "1 elements finite in one and not the other")
        self.assertEqual(ic.compare(torch.tensor([1.0, inf, nan, -inf, 2.0]), want, 1), "NaN/Inf elements differ")
        self.assertEqual(ic.compare(torch.tensor([1.0, nan, -inf, inf, 2.0]), want, 1), "NaN/Inf elements differ")

    def test_slices_give_the_whole_tensors_verdict(self):
        # A gigabyte output is compared a slice at a time; with slices of 3 elements every verdict
        # and message is the one-slice comparison's, the worst element's flat index included.
        from ksol import inductor_capture as ic
        nan, inf = float("nan"), float("inf")
        whole = ic.CHUNK
        try:
            gen = torch.Generator().manual_seed(5)
            cases = []
            for n in (1, 3, 7, 10):
                want = torch.randn(n, generator=gen)
                cases.append((want.clone(), want))
                got = want.clone()
                got[n // 2] += 1.0
                cases.append((got, want))
            want = torch.tensor([1.0, 2.0, nan, 4.0, inf, 6.0, 7.0, 8.0])
            for k, v in ((7, 7.5), (1, 2.5), (6, nan), (4, -inf)):
                got = want.clone()
                got[k] = v
                cases.append((got, want))
            cases.append((torch.tensor([1, 2, 3, 4, 5]), torch.tensor([1, 0, 3, 0, 5])))
            expected = [ic.compare(g, w, 64) for g, w in cases]
            self.assertIn("worst at flat index 5: got 7.5", expected[-5])  # element 7 is the 6th finite one
            ic.CHUNK = 3
            self.assertEqual([ic.compare(g, w, 64) for g, w in cases], expected)
        finally:
            ic.CHUNK = whole


@needs_torch
class RecordedLaunches(unittest.TestCase):
    """A kernel's recorded launches, kept while its search runs."""

    def test_recorded_launches_move_and_come_back(self):
        # While a search runs the recorded launches wait on the host, then come back for the checks.
        from ksol import inductor_capture as ic
        a, b = torch.arange(4.0), torch.zeros(2)
        r = ic.Recorded(["x", "y"], {"n": 4}, None, {"x": a}, {"y": b})
        r.to("meta")
        self.assertEqual([(t.device.type, tuple(t.shape)) for t in (r.inputs["x"], r.outputs["y"])], [("meta", (4,)), ("meta", (2,))])
        r = ic.Recorded(["x", "y"], {"n": 4}, None, {"x": a}, {"y": b})
        r.to("cpu")
        self.assertTrue(torch.equal(r.inputs["x"], a) and torch.equal(r.outputs["y"], b))


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
