"""The Python evaluation worker on the CPU: an honest candidate passes every gate and is timed
beside eager; each exploit is rejected by the gate meant for it; the line protocol is the one
ksol-worker speaks. Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import torch

from ksol_torch import worker

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEM = os.path.join(HERE, "problems", "01_gemm_relu.py")


def cand(name):
    return os.path.join(HERE, "candidates", name)


def run(name, **kw):
    req = {"problem": PROBLEM, "candidate": cand(name), "device": "cpu", "seeds": [11, 12, 13]}
    req.update(kw)
    return worker.evaluate(req)


class Gates(unittest.TestCase):
    def expect_rejected(self, name, gate, error_class, text=""):
        r = run(name, baselines=False)
        self.assertEqual(r["status"], "failed", r)
        self.assertEqual((r["failed_gate"], r["error_class"]), (gate, error_class), r["message"])
        self.assertIn(text, r["message"])
        return r

    def test_honest_candidate_passes_and_is_timed_beside_eager(self):
        r = run("gemm_relu_numpy.py")
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(len(r["correctness"]["cases"]), 9)  # 3 seeds x normal, heavy, spiky
        self.assertLess(r["correctness"]["worst_error_over_tolerance"], 1.0)
        self.assertGreater(r["timing"]["median_us"], 0)
        self.assertLessEqual(r["timing"]["ci_low_us"], r["timing"]["median_us"])
        self.assertGreater(r["baselines"]["eager"]["median_us"], 0)
        self.assertIn("speedup", r["baselines"]["eager"])
        if not hasattr(torch, "compile"):
            self.assertIn("no torch.compile", r["baselines"]["compile"]["error"])
        self.assertGreater(r["accumulation"], 1)  # from the trace: a 32-term dot product per output

    def test_wrong_by_a_thousandth_fails(self):
        r = self.expect_rejected("gemm_relu_wrong.py", "correctness", "wrong_result", "out of tolerance")
        # ... while KernelBench's allclose(atol=rtol=1e-2) lets it through: both are reported.
        self.assertTrue(r["kernelbench"]["correct"], r["kernelbench"])
        self.assertGreater(r["kernelbench"]["mean_us"], 0)

    def test_cheats_get_no_kernelbench_numbers(self):
        r = run("gemm_relu_fallback.py", baselines=False)
        self.assertNotIn("kernelbench", r)

    def test_fallback_to_pytorch_inside_try_except(self):
        self.expect_rejected("gemm_relu_fallback.py", "correctness", "pytorch_fallback", "addmm")

    def test_patched_timer(self):
        self.expect_rejected("gemm_relu_patch_timer.py", "integrity", "patched_function", "time.perf_counter_ns")

    def test_patched_synchronize(self):
        original = torch.cuda.synchronize
        self.expect_rejected("gemm_relu_patch_sync.py", "integrity", "patched_function", "torch.cuda.synchronize")
        self.assertIs(torch.cuda.synchronize, original)

    def test_patched_torch_function_is_caught_and_undone(self):
        original = torch.isfinite
        self.expect_rejected("gemm_relu_patch_torch.py", "integrity", "patched_function", "torch.isfinite")
        self.assertIs(torch.isfinite, original)  # put back for the next evaluation

    def test_tensor_subclass(self):
        self.expect_rejected("gemm_relu_subclass.py", "correctness", "tensor_subclass", "Lazy")

    def test_cached_answer(self):
        self.expect_rejected("gemm_relu_cache.py", "correctness", "wrong_result", "seed 11, heavy")

    def test_thread_started_at_load(self):
        self.expect_rejected("gemm_relu_thread.py", "integrity", "thread_started")

    def test_thread_pool_of_its_own(self):
        # A pool's workers start on the first submit, inside the call: a pool that existed
        # before the candidate may grow (PyTorch's own), a new one may not.
        self.expect_rejected("gemm_relu_pool.py", "integrity", "thread_started")

    def test_idle_pool_workers_are_not_the_candidates_but_its_code_on_them_is(self):
        import threading
        import time
        from concurrent.futures import ThreadPoolExecutor
        # A pool that grows while running only standard-library code (as PyTorch's do).
        pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="torch_like")
        pool.submit(lambda: None).result()
        before = worker._threads()
        futs = [pool.submit(threading.Event().wait, 0.3) for _ in range(3)]
        self.assertEqual(worker._new_threads(before), [])
        for f in futs:
            f.result()
        # The same pool running the candidate's function, and a thread whose target is wrapped
        # by PyTorch: the candidate's code on their stacks gives them away.
        def evil():
            time.sleep(0.3)
        before = worker._threads()
        futs = [pool.submit(evil) for _ in range(4)]
        t = threading.Thread(target=torch.no_grad()(evil), name="ThreadPoolExecutor-0_9")
        t.start()
        time.sleep(0.05)
        found = worker._new_threads(before)
        self.assertTrue(any(n == "ThreadPoolExecutor-0_9" for n, _ in found), found)
        self.assertTrue(all("test_worker.py" in w for _, w in found), found)
        t.join()
        for f in futs:
            f.result()
        pool.shutdown()


class Float64Reference(unittest.TestCase):
    def test_narrowing_casts_inside_the_reference_stay_float64(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return (x.float() * 3.0).to(torch.bfloat16) + torch.zeros(x.shape, dtype=torch.float32)

        x = torch.tensor([0.1], dtype=torch.float64)
        with worker._Float64():
            y = M()(x)
        self.assertEqual(y.dtype, torch.float64)
        self.assertEqual(y.item(), 0.1 * 3.0)  # float64 arithmetic: not fp32's 0.3000000119 nor bf16's 0.30078125
        self.assertNotEqual((x.float() * 3.0).to(torch.bfloat16).dtype, torch.float64)  # and only inside

    def test_a_reference_that_does_not_fit_on_the_gpu_runs_on_the_host(self):
        # The device's forward runs out of memory once: that case and every later one are computed
        # on the host, with the same values as the host's own float64 forward.
        from ksol_torch import problem as problem_mod

        prob = problem_mod.load(PROBLEM)
        ref = worker._Reference(prob, 11, "cpu")
        ref.device = "cuda:0"  # as if its model were on a GPU (it moves to the host in place)
        real, devices = worker._Reference._forward, []

        def forward(model, inputs, device):
            devices.append(device)
            if device != "cpu":
                raise worker._out_of_memory()("CUDA out of memory. Tried to allocate 12.00 GiB.")
            return real(model, inputs, device)

        inputs = worker._draw(prob, 11, "normal", "cpu")
        with mock.patch.object(worker._Reference, "_forward", staticmethod(forward)):
            first, second = ref(inputs), ref(inputs, place=False)
        self.assertEqual(devices, ["cuda:0", "cpu", "cpu"])
        self.assertTrue(ref.on_host)
        self.assertIn("Tried to allocate 12.00 GiB", ref.why)
        want = real(problem_mod.instantiate(prob, 11, inputs=False)[0].double(), inputs, "cpu")
        for got in (first, second):
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.assertEqual(g.device.type, "cpu")
                self.assertTrue(torch.equal(g, w))

    def test_what_counts_as_out_of_memory(self):
        self.assertTrue(worker._is_out_of_memory(worker._out_of_memory()("CUDA out of memory. Tried to allocate 2.00 GiB")))
        self.assertTrue(worker._is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")))
        self.assertFalse(worker._is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied")))
        self.assertFalse(worker._is_out_of_memory(ValueError("out of memory")))

    def test_out_of_memory_on_the_host_is_not_retried(self):
        from ksol_torch import problem as problem_mod

        ref = worker._Reference(problem_mod.load(PROBLEM), 11, "cpu")

        def forward(model, inputs, device):
            raise worker._out_of_memory()("out of memory")

        with mock.patch.object(worker._Reference, "_forward", staticmethod(forward)):
            with self.assertRaises(worker._out_of_memory()):
                ref([torch.zeros(2)])
        self.assertFalse(ref.on_host)


class AbiCandidates(unittest.TestCase):
    """Libraries built to ksol's C ABI (include/ksol/abi.h), called on the module's tensors: on the
    CPU a host-memory ksol_run stands in for a CUDA kernel."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ksol-abi-")
        root = os.path.join(HERE, "..", "..")
        cls.libs = {}
        for name, flags in (("ok", []), ("wrong", ["-DKSOL_WRONG"]), ("fail", ["-DKSOL_FAIL"]), ("slow", ["-DKSOL_REPEAT=2000"])):
            out = os.path.join(cls.dir, f"gemm_relu_{name}.so")
            subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", os.path.join(root, "include"), *flags,
                            cand("gemm_relu_abi.c"), "-o", out], check=True)
            cls.libs[name] = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def abi(self, name):
        return worker.evaluate({"problem": PROBLEM, "candidate_so": self.libs[name], "dims": [8, 32, 16], "device": "cpu",
                                "seeds": [3, 4, 5], "baselines": False})

    def test_honest_library_passes(self):
        r = self.abi("ok")
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(len(r["correctness"]["cases"]), 9)
        self.assertGreater(r["timing"]["median_us"], 0)

    def test_wrong_library_fails(self):
        r = self.abi("wrong")
        self.assertEqual((r["status"], r["error_class"]), ("failed", "wrong_result"), r)

    def test_task_shapes_must_match_the_module(self):
        shapes = [{"name": "X", "shape": [8, 32]}, {"name": "W", "shape": [16, 32]}, {"name": "B", "shape": [16]},
                  {"name": "Y", "shape": [8, 16]}]
        base = {"problem": PROBLEM, "candidate_so": self.libs["ok"], "dims": [8, 32, 16], "device": "cpu", "seeds": [3, 4, 5],
                "baselines": False, "time": False}
        self.assertEqual(worker.evaluate(dict(base, expect_shapes=shapes))["status"], "ok")
        shapes[3]["shape"] = [8, 17]
        r = worker.evaluate(dict(base, expect_shapes=shapes))
        self.assertEqual((r["failed_gate"], r["error_class"]), ("load", "binding"), r)
        self.assertIn("Y [8, 17]", r["message"])

    def test_failing_library_is_a_launch_failure(self):
        r = self.abi("fail")
        self.assertEqual((r["failed_gate"], r["error_class"]), ("launch", "candidate_error"), r)
        self.assertIn("ksol_run returned 7", r["message"])


    def test_screen_times_a_batch_and_only_rejects(self):
        spec = lambda name, **kw: dict({"so": self.libs[name], "dims": [8, 32, 16]}, **kw)
        shapes = [{"name": "X", "shape": [8, 32]}, {"name": "W", "shape": [16, 32]}, {"name": "B", "shape": [16]},
                  {"name": "Y", "shape": [8, 17]}]
        # drop_above 20: the slow library does 2000 times the work; the others are alike, and a
        # busy machine must not make one of them look 20 times slower than another.
        r = worker.screen({"problem": PROBLEM, "device": "cpu", "seeds": [3, 4, 5], "rounds": 3, "samples_per_round": 2, "drop_above": 20,
                           "candidates": [spec("ok"), spec("fail"), spec("ok", expect_shapes=shapes), spec("wrong"), spec("slow")]})
        ok, fail, binding, wrong, slow = r["results"]
        self.assertEqual(ok["status"], "ok", ok)
        self.assertGreater(ok["median_us"], 0)
        self.assertEqual(len(ok["samples"]), 6)
        self.assertLessEqual(ok["ci_low_us"], ok["median_us"])
        self.assertLessEqual(ok["median_us"], ok["ci_high_us"])
        self.assertFalse(ok["dropped"])
        self.assertEqual((fail["status"], fail["error_class"]), ("failed", "candidate_error"), fail)
        self.assertIn("ksol_run returned 7", fail["message"])
        self.assertEqual((binding["status"], binding["error_class"]), ("failed", "binding"), binding)
        # A screen checks nothing: a wrong library is timed, and the full evaluation refuses it.
        self.assertEqual(wrong["status"], "ok", wrong)
        # Far slower than the fastest after the first round: no more samples.
        self.assertEqual(slow["status"], "ok", slow)
        self.assertTrue(slow["dropped"], slow)
        self.assertEqual(len(slow["samples"]), 2)
        self.assertGreater(slow["median_us"], 20 * ok["median_us"])
        self.assertIn("timing", r["phase_seconds"])


