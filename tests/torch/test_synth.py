"""ksol_torch.synth: a module's forward as one DSL program, checked in float64 against the module
itself (tests/torch/dsl_eval.py evaluates the program), and the reasons when it is not one.
Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import os
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from ksol_torch import abi, problem, synth

import dsl_eval

HERE = os.path.dirname(os.path.abspath(__file__))


def lowered(folder, name, seed=0):
    p = problem.load(os.path.join(HERE, folder, name))
    model, inputs = problem.instantiate(p, seed)
    return model, inputs, synth.synthesize(model, inputs)


class Synth(unittest.TestCase):
    def check_against_module(self, folder, name, family):
        model, inputs, _ = lowered(folder, name)
        return self.check_module(model, inputs, family)

    def check_module(self, model, inputs, family):
        out = synth.synthesize(model, inputs)
        self.assertIsNotNone(out["program"], out["reason"])
        self.assertEqual(out["family"], family)
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        # The tensor table is the ABI's: the forward's tensor inputs, the state_dict in order, the output.
        names = [t["name"] for t in out["tensors"]]
        want = [f"input{i}" for i in range(len(tensors))] + list(synth.param_names(model.state_dict()).values()) + ["output0"]
        self.assertEqual(names, want)
        # The program reads each tensor in its declared view of the module's layout (rows merged,
        # a row of several dims merged, a broadcast tensor without its size-1 dims).
        pnames = synth.param_names(model.state_dict())
        env = {f"input{i}": x for i, x in enumerate(tensors)}
        env.update({pnames[k]: v for k, v in model.state_dict().items()})
        got = dsl_eval.run(out["program"], dsl_eval.as_declared(out["program"], out["dims"], env), out["dims"])["output0"]
        with torch.no_grad():
            ref_full = model.double()(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs])
        ref = dsl_eval.as_declared(out["program"], out["dims"], {"output0": ref_full})["output0"]
        self.assertEqual(tuple(got.shape), tuple(ref.shape))
        if not ref.is_floating_point():  # indices (argmax): the evaluator computes in float64
            ref = ref.double()
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
        # Dims: every tensor of the table, at these dims, is the module's as the worker's binding
        # check accepts it (the same shape, or the same with leading dims merged).
        for t, x in zip(out["tensors"], tensors + list(model.state_dict().values()) + [ref_full]):
            want = [out["dims"][d] for d in t["shape"]]
            self.assertTrue(abi.same_layout(want, list(x.shape)), (t["name"], want, list(x.shape)))
        return out

    def test_elementwise_chain_of_activations(self):
        out = self.check_against_module("synth_problems", "01_activation_chain.py", "elementwise")
        self.assertIn("select(", out["program"])  # leaky_relu, elu, softplus, mish

    def test_rowwise_layernorm_then_log_softmax(self):
        self.check_against_module("synth_problems", "02_layernorm_logsoftmax.py", "rowwise")

    def test_linear_with_an_epilogue_and_a_parameter_along_n(self):
        out = self.check_against_module("synth_problems", "03_linear_epilogue.py", "gemm")
        self.assertIn("w_shift[n]", out["program"])

    def test_the_rowwise_seed_schedule_follows_the_shape(self):
        def schedule(model, x):
            out = synth.synthesize(model, [x])
            self.assertIsNotNone(out["program"], out["reason"])
            return out["program"].split("schedule {")[1]
        # Few long rows are split over blocks; rows of whole float4s are read 16 bytes at a time.
        few_long = schedule(nn.LayerNorm([2, 32768], elementwise_affine=False), torch.randn(4, 2, 32768))
        self.assertIn("reduction = two_pass", few_long)
        self.assertIn("vector = 4", few_long)
        many = schedule(nn.LayerNorm(2048), torch.randn(300, 2048))
        self.assertIn("reduction = block", many)
        self.assertIn("vector = 4", many)
        # Rows of 1024 or fewer get a warp each, eight rows to a block.
        short = schedule(nn.LayerNorm(16, elementwise_affine=False), torch.randn(4096, 16))  # a group norm group
        self.assertIn("reduction = warp", short)
        self.assertIn("rows_per_block = 8", short)
        self.assertIn("reduction = warp", schedule(nn.LayerNorm(1024), torch.randn(300, 1024)))
        odd = schedule(nn.Softmax(dim=1), torch.randn(3, 70001))
        self.assertIn("reduction = two_pass", odd)
        self.assertIn("vector = 1", odd)

        class Scan(nn.Module):
            def forward(self, x):
                return torch.cumsum(x, dim=1)
        # A scan is computed by one block per row.
        self.assertIn("reduction = block", schedule(Scan(), torch.randn(2, 65536)))

    def test_rowwise_over_the_last_dim_of_a_3d_tensor(self):
        self.check_against_module("synth_problems", "04_attention_softmax_3d.py", "rowwise")

    def test_layernorm_over_trailing_dims_is_one_row_of_their_product(self):
        # KernelBench's 40_LayerNorm: normalized over [F, H, W], the row is F*H*W long and the
        # affine weight and bias (of shape [F, H, W]) are read at the row's flattened index.
        out = self.check_against_module("synth_problems", "05_layernorm_trailing_dims.py", "rowwise")
        self.assertEqual(out["dims"], {"R": 3, "C": 120, "C0": 4, "C1": 5, "C2": 6})
        self.assertIn("w_ln_weight: f32[C]", out["program"])
        self.assertIn("w_ln_weight[c]", out["program"])
        # The table keeps the module's layout, which the worker's binding check compares.
        self.assertEqual([t["shape"] for t in out["tensors"]],
                         [["R", "C0", "C1", "C2"], ["C0", "C1", "C2"], ["C0", "C1", "C2"], ["R", "C0", "C1", "C2"]])
        self.assertFalse(abi.same_layout([3, 120], [3, 4, 5, 6]), "a flattened row needs the table's own dims")

    def test_functional_layernorm_over_two_dims_with_leading_dims_merged(self):
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.rand(4, 5) + 0.5)
                self.b = torch.nn.Parameter(torch.randn(4, 5))

            def forward(self, x):
                return F.layer_norm(torch.relu(x), (4, 5), self.w, self.b, 1e-3) * 2.0
        torch.manual_seed(7)
        out = self.check_module(M().eval(), [torch.randn(2, 3, 4, 5)], "rowwise")
        self.assertEqual(out["dims"], {"R": 6, "C": 20, "C0": 4, "C1": 5})
        self.assertEqual(out["tensors"][0]["shape"], ["R", "C0", "C1"])

    def test_an_input_read_through_a_permutation(self):
        # A forward input laid out channels-last ([N, H, W, C]) and permuted to [N, C, H, W]: the
        # program declares it as laid out and permutes its reads, for an elementwise chain and
        # for a pool; an argmax over it is refused with a reason (pools only).
        class Chain(nn.Module):
            def forward(self, x):
                return torch.tanh(x.permute(0, 3, 1, 2)) * 2.0

        class Pool(nn.Module):
            def forward(self, x):
                return F.relu(F.max_pool2d(x.permute(0, 3, 1, 2) - 0.25, 2))

        class Arg(nn.Module):
            def forward(self, x):
                return torch.argmax(x.permute(0, 2, 1), dim=1)
        torch.manual_seed(8)
        out = self.check_module(Chain(), [torch.randn(2, 5, 6, 3)], "elementwise")
        self.assertIn("input0: f32[D0, D2, D3, D1]", out["program"])
        self.assertNotIn("vector", out["program"])
        out = self.check_module(Pool(), [torch.randn(2, 6, 8, 3)], "direct")
        self.assertIn("input0[n, h*2+r, w*2+s, c]", out["program"])
        out = synth.synthesize(Arg(), [torch.randn(2, 5, 7)])
        self.assertIsNone(out["program"])
        self.assertIn("argmax", out["reason"])

    def test_a_norm_over_long_rows_reads_each_row_once_for_its_statistics(self):
        # Rows of 65536 or more fit no row cache: the mean and the mean square are one pass's two
        # float64 sums, so the statistics read the row once (the mean, then the squares about it,
        # would read it twice). Few such rows are split over blocks (reduction = two_pass).
        torch.manual_seed(3)
        out = self.check_module(nn.LayerNorm([2, 32768]).eval(), [torch.randn(3, 2, 32768) * 4 + 100], "rowwise")
        self.assertEqual(out["dims"]["C"], 65536)
        body = out["program"].split("schedule {")[0]
        self.assertEqual(body.count("mean(f64("), 2, body)
        self.assertIn("reduction = two_pass", out["program"])
        # Shorter rows keep the mean, then the mean of the squares about it, in float32.
        short = synth.synthesize(nn.LayerNorm(2048).eval(), [torch.randn(8, 2048)])["program"]
        self.assertNotIn("f64(", short)
        self.assertEqual(short.count("mean("), 2)
        # Many long rows (one block each) too, and instance norm of long planes.
        many = synth.synthesize(nn.LayerNorm(65536, elementwise_affine=False).eval(), [torch.randn(300, 65536)])["program"]
        self.assertIn("reduction = block", many)
        self.assertEqual(many.count("mean(f64("), 2)

        class Inst(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.InstanceNorm2d(2)

            def forward(self, x):
                return self.norm(x * 3.0 + 1.0)
        inst = self.check_module(Inst().eval(), [torch.randn(2, 2, 256, 256)], "rowwise")
        self.assertIn("mean(f64(", inst["program"])

    def test_a_one_dim_softmax_is_one_row(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.softmax(x * 0.5, dim=0)
        out = self.check_module(M(), [torch.randn(40)], "rowwise")
        self.assertEqual(out["dims"], {"R": 1, "C": 40})
        self.assertEqual(out["tensors"][0]["shape"], ["C"])

    def test_rowwise_ops_over_different_rows_are_refused(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.softmax(F.layer_norm(x, (4, 5)), dim=-1)
        out = synth.synthesize(M(), [torch.randn(3, 4, 5)])
        self.assertIsNone(out["program"])
        self.assertIn("different trailing dims", out["reason"])

    def test_a_broadcast_input_is_read_along_its_own_dims(self):
        # KernelBench's 100_HingeLoss before its mean: targets [N] broadcast over predictions' rows.
        out = self.check_against_module("synth_problems", "06_hinge_broadcast.py", "elementwise")
        self.assertIn("input1: f32[D1]", out["program"])
        self.assertIn("input1[i1]", out["program"])

    def test_broadcasts_of_lower_rank_and_size_one_dims(self):
        out = self.check_against_module("synth_problems", "07_broadcast_inputs_and_parameters.py", "elementwise")
        shapes = {t["name"]: t["shape"] for t in out["tensors"]}
        self.assertEqual(shapes["input1"], ["D2", "D3"])
        self.assertEqual(shapes["input2"], ["D0", "U", "U", "D3"])  # the module's [2, 1, 1, 5]
        self.assertEqual(shapes["w_scale"], ["D1", "U", "U"])
        self.assertEqual(out["dims"]["U"], 1)
        for read in ("input2[i0, i3]", "w_scale[i1]", "w_bias[i3]"):
            self.assertIn(read, out["program"])

    def test_one_value_broadcast_to_every_element_is_read_with_no_index(self):
        # An input of shape [1, 1] and parameters of shapes [] and [1] (KernelBench's learnable
        # scales): each declared with no extents and read s[], its module shape the layout's U = 1.
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.nn.Parameter(torch.tensor(0.75))
                self.shift = torch.nn.Parameter(torch.tensor([0.25]))

            def forward(self, x, y):
                return torch.min(x + y, self.shift) * self.scale - self.scale

        out = self.check_module(M(), [torch.randn(3, 4), torch.randn(1, 1)], "elementwise")
        for decl in ("input1: f32[]", "w_scale: f32[]", "w_shift: f32[]"):
            self.assertIn(decl, out["program"])
        for read in ("input1[]", "w_scale[]", "w_shift[]"):
            self.assertIn(read, out["program"])
        shapes = {t["name"]: t["shape"] for t in out["tensors"]}
        self.assertEqual((shapes["input1"], shapes["w_scale"], shapes["w_shift"]), (["U", "U"], [], ["U"]))
        # In a GEMM's epilogue and a row-wise chain too.
        class G(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 6)
                self.c = torch.nn.Parameter(torch.tensor(0.1))

            def forward(self, x):
                return torch.min(self.lin(x), self.c) - self.c

        self.assertIn("w_c[]", self.check_module(G(), [torch.randn(5, 8)], "gemm")["program"])

        class R(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.t = torch.nn.Parameter(torch.tensor([2.0]))

            def forward(self, x):
                return torch.softmax(x * self.t, dim=-1)

        self.assertIn("w_t[]", self.check_module(R(), [torch.randn(4, 9)], "rowwise")["program"])

        # A column reduction's kernels read no one-value tensor: refused there (stitching cuts before).
        class C(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.s = torch.nn.Parameter(torch.tensor(2.0))

            def forward(self, x):
                return (x * self.s).sum(dim=0)

        out = synth.synthesize(C(), [torch.randn(6, 5)])
        self.assertIsNone(out["program"])
        # KernelBench's 68_Matmul_Min_Subtract in small: both one-value parameters in the epilogue.
        out = self.check_against_module("synth_problems", "26_scalar_parameters.py", "gemm")
        self.assertIn("(min((acc[m, n] + w_linear_bias[n]), w_constant[])) - w_constant[])) * w_scale[]", out["program"])

    def test_a_shape_unpacked_into_names_traces(self):
        # KernelBench's level2/38: `b, c, d, h, w = x.shape` before a view (PyTorch 1.13's tracer
        # looked the unpacking up by the offset over 2, which Python 3.11's caches broke).
        from ksol_torch import trace

        class Unpack(torch.nn.Module):
            def forward(self, x):
                b, c, h = x.shape
                return torch.softmax(x.view(b * c, h), dim=1) * 2.0

        x = torch.randn(3, 4, 5)
        gm = trace.symbolic_trace(Unpack())
        torch.testing.assert_close(gm(x), Unpack()(x))
        self.assertNotEqual(torch.fx.Proxy.__iter__.__name__, "_iter_proxy")  # put back after the trace

    def test_tril_and_triu_are_masks_by_the_elements_position(self):
        # KernelBench's 15_Matmul_for_lower_triangular_matrices: the mask in the GEMM's epilogue.
        class Tril(torch.nn.Module):
            def forward(self, a, b):
                return torch.tril(torch.matmul(a, b))

        out = self.check_module(Tril(), [torch.randn(9, 7), torch.randn(7, 9)], "gemm")
        self.assertIn("output0[m, n] = (select(n <= m, acc[m, n], 0.0))", out["program"])

        class Bands(torch.nn.Module):
            def forward(self, x):
                return torch.triu(x, diagonal=1) * 2.0 + torch.tril(x, -2)

        out = self.check_module(Bands(), [torch.randn(3, 6, 5)], "elementwise")
        for mask in ("select(i2 >= i1 + 1,", "select(i2 <= i1 - 2,"):
            self.assertIn(mask, out["program"])
        # A GEMM over [B, S, K] merges B and S into its rows, where m is not tril's row: refused.
        class Merged(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 5)

            def forward(self, x):
                return torch.tril(self.lin(x))

        out = synth.synthesize(Merged(), [torch.randn(2, 5, 4)])
        self.assertIsNone(out["program"])
        self.assertIn("whose rows are not merged", out["reason"])

    def test_a_python_number_the_same_in_every_draw_is_a_constant(self):
        out = self.check_against_module("synth_problems", "08_scalar_input.py", "elementwise")
        self.assertIn("input0[i0, i1] * 3.14", out["program"])
        self.assertEqual([t["name"] for t in out["tensors"]], ["input0", "output0"])
        self.assertEqual(len(out["constants"]), 1)
        c = out["constants"][0]
        self.assertEqual((c["argument"], c["position"], c["value"]), ("s", 1, 3.14))
        self.assertIn("under every seed drawn", c["reason"])
        self.assertIn("# The forward's argument s is the constant 3.14: get_inputs gives 3.14", out["program"])

    def test_a_python_number_that_changes_between_draws_is_refused(self):
        _, _, out = lowered("synth_problems", "09_scalar_input_changes.py")
        self.assertIsNone(out["program"])
        self.assertIn("the forward's argument s is 1.5 here but 0.5 from get_inputs under seed 0", out["reason"])
        self.assertIn("not lowered as a constant", out["reason"])

    def test_a_python_number_without_get_inputs_to_draw_is_refused(self):
        class M(torch.nn.Module):
            def forward(self, x, k):
                return torch.softmax(x * k, dim=-1)
        x = torch.randn(4, 6)
        out = synth.synthesize(M(), [x, 2.0])
        self.assertIsNone(out["program"])
        self.assertIn("no get_inputs beside the Model", out["reason"])
        # Drawn by the caller instead: the same number under every seed is written as a constant,
        # also where the forward uses it as an argument of an op (the softmax's dim below).
        class D(torch.nn.Module):
            def forward(self, x, k, dim):
                return (x * k).softmax(dim)
        out = synth.synthesize(D(), [x, 2.0, 1], draw=lambda seeds: [[None, 2.0, 1] for _ in seeds])
        self.assertIsNotNone(out["program"], out["reason"])
        self.assertEqual([c["argument"] for c in out["constants"]], ["k", "dim"])
        got = dsl_eval.run(out["program"], {"input0": x})["output0"]
        torch.testing.assert_close(got, torch.softmax(x.double() * 2.0, dim=1), rtol=1e-12, atol=1e-12)
        out = synth.synthesize(D(), [x, 2.0, 1], draw=lambda seeds: [[None, 2.0 + s, 1] for s in seeds])
        self.assertIn("changes between draws", out["reason"])

    def test_a_default_argument_is_a_constant_and_other_values_are_refused(self):
        class M(torch.nn.Module):
            def forward(self, x, alpha=0.5):
                return x * alpha
        x = torch.randn(3, 4)
        out = synth.synthesize(M(), [x])
        self.assertIn("input0[i0, i1] * 0.5", out["program"] or out["reason"])
        self.assertIn("the forward's default", out["constants"][0]["reason"])

        class T(torch.nn.Module):
            def forward(self, x, t):
                return x * t[0]
        out = synth.synthesize(T(), [x, (2.0,)])
        self.assertIn("the forward's argument t is tuple (2.0,), not a tensor", out["reason"])

    def test_same_layout_merges_leading_dims_only(self):
        self.assertTrue(abi.same_layout([12, 48], [2, 6, 48]))
        self.assertTrue(abi.same_layout([48], [48]))
        self.assertFalse(abi.same_layout([12, 48], [2, 48, 6]))
        self.assertFalse(abi.same_layout([2, 288], [2, 6, 48]))
        self.assertFalse(abi.same_layout([12, 48, 1], [12, 48]))

    def test_kernelbench_style_problems(self):
        self.check_against_module("problems", "01_gemm_relu.py", "gemm")
        self.check_against_module("problems", "02_softmax.py", "rowwise")
        self.check_against_module("problems", "07_zero.py", "elementwise")

    def test_reasons_when_the_forward_is_not_one_program(self):
        for name, text in [("03_conv_bn_relu.py", "no DSL form for conv2d"), ("03_conv_bn_relu.py", "padding_mode 'reflect'"),("05_residual_layernorm.py", "GEMM followed by a row-wise op"),
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

    def test_conv_with_bias_and_relu_is_one_conv_program(self):
        out = self.check_against_module("synth_problems", "10_conv_bias_relu.py", "conv")
        self.assertIn("input0: f32[N, C, H, W] outside 0", out["program"])
        self.assertIn("w_conv_weight: f32[K, C, 3, 3]", out["program"])
        self.assertIn("acc[n, k, h, w] = sum(input0[n, c, h+r-1, w+s-1] * w_conv_weight[k, c, r, s]) over c, r, s", out["program"])
        self.assertIn("w_conv_bias[k]", out["program"])
        self.assertEqual(out["dims"], {"N": 2, "C": 3, "H": 9, "W": 8, "K": 5, "P": 9, "Q": 8, "R": 3, "S": 3})
        self.assertEqual([t["shape"] for t in out["tensors"]], [["N", "C", "H", "W"], ["K", "C", "R", "S"], ["K"], ["N", "K", "P", "Q"]])

    def test_a_reduction_over_a_convs_channels_is_its_epilogue(self):
        out = self.check_against_module("synth_problems", "27_conv_channel_min.py", "conv")
        self.assertIn("output0[n, h, w] = min((((acc[n, k, h, w] + w_conv_bias[k]) * 0.5))) over k", out["program"])
        self.assertIn("-> (output0: f32[N, P, Q])", out["program"])
        # The filter count is a number of the program, so the tiles with fewer filters are refused;
        # the table keeps its dim K.
        self.assertIn("w_conv_weight: f32[6, C, 3, 3], w_conv_bias: f32[6]", out["program"])
        self.assertEqual(out["tensors"][1]["shape"], ["K", "C", "R", "S"])
        self.assertEqual(out["tensors"][-1]["shape"], ["N", "U", "P", "Q"])  # keepdim: [N, 1, P, Q]

        class Reduce(torch.nn.Module):
            def __init__(self, how, filters=6):
                super().__init__()
                self.conv, self.how = torch.nn.Conv2d(3, filters, 3, stride=2), how

            def forward(self, x):
                y = torch.relu(self.conv(x))
                return {"sum": lambda: y.sum(dim=1), "mean": lambda: y.mean(1, keepdim=True),
                        "amax": lambda: torch.amax(y, dim=-3), "max": lambda: y.max(dim=1).values}[self.how]()

        x = torch.randn(2, 3, 9, 8)
        for how, op in (("sum", "sum"), ("mean", "mean"), ("amax", "max"), ("max", "max")):
            out = self.check_module(Reduce(how).eval(), [x], "conv")
            self.assertIn(f"output0[n, h, w] = {op}(", out["program"])
        # Ops after the reduction that read its value alone: the output's definition of it.
        class MinThenMap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 6, 3)

            def forward(self, x):
                return torch.tanh(torch.amin(self.conv(x), dim=1)) * 2.0 - 0.5

        out = self.check_module(MinThenMap().eval(), [x], "conv")
        self.assertIn("v1[n, h, w] = min(", out["program"])
        self.assertIn("output0[n, h, w] = ", out["program"])
        # More channels than one block holds: not the conv's epilogue.
        self.assertIn("more than one DSL program", synth.synthesize(Reduce("sum", 129).eval(), [x])["reason"])

    def test_conv_products_in_tf32_round_both_factors(self):
        # What a precision mode that lets cuDNN use TF32 lowers a convolution to: both factors in
        # tf32(), the tensor cores' kernel at its own tile; in float64 it is the module on a
        # TF32-rounded image and filter (the bias added as it is).
        model, inputs, fp = lowered("synth_problems", "10_conv_bias_relu.py")
        out = synth.synthesize(model, inputs, conv_products="tf32")
        self.assertEqual(out.get("conv_products"), "tf32")
        self.assertIn("acc[n, k, h, w] = sum(tf32(input0[n, c, h+r-1, w+s-1]) * tf32(w_conv_weight[k, c, r, s])) over c, r, s",
                      out["program"])
        # Its 5 filters take the narrowest tile: 128 pixels x 16 filters, eight warps of 16 x 16 outputs.
        self.assertIn("schedule {\n  mainloop = auto\n  tile = [128, 16, 16]\n  thread_tile = [1, 1]\n}", out["program"])
        self.assertEqual([synth._mma_tile(k) for k in (16, 17, 64, 65)],
                         [["tile = [128, 16, 16]", "thread_tile = [1, 1]"], ["tile = [128, 32, 16]", "thread_tile = [2, 1]"],
                          ["tile = [128, 64, 16]", "thread_tile = [2, 2]"], ["tile = [128, 128, 16]", "thread_tile = [2, 2]"]])
        self.assertNotIn("tf32(", fp["program"])
        self.assertNotIn("conv_products", fp)
        sd = model.state_dict()
        env = {"input0": inputs[0], "w_conv_weight": sd["conv.weight"], "w_conv_bias": sd["conv.bias"]}
        got = dsl_eval.run(out["program"], dsl_eval.as_declared(out["program"], out["dims"], env), out["dims"])["output0"]
        rounded = model.double()
        with torch.no_grad():
            rounded.conv.weight.copy_(dsl_eval.tf32(rounded.conv.weight))
            want = rounded(dsl_eval.tf32(inputs[0].double()))
            plain = model.double()(inputs[0].double())
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        self.assertFalse(torch.allclose(want, plain, rtol=1e-6, atol=0), "TF32 rounding changes the sums")
        with self.assertRaisesRegex(ValueError, "conv_products 'bf16': fp32 or tf32"):
            synth.synthesize(model, inputs, conv_products="bf16")

    def test_a_tf32_gemm_that_fills_the_gpu_falls_back_to_the_mma_kernel(self):
        # A TF32 GEMM of at least 132 output tiles of 128 x 256 (here 4096 x 8192: 512): the fallback
        # is the warp-level mma kernel; the same GEMM with 512 rows (32 tiles) keeps the SIMT kernel.
        for rows, mainloop in ((4096, "mma"), (512, "simt")):
            model, x = nn.Linear(1024, 8192, device="meta"), torch.empty(rows, 1024, device="meta")
            out = synth.synthesize(model, [x], gemm_products="tf32")
            self.assertIsNotNone(out["program"], out["reason"])
            self.assertIn("mainloop = cooperative", out["program"])
            self.assertIn(f"mainloop = {mainloop}", out["program_fallback"].split("schedule {")[1])

    def test_gemm_products_in_tf32_take_cutlass_with_a_cuda_core_fallback(self):
        # Where matmul may use TF32: both operands in tf32(), CUTLASS's mainloop, and the same program
        # on CUDA cores (a GEMM of few output tiles: the SIMT kernel splits K) for where the generator
        # refuses that; in float64 the module on TF32-rounded input and weight.
        import copy
        model, inputs, fp = lowered("synth_problems", "03_linear_epilogue.py")
        out = synth.synthesize(model, inputs, gemm_products="tf32")
        self.assertEqual(out.get("gemm_products"), "tf32")
        self.assertIn("acc[m, n] = sum(tf32(input0[m, k]) * tf32(w_fc_weight[n, k])) over k", out["program"])
        self.assertIn("mainloop = cooperative", out["program"])
        fb = out["program_fallback"]
        self.assertEqual(fb.split("schedule {")[0], out["program"].split("schedule {")[0])
        self.assertEqual(fb.split("schedule {")[1], fp["program"].split("schedule {")[1])
        self.assertNotIn("program_fallback", fp)
        sd = model.state_dict()
        pnames = synth.param_names(sd)
        env = {"input0": inputs[0]}
        env.update({pnames[k]: v for k, v in sd.items()})
        got = dsl_eval.run(out["program"], dsl_eval.as_declared(out["program"], out["dims"], env), out["dims"])["output0"]
        rounded = copy.deepcopy(model).double()
        with torch.no_grad():
            rounded.fc.weight.copy_(dsl_eval.tf32(rounded.fc.weight))
            want = rounded(dsl_eval.tf32(inputs[0].double()))
        ref = dsl_eval.as_declared(out["program"], out["dims"], {"output0": want})["output0"]
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
        with self.assertRaisesRegex(ValueError, "gemm_products 'bf16': fp32 or tf32"):
            synth.synthesize(model, inputs, gemm_products="bf16")

    def test_a_transposed_convolution_at_stride_1_is_no_one_program(self):
        # The stitched module runs it as a convolution by its flipped filter (weight preparation):
        # synth refuses it with that reason; at stride 2 it is the direct family's one program.
        for stride, family in ((1, None), (2, "direct")):
            with self.subTest(stride=stride):
                model = torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 5, 3, stride=stride, padding=1), torch.nn.Tanh())
                out = synth.synthesize(model, [torch.randn(2, 3, 6, 7)])
                self.assertEqual(out["family"], family, out["reason"])
                if family is None:
                    self.assertIn("conv_transpose2d at stride 1 is a convolution by its filter flipped", out["reason"])

    def test_direct_convolutions_take_tf32_products_too(self):
        # 3-D and grouped, transposed (divided indices), 1-D: both factors in tf32(); in float64 the
        # program is the module on a TF32-rounded input and convolution weights. Pools keep theirs.
        import copy
        for name in ("20_conv3d_grouped.py", "21_conv_transpose2d_epilogue.py", "22_conv_transpose3d_grouped.py"):
            model, inputs, fp = lowered("synth_problems", name)
            out = synth.synthesize(model, inputs, conv_products="tf32")
            self.assertEqual((out["family"], out.get("conv_products")), ("direct", "tf32"), name)
            self.assertEqual(out["program"].count("tf32("), 2, name)
            self.assertIn("= sum(tf32(input0[", out["program"], name)
            body = lambda prog: [l for l in prog.split("schedule {")[0].splitlines() if "sum(" not in l]
            self.assertEqual(body(out["program"]), body(fp["program"]), name)
            self.assertIn("  tile = [128, ", out["program"], name)  # the tensor cores' tile for its filter count
            pnames = synth.param_names(model.state_dict())
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            env = {f"input{i}": x for i, x in enumerate(tensors)}
            env.update({pnames[k]: v for k, v in model.state_dict().items()})
            got = dsl_eval.run(out["program"], dsl_eval.as_declared(out["program"], out["dims"], env), out["dims"])["output0"]
            rounded = copy.deepcopy(model).double()
            with torch.no_grad():
                for mod in rounded.modules():
                    if isinstance(mod, torch.nn.modules.conv._ConvNd):
                        mod.weight.copy_(dsl_eval.tf32(mod.weight))
                want = rounded(*[dsl_eval.tf32(x.double()) if i == 0 else x.double() for i, x in enumerate(tensors)])
            ref = dsl_eval.as_declared(out["program"], out["dims"], {"output0": want})["output0"]
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
        model, inputs, _ = lowered("synth_problems", "23_pools.py")
        self.assertNotIn("tf32(", synth.synthesize(model, inputs, conv_products="tf32")["program"])

    def test_conv_stride_dilation_and_padding_are_the_image_subscripts(self):
        # Stride (2, 1), dilation 2, padding (1, 2): h*2 + r*2 - 1 and w + s*2 - 2; P, Q from the output.
        out = self.check_against_module("synth_problems", "11_conv_stride_dilation.py", "conv")
        self.assertIn("input0[n, c, h*2+r*2-1, w+s*2-2]", out["program"])
        self.assertEqual((out["dims"]["P"], out["dims"]["Q"]), (5, 9))
        self.assertIn("w_conv_weight: f32[K, C, 3, 2]", out["program"])

    def test_conv_epilogue_reads_a_channel_shift_and_a_residual_input(self):
        out = self.check_against_module("synth_problems", "13_conv_epilogue_inputs.py", "conv")
        self.assertIn("input0[n, c, h*2+r, w*2+s]", out["program"])
        self.assertIn("w_shift[k]", out["program"])
        self.assertIn("input1[n, k, h, w]", out["program"])
        self.assertEqual(out["program"].count("] = "), 2, "a conv and one epilogue definition")

    def test_conv_without_epilogue_writes_the_output_directly(self):
        m = torch.nn.Conv2d(3, 4, 3, bias=False)
        x = torch.randn(1, 3, 6, 7)
        out = self.check_module(m, [x], "conv")
        self.assertIn("output0[n, k, h, w] = sum(", out["program"])
        self.assertNotIn("acc", out["program"])

    def test_convs_the_dsl_has_no_form_for_are_refused_with_the_reason(self):
        x4 = torch.randn(1, 3, 6, 6)
        for m, x, text in [
                (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")), x4, "padding_mode 'reflect'"),
                (torch.nn.Conv1d(3, 4, 3, padding=1, padding_mode="circular"), torch.randn(1, 3, 8), "conv1d with padding_mode"),
                (torch.nn.Conv3d(3, 4, 3, padding=1, padding_mode="replicate"), torch.randn(1, 3, 4, 4, 4), "conv3d with padding_mode"),
                (torch.nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), x4, "count_include_pad=False"),
                (torch.nn.Conv2d(3, 4, 3).double(), x4.double(), "float32")]:
            out = synth.synthesize(torch.nn.Sequential(m), [x])  # the conv as a module call, as a Model holds it
            self.assertIsNone(out["program"], text)
            self.assertIn(text, out["reason"])
        # Ops before the conv, or a second read of its image, are more than one conv program.
        class Pre(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 4, 3)

            def forward(self, x):
                return self.conv(torch.relu(x))
        self.assertIn("must read a forward input", synth.synthesize(Pre(), [x4])["reason"])

    def test_instance_norm_is_one_row_per_plane(self):
        # InstanceNorm2d without affine: each (sample, channel) plane of [2, 4, 5, 6] is a row of 30.
        out = self.check_against_module("synth_problems", "15_instance_norm_divide.py", "rowwise")
        self.assertEqual(out["dims"], {"R": 8, "C": 30, "C0": 5, "C1": 6})
        self.assertIn("mean(", out["program"])
        m = torch.nn.Sequential(torch.nn.InstanceNorm2d(4, affine=True))
        self.assertIn("affine", synth.synthesize(m, [torch.randn(2, 4, 5, 6)])["reason"])

    def test_reductions_over_trailing_dims_give_one_value_per_row(self):
        torch.manual_seed(11)
        x, y = torch.randn(3, 5, 7), torch.randn(3, 5, 7)
        for name, f, rows in [
                ("sum keepdim", lambda x: torch.sum(x, dim=2, keepdim=True) * 2.0, 15),
                ("mean over two dims", lambda x: torch.relu(x).mean(dim=(1, 2)), 3),
                ("max values", lambda x: torch.max(x, dim=-1)[0] + 1.0, 15),
                ("min .values", lambda x: torch.min(x, dim=2, keepdim=True).values, 15),
                ("amax", lambda x: torch.amax(x, dim=-1), 15),
                ("logsumexp", lambda x: torch.logsumexp(x * 2.0, dim=2), 15),
                ("l1 normalize", lambda x: x / torch.mean(torch.abs(x), dim=-1, keepdim=True), 15),
                ("l2 normalize", lambda x: x / torch.norm(x, p=2, dim=2, keepdim=True), 15),
                ("frobenius normalize", lambda x: x / torch.norm(x, p="fro"), 1)]:
            class M(torch.nn.Module):
                def forward(self, x):
                    return f(x)
            out = self.check_module(M(), [x], "rowwise")
            self.assertEqual(out["dims"]["R"], rows, name)

        class Mse(torch.nn.Module):
            def forward(self, a, b):
                return torch.mean((a - b) ** 2)
        out = self.check_module(Mse(), [x, y], "rowwise")
        self.assertEqual((out["dims"]["R"], out["tensors"][-1]["shape"]), (1, []))  # one row; the output is 0-d

    def test_reductions_over_leading_dims_are_column_reductions(self):
        # One definition, Y[c] = OP(f(X[r, c])) over r: the leading dims merged into r, the rest
        # into c (kept as C0, C1, ... for the tensor table), the prologue inlined.
        torch.manual_seed(12)
        x = torch.randn(4, 3, 5)
        for name, f, cols in [
                ("sum", lambda x: x.sum(0), 15),
                ("mean of squares keepdim", lambda x: torch.mean(x * x, dim=0, keepdim=True), 15),
                ("max values", lambda x: torch.max(torch.relu(x), dim=0)[0], 15),
                ("amin over two dims", lambda x: torch.amin(x - 1.0, dim=(0, 1), keepdim=True), 5)]:
            class M(torch.nn.Module):
                def forward(self, x):
                    return f(x)
            out = self.check_module(M(), [x], "rowwise")
            self.assertEqual(out["dims"]["C"], cols, name)
            self.assertRegex(out["program"], r"output0\[c\] = (sum|mean|max|min)\(.*\) over r", name)
        # Over middle dims: batched, Y[b, c] = OP(f(X[b, r, c])) over r, the dims before merged into b.
        x4 = torch.randn(4, 3, 5, 2)
        for name, f, dims in [
                ("sum over dim 1", lambda x: torch.sum(x, dim=1, keepdim=True), {"B": 4, "R": 3, "C": 10, "C0": 5, "C1": 2, "U": 1}),
                ("rms over channels", lambda x: torch.mean(x ** 2, dim=1), {"B": 4, "R": 3, "C": 10, "C0": 5, "C1": 2}),
                ("argmax-free max values", lambda x: torch.max(x, dim=2)[0], {"B": 12, "R": 5, "C": 2}),
                ("min over two middle dims", lambda x: torch.amin(x, dim=(1, 2)), {"B": 4, "R": 15, "C": 2, "R0": 3, "R1": 5})]:
            class M(torch.nn.Module):
                def forward(self, x):
                    return f(x)
            out = self.check_module(M(), [x4], "rowwise")
            self.assertEqual(out["dims"], dims, name)
            self.assertIn("output0[b, c] = ", out["program"], name)
        # Size-1 dims after the reduced one: a row-wise reduction (logsumexp over the channels of [B, C, 1, 1]).
        class Lse(torch.nn.Module):
            def forward(self, x):
                return torch.logsumexp(x, dim=1, keepdim=True)
        self.check_module(Lse(), [torch.randn(3, 4, 1, 1)], "rowwise")
        # Elementwise ops of the reduction's value alone after it: its epilogue, a second definition.
        class Epi(torch.nn.Module):
            def forward(self, x):
                return torch.tanh(x.sum(0) + 1.0) * 2.0
        out = self.check_module(Epi(), [x], "rowwise")
        self.assertIn("output0[c] = ", out["program"])
        self.assertIn("] = sum(input0[r, c]) over r", out["program"])
        class Other(torch.nn.Module):  # an epilogue that reads another tensor
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(*x.shape[1:]))

            def forward(self, x):
                return x.sum(0) * self.w
        out = synth.synthesize(Other(), [x])
        self.assertIsNone(out["program"])
        self.assertIn("read only its value", out["reason"])
        for f, text in [(lambda x: torch.logsumexp(x, dim=0), "a sum, mean, max or min")]:
            class M(torch.nn.Module):
                def forward(self, x):
                    return f(x)
            out = synth.synthesize(M(), [x])
            self.assertIsNone(out["program"], text)
            self.assertIn(text, out["reason"])

    def test_reductions_the_row_wise_family_cannot_take_are_refused(self):
        x = torch.randn(3, 5, 7)
        for f, text in [(lambda x: torch.sum(x, dim=(0, 2)), "trailing dims"), (lambda x: torch.max(x, dim=2)[1].float(), "indices"), (lambda x: torch.norm(x, p=3, dim=2), "p=3")]:
            class M(torch.nn.Module):
                def forward(self, x):
                    return f(x)
            out = synth.synthesize(M(), [x])
            self.assertIsNone(out["program"], text)
            self.assertIn(text, out["reason"])

    def test_batched_and_higher_rank_matrix_products_are_gemms(self):
        # bmm keeps its batch as the gemm's leading index; a [..., M, K] tensor times a [K, N]
        # matrix (matmul or einsum) is one 2-D GEMM over the tensor's rows, merged.
        out = self.check_against_module("synth_problems", "16_bmm_epilogue.py", "gemm")
        self.assertIn("acc[b, m, n] = sum(input0[b, m, k] * input1[b, k, n]) over k", out["program"])
        out = self.check_against_module("synth_problems", "17_matmul_3d_by_matrix.py", "gemm")
        self.assertEqual(out["dims"], {"M": 10, "N": 3, "K": 6})
        out = self.check_against_module("synth_problems", "18_einsum_4d_by_matrix.py", "gemm")
        self.assertEqual(out["dims"], {"M": 24, "N": 6, "K": 5})
        torch.manual_seed(3)
        for f, args in [(lambda a, b: torch.matmul(a, b), [torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 6)]),
                        (lambda a, b: torch.einsum("bmk,bkn->bmn", a, b) + 1.0, [torch.randn(2, 4, 5), torch.randn(2, 5, 3)])]:
            class M(torch.nn.Module):
                def forward(self, a, b):
                    return f(a, b)
            self.check_module(M(), args, "gemm")
        for f, text in [(lambda a, b: torch.einsum("ij,jk->ki", a, b), "einsum 'ij,jk->ki'"),
                        (lambda a, b: torch.matmul(a, b), "equal batch dims")]:
            class M(torch.nn.Module):
                def forward(self, a, b):
                    return f(a, b)
            x, y = (torch.randn(3, 4), torch.randn(4, 5)) if "einsum" in text else (torch.randn(2, 3, 4), torch.randn(1, 4, 5))
            out = synth.synthesize(M(), [x, y])
            self.assertIsNone(out["program"], text)
            self.assertIn(text, out["reason"])

    def test_direct_convolutions_keep_f32_products_where_the_tensor_cores_do_not_run(self):
        # TF32 products only where the direct family's mma kernel takes the shape (16 or more
        # filters a group and reduction positions an output). A depthwise convolution (one filter
        # a group) runs on the loop kernel: IEEE float32 products, and the loop kernel's seed.
        self.assertTrue(synth._direct_mma_takes({"K": 64, "C": 3, "T0": 3, "T1": 5, "T2": 7}))
        self.assertTrue(synth._direct_mma_takes({"K": 16, "C": 16}))
        self.assertFalse(synth._direct_mma_takes({"K": 1, "C": 1, "T0": 3, "T1": 7, "G": 128}))
        self.assertFalse(synth._direct_mma_takes({"K": 64, "C": 1, "T0": 3, "T1": 3}))
        self.assertFalse(synth._direct_mma_takes({"K": 8, "C": 64, "T0": 3}))
        model, inputs, fp = lowered("synth_problems", "12_conv_depthwise.py")
        out = synth.synthesize(model, inputs, conv_products="tf32")
        self.assertEqual(out["family"], "direct")
        self.assertNotIn("conv_products", out)
        self.assertEqual(out["program"], fp["program"])
        self.assertIn("schedule {\n  threads = 256\n}", out["program"])

    def test_windowed_reductions_are_direct_programs(self):
        # Convolutions the conv family does not take (3-D, grouped, transposed), pools over
        # overlapping or padded windows and argmin over a middle dim: one reduction per output
        # element with its epilogue, checked against the module in float64.
        out = self.check_against_module("synth_problems", "12_conv_depthwise.py", "direct")
        self.assertIn("acc[n, g, k, h, w] = sum(input0[n, g, c, h+r-1, w+s-1] * w_conv_weight[g, k, c, r, s]) over c, r, s",
                      out["program"])
        self.assertEqual([t["shape"] for t in out["tensors"]][0], ["N", "CT", "I0", "I1"])
        out = self.check_against_module("synth_problems", "20_conv3d_grouped.py", "direct")
        self.assertIn("input0[n, g, c, d+t-1, h*2+r, w+s*2-2]", out["program"])
        self.assertIn("w_scale[g, k]", out["program"])
        out = self.check_against_module("synth_problems", "21_conv_transpose2d_epilogue.py", "direct")
        self.assertIn("input0[n, c, (h-r+1)/2, (w-s*2+2)/3] * w_conv_transpose_weight[c, k, r, s]", out["program"])
        self.check_against_module("synth_problems", "22_conv_transpose3d_grouped.py", "direct")
        out = self.check_against_module("synth_problems", "23_pools.py", "direct")
        self.assertIn("input0: f32[N, C, I0, I1] outside -inf", out["program"])
        self.assertIn("max(input0[n, c, h*2+r-1, w*2+s*2-1]) over r:3, s:3", out["program"])
        out = self.check_against_module("synth_problems", "24_avg_pool3d.py", "direct")
        self.assertIn("mean(", out["program"])
        out = self.check_against_module("synth_problems", "25_argmin.py", "direct")
        self.assertIn("acc[b, c] = argmax(-input0[b, r, c]) over r", out["program"])
        self.assertEqual(out["tensors"][-1]["dtype"], "i64")

    def test_conv1d_is_a_conv_over_an_image_of_height_one(self):
        out = self.check_against_module("synth_problems", "19_conv1d_strided_dilated.py", "conv")
        self.assertIn("input0[n, c, h+r, w*2+s*2-2]", out["program"])
        self.assertEqual((out["dims"]["H"], out["dims"]["P"], out["dims"]["R"]), (1, 1, 1))
        self.assertEqual([t["shape"] for t in out["tensors"]][0], ["N", "C", "W"])
        # A grouped one is the direct family's, its channels split into groups: g, k.
        out = self.check_module(torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, groups=2)), [torch.randn(2, 4, 9)], "direct")
        self.assertIn("input0[n, g, c, w+s]", out["program"])

    def test_multiply_divide_and_subtract_are_the_operators(self):
        torch.manual_seed(20)
        class M(torch.nn.Module):
            def forward(self, x, y):
                return torch.multiply(torch.tanh(F.softplus(x)), x) - torch.divide(torch.subtract(x, y), 2.0)
        self.check_module(M(), [torch.randn(3, 4), torch.randn(3, 4)], "elementwise")
        class Floor(torch.nn.Module):
            def forward(self, x):
                return torch.divide(x, 2.0, rounding_mode="floor")
        self.assertIn("rounding_mode", synth.synthesize(Floor(), [torch.randn(3, 4)])["reason"])

    def test_a_one_value_constant_tensor_is_a_number(self):
        # torch.tensor(c) in the forward (KernelBench level 2's min with a constant) is code, not state.
        torch.manual_seed(21)
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 4, 3)

            def forward(self, x):
                return torch.min(self.conv(x), torch.tensor(0.5)) * 2.0
        out = self.check_module(M(), [torch.randn(2, 3, 6, 6)], "conv")
        self.assertIn(", 0.5)", out["program"])

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
