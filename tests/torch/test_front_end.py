"""The PyTorch front end on small problems written for these tests in KernelBench's format,
PyTorch on the CPU. Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

from ksol_torch import lower, problem, report, screen, trace

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = os.path.join(HERE, "problems")
BAD = os.path.join(HERE, "bad")


def imported(name):
    p = problem.load(os.path.join(PROBLEMS, name))
    model, inputs = problem.instantiate(p, 0)
    g = trace.trace(model, inputs)
    return p, model, g, lower.lower(g)


class Load(unittest.TestCase):
    def expect_error(self, name, line, col, text):
        path = os.path.join(BAD, name)
        with self.assertRaises(problem.ProblemError) as cm:
            p = problem.load(path)
            problem.instantiate(p, 0)
        e = cm.exception
        self.assertEqual((e.line, e.col), (line, col), str(e))
        self.assertIn(text, str(e))
        self.assertTrue(str(e).startswith(f"{path}:{line}:{col}: error: "), str(e))

    def test_syntax_error_names_line_and_column(self):
        self.expect_error("syntax_error.py", 5, 25, "syntax error")

    def test_missing_function(self):
        self.expect_error("missing_init.py", 1, 1, "missing get_init_inputs")

    def test_model_must_be_a_module(self):
        self.expect_error("not_module.py", 4, 1, "Model must be a subclass of torch.nn.Module")

    def test_exception_in_get_inputs_points_at_its_line(self):
        self.expect_error("raises.py", 12, 1, "get_inputs() raised AttributeError")

    def test_instantiation_is_deterministic_in_the_seed(self):
        p = problem.load(os.path.join(PROBLEMS, "01_gemm_relu.py"))
        m1, x1 = problem.instantiate(p, 3)
        m2, x2 = problem.instantiate(p, 3)
        m3, _ = problem.instantiate(p, 4)
        self.assertTrue(torch.equal(m1.fc.weight, m2.fc.weight))
        self.assertTrue(torch.equal(x1[0], x2[0]))
        self.assertFalse(torch.equal(m1.fc.weight, m3.fc.weight))


class Batch(unittest.TestCase):
    def test_a_failing_forward_costs_only_its_own_file(self):
        from ksol_torch import __main__ as cli

        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            rc = cli.main(["import", "--json-out", out, "--", os.path.join(BAD, "forward_raises.py"),
                           os.path.join(PROBLEMS, "02_softmax.py")])
            with open(out) as fh:
                res = json.load(fh)
        self.assertEqual(rc, 2)
        self.assertFalse(res[0]["ok"])
        self.assertIn("forward_raises.py:7:1: error: RuntimeError: this forward always fails", res[0]["error"])
        self.assertTrue(res[1]["ok"])
        self.assertEqual(res[1]["pieces"][0]["family"], "rowwise")


class TraceAndCost(unittest.TestCase):
    def test_accumulation_is_the_longest_sum_of_any_op(self):
        # The correctness gate's error growth: K for a GEMM, a normalization's extent (its
        # output is as large as its input, so FLOPs per output would say ~4).
        self.assertEqual(imported("01_gemm_relu.py")[2].accumulation, 32)
        self.assertEqual(imported("02_softmax.py")[2].accumulation, 64)

        class Norms(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ln = torch.nn.LayerNorm([6, 10])
                self.gn = torch.nn.GroupNorm(2, 4)

            def forward(self, x):
                return (torch.nn.functional.layer_norm(x, (10,)), self.ln(x), self.gn(x), x.sum(dim=(1, 2)),
                        torch.softmax(x, dim=1), torch.cumsum(x, 2))

        class Selections(torch.nn.Module):
            def forward(self, x):
                return (torch.max(x, x * 2), torch.amax(x, dim=3), torch.argmax(x, dim=3), x.max(dim=2)[0],
                        torch.nn.functional.local_response_norm(x, 3))

        sel = trace.trace(Selections(), [torch.randn(3, 4, 6, 10)])
        self.assertEqual({o.op: o.accumulation for o in sel.ops if o.kind == "rowwise"},
                         {"max": 1, "amax": 1, "argmax": 1, "local_response_norm": 3})
        g = trace.trace(Norms(), [torch.randn(3, 4, 6, 10)])
        by_op = {o.op: o.accumulation for o in g.ops}
        self.assertEqual(by_op, {"layer_norm": 60, "group_norm": 2 * 6 * 10, "sum": 4 * 6, "softmax": 4, "cumsum": 6})
        self.assertEqual([o.accumulation for o in g.ops if o.op == "layer_norm"], [10, 60])
        self.assertEqual(g.accumulation, 120)
    def test_linear_relu_flops_and_bytes(self):
        _, _, g, pieces = imported("01_gemm_relu.py")
        self.assertTrue(g.traced)
        self.assertEqual([o.op for o in g.ops], ["linear", "relu"])
        # 8x32 @ 32x16: 2*M*N*K, plus the bias and the ReLU once per output
        self.assertEqual(g.flops, 2 * 8 * 16 * 32 + 8 * 16 + 8 * 16)
        # input, weight, bias, output, each once, float32
        self.assertEqual(g.bytes, 4 * (8 * 32 + 16 * 32 + 16 + 8 * 16))
        self.assertEqual(len(pieces), 1)
        self.assertEqual((pieces[0].family, pieces[0].dsl), ("gemm", True))
        self.assertEqual([o.op for o in pieces[0].ops], ["linear", "relu"])

    def test_conv_flops(self):
        _, _, g, _ = imported("03_conv_bn_relu.py")
        conv = g.ops[0]
        self.assertEqual(conv.op, "conv2d")
        self.assertEqual(conv.shape, [2, 4, 8, 8])
        # every output: 2 * C_in * k*k FLOPs, plus the bias
        self.assertEqual(conv.flops, 2 * (2 * 4 * 8 * 8) * 3 * 9 + 2 * 4 * 8 * 8)

    def test_a_masked_products_bound_counts_only_the_kept_entries(self):
        class Masked(torch.nn.Module):
            def __init__(self, which, diagonal):
                super().__init__()
                self.which, self.diagonal = which, diagonal

            def forward(self, a, b):
                return getattr(torch, self.which)(torch.matmul(a, b), diagonal=self.diagonal)

        class Reused(torch.nn.Module):
            def forward(self, a, b):
                c = torch.matmul(a, b)
                return torch.tril(c) + c

        a, b = torch.randn(6, 4), torch.randn(4, 5)
        full = 2 * 6 * 5 * 4
        for which, diagonal, kept in [("tril", 0, 1 + 2 + 3 + 4 + 5 + 5), ("tril", -2, 0 + 0 + 1 + 2 + 3 + 4),
                                      ("triu", 1, 4 + 3 + 2 + 1 + 0 + 0), ("triu", -1, 5 + 5 + 4 + 3 + 2 + 1)]:
            g = trace.trace(Masked(which, diagonal), [a, b])
            mm = g.ops[0]
            self.assertEqual(mm.op, "matmul")
            self.assertAlmostEqual(mm.flops, full * kept / 30, msg=(which, diagonal))
            self.assertEqual(mm.accumulation, 4)  # each kept entry still sums K terms
        # A product used beside its mask needs every entry.
        g = trace.trace(Reused(), [a, b])
        self.assertEqual(g.ops[0].flops, full)

    def test_untraceable_module_is_one_opaque_op(self):
        _, _, g, pieces = imported("06_data_dependent.py")
        self.assertFalse(g.traced)
        self.assertIn("TraceError", g.reason)
        self.assertEqual([(p.family, p.dsl) for p in pieces], [("torch", False)])


class Lowering(unittest.TestCase):
    def test_import_reports_the_plan_optimize_runs(self):
        # `ksol import` and `ksol optimize` cut a forward the same way: import's pieces are
        # stitch.py's DSL pieces, in graph order with the ops it keeps.
        from ksol_torch import __main__ as cli, stitch
        files = [os.path.join(PROBLEMS, "03_conv_bn_relu.py"), os.path.join(HERE, "synth_problems", "14_gemm_row_reductions.py")]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            self.assertEqual(cli.main(["import", "--no-screen", "--json-out", out, "--"] + files), 0)
            with open(out) as fh:
                res = json.load(fh)
        for path, r in zip(files, res):
            model, inputs = problem.instantiate(problem.load(path), 0)
            plan = stitch.split(model, inputs)
            self.assertEqual([p["nodes"] for p in r["pieces"] if p["dsl"]], [p.nodes for p in plan.pieces], path)
            self.assertEqual([p["family"] for p in r["pieces"] if p["dsl"]], [p.family for p in plan.pieces], path)
            self.assertEqual(sorted(p["nodes"][0] for p in r["pieces"] if not p["dsl"]), sorted(k["node"] for k in plan.kept))
        self.assertEqual([(p["family"], p["ops"]) for p in res[0]["pieces"]],
                         [("torch", ["conv2d"]), ("elementwise", ["relu"]), ("direct", ["max_pool2d"])])

    def test_residual_add_is_a_gemm_epilogue_and_norm_takes_gelu(self):
        _, _, _, pieces = imported("05_residual_layernorm.py")
        self.assertEqual([(p.family, [o.op for o in p.ops]) for p in pieces],
                         [("gemm", ["matmul", "add"]), ("rowwise", ["layer_norm", "gelu"])])
        self.assertIn("input0", pieces[0].inputs)  # the residual reads the input again
        self.assertTrue(all(p.dsl for p in pieces))

    def test_conv_and_pool_stay_vendor_or_torch_calls(self):
        _, _, _, pieces = imported("03_conv_bn_relu.py")
        self.assertEqual([(p.family, p.dsl) for p in pieces], [("conv", False), ("torch", False)])
        self.assertIn("cuDNN", pieces[0].reason)

    def test_an_op_with_two_users_is_not_fused_away(self):
        class Two(torch.nn.Module):
            def forward(self, x):
                y = torch.relu(x)
                return torch.sigmoid(y) + torch.tanh(y)

        g = trace.trace(Two(), [torch.randn(4, 4)])
        pieces = lower.lower(g)
        first = pieces[0]
        self.assertEqual([o.op for o in first.ops], ["relu"])  # relu's output is needed twice
        self.assertGreater(len(pieces), 1)


class Screening(unittest.TestCase):
    def verdict(self, name):
        p, model, g, _ = imported(name)
        return screen.screen(p, model, g.flops).verdict

    def test_honest_problems_pass(self):
        for name in ("01_gemm_relu.py", "02_softmax.py", "03_conv_bn_relu.py", "05_residual_layernorm.py"):
            self.assertEqual(self.verdict(name), "ok", name)

    def test_degenerate_problems_are_marked(self):
        self.assertEqual(self.verdict("04_constant.py"), "constant_fill")
        self.assertEqual(self.verdict("07_zero.py"), "zero")

    def test_the_judge_sees_each_criterion(self):
        def judge(*draws):
            j = screen.Judge()
            for d in draws:
                j.add([torch.tensor(x, dtype=torch.float64) for x in d])
            return j.verdict().verdict
        self.assertEqual(judge([[1.0, 2.0]], [[3.0, 1.0]]), "ok")
        self.assertEqual(judge([[0.0, 0.0]], [[0.0, 0.0]]), "zero")
        self.assertEqual(judge([[2.0, 2.0]], [[5.0, 5.0]]), "constant_fill")
        self.assertEqual(judge([[2.0, 2.0]], [[5.0, 6.0]]), "ok")  # one draw varies: not a fill
        self.assertEqual(judge([[1.0, 2.0], [3.0]], [[1.0, 2.0], [3.0]]), "input_independent")
        self.assertEqual(judge([[1.0, 2.0], [3.0]], [[1.0, 2.0], [4.0]]), "ok")  # the second output moved
        self.assertEqual(judge([[1.0, float("nan")]], [[1.0, 2.0]]), "nonfinite")
        self.assertEqual(judge([[1.0, 2.0]], [[1.0, 2.0, 3.0]]), "ok")  # sizes depend on the inputs
        self.assertEqual(judge(), "skipped")
        self.assertEqual(judge([[]], [[]]), "skipped")  # empty outputs: nothing to judge
        # NaN in a later draw: not finite (never "input_independent" by a NaN difference).
        self.assertEqual(judge([[1.0, 2.0, 3.0]], [[float("nan"), 5.0, 6.0]], [[7.0, float("nan"), 9.0]]), "nonfinite")

    def test_large_problems_are_skipped_with_the_reason(self):
        p, model, g, _ = imported("01_gemm_relu.py")
        s = screen.screen(p, model, g.flops, max_flops=1.0)
        self.assertEqual(s.verdict, "skipped")
        self.assertIn("GFLOP", s.detail)


class Report(unittest.TestCase):
    RESULTS = [
        {"problem": "a", "correct": True, "ksol_us": 50.0, "eager_us": 100.0, "compile_us": 80.0},   # 2.0x, 1.6x
        {"problem": "b", "correct": True, "ksol_us": 100.0, "eager_us": 120.0, "compile_us": 90.0},  # 1.2x, 0.9x
        {"problem": "c", "correct": False, "ksol_us": 10.0, "eager_us": 100.0, "compile_us": 100.0,
         "fell_back": True, "reason": "wrong_result at h1"},
        {"problem": "d", "correct": True, "ksol_us": 1.0, "eager_us": 9.0, "compile_us": 9.0, "degenerate": True},
    ]

    def test_fast_p_follows_kernelbench(self):
        s = report.summarize(self.RESULTS)
        self.assertEqual(s["counted"], 3)
        self.assertEqual(s["degenerate"], ["d"])
        self.assertAlmostEqual(s["correctness_rate"], 2 / 3)
        self.assertEqual(s["fast_p_vs_eager"], {"0.0": 2 / 3, "0.5": 2 / 3, "0.8": 2 / 3, "1.0": 2 / 3, "1.5": 1 / 3,
                                                "2.0": 0.0})  # 2.0x is not > 2
        self.assertEqual(s["fast_p_vs_compile"]["1.0"], 1 / 3)
        self.assertEqual(s["fast_p_vs_compile"]["0.8"], 2 / 3)  # b is 0.9x torch.compile
        # Against the better of eager and torch.compile: a 1.6x (80 us), b 0.9x (90 us).
        self.assertEqual(s["fast_p_vs_best"]["1.0"], 1 / 3)
        self.assertAlmostEqual(s["geomean_speedup_vs_best_correct"], (1.6 * 0.9) ** 0.5)
        self.assertEqual((s["own_kernel"], s["own_kernel_rate"]), (1, 1 / 3))
        self.assertIn("ksol's own kernel returned (correct, faster than the better of eager and torch.compile): 1 of 3",
                      report.format_summary(s))
        self.assertNotIn("levels", s, "no problem is named after a KernelBench level")
        self.assertAlmostEqual(s["geomean_speedup_vs_eager_correct"], (2.0 * 1.2) ** 0.5)
        # c fell back to the better baseline: as fast as eager, so 1.0x against eager
        self.assertAlmostEqual(s["geomean_speedup_vs_eager_delivered"], (2.0 * 1.2 * 1.0) ** (1 / 3))
        self.assertEqual(s["fell_back"], [{"problem": "c", "reason": "wrong_result at h1"}])
        self.assertIn("fell back: c", report.format_summary(s))

    def test_each_level_is_summarized_apart(self):
        rs = [dict(r, problem=f"level{1 + i % 2}/{r['problem']}") for i, r in enumerate(self.RESULTS)]
        s = report.summarize(rs)
        self.assertEqual(sorted(s["levels"]), ["level1", "level2"])
        l1, l2 = s["levels"]["level1"], s["levels"]["level2"]
        self.assertEqual((l1["counted"], l2["counted"]), (2, 1))  # level1: a and c; level2: b (d is degenerate)
        self.assertEqual(l1["fast_p_vs_best"]["1.0"], 1 / 2)
        self.assertEqual(l2["fast_p_vs_best"]["0.8"], 1.0)
        self.assertAlmostEqual(l1["geomean_speedup_vs_compile_delivered"], (1.6 * 1.0) ** 0.5)
        text = report.format_summary(s)
        self.assertIn("level1: 2 counted, correct 1 (50.0%)", text)
        self.assertIn("  vs the better of eager and torch.compile: fast_0.0 50.0%", text)

    def test_cli_report(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(self.RESULTS, fh)
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        out = subprocess.run([sys.executable, "-m", "ksol_torch", "report", fh.name], capture_output=True, text=True, env=env)
        os.unlink(fh.name)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("correct 2 (66.7%)", out.stdout)

    def test_from_eval_module_documents(self):
        base = {"eager": {"median_us": 100.0}, "compile": {"median_us": 80.0}}
        docs = [
            {"problem": "/p/a.py", "results": [
                {"candidate": "x.py", "status": "failed", "failed_gate": "correctness", "error_class": "wrong_result",
                 "message": "off", "baselines": base},
                {"candidate": "y.so", "status": "ok", "timing": {"median_us": 40.0}, "baselines": base}]},
            {"problem": "/p/b.py", "results": [
                {"candidate": "z.py", "status": "ok", "timing": {"median_us": 90.0}, "baselines": base}]},
            {"problem": "/p/c.py", "results": [
                {"candidate": "w.py", "status": "failed", "failed_gate": "correctness", "error_class": "pytorch_fallback",
                 "message": "addmm", "baselines": base}]},
        ]
        rs = report.from_eval_module(docs)
        self.assertEqual([r["problem"] for r in rs], ["a", "b", "c"])
        self.assertEqual((rs[0]["correct"], rs[0]["ksol_us"], rs[0]["fell_back"]), (True, 40.0, False))
        self.assertTrue(rs[1]["fell_back"])  # 90 us is not faster than torch.compile's 80
        self.assertIn("not faster than eager/torch.compile", rs[1]["reason"])
        self.assertEqual((rs[2]["correct"], rs[2]["fell_back"]), (False, True))
        self.assertIn("pytorch_fallback", rs[2]["reason"])
        s = report.summarize(rs)
        self.assertAlmostEqual(s["fast_p_vs_eager"]["1.0"], 2 / 3)  # a (2.5x) and b (1.11x)

    def test_from_optimize_module_documents(self):
        # ksol optimize FILE.py --json-out: a verified winner, a verified kernel slower than the
        # baselines, a forward that is not one DSL program.
        docs = [
            {"problem": "/p/a.py", "results": [{"stop_reason": "plateau", "use_baseline": False, "best": {"score_us": 40.0},
                                                "baseline_us": {"eager": 100.0, "compile": 80.0, "compile_max_autotune": 70.0}}]},
            {"problem": "/p/b.py", "results": [{"stop_reason": "seconds", "use_baseline": True, "best": {"score_us": 90.0},
                                                "baseline_us": {"eager": 100.0, "compile": 80.0}}]},
            {"problem": "/p/c.py", "results": [{"stop_reason": "not_lowered", "use_baseline": True, "reason": "no DSL form for conv2d",
                                                "baseline_us": {"eager": 100.0, "compile": 0.0}}]},
        ]
        rs = report.from_optimize_module(docs)
        self.assertEqual((rs[0]["correct"], rs[0]["ksol_us"], rs[0]["fell_back"]), (True, 40.0, False))
        self.assertEqual(rs[0]["compile_us"], 70.0)  # the faster of torch.compile's modes, as a user would pick
        self.assertEqual((rs[1]["correct"], rs[1]["fell_back"]), (True, True))
        self.assertIn("not faster than the best baseline", rs[1]["reason"])
        self.assertEqual((rs[2]["correct"], rs[2]["fell_back"], rs[2]["compile_us"]), (False, True, None))
        self.assertIn("conv2d", rs[2]["reason"])
        # Stitched modules: one faster than both baselines, one that failed a gate.
        stitched = [
            {"problem": "/p/d.py", "results": [{"stop_reason": "stitched", "use_baseline": False,
                                                "stitched": {"status": "ok", "median_us": 50.0},
                                                "baseline_us": {"eager": 100.0, "compile": 80.0}}]},
            {"problem": "/p/e.py", "results": [{"stop_reason": "stitched", "use_baseline": True,
                                                "reason": "the stitched module failed: wrong_result",
                                                "stitched": {"status": "failed", "median_us": 0.0},
                                                "baseline_us": {"eager": 100.0, "compile": 80.0}}]},
        ]
        rs2 = report.from_optimize_module(stitched)
        self.assertEqual((rs2[0]["correct"], rs2[0]["ksol_us"], rs2[0]["fell_back"]), (True, 50.0, False))
        self.assertEqual((rs2[1]["correct"], rs2[1]["fell_back"]), (False, True))
        self.assertIn("stitched: the stitched module failed", rs2[1]["reason"])
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(docs, fh)
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        out = subprocess.run([sys.executable, "-m", "ksol_torch", "report", fh.name], capture_output=True, text=True, env=env)
        os.unlink(fh.name)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("correct 2 (66.7%)", out.stdout)
        self.assertIn("fell back: c: not one DSL program: no DSL form for conv2d", out.stdout)

    def test_the_inductor_paths_answer_counts_where_it_was_returned(self):
        # --path best: the Inductor path returned with a ksol kernel in the compiled model
        # (1.25x over torch.compile as it measured both), and one where it only tied.
        def doc(name, chosen, answer, speedup):
            return {"problem": f"/kb/level2/{name}.py",
                    "results": [{"stop_reason": "plateau", "use_baseline": True, "best": {"score_us": 90.0},
                                 "baseline_us": {"eager": 100.0, "compile": 80.0}}],
                    "path": {"chosen": chosen, "fx": {"ok": True, "answer": "compile", "speedup_vs_compile": 1.0},
                             "inductor": {"ok": True, "answer": answer, "speedup_vs_compile": speedup}}}
        docs = [doc("5_a", "inductor", "inductor+ksol", 1.25), doc("10_b", "fx", "compile", 1.0)]
        for d in docs:
            d["results"][0]["kernelbench"] = {"correct": True, "mean_us": 95.0, "eager_mean_us": 100.0}
        won, tied = report.from_optimize_module(docs)
        self.assertNotIn("kb", won)  # KernelBench's protocol ran on the fx path's kernel, not on this answer
        self.assertIn("kb", tied)
        self.assertEqual((won["correct"], won["fell_back"], won["form"], won["path"]), (True, False, "inductor+ksol", "inductor"))
        self.assertAlmostEqual(won["ksol_us"], 64.0)  # 80 us / 1.25
        self.assertEqual((tied["fell_back"], tied["form"], tied["ksol_us"]), (True, "one DSL program", 90.0))
        s = report.summarize([won, tied])
        self.assertEqual(s["own_kernel"], 1)
        self.assertAlmostEqual(s["geomean_speedup_vs_compile_delivered"], (1.25 * 1.0) ** 0.5)

    def test_the_table_has_a_line_per_problem_with_what_was_returned(self):
        docs = [
            {"problem": "/kb/level1/5_a.py", "results": [{"stop_reason": "plateau", "use_baseline": False, "best": {"score_us": 40.0},
                                                          "candidates": 4, "baseline_us": {"eager": 100.0, "compile": 80.0}}]},
            {"problem": "/kb/level2/5_a.py", "results": [{"stop_reason": "stitched", "use_baseline": True, "pieces": [{}, {}],
                                                          "reason": "the stitched module (90 us) is not faster than compile_max_autotune",
                                                          "stitched": {"status": "ok", "median_us": 90.0},
                                                          "kernels": {"ksol": 3, "eager": 6, "compile": 4, "compile_max_autotune": 2},
                                                          "baseline_us": {"eager": 100.0, "compile": 80.0, "compile_max_autotune": 70.0}}]},
            {"problem": "/kb/level2/10_b.py", "results": [{"stop_reason": "killed", "use_baseline": True, "baseline_us": {},
                                                           "reason": "ksol optimize ran past the per-problem limit of 180 s and was killed"}]},
        ]
        rs = report.from_optimize_module(docs)
        self.assertEqual([r["problem"] for r in rs], ["level1/5_a", "level2/5_a", "level2/10_b"])  # the level tells them apart
        lines = report.format_table(rs).splitlines()
        self.assertEqual(len(lines), 2 + 3 + 1)
        self.assertRegex(lines[2], r"^level1/5_a\s+one DSL program\s+unstated\s+4\s+40\.0\s+100\.0\s+80\.0\s+2\.500x\s+2\.000x\s+-\s+ksol")
        # Kernels per call: ksol's against the faster torch.compile mode's (max-autotune here).
        self.assertRegex(lines[3], r"stitched \(2 piece\(s\)\).*70\.0\*\s+1\.111x\s+0\.778x\s+3/2\s+compile \(max-autotune\)")
        self.assertRegex(lines[4], r"^level2/10_b\s+killed\s+unstated\s+0\s+-\s+-\s+-\s+-\s+-\s+-\s+nothing timed\s+ksol optimize ran past")

    def test_the_precision_mode_is_on_every_line_and_in_the_summary(self):
        policy = {"mode": "default", "arithmetic": "tf32", "u_acc": 2.0 ** -11, "why": "TF32 allowed for cuDNN convolutions"}
        opt = {"problem": "/kb/level1/55_conv.py", "precision": policy,
               "results": [{"stop_reason": "plateau", "use_baseline": False, "best": {"score_us": 40.0},
                            "baseline_us": {"eager": 100.0, "compile": 80.0}}]}
        ev = {"problem": "/p/b.py", "precision": "strict",
              "results": [{"candidate": "z.py", "status": "ok", "timing": {"median_us": 90.0},
                           "baselines": {"eager": {"median_us": 100.0}},
                           "precision": {"mode": "strict", "arithmetic": "fp32"}}]}
        rs = report.from_optimize_module([opt])
        self.assertEqual(rs[0]["precision"], "default: tf32")
        self.assertRegex(report.format_table(rs).splitlines()[2], r"^level1/55_conv\s+one DSL program\s+default: tf32\s+")
        self.assertIn("precision: default (baselines and ksol under the same mode per problem)",
                      report.format_summary(report.summarize(rs)))
        rs2 = report.from_eval_module([ev])
        self.assertEqual(rs2[0]["precision"], "strict: fp32")
        mixed = report.format_summary(report.summarize(rs + rs2))
        self.assertIn("precision: mixed (default, strict)", mixed)
        # A document written before the modes says so rather than guessing one.
        del opt["precision"]
        self.assertEqual(report.from_optimize_module([opt])[0]["precision"], "unstated")

    def test_kernelbench_protocol_numbers_from_optimize_documents(self):
        def doc(name, verified, kb):
            item = {"stop_reason": "plateau", "use_baseline": not verified, "baseline_us": {"eager": 100.0, "compile": 80.0},
                    "kernelbench": kb}
            if verified:
                item["best"] = {"score_us": 50.0}
            return {"problem": f"/kb/level1/{name}.py", "results": [item]}
        docs = [doc("1_a", True, {"correct": True, "mean_us": 40.0, "eager_mean_us": 90.0}),
                doc("2_b", True, {"correct": False, "mean_us": None, "eager_mean_us": 90.0}),
                doc("3_c", False, {"correct": False, "error": "no candidate passed ksol's gates"})]
        s = report.summarize(report.from_optimize_module(docs))
        k = s["kernelbench_protocol"]
        self.assertEqual((k["problems"], k["correct"]), (3, 1))
        self.assertAlmostEqual(k["fast_p_vs_eager"]["1.0"], 1 / 3)
        self.assertAlmostEqual(k["geomean_speedup_vs_eager_correct"], 90.0 / 40.0)
        self.assertIn("KernelBench's protocol: correct 1 of 3", report.format_summary(s))
        # A run made before the optimize flow asked for the protocol has none to report.
        del docs[0]["results"][0]["kernelbench"], docs[1]["results"][0]["kernelbench"], docs[2]["results"][0]["kernelbench"]
        self.assertNotIn("kernelbench_protocol", report.summarize(report.from_optimize_module(docs)))

    def test_the_workers_screen_reports_degenerate_problems_apart(self):
        def doc(name, screen):
            return {"problem": f"/p/{name}.py", "results": [{"stop_reason": "plateau", "use_baseline": False, "best": {"score_us": 10.0},
                                                             "baseline_us": {"eager": 100.0, "compile": 80.0}, "screen": screen}]}
        docs = [doc("a", {"verdict": "ok", "detail": "outputs vary", "degenerate": False}),
                doc("z", {"verdict": "zero", "detail": "every output is 0 on 3 draws of the inputs", "degenerate": True})]
        rs = report.from_optimize_module(docs)
        self.assertEqual([r["degenerate"] for r in rs], [False, True])
        s = report.summarize(rs)
        self.assertEqual((s["counted"], s["screened"], s["degenerate"]), (1, 2, ["z"]))
        text = report.format_summary(s)
        self.assertIn("screened for degenerate outputs: 2; degenerate, reported apart: 1", text)
        self.assertIn("degenerate: z: zero: every output is 0", text)


if __name__ == "__main__":
    unittest.main()