class ScreenBlame(unittest.TestCase):
    """A screen blames what one candidate does on that candidate alone: a function it replaced is
    put back before the next one runs; a thread it leaves running ends the worker, naming it."""

    @classmethod
    def setUpClass(cls):
        AbiCandidates.setUpClass()

    @classmethod
    def tearDownClass(cls):
        AbiCandidates.tearDownClass()

    def test_a_replaced_function_fails_its_candidate_alone(self):
        relu = torch.relu
        calls = {"n": 0}
        real = worker._abi_candidate

        def fake(so, dims, expect_shapes, model, inputs0):
            honest = real(so, dims, expect_shapes, model, inputs0)
            calls["n"] += 1
            mine = calls["n"] == 2  # the second candidate replaces torch.relu on its first call

            def call(*xs):
                if mine:
                    torch.relu = lambda x: x
                return honest(*xs)
            return call

        with mock.patch.object(worker, "_abi_candidate", side_effect=fake):
            lib = AbiCandidates.libs["ok"]
            r = worker.screen({"problem": PROBLEM, "device": "cpu", "seeds": [3, 4, 5], "rounds": 2, "drop_above": 100,
                               "candidates": [{"so": lib, "dims": [8, 32, 16]} for _ in range(3)]})
        self.assertIs(torch.relu, relu, "put back")
        first, patcher, last = r["results"]
        self.assertEqual((patcher["status"], patcher["error_class"]), ("failed", "patched_function"), patcher)
        self.assertEqual(first["status"], "ok", first)
        self.assertEqual(last["status"], "ok", last)

    def test_a_thread_left_running_names_its_candidate(self):
        real = worker._abi_candidate
        calls = {"n": 0}

        def fake(so, dims, expect_shapes, model, inputs0):
            honest = real(so, dims, expect_shapes, model, inputs0)
            calls["n"] += 1
            mine = calls["n"] == 3

            def call(*xs):
                if mine:
                    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                return honest(*xs)
            return call

        with mock.patch.object(worker, "_abi_candidate", side_effect=fake):
            lib = AbiCandidates.libs["ok"]
            with self.assertRaises(worker._Culprit) as c:
                worker.screen({"problem": PROBLEM, "device": "cpu", "seeds": [3, 4, 5],
                               "candidates": [{"so": lib, "dims": [8, 32, 16]} for _ in range(4)]})
        self.assertEqual(c.exception.index, 2)


