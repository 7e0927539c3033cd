"""A user's module written as a KernelBench-format problem (python/ksol/serialize.py): it loads
in a fresh process without the user's class, computes what the module does, draws fresh inputs
like the example, builds on shape-only tensors; what cannot be written is refused with the reason."""
import os
import subprocess
import sys
import unittest

import ksol
from fixtures import ROOT, TempDir, needs_torch, torch
from ksol.serialize import write_problem

if torch is not None:
    from ksol_torch import problem

    class Net(torch.nn.Module):
        """Defined in this test file: the worker's process cannot import it."""

        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x, idx, mask, scale):
            y = torch.relu(self.drop(self.fc(x))) * scale
            return y + idx.float().mean() + mask.float().sum()


def example():
    torch.manual_seed(0)
    return [torch.randn(8, 32), torch.randint(3, 9, (4,)), torch.rand(8) < 0.25, 0.5]


@needs_torch
class WriteProblem(TempDir):
    def setUp(self):
        super().setUp()
        self.net = Net()
        self.net.train()
        self.files = write_problem(self.net, example(), self.path("run"), "Net")

    def test_the_file_is_a_kernelbench_problem_loaded_without_the_users_class(self):
        self.assertEqual(self.files.path, self.path("run", "Net.py"))
        self.assertTrue(self.files.traced)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        # What `ksol optimize` runs first, in a process of its own.
        p = subprocess.run([sys.executable, "-m", "ksol_torch", "synth", self.files.path, "--out", self.path("synth.json")],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_the_model_computes_what_the_module_does_in_eval_mode(self):
        prob = problem.load(self.files.path)
        model, _ = problem.instantiate(prob, 0)
        xs = example()
        self.assertTrue(self.net.training, "the caller's training flag is put back")
        self.net.eval()
        with torch.no_grad():
            self.assertTrue(torch.equal(model(*xs), self.net(*xs)))
        self.assertEqual(list(model.state_dict()), ["net.fc.weight", "net.fc.bias"])

    def test_get_inputs_draws_like_the_example(self):
        prob = problem.load(self.files.path)
        torch.manual_seed(1)
        a = problem.call(prob, "get_inputs")
        torch.manual_seed(2)
        b = problem.call(prob, "get_inputs")
        self.assertEqual([(tuple(t.shape), t.dtype) for t in a[:3]],
                         [((8, 32), torch.float32), ((4,), torch.int64), ((8,), torch.bool)])
        self.assertFalse(torch.equal(a[0], b[0]), "fresh values under another seed")
        ex = example()
        self.assertEqual(self.files.inputs[1], {"kind": "tensor", "shape": [4], "dtype": "int64", "draw": "integers",
                                                "low": int(ex[1].min()), "high": int(ex[1].max())})
        self.assertTrue(((a[1] >= ex[1].min()) & (a[1] <= ex[1].max())).all())
        self.assertEqual(a[3], 0.5)
        spec = self.files.inputs[0]
        self.assertEqual((spec["draw"], spec["mean"]), ("normal", float(f"{ex[0].double().mean().item():.6g}")))

    def test_it_builds_on_shape_only_tensors(self):
        prob = problem.load(self.files.path)
        model, xs = problem.instantiate(prob, 0, meta=True)
        self.assertTrue(model(*xs).is_meta)

    def test_input_draws(self):
        from ksol.serialize import input_spec

        self.assertEqual(input_spec(torch.tensor([0.5, 2.0, 1.0]), 0),
                         {"kind": "tensor", "shape": [3], "dtype": "float32", "draw": "uniform", "low": 0.5, "high": 2.0})
        self.assertEqual(input_spec(torch.zeros(2, 2), 0)["draw"], "normal")  # one value: standard normal
        self.assertEqual(input_spec(torch.ones(4, dtype=torch.bool), 0)["p"], 1.0)
        self.assertEqual(input_spec(None, 3), {"kind": "value", "value": None})


@needs_torch
class Refused(TempDir):
    def test_an_untraceable_module_whose_class_is_in_main(self):
        class Branchy(torch.nn.Module):
            def forward(self, x):
                return x if x.sum() > 0 else -x

        Branchy.__module__ = "__main__"
        with self.assertRaises(ksol.UnsupportedError) as c:
            write_problem(Branchy(), [torch.randn(4)], self.path("run"), "Branchy")
        self.assertIn("torch.fx cannot trace Branchy", str(c.exception))
        self.assertIn("define the class in a module file", str(c.exception))

    def test_inputs_it_cannot_draw(self):
        with self.assertRaises(ksol.UnsupportedError) as c:
            write_problem(torch.nn.ReLU(), [torch.randn(4), "text"], self.path("run"), "ReLU")
        self.assertEqual(str(c.exception), "input 1 is a str: ksol.optimize takes tensors and Python numbers")
        with self.assertRaises(ksol.UnsupportedError):
            write_problem(torch.nn.ReLU(), [3.0], self.path("run"), "ReLU")

    def test_outputs_that_are_not_tensors(self):
        class Named(torch.nn.Module):
            def forward(self, x):
                return {"y": x * 2}

        with self.assertRaises(ksol.UnsupportedError) as c:
            write_problem(Named(), [torch.randn(4)], self.path("run"), "Named")
        self.assertIn("returns dict", str(c.exception))

    def test_a_module_that_is_not_one(self):
        with self.assertRaises(ksol.UnsupportedError):
            write_problem(lambda x: x, [torch.randn(4)], self.path("run"), "f")


if __name__ == "__main__":
    unittest.main()
