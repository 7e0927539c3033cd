"""ksol_torch.triton_task: a standalone Triton kernel as a task (docs/TRITON.md). The parse, its
errors (exact messages), the config space and the coordinate search over it need neither Triton
nor a GPU; preparing the worker's files and lowering the references need PyTorch; running the
kernels needs Triton, here through its interpreter on the CPU (TRITON_INTERPRET=1, the
interpreter's times are never a result). The task files are tests/triton/softmax.py and
tests/triton/layernorm.py, written as a user would.
Run: PYTHONPATH=python python3 -m unittest discover -s tests/python"""
import importlib.util
import json
import math
import os
import shutil
import sys
import textwrap
import unittest

from fixtures import ROOT, TempDir, needs_torch, torch

from ksol_torch import triton_task as tt
from ksol_torch.problem import ProblemError

TRITON_DIR = os.path.join(ROOT, "tests", "triton")
SOFTMAX = os.path.join(TRITON_DIR, "softmax.py")
LAYERNORM = os.path.join(TRITON_DIR, "layernorm.py")


def _has_triton():
    try:
        return importlib.util.find_spec("triton") is not None and not getattr(sys.modules.get("triton"), "__ksol_stand_in__", False)
    except ValueError:
        return False


needs_triton = unittest.skipIf(not _has_triton(), f"needs Triton for {sys.executable} (its interpreter runs the kernels "
                                                  "on the CPU; a GPU host runs them for real: scripts/gpu_triton.sh)")

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n\n"
KERNEL = textwrap.dedent("""\
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
    """)
LAUNCH = textwrap.dedent("""\
    def launch(kernel, x, *, BLOCK=256):
        y = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
        return y
    """)
INPUTS = "def get_inputs():\n    return [torch.randn(1000)]\n"


class Files(TempDir):
    def file(self, text, name="task.py"):
        p = self.path(name)
        with open(p, "w") as fh:
            fh.write(text)
        return p


class Parse(unittest.TestCase):
    def test_softmax_kernel_its_knobs_and_where_they_go(self):
        s = tt.parse(SOFTMAX, "softmax_kernel")
        self.assertEqual(s.params, ["out_ptr", "in_ptr", "in_row_stride", "out_row_stride", "n_cols", "BLOCK_SIZE"])
        self.assertEqual(s.constexprs, ["BLOCK_SIZE"])
        self.assertTrue(s.loops)
        self.assertEqual(s.unmasked, [])
        self.assertTrue(s.has_reference)
        self.assertEqual(s.reference_params, ["x"])
        self.assertEqual(s.launch_params, ["x"])
        # BLOCK_SIZE and num_warps are launch's keywords; num_stages is not, so ksol's launcher
        # passes it to the kernel, and its default is Triton's own (launch passes none).
        self.assertEqual([(k.name, k.kind, k.where, k.default) for k in s.knobs],
                         [("BLOCK_SIZE", "block", "launch", 1024), ("num_warps", "option", "launch", 4),
                          ("num_stages", "option", "launcher", None)])

    def test_layernorm_kernel(self):
        s = tt.parse(LAYERNORM, "layernorm_kernel")
        self.assertEqual(s.constexprs, ["BLOCK_SIZE"])
        self.assertEqual(s.reference_params, ["x", "weight", "bias"])
        self.assertEqual([(k.name, k.default) for k in s.knobs], [("BLOCK_SIZE", 512), ("num_warps", 4), ("num_stages", None)])

    def test_aliases_and_a_literal_launch_option(self):
        src = ("import torch\nimport triton as tr\nfrom triton import language as lang\n\n\n@tr.jit\n"
               "def k(x_ptr, y_ptr, n, B: lang.constexpr):\n    offs = tl_offs = lang.arange(0, B)\n"
               "    lang.store(y_ptr + offs, lang.load(x_ptr + offs))\n\n\n"
               "def launch(kernel, x):\n    y = torch.empty_like(x)\n    kernel[(1,)](x, y, x.numel(), B=1024, num_warps=2)\n    return y\n\n\n"
               + INPUTS)
        s = tt.parse("alias.py", "k", src)
        self.assertEqual(s.constexprs, ["B"])
        self.assertFalse(s.loops)
        self.assertEqual(s.unmasked, [(9, 5), (9, 30)])  # the store and the load, neither masked
        self.assertEqual([(k.name, k.where, k.default) for k in s.knobs], [("num_warps", "launcher", 2), ("num_stages", "launcher", None)])
        self.assertFalse(s.has_reference)


