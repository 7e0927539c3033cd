"""Reading a run folder as `ksol optimize FILE.py --report DIR` leaves it (python/ksol/run_dir.py):
the three answers, times and reasons, moved folders, the libraries (the folder's lib/, the
recorded path, ksol's compile cache), and each missing piece's error. No PyTorch needed."""
import json
import os
import time

import ksol
from fixtures import PROGRAM, TempDir, item_not_lowered, item_one_program, item_stitched, write_run
from ksol import run_dir as rd
from ksol.optimize import check_precision

PIECE = {"nodes": ["relu", "mul"], "so": "", "dims": [8, 16], "family": "elementwise", "kernel": "elementwise_model_f32_t256_v1_i1",
         "program": PROGRAM}


class ReadRun(TempDir):
    def run_of(self, item, **kw):
        problem = self.write("run/Net.py", "# the module\n")
        write_run(self.path("run"), problem, item, **kw)
        return rd.read_run(self.path("run"))

    def test_one_program(self):
        r = self.run_of(item_one_program())
        self.assertEqual((r.answer, r.kernel, r.kernel_us, r.speedup), ("kernel", "gemm_model_f32_64x64x16_simt", 80.0, 1.25))
        self.assertTrue(r.uses_ksol_kernels)
        self.assertEqual((r.best_baseline, r.baseline_us), ("compile", {"eager": 120.0, "compile": 100.0}))
        self.assertEqual((r.gpu, r.emulated, r.precision, r.rtol_scale), ("NVIDIA H200", False, "fp32", 16.0))
        self.assertEqual(r.problem, self.path("run/Net.py"))
        self.assertEqual(r.summary(), "ksol returned its kernel gemm_model_f32_64x64x16_simt: 80.0 us, 1.250x over compile "
                                      "(100.0 us) on NVIDIA H200")

    def test_stitched(self):
        r = self.run_of(item_stitched([dict(PIECE, so="/cache/a.so"), dict(PIECE, nodes=["add"], dims=[4])]))
        self.assertEqual((r.answer, r.kernel_us, r.speedup), ("stitched", 50.0, 2.0))
        self.assertEqual([(p.index, p.nodes, p.dims, p.so) for p in r.pieces],
                         [(0, ["relu", "mul"], [8, 16], "/cache/a.so"), (1, ["add"], [4], "")])
        self.assertIn("a stitched module of 2 DSL piece(s)", r.summary())
        self.assertFalse(r.vendor)
        self.assertNotIn("vendor-call plan", r.summary())

    def test_the_vendor_call_plans_stitched_module(self):
        item = item_stitched([dict(PIECE, so="/cache/a.so", vendor=True)])
        item["plan"] = "vendor"
        r = self.run_of(item)
        self.assertTrue(r.vendor)
        self.assertEqual(r.answer, "stitched")
        self.assertIn("(the vendor-call plan: its convolutions and GEMMs are cuDNN's and cuBLAS's)", r.summary())

    def test_a_piece_kept_as_pytorch(self):
        kept = {"nodes": ["add"], "family": "elementwise", "keep": True}
        r = self.run_of(item_stitched([dict(PIECE, so="/cache/a.so"), kept]))
        self.assertEqual([(p.index, p.keep, p.so) for p in r.pieces], [(0, False, "/cache/a.so"), (1, True, "")])
        self.assertEqual(r.kernel, PIECE["kernel"])
        self.assertIn("a stitched module of 1 DSL piece(s) (elementwise_model_f32_t256_v1_i1) and PyTorch calls "
                      "(1 piece(s) left as PyTorch's calls: faster, or not built)", r.summary())
        with self.assertRaisesRegex(ksol.RunDirError, "lists no piece ksol computes"):
            self.run_of(item_stitched([kept]))

    def test_pytorch_returned(self):
        r = self.run_of(item_not_lowered())
        self.assertEqual((r.answer, r.kernel_us, r.speedup), ("pytorch", None, 1.0))
        self.assertFalse(r.uses_ksol_kernels)
        self.assertEqual(r.summary(), "ksol returned PyTorch itself (compile, 20.0 us): cumsum has no DSL form; "
                                      "torch.compile(module) is the faster form")

    def test_a_kernel_that_lost_is_pytorch_with_the_times(self):
        r = self.run_of(item_one_program(use_baseline=True, score_us=101.5))
        self.assertEqual((r.answer, r.reason), ("pytorch", "ksol's best kernel, gemm_model_f32_64x64x16_simt at 101.5 us, is not "
                                                           "faster than compile (100.0 us)"))

    def test_a_seed_that_failed_the_gates_is_pytorch_with_its_error(self):
        item = item_one_program(use_baseline=True)
        item.update(stop_reason="seed_failed", best=None, trajectory=[
            {"index": 0, "status": "failed", "error": "module: output 0: 1 of 4194304 elements out of tolerance"}])
        r = self.run_of(item)
        self.assertEqual(r.reason, "the seed program failed ksol's gates: module: output 0: 1 of 4194304 elements out of tolerance")

    def test_a_stitched_module_that_lost_is_pytorch_with_the_reason(self):
        r = self.run_of(item_stitched([PIECE], use_baseline=True, reason="the stitched module (50 us) is not faster than eager"))
        self.assertEqual((r.answer, r.reason), ("pytorch", "the stitched module (50 us) is not faster than eager"))
        self.assertEqual(len(r.pieces), 1)

    def test_emulated(self):
        r = self.run_of(item_stitched([PIECE], use_baseline=True), emulated=True, gpu="none: the CPU emulator")
        self.assertTrue(r.emulated)

    def test_the_manifest_names_the_precision(self):
        self.write("run/ksol-python.json", json.dumps({"precision": "fp32", "rtol_scale": 8.0}))
        r = self.run_of(item_one_program())
        self.assertEqual((r.precision, r.rtol_scale, r.manifest["rtol_scale"]), ("fp32", 8.0, 8.0))

    def test_a_moved_folder_finds_its_problem_file(self):
        write_run(self.path("moved"), "/nowhere/run/Net.py", item_one_program())
        self.write("moved/Net.py", "# the module\n")
        self.assertEqual(rd.read_run(self.path("moved")).problem, self.path("moved/Net.py"))

    def test_errors_name_what_is_missing(self):
        cases = []
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("none"))
        cases.append(str(c.exception))
        os.makedirs(self.path("empty"))
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("empty"))
        cases.append(str(c.exception))
        self.write("bad/results.json", "{not json")
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("bad"))
        cases.append(str(c.exception))
        self.write("tasks/results.json", json.dumps({"run": 3, "results": [{"task": "softmax_f32"}]}))
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("tasks"))
        cases.append(str(c.exception))
        write_run(self.path("gone"), "/nowhere/Net.py", item_one_program())
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("gone"))
        cases.append(str(c.exception))
        item = item_one_program()
        del item["best"]
        problem = self.write("nobest/Net.py")
        write_run(self.path("nobest"), problem, item)
        with self.assertRaises(ksol.RunDirError) as c:
            rd.read_run(self.path("nobest"))
        cases.append(str(c.exception))
        self.assertEqual(cases, [
            f"{self.path('none')}: no such folder",
            f"{self.path('empty')}/results.json: no such file (the run's results)",
            f"{self.path('bad')}/results.json: cannot be read (the run's results): Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1)",
            f"{self.path('tasks')}/results.json is not a module's run (no problem file): ksol.load reads runs of "
            "`ksol optimize FILE.py` and ksol.optimize, not of built-in tasks",
            f"{self.path('gone')}: the module's problem file /nowhere/Net.py is not there: ksol.load reads runs of "
            "`ksol optimize FILE.py` and ksol.optimize",
            f"{self.path('nobest')}/results.json returns a kernel but names no best program"])