class KernelProfile(unittest.TestCase):
    """The kernels one call launches and their device time by name, for the report beside
    torch.compile's: torch.profiler's on a GPU, and nothing (not a guess) without one."""

    def test_nothing_is_counted_without_a_gpu(self):
        if torch.cuda.is_available():
            self.skipTest("this host has a GPU: the GPU case below runs instead")
        self.assertIsNone(worker.kernel_profile(torch.relu, [torch.ones(4)], "cpu"))
        r = worker.evaluate({"problem": PROBLEM, "candidate": cand("gemm_relu_numpy.py"), "device": "cpu", "seeds": [1, 2, 3],
                             "baselines": True, "count_kernels": True, "kernelbench": False})
        self.assertEqual(r["status"], "ok", r)
        self.assertNotIn("kernels", r)
        self.assertNotIn("kernel_us", r)
        self.assertNotIn("kernels", r["baselines"]["eager"])

    def test_launches_are_summed_by_name_the_slowest_first(self):
        launches = [("relu", 2.0), ("gemm", 30.0), ("relu", 2.5)] + [(f"k{i}", 1.0 + i / 100) for i in range(14)]
        rows = worker._kernel_rows(launches)
        self.assertEqual(rows[:2], [{"name": "gemm", "calls": 1, "us": 30.0}, {"name": "relu", "calls": 2, "us": 4.5}])
        self.assertEqual(len(rows), worker._PROFILE_KERNELS + 1)
        # 16 names: the 12 slowest, then the 4 fastest (k0..k3) as one row.
        self.assertEqual(rows[-1], {"name": "(4 other kernels)", "calls": 4, "us": 4.06})
        self.assertEqual(worker._kernel_rows([("x" * 300, 1.0)])[0]["name"], "x" * 120)

    def test_one_relu_is_one_kernel_on_a_gpu(self):
        if not torch.cuda.is_available():
            self.skipTest("needs a CUDA GPU: the count is torch.profiler's CUDA activity")
        x = torch.randn(1 << 20, device="cuda")
        self.assertEqual(worker.kernel_profile(torch.relu, [x], "cuda")["count"], 1)
        p = worker.kernel_profile(lambda a: torch.relu(torch.relu(a)) + 1, [x], "cuda")
        self.assertEqual(p["count"], 3)
        self.assertEqual(sum(k["calls"] for k in p["us"]), 3)
        self.assertTrue(all(k["us"] > 0 for k in p["us"]), p)
        self.assertEqual([k["us"] for k in p["us"]], sorted((k["us"] for k in p["us"]), reverse=True))