class Errors(unittest.TestCase):
    """A file that does not follow the contract: the exact message, at its line and column."""

    def check(self, src, message, fn="scale_kernel"):
        with self.assertRaises(ProblemError) as c:
            tt.parse("task.py", fn, src)
        self.assertEqual(str(c.exception), message)

    def test_messages(self):
        cases = [
            (HEADER + "def f(:\n", "task.py:6:7: error: syntax error: invalid syntax"),
            (HEADER + KERNEL + LAUNCH + INPUTS, "task.py:1:1: error: no function 'nope' at the top level of the file; its "
                                                "@triton.jit kernels: scale_kernel", "nope"),
            (HEADER + KERNEL.replace("@triton.jit\n", "") + LAUNCH + INPUTS,
             "task.py:6:1: error: 'scale_kernel' is not a @triton.jit kernel (its decorators: none)"),
            (HEADER + "@triton.autotune(configs=[], key=['n'])\n" + KERNEL + LAUNCH + INPUTS,
             "task.py:6:2: error: 'scale_kernel' is decorated with @triton.autotune: ksol tunes the configs itself; give "
             "the kernel with @triton.jit alone and its block sizes as keyword-only parameters of launch"),
            (HEADER + KERNEL + INPUTS,
             "task.py:1:1: error: no function 'launch': the file defines launch(kernel, *inputs, *, KNOB=default, ...), which "
             "runs the kernel given as its first argument on get_inputs()'s tensors and returns its output(s)"),
            (HEADER + KERNEL + LAUNCH.replace("kernel[", "scale_kernel[") + INPUTS,
             "task.py:12:5: error: launch launches 'scale_kernel' by its name: launch the kernel it is given, its first "
             "parameter (kernel[grid](...)), which is the kernel ksol configures"),
            (HEADER + KERNEL + LAUNCH.replace("kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)", "print(kernel)")
             + INPUTS, "task.py:10:1: error: launch never launches its first parameter 'kernel' (kernel[grid](...))"),
            (HEADER + KERNEL + LAUNCH.replace("BLOCK=256)", "BLOCK=256, TILE=4)") + INPUTS,
             "task.py:10:37: error: launch's keyword-only parameter 'TILE' is not a knob: knobs are num_warps, num_stages "
             "and the tl.constexpr parameters of 'scale_kernel' (BLOCK)"),
            (HEADER + KERNEL + LAUNCH.replace("BLOCK=256)", "BLOCK=250)") + INPUTS,
             "task.py:10:32: error: knob 'BLOCK' defaults to 250, not a power of two: a block size is one (tl.arange needs it)"),
            (HEADER + KERNEL + LAUNCH.replace("BLOCK=256)", "BLOCK=2 ** 8)") + INPUTS,
             "task.py:10:32: error: knob 'BLOCK' needs a positive integer literal as its default, not 2 ** 8"),
            (HEADER + KERNEL + LAUNCH.replace("BLOCK=256)", "BLOCK=256, num_warps)") + INPUTS,
             "task.py:10:37: error: launch's keyword-only parameter 'num_warps' has no default: a knob's default is its "
             "value in the kernel as given"),
            (HEADER + KERNEL + LAUNCH.replace("(kernel, x,", "(x,") + INPUTS,
             "task.py:10:1: error: launch never launches its first parameter 'x' (x[grid](...))"),
            (HEADER + KERNEL + LAUNCH,
             "task.py:1:1: error: no function 'get_inputs': the file defines get_inputs(), which returns the kernel's input "
             "tensors (made without a device; ksol draws them on the GPU)"),
            (HEADER + "@triton.jit\n@other\n" + KERNEL.replace("@triton.jit\n", "") + LAUNCH + INPUTS,
             "task.py:7:2: error: 'scale_kernel' has decorators besides @triton.jit (@other): ksol launches the "
             "@triton.jit kernel alone"),
        ]
        for case in cases:
            with self.subTest(message=case[1]):
                self.check(case[0], case[1], *case[2:])

    def test_the_bad_files_of_the_cli_cases(self):
        # tests/errors/cli/optimize_triton_*.case give these files to `ksol optimize --triton-fn`.
        for name, fn, message in [
            ("autotuned.py", "add_kernel", "autotuned.py:7:2: error: 'add_kernel' is decorated with @triton.autotune"),
            ("launch_by_name.py", "add_kernel", "launch_by_name.py:18:5: error: launch launches 'add_kernel' by its name"),
        ]:
            with self.assertRaises(ProblemError) as c:
                tt.parse(os.path.join(TRITON_DIR, "bad", name), fn)
            self.assertTrue(str(c.exception).startswith(os.path.join(TRITON_DIR, "bad", message)), str(c.exception))