class Libraries(TempDir):
    SOURCE = "// generated\nextern \"C\" int ksol_run(const ksol_call* c) { return 0; }\n"

    def setUp(self):
        super().setUp()
        problem = self.write("run/Net.py")
        write_run(self.path("run"), problem, item_one_program())
        self.write("run/best.cu", self.SOURCE)
        self.run_ = rd.read_run(self.path("run"))

    def cache_entry(self, key, source, age=0.0):
        self.write(f"cache/compile/{key[:2]}/{key}/source.cu", source)
        so = self.write(f"cache/compile/{key[:2]}/{key}/lib.so", "ELF")
        t = time.time() - age
        os.utime(so, (t, t))
        return so

    def test_the_folders_own_library_first(self):
        here = self.write("run/lib/best.so", "ELF")
        self.cache_entry("ab12", self.SOURCE)
        self.assertEqual(rd.library(self.run_, "best", cache=self.path("cache")), here)

    def test_the_compile_caches_build_of_its_source(self):
        self.cache_entry("cd34", self.SOURCE + "// other\n")
        old = self.cache_entry("ab12", self.SOURCE, age=100)
        new = self.cache_entry("ef56", self.SOURCE)
        self.assertEqual(rd.find_in_compile_cache(self.SOURCE, self.path("cache")), new)
        os.remove(new)
        self.assertEqual(rd.library(self.run_, "best", cache=self.path("cache")), old)

    def test_a_recorded_library_that_is_still_there(self):
        so = self.write("elsewhere/candidate.so", "ELF")
        self.assertEqual(rd.library(self.run_, "piece-0", so, cache=self.path("cache")), so)

    def test_none_anywhere(self):
        with self.assertRaises(ksol.RunDirError) as c:
            rd.library(self.run_, "piece-1", "/gone/candidate.so", cache=self.path("cache"))
        self.assertEqual(str(c.exception),
                         f"{self.path('run')}: the library of piece-1 is not there (looked at: {self.path('run/lib/piece-1.so')}; "
                         f"/gone/candidate.so; {self.path('run/piece-1.cu')} (the run kept no CUDA for it)); ksol.optimize "
                         "copies it into lib/, a run of the CLI leaves it in ksol's compile cache: run ksol.optimize again")

    def test_the_cache_folder_as_the_cli_finds_it(self):
        self.assertEqual(rd.cache_dir({"KSOL_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}), "/c")
        self.assertEqual(rd.cache_dir({"XDG_CACHE_HOME": "/x"}), "/x/ksol")
        self.assertTrue(rd.cache_dir({}).endswith("/.cache/ksol"))


class Precision(TempDir):
    def test_the_modes_and_the_old_fp32_name(self):
        self.assertEqual([check_precision(p) for p in ("default", "strict", "tf32", "TF32")], ["default", "strict", "tf32", "tf32"])
        self.assertEqual([check_precision(p) for p in ("fp32", "float32", "FP32")], ["strict"] * 3)
        for p in ("bf16", "fp16", "ieee"):
            with self.assertRaises(ksol.UnsupportedError) as c:
                check_precision(p)
            self.assertIn("default, strict (also fp32) and tf32", str(c.exception))

    def test_a_cli_run_names_its_mode_and_old_runs_were_strict(self):
        self.write("run/M.py", "")
        self.write("run/results.json", json.dumps({"problem": self.path("run/M.py"), "precision": {"mode": "tf32", "arithmetic": "tf32"},
                                                   "results": [{"use_baseline": True}]}))
        r = rd.read_run(self.path("run"))
        self.assertEqual((r.precision, rd.worker_mode(r.precision)), ("tf32", "tf32"))
        self.assertEqual(rd.worker_mode("fp32"), "strict")
