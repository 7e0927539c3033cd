"""ksol_torch.synth: a module's forward as one DSL program, checked in float64 against the module
itself (tests/torch/dsl_eval.py evaluates the program), and the reasons when it is not one.
Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import os
import unittest

import torch

from ksol_torch import problem, synth, worker

import dsl_eval

HERE = os.path.dirname(os.path.abspath(__file__))


def lowered(folder, name, seed=0):
    p = problem.load(os.path.join(HERE, folder, name))
    model, inputs = problem.instantiate(p, seed)
    return model, inputs, synth.synthesize(model, inputs)


class Synth(unittest.TestCase):
    def check_against_module(self, folder, name, family):
        model, inputs, out = lowered(folder, name)
        self.assertIsNotNone(out["program"], out["reason"])
        self.assertEqual(out["family"], family)
        # The tensor table is the ABI's: the forward's inputs, the state_dict in order, the output.
        names = [t["name"] for t in out["tensors"]]
        want = [f"input{i}" for i in range(len(inputs))] + list(synth.param_names(model.state_dict()).values()) + ["output0"]
        self.assertEqual(names, want)
        # Rows of a row-wise program merge the leading dims of contiguous tensors.
        flat = (lambda x: x.reshape(-1, x.shape[-1])) if family == "rowwise" else (lambda x: x)
        env = {f"input{i}": flat(x) for i, x in enumerate(inputs)}
        names = synth.param_names(model.state_dict())
        env.update({names[k]: v for k, v in model.state_dict().items()})
        got = dsl_eval.run(out["program"], env)["output0"]
        with torch.no_grad():
            ref = model.double()(*[x.double() for x in inputs])
        ref_full, ref = ref, flat(ref)
        self.assertEqual(tuple(got.shape), tuple(ref.shape))
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
        # Dims: every tensor's shape at these dims is the module's (leading dims merged for rows),
        # as the worker's binding check accepts it.
        for t, x in zip(out["tensors"], list(inputs) + list(model.state_dict().values()) + [ref_full]):
            want = [out["dims"][d] for d in t["shape"]]
            self.assertTrue(worker._same_layout(want, list(x.shape)), (t["name"], want, list(x.shape)))
        return out

    def test_elementwise_chain_of_activations(self):
        out = self.check_against_module("synth_problems", "01_activation_chain.py", "elementwise")
        self.assertIn("select(", out["program"])  # leaky_relu, elu, softplus, mish

    def test_rowwise_layernorm_then_log_softmax(self):
        self.check_against_module("synth_problems", "02_layernorm_logsoftmax.py", "rowwise")

    def test_linear_with_an_epilogue_and_a_parameter_along_n(self):
        out = self.check_against_module("synth_problems", "03_linear_epilogue.py", "gemm")
        self.assertIn("w_shift[n]", out["program"])

    def test_rowwise_over_the_last_dim_of_a_3d_tensor(self):
        self.check_against_module("synth_problems", "04_attention_softmax_3d.py", "rowwise")

    def test_same_layout_merges_leading_dims_only(self):
        self.assertTrue(worker._same_layout([12, 48], [2, 6, 48]))
        self.assertTrue(worker._same_layout([48], [48]))
        self.assertFalse(worker._same_layout([12, 48], [2, 48, 6]))
        self.assertFalse(worker._same_layout([2, 288], [2, 6, 48]))
        self.assertFalse(worker._same_layout([12, 48, 1], [12, 48]))

    def test_kernelbench_style_problems(self):
        self.check_against_module("problems", "01_gemm_relu.py", "gemm")
        self.check_against_module("problems", "02_softmax.py", "rowwise")
        self.check_against_module("problems", "07_zero.py", "elementwise")

    def test_reasons_when_the_forward_is_not_one_program(self):
        for name, text in [("03_conv_bn_relu.py", "conv2d"), ("05_residual_layernorm.py", "GEMM followed by a row-wise op"),
                           ("06_data_dependent.py", "cannot be traced")]:
            _, _, out = lowered("problems", name)
            self.assertIsNone(out["program"], name)
            self.assertIn(text, out["reason"], name)

    def test_clamp_min_and_max_and_dropout(self):
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = torch.nn.Dropout(0.5)

            def forward(self, x):
                return self.drop(torch.clamp_max(torch.clamp_min(x, -0.5), 0.25) + x.clamp_max(0.1))
        m = M().eval()
        x = torch.randn(6, 10)
        out = synth.synthesize(m, [x])
        self.assertIsNotNone(out["program"], out["reason"])
        got = dsl_eval.run(out["program"], {"input0": x})["output0"]
        torch.testing.assert_close(got, m.double()(x.double()), rtol=0, atol=0)
        m.train()
        self.assertIn("training mode", synth.synthesize(m, [x])["reason"])
        self.assertIn("training mode", synth.synthesize(type("F", (torch.nn.Module,), {
            "forward": lambda self, x: torch.nn.functional.dropout(x, 0.1)})().eval(), [x])["reason"])

    def test_parameter_names_never_meet(self):
        self.assertEqual(list(synth.param_names(["fc.weight", "fc_weight", "acc", "v1"]).values()),
                         ["w_fc_weight", "w_fc_weight_2", "w_acc", "w_v1"])

    def test_non_float32_is_refused_with_the_reason(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x)
        out = synth.synthesize(M(), [torch.randn(4, 4, dtype=torch.float64)])
        self.assertIsNone(out["program"])
        self.assertIn("only float32", out["reason"])


if __name__ == "__main__":
    unittest.main()