class Space(unittest.TestCase):
    def test_softmax_values_from_the_shapes(self):
        knobs = tt.space(tt.parse(SOFTMAX, "softmax_kernel"), [[4096, 8192]])
        self.assertEqual({k.name: k.values for k in knobs},
                         {"BLOCK_SIZE": [1024, 16, 32, 64, 128, 256, 512, 2048, 4096, 8192], "num_warps": [4, 1, 2, 8, 16],
                          "num_stages": [None, 1, 2, 3, 4]})
        self.assertEqual(knobs[0].why, "powers of two 16..8192 (the largest input extent is 8192)")
        self.assertEqual(len(tt.configs(knobs)), 10 * 5 * 5)
        self.assertEqual(tt.configs(knobs)[0], {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": None})
        self.assertEqual(tt.label("softmax_kernel", {"BLOCK_SIZE": 2048, "num_warps": 8, "num_stages": 2}, knobs),
                         "softmax_kernel_block_size2048_w8_s2")
        self.assertEqual(tt.label("softmax_kernel", tt.default_config(knobs), knobs), "softmax_kernel_block_size1024_w4")
        self.assertEqual(tt.config_text({"BLOCK_SIZE": 2048, "num_warps": 8, "num_stages": None}), "BLOCK_SIZE=2048 num_warps=8")

    def test_no_loop_no_stages_and_an_unmasked_kernel_keeps_to_the_extents(self):
        src = (HEADER + KERNEL.replace(", mask=offs < n)", ")") + LAUNCH.replace("BLOCK=256)", "BLOCK=64)") + INPUTS)
        spec = tt.parse("task.py", "scale_kernel", src)
        self.assertFalse(spec.loops)
        # Extents 3 * 64 and 2 * 64 * 5: past the default 64 only 128 divides both... 640 % 128 = 0, 192 % 128 != 0.
        knobs = tt.space(spec, [[192], [640]])
        self.assertEqual(knobs[0].values, [64, 16, 32])
        self.assertIn("no larger block than the default unless it divides every extent the default divides (192, 640)", knobs[0].why)
        self.assertEqual(knobs[2].values, [None])
        self.assertEqual(knobs[2].why, "not tuned: the kernel has no loop to pipeline")

    def test_block_sizes_multiply_within_tritons_largest_tensor(self):
        src = (HEADER + "@triton.jit\ndef k(x, BM: tl.constexpr, BN: tl.constexpr):\n    pass\n\n\n"
               "def launch(kernel, x, *, BM=64, BN=64):\n    kernel[(1,)](x, BM=BM, BN=BN)\n\n\n" + INPUTS)
        knobs = tt.space(tt.parse("t.py", "k", src), [[1 << 20, 1 << 20]])
        cs = tt.configs(knobs)
        self.assertTrue(all(c["BM"] * c["BN"] <= 1 << 20 for c in cs))
        self.assertIn({"BM": 1024, "BN": 1024, "num_warps": None, "num_stages": None}, cs)
        self.assertNotIn({"BM": 2048, "BN": 1024, "num_warps": None, "num_stages": None}, cs)


class CoordinateSearch(unittest.TestCase):
    """The search against scripted measurements: a time per config, failures where scripted."""

    def knobs(self):
        return tt.space(tt.parse(SOFTMAX, "softmax_kernel"), [[4096, 8192]])

    @staticmethod
    def bowl(best):
        """A time that grows with each knob's distance (in log2) from `best`."""
        def measure(c):
            t = 10.0
            for k, v in best.items():
                a, b = c[k], v
                t += 3 * abs(math.log2(a or 2) - math.log2(b or 2))
            return {"status": "ok", "median_us": t}
        return measure

    def test_finds_the_fastest_config_one_knob_at_a_time(self):
        best = {"BLOCK_SIZE": 4096, "num_warps": 16, "num_stages": 1}
        order, cur, stop = tt.coordinate_search(self.knobs(), self.bowl(best), max_configs=100)
        self.assertEqual(cur, best)
        self.assertEqual(stop, "converged")
        self.assertEqual(order[0][0], {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": None})  # the default first
        # The neighbours of the current value first: 512 and 2048 before 16.
        blocks = [c["BLOCK_SIZE"] for c, _ in order[1:10]]
        self.assertEqual(blocks[:2], [512, 2048])
        self.assertEqual(len({json.dumps(c, sort_keys=True) for c, _ in order}), len(order))  # nothing measured twice

    def test_failures_never_win_and_a_failing_default_is_left(self):
        best = {"BLOCK_SIZE": 4096, "num_warps": 16, "num_stages": 1}
        ok = self.bowl(best)

        def measure(c):
            if c["BLOCK_SIZE"] == 1024 or c["num_warps"] == 16:
                return {"status": "failed", "error": "correctness/wrong_result"}
            return ok(c)

        order, cur, _ = tt.coordinate_search(self.knobs(), measure, max_configs=200)
        self.assertEqual(order[0][1]["status"], "failed")
        self.assertEqual(cur, {"BLOCK_SIZE": 4096, "num_warps": 8, "num_stages": 1})

    def test_stops_at_the_count_and_at_the_deadline(self):
        order, _, stop = tt.coordinate_search(self.knobs(), self.bowl({"BLOCK_SIZE": 64, "num_warps": 1, "num_stages": 4}), max_configs=7)
        self.assertEqual((len(order), stop), (7, "configs"))
        now = [0.0]

        def measure(c):
            now[0] += 1.0
            return {"status": "ok", "median_us": 5.0}

        order, cur, stop = tt.coordinate_search(self.knobs(), measure, max_configs=100, deadline=3.0, clock=lambda: now[0])
        self.assertEqual((len(order), stop), (3, "seconds"))
        self.assertEqual(cur, {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": None})  # nothing 2% faster

    def test_a_gain_under_two_percent_does_not_move(self):
        def measure(c):
            return {"status": "ok", "median_us": 100.0 - (1.0 if c["num_warps"] == 8 else 0.0)}

        _, cur, stop = tt.coordinate_search(self.knobs(), measure, max_configs=100)
        self.assertEqual((cur["num_warps"], stop), (4, "converged"))


@needs_torch
class Prepare(Files):
    def test_problem_and_default_config_files(self):
        r = tt.prepare(SOFTMAX, "softmax_kernel", self.path("work"))
        self.assertTrue(r["ok"])
        self.assertEqual(r["inputs"], [{"shape": [4096, 8192], "dtype": "float32"}])
        self.assertEqual((r["space"], r["default_label"]), (250, "softmax_kernel_block_size1024_w4"))
        self.assertEqual(r["default"], {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": None})
        self.assertEqual(r["problem"], self.path("work", "softmax_kernel.py"))
        self.assertEqual(r["default_candidate"], self.path("work", "configs", "softmax_kernel_block_size1024_w4.py"))
        # The problem is a KernelBench problem whose Model is the reference.
        from ksol_torch import problem

        prob = problem.load(r["problem"])
        model, inputs = problem.instantiate(prob, 0, meta=True)
        self.assertEqual([list(x.shape) for x in inputs], [[4096, 8192]])
        x = torch.randn(3, 5)
        torch.testing.assert_close(model(x), torch.softmax(x, dim=-1))
        ns = {}
        with open(r["default_candidate"]) as fh:
            exec(compile(fh.read(), r["default_candidate"], "exec"), ns)
        self.assertEqual(ns["ModelNew"].__name__, "softmax_kernel_block_size1024_w4")

    def test_without_triton_launching_says_why(self):
        if _has_triton():
            self.skipTest("Triton is installed here: the stand-in is not used")
        task = tt.load_task(SOFTMAX, "softmax_kernel")
        with self.assertRaises(RuntimeError) as c:
            task.run({}, torch.randn(2, 8))
        self.assertEqual(str(c.exception), f"Triton is not installed for {sys.executable}: @triton.jit kernel softmax_kernel "
                                           "cannot run here (ksol parses the file, traces its reference and lists its configs "
                                           "without Triton)")

    def test_errors_of_the_running_file(self):
        bad = self.file(HEADER + KERNEL + LAUNCH + "def get_inputs():\n    return torch.randn(4)\n")
        with self.assertRaises(ProblemError) as c:
            tt.prepare(bad, "scale_kernel", self.path("w"))
        self.assertEqual(str(c.exception), f"{bad}:14:1: error: get_inputs() must return a list, not Tensor")
        bad = self.file(HEADER + KERNEL + LAUNCH + "def get_inputs():\n    return [torch.randn(4) + undefined]\n")
        with self.assertRaises(ProblemError) as c:
            tt.prepare(bad, "scale_kernel", self.path("w"))
        self.assertEqual(str(c.exception), f"{bad}:15:1: error: get_inputs() raised NameError: name 'undefined' is not defined")
        bad = self.file(HEADER + "SIZE = 1 // 0\n" + KERNEL + LAUNCH + INPUTS)
        with self.assertRaises(ProblemError) as c:
            tt.prepare(bad, "scale_kernel", self.path("w"))
        self.assertEqual(str(c.exception), f"{bad}:6:1: error: running the file raised ZeroDivisionError: integer division or modulo by zero")
        self.assertFalse(os.path.exists(self.path("w")))

    def test_without_a_reference_the_model_is_the_kernel_as_given(self):
        p = self.file(HEADER + KERNEL + LAUNCH + INPUTS)
        r = tt.prepare(p, "scale_kernel", self.path("w"))
        self.assertFalse(r["reference"])
        with open(r["problem"]) as fh:
            text = fh.read()
        self.assertIn("return _task.run({}, x)", text)
        self.assertIn("scale_kernel at its default config (the file has no reference())", text)


@needs_torch
class ReferencesLower(unittest.TestCase):
    """The two tasks' references are each one DSL program (the DSL candidates' seed), equal to the
    reference in float64 (tests/torch/dsl_eval.py evaluates the program)."""

    def check(self, path, fn, family):
        sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))
        try:
            import dsl_eval
        finally:
            sys.path.pop(0)
        from ksol_torch import problem, synth

        with TempDirPath() as d:
            r = tt.prepare(path, fn, d)
            prob = problem.load(r["problem"])
            model, inputs = problem.instantiate(prob, 0, meta=True)
            out = synth.synthesize(model, inputs)
        self.assertIsNotNone(out["program"], out.get("reason"))
        self.assertEqual(out["family"], family)
        small = [torch.randn(6, 40)] + ([torch.rand(40) + 0.5, torch.randn(40)] if len(inputs) == 3 else [])
        dims = dict(out["dims"], R=6, C=40)
        env = {f"input{i}": x.double() for i, x in enumerate(small)}
        got = dsl_eval.run(out["program"], dsl_eval.as_declared(out["program"], dims, env), dims)["output0"]
        if len(small) == 3:
            want = torch.nn.functional.layer_norm(env["input0"], (40,), env["input1"], env["input2"], 1e-5)
        else:
            want = torch.softmax(env["input0"], dim=-1)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        return out

    def test_softmax(self):
        self.check(SOFTMAX, "softmax_kernel", "rowwise")

    def test_layernorm_with_weight_and_bias_from_get_inputs(self):
        out = self.check(LAYERNORM, "layernorm_kernel", "rowwise")
        self.assertIn("input1[c] + input2[c]", out["program"])


class TempDirPath:
    def __enter__(self):
        import tempfile

        self.d = tempfile.TemporaryDirectory()
        return self.d.name

    def __exit__(self, *exc):
        self.d.cleanup()


def _small(path, d, rows, cols):
    """A copy of a task file with smaller shapes, for the interpreter."""
    with open(path) as fh:
        text = fh.read()
    text = text.replace("ROWS, COLS = 4096, 8192", f"ROWS, COLS = {rows}, {cols}").replace("ROWS, COLS = 4096, 4096", f"ROWS, COLS = {rows}, {cols}")
    p = os.path.join(d, os.path.basename(path))
    with open(p, "w") as fh:
        fh.write(text)
    return p


@needs_torch
@needs_triton
class Interpreted(Files):
    """The kernels run by Triton's interpreter on the CPU, through the worker's gates and the
    screening search: what the GPU runs, minus the GPU."""

    def setUp(self):
        super().setUp()
        os.environ["TRITON_INTERPRET"] = "1"
        # Triton 3.6's interpreter turns a loop bound into int() of a one-element array, which
        # NumPy 2.5 refuses: the kernels here loop over their rows.
        import numpy

        try:
            int(numpy.array([1]))
        except TypeError:
            import triton

            self.skipTest(f"Triton {triton.__version__}'s interpreter cannot run a loop under NumPy {numpy.__version__} "
                          "(int() of a one-element array); NumPy < 2.3 can")

    def test_worker_verifies_configs_and_catches_a_wrong_one(self):
        from ksol_torch import worker

        p = _small(SOFTMAX, self.path(), 8, 200)
        r = tt.prepare(p, "softmax_kernel", self.path("work"))
        knobs = [tt.Knob(**k) for k in r["knobs"]]
        spec = tt.parse(p, "softmax_kernel")
        good = tt.write_candidate(self.path("work"), spec, {"BLOCK_SIZE": 64, "num_warps": 2, "num_stages": 1}, knobs)
        res = worker.evaluate({"problem": r["problem"], "candidate": good, "device": "cpu", "seeds": [1, 2, 3], "baselines": False,
                               "kernelbench": False})
        self.assertEqual(res["status"], "ok", res.get("message"))
        self.assertEqual(len(res["correctness"]["cases"]), 9)
        # A kernel that drops the last column block: the reference catches it.
        with open(p) as fh:
            text = fh.read()
        wrong = self.file(text.replace("for start in range(0, n_cols, BLOCK_SIZE):\n        cols = start + offs\n        x = tl.load(in_row + cols, mask=cols < n_cols, other=float(\"-inf\")).to(tl.float32)\n        tl.store",
                                       "for start in range(0, n_cols - BLOCK_SIZE, BLOCK_SIZE):\n        cols = start + offs\n        x = tl.load(in_row + cols, mask=cols < n_cols, other=float(\"-inf\")).to(tl.float32)\n        tl.store"),
                          "wrong.py")
        r2 = tt.prepare(wrong, "softmax_kernel", self.path("work2"))
        res = worker.evaluate({"problem": r2["problem"], "candidate": r2["default_candidate"], "device": "cpu", "seeds": [1, 2, 3],
                               "baselines": False, "kernelbench": False})
        self.assertEqual((res["status"], res["error_class"]), ("failed", "wrong_result"), res.get("message"))

    def test_layernorm_without_reference_is_checked_against_its_default_config_in_float64(self):
        from ksol_torch import worker

        p = _small(LAYERNORM, self.path(), 4, 96)
        with open(p) as fh:
            text = fh.read()
        p = self.file(text[:text.index("def reference")], "layernorm_noref.py")
        r = tt.prepare(p, "layernorm_kernel", self.path("work"))
        self.assertFalse(r["reference"])
        spec = tt.parse(p, "layernorm_kernel")
        knobs = [tt.Knob(**k) for k in r["knobs"]]
        c = tt.write_candidate(self.path("work"), spec, {"BLOCK_SIZE": 32, "num_warps": 4, "num_stages": 2}, knobs)
        res = worker.evaluate({"problem": r["problem"], "candidate": c, "device": "cpu", "seeds": [1, 2, 3], "baselines": False,
                               "kernelbench": False})
        self.assertEqual(res["status"], "ok", res.get("message"))

    def test_screen_searches_and_writes_the_fastest_for_verification(self):
        p = _small(SOFTMAX, self.path(), 4, 100)
        tt.prepare(p, "softmax_kernel", self.path("work"))
        r = tt.prepare(p, "softmax_kernel", self.path("work"))
        with open(self.path("task.json"), "w") as fh:
            json.dump(r, fh)
        out = tt.screen(self.path("task.json"), self.path("log.jsonl"), max_configs=6, top=2, deadline=None, device="cpu")
        self.assertEqual(len(out["screened"]), 6)
        self.assertEqual(out["screened"][0]["label"], "softmax_kernel_block_size1024_w4")
        self.assertTrue(all(s["status"] == "ok" for s in out["screened"]), out["screened"])
        self.assertEqual(len(out["verify"]), 2)
        self.assertTrue(all(os.path.exists(v["candidate"]) for v in out["verify"]))
        # A rerun replays the log: nothing is measured again.
        with open(self.path("log.jsonl")) as fh:
            n = len(fh.readlines())
        again = tt.screen(self.path("task.json"), self.path("log.jsonl"), max_configs=6, top=2, deadline=None, device="cpu")
        self.assertEqual([s["label"] for s in again["screened"]], [s["label"] for s in out["screened"]])
        with open(self.path("log.jsonl")) as fh:
            self.assertEqual(len(fh.readlines()), n)


    def test_screen_in_batches_goes_on_from_the_log(self):
        p = _small(SOFTMAX, self.path(), 4, 100)
        r = tt.prepare(p, "softmax_kernel", self.path("work"))
        with open(self.path("task.json"), "w") as fh:
            json.dump(r, fh)
        # A batch deadline already past: each process measures one config and stops ("batch").
        first = tt.screen(self.path("task.json"), self.path("log.jsonl"), max_configs=3, top=2, deadline=None, device="cpu",
                          batch_deadline=1.0)
        self.assertEqual((first["stop"], first["measured"], len(first["screened"]), first["verify"]), ("batch", 1, 1, []))
        second = tt.screen(self.path("task.json"), self.path("log.jsonl"), max_configs=3, top=2, deadline=None, device="cpu",
                           batch_deadline=1.0)
        self.assertEqual((second["stop"], second["measured"], len(second["screened"])), ("batch", 1, 2))
        last = tt.screen(self.path("task.json"), self.path("log.jsonl"), max_configs=3, top=2, deadline=None, device="cpu")
        self.assertEqual((last["stop"], last["measured"], len(last["screened"]), len(last["verify"])), ("configs", 1, 3, 2))
        self.assertEqual(last["screened"][:2], second["screened"])

    def test_compare_times_every_contender_side_by_side_in_one_process(self):
        p = _small(SOFTMAX, self.path(), 4, 100)
        r = tt.prepare(p, "softmax_kernel", self.path("work"))
        with open(self.path("task.json"), "w") as fh:
            json.dump(r, fh)
        # The module path's folder where its search returned PyTorch: no DSL contender, and why.
        from fixtures import item_one_program, write_run

        write_run(self.path("dsl"), r["problem"], item_one_program(use_baseline=True), emulated=True)
        out = tt.compare(self.path("task.json"), [
            {"name": "triton", "kind": "triton", "config": r["default"]},
            {"name": "softmax_kernel_block_size64_w2", "kind": "triton", "config": {"BLOCK_SIZE": 64, "num_warps": 2, "num_stages": None}},
            {"name": "model_rowwise", "kind": "dsl", "dir": self.path("dsl")},
            {"name": "eager", "kind": "pytorch"},
            {"name": "compile", "kind": "pytorch"},
        ], "cpu", rounds=2)
        self.assertTrue(out["ok"])
        self.assertEqual(out["rounds"], 2)
        got = {c["name"]: c for c in out["contenders"]}
        # torch.compile traces reference(), whose module is the task file's own; on the CPU its code
        # is C++, built by the host's compiler.
        for name in ("triton", "softmax_kernel_block_size64_w2", "eager") + (("compile",) if shutil.which("c++") else ()):
            self.assertEqual(len(got[name]["rounds_us"]), 2, got[name])
            self.assertGreater(got[name]["median_us"], 0)
        self.assertNotIn("median_us", got["model_rowwise"])
        self.assertTrue(got["model_rowwise"]["error"].startswith("ValueError: the DSL search returned PyTorch itself"), got["model_rowwise"])

    def test_compare_leaves_out_a_contender_that_fails_its_check(self):
        p = _small(SOFTMAX, self.path(), 4, 100)
        with open(p) as fh:
            text = fh.read()
        # Wrong only at BLOCK_SIZE 16: the check before the timing catches what the timing would run.
        wrong = self.file(text.replace("for start in range(0, n_cols, BLOCK_SIZE):",
                                       "for start in range(0, n_cols - (BLOCK_SIZE == 16) * BLOCK_SIZE, BLOCK_SIZE):"), "wrong16.py")
        r = tt.prepare(wrong, "softmax_kernel", self.path("work"))
        with open(self.path("task.json"), "w") as fh:
            json.dump(r, fh)
        out = tt.compare(self.path("task.json"), [
            {"name": "triton", "kind": "triton", "config": r["default"]},
            {"name": "k16", "kind": "triton", "config": {"BLOCK_SIZE": 16, "num_warps": 4, "num_stages": None}},
        ], "cpu", rounds=1)
        got = {c["name"]: c for c in out["contenders"]}
        self.assertGreater(got["triton"]["median_us"], 0)
        self.assertNotIn("median_us", got["k16"])
        self.assertIn("correctness/wrong_result", got["k16"]["error"])


class ScreenLog(TempDir):
    """The screening's log across processes (triton_task.Measurements), with scripted
    measurements: what a process replays, blames, and where it stops."""

    def knobs(self):
        return tt.space(tt.parse(SOFTMAX, "softmax_kernel"), [[4096, 8192]])

    def test_batches_go_on_from_the_log_and_measure_nothing_twice(self):
        knobs = self.knobs()
        ran = []

        def run_one(c):
            ran.append(json.dumps(c, sort_keys=True))
            return CoordinateSearch.bowl({"BLOCK_SIZE": 4096, "num_warps": 16, "num_stages": 1})(c)

        whole, _, whole_stop = tt.coordinate_search(knobs, run_one, max_configs=30)
        ran.clear()
        # Each process's share of the time is up once it has measured one config: one config per
        # process, each going on from the log, none measured twice, the same search in the end.
        now = [0.0]

        def clock():
            now[0] += 1.0
            return now[0]

        runs, stop = 0, "batch"
        while stop == "batch":
            runs += 1
            m = tt.Measurements(self.path("log.jsonl"), run_one, deadline=None, batch_deadline=now[0] + 0.5, clock=clock)
            order, _, stop = tt.coordinate_search(knobs, m, max_configs=30)
            m.close()
            self.assertLessEqual(m.measured, 1)
        self.assertEqual(stop, whole_stop)
        self.assertEqual(runs, len(whole))
        self.assertEqual(order, [(c, dict(r, seconds=order[i][1]["seconds"])) for i, (c, r) in enumerate(whole)])
        self.assertEqual(len(ran), len(whole))
        self.assertEqual(len(set(ran)), len(ran))

    def test_only_the_config_running_when_a_process_ended_is_blamed_and_the_drivers_reason_kept(self):
        a, b, c = {"BLOCK_SIZE": 1}, {"BLOCK_SIZE": 2}, {"BLOCK_SIZE": 4}
        log = self.path("log.jsonl")
        killed = "killed at the timeout: still running 610 s after it started, past the 600 s a config may take (--timeout)"
        with open(log, "w") as fh:
            for e in [{"event": "start", "config": a}, {"event": "result", "config": a, "result": {"status": "ok", "median_us": 3.0}},
                      {"event": "start", "config": b},
                      {"event": "result", "config": b, "result": {"status": "failed", "error": killed}},
                      {"event": "start", "config": c}]:
                fh.write(json.dumps(e) + "\n")
        ran = []
        m = tt.Measurements(log, lambda cfg: ran.append(cfg) or {"status": "ok", "median_us": 1.0})
        self.assertEqual(m(a), {"status": "ok", "median_us": 3.0})
        self.assertEqual(m(b), {"status": "failed", "error": killed})
        self.assertEqual(m(c), {"status": "failed", "error": tt.ENDED_UNDER})  # no reason written: the generic one
        self.assertEqual(m({"BLOCK_SIZE": 8})["status"], "ok")
        m.close()
        self.assertEqual(ran, [{"BLOCK_SIZE": 8}])
        done, running = tt._read_log(log)
        self.assertIsNone(running)
        self.assertEqual(len(done), 4)

    def test_the_budget_stops_new_configs_never_a_replay(self):
        log = self.path("log.jsonl")
        m = tt.Measurements(log, lambda c: {"status": "ok", "median_us": 2.0}, name=lambda c: f"k{c['B']}")
        m({"B": 1})
        m.close()
        with open(log) as fh:
            start = json.loads(fh.readline())
        self.assertEqual((start["event"], start["label"]), ("start", "k1"))
        self.assertGreater(start["t"], 0)
        late = tt.Measurements(log, lambda c: self.fail("nothing new runs past the deadline"), deadline=0.0, clock=lambda: 10.0)
        self.assertEqual(late({"B": 1})["median_us"], 2.0)
        with self.assertRaises(tt._Stop) as s:
            late({"B": 2})
        self.assertEqual(str(s.exception), "seconds")
        late.close()

    def test_a_config_running_when_the_process_ended_failed(self):
        p = self.path("log.jsonl")
        with open(p, "w") as fh:
            fh.write(json.dumps({"event": "start", "config": {"B": 1}}) + "\n")
            fh.write(json.dumps({"event": "result", "config": {"B": 1}, "result": {"status": "ok", "median_us": 3.0}}) + "\n")
            fh.write(json.dumps({"event": "start", "config": {"B": 2}}) + "\n")
            fh.write('{"event": "res')  # cut short
        done, running = tt._read_log(p)
        self.assertEqual(done, {json.dumps({"B": 1}): {"status": "ok", "median_us": 3.0}})
        self.assertEqual(running, {"B": 2})


if __name__ == "__main__":
    unittest.main()