class Protocol(unittest.TestCase):
    def test_hello_eval_exit_over_pipes(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        reqs = [{"id": 7, "op": "hello"},
                {"id": 8, "op": "eval", "problem": PROBLEM, "candidate": cand("gemm_relu_numpy.py"), "device": "cpu",
                 "seeds": [1, 2, 3], "baselines": False},
                {"id": 9, "op": "nope"},
                {"id": 11, "op": "screen", "problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "candidates": []},
                {"id": 10, "op": "exit"}]
        p = subprocess.run([sys.executable, "-m", "ksol_torch", "worker"], input="".join(json.dumps(r) + "\n" for r in reqs),
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual([l["id"] for l in lines], [7, 8, 9, 11, 10], p.stdout)
        self.assertTrue(lines[0]["ok"])
        self.assertEqual(lines[0]["protocol"], 1)
        self.assertEqual(lines[1]["result"]["status"], "ok", lines[1])
        # Where the time went, in the reply and, phase by phase as they end, in the worker's log.
        self.assertIn("correctness", lines[1]["result"]["phase_seconds"])
        self.assertIn("01_gemm_relu.py: correctness ...", p.stderr)
        self.assertRegex(p.stderr, r"01_gemm_relu.py: correctness [0-9.]+ s")
        self.assertFalse(lines[2]["ok"])
        self.assertIn("unknown op", lines[2]["error"])
        self.assertEqual(lines[3]["result"]["results"], [], lines[3])

    def test_threads_torch_compile_keeps_are_not_the_candidates(self):
        # torch.compile starts a pool of compile workers on first use and keeps it (found on the
        # H200 with PyTorch 2.11: every baseline request ended the worker). Here a stand-in for
        # torch.compile does the same; the baselines, and a candidate after them, must pass, and
        # the worker must live on.
        shim = (
            "import sys, torch\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "kept = []\n"
            "def compile(model, **kw):\n"
            "    sys.stderr.write('compile mode=%s\\n' % kw.get('mode'))\n"
            "    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix='compile_worker')\n"
            "    pool.submit(lambda: None).result()\n"
            "    kept.append(pool)\n"
            "    return model\n"
            "torch.compile = compile\n"
            "from ksol_torch import worker\n"
            "sys.exit(worker.serve())\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        reqs = [{"id": 1, "op": "eval", "problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True},
                {"id": 2, "op": "eval", "problem": PROBLEM, "candidate": cand("gemm_relu_numpy.py"), "device": "cpu",
                 "seeds": [1, 2, 3]},
                {"id": 5, "op": "eval", "problem": os.path.join(HERE, "problems", "02_softmax.py"), "device": "cpu",
                 "seeds": [1, 2, 3], "baselines_only": True},
                {"id": 3, "op": "eval", "problem": PROBLEM, "candidate": cand("gemm_relu_pool.py"), "device": "cpu",
                 "seeds": [1, 2, 3]},
                {"id": 4, "op": "exit"}]
        p = subprocess.run([sys.executable, "-c", shim], input="".join(json.dumps(r) + "\n" for r in reqs),
                           capture_output=True, text=True, env=env, timeout=300)
        lines = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual([l["id"] for l in lines], [1, 2, 5, 3], p.stdout + p.stderr)
        for l in lines[:2]:
            self.assertTrue(l["ok"], l)
            self.assertNotIn("fatal", l)
            self.assertGreater(l["result"]["baselines"]["compile"]["median_us"], 0, l)
        self.assertEqual(lines[1]["result"]["status"], "ok", lines[1])
        # A GEMM problem: torch.compile's max-autotune mode is timed too, with its compile time.
        ma = lines[0]["result"]["baselines"]["compile_max_autotune"]
        self.assertGreater(ma["median_us"], 0, ma)
        self.assertEqual(ma["options"], {"mode": "max-autotune"})
        self.assertIn("compile_seconds", ma)
        self.assertIn("compile mode=max-autotune", p.stderr)
        # A softmax has neither a GEMM nor a convolution: the default mode only.
        self.assertIn("compile", lines[2]["result"]["baselines"])
        self.assertNotIn("compile_max_autotune", lines[2]["result"]["baselines"])
        # A pool of the candidate's own is still caught, and still ends the worker.
        self.assertEqual(lines[3]["result"]["error_class"], "thread_started", lines[3])
        self.assertTrue(lines[3]["fatal"])
        self.assertEqual(p.returncode, 3)


if __name__ == "__main__":
    unittest.main()
