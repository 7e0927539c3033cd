"""One Inductor kernel as PyTorch (python/ksol/inductor_region.py), on the hand-written output code
of tests/python/inductor/: each kernel's inputs and outputs bound to its Graph fragment, softmax,
layer_norm and gelu recomposed, the exact reason where a kernel cannot be bound; then, with
PyTorch on the CPU, the problem file it writes computes what the fragment says (the recomposed
ops against the fragment's own ATen ops) and ksol's lowering takes it."""
import os
import tempfile
import unittest

from fixtures import needs_torch, torch
from ksol import inductor_region as ir
from ksol import inductor_wrapper as iw
from test_inductor_wrapper import fixture, text_of

POINTWISE = """\
region triton_poi_fused_add_mul_relu_sigmoid_0
  in in_ptr0 = arg0_1 %arg0_1 f32[64, 128][128, 1]
  in in_ptr1 = arg1_1 %arg1_1 f32[128][1]
  out out_ptr0 = buf0 %add_1 f32[64, 128][128, 1]
  accumulation 1
  | arg0_1 = in_ptr0
  | arg1_1 = in_ptr1
  | add = (arg0_1 + arg1_1)
  | relu = torch.relu(add)
  | mul = (relu * 2.0)
  | sigmoid = torch.sigmoid(arg0_1)
  | add_1 = (mul + sigmoid)
  | return add_1
"""

SOFTMAX = """\
region triton_per_fused__softmax_0
  in in_ptr0 = arg0_1 %arg0_1 f32[32, 256][256, 1]
  out out_ptr2 = buf2 %div f32[32, 256][256, 1]
  recomposed softmax
  accumulation 256
  | arg0_1 = in_ptr0
  | div = torch.softmax(arg0_1, dim=-1)
  | return div
"""

SUM = """\
region triton_per_fused_sum_1
  in in_ptr0 = arg0_1 %arg0_1 f32[32, 256][256, 1]
  out out_ptr0 = buf3 %sum_2 f32[256][1]
  accumulation 32
  | arg0_1 = in_ptr0
  | sum_2 = torch.sum(arg0_1, dim=[0], keepdim=False)
  | return sum_2
"""

MM_EPILOGUE = """\
region triton_poi_fused_mul_relu_0
  in in_out_ptr0 = buf1 %addmm f32[128, 64][64, 1]
  out in_out_ptr0 = buf1 %mul f32[128, 64][64, 1]
  accumulation 1
  | addmm = in_out_ptr0
  | relu = torch.relu(addmm)
  | mul = (relu * 0.5)
  | return mul
"""

GELU = """\
region triton_poi_fused_gelu_1
  in in_out_ptr0 = buf3 %mm f32[128, 32][32, 1]
  out in_out_ptr0 = buf3 %mul_3 f32[128, 32][32, 1]
  recomposed gelu
  accumulation 1
  | mm = in_out_ptr0
  | mul_3 = F.gelu(mm)
  | return mul_3
"""

LAYER_NORM = """\
region triton_per_fused_native_layer_norm_0
  in in_ptr0 = arg0_1 %arg0_1 f32[32, 1000][1000, 1]
  in in_ptr1 = arg1_1 %arg1_1 f32[1000][1]
  in in_ptr2 = arg2_1 %arg2_1 f32[1000][1]
  out out_ptr2 = buf3 %add_1 f32[32, 1000][1000, 1]
  recomposed layer_norm
  accumulation 1000
  | arg0_1 = in_ptr0
  | arg1_1 = in_ptr1
  | arg2_1 = in_ptr2
  | add_1 = F.layer_norm(arg0_1, [1000], arg1_1, arg2_1, 1e-05)
  | return add_1
"""


CONV_EPILOGUE = """\
region triton_poi_fused_convolution_div_leaky_relu_0
  in in_out_ptr0 = buf1 %buf0 f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]
  in in_ptr0 = arg1_1 %arg1_1 f32[32, 1, 1, 1][1, 1, 1, 1]
  out in_out_ptr0 = buf1 %div f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]
  recomposed leaky_relu
  accumulation 1
  | buf0 = in_out_ptr0
  | arg1_1 = in_ptr0
  | convolution = (buf0 + arg1_1)
  | where = F.leaky_relu(convolution, 0.2)
  | div = (where / 2.0)
  | return div
"""


def regions(name, recompose=True):
    p = iw.parse_file(fixture(name))
    out = {}
    for launch in p.launches():
        try:
            out[launch.kernel] = ir.bind(p, launch, recompose)
        except ir.RegionError as e:
            out[launch.kernel] = str(e)
    return out


def refusal(text, kernel):
    p = iw.parse(text, "w.py")
    launch = next(l for l in p.launches() if l.kernel == kernel)
    with unittest.TestCase().assertRaises(ir.RegionError) as cm:
        ir.bind(p, launch)
    return str(cm.exception)


class Bind(unittest.TestCase):
    def test_pointwise(self):
        self.assertEqual(ir.describe(regions("pointwise_fusion")["triton_poi_fused_add_mul_relu_sigmoid_0"]), POINTWISE)

    def test_reductions(self):
        r = regions("reduction")
        self.assertEqual(ir.describe(r["triton_per_fused__softmax_0"]), SOFTMAX)
        self.assertEqual(ir.describe(r["triton_per_fused_sum_1"]), SUM)

    def test_in_place_epilogues_of_extern_calls(self):
        r = regions("extern_mm_epilogue")
        self.assertEqual(ir.describe(r["triton_poi_fused_mul_relu_0"]), MM_EPILOGUE)
        self.assertEqual(ir.describe(r["triton_poi_fused_gelu_1"]), GELU)

    def test_layer_norm(self):
        r = regions("layer_norm")
        self.assertEqual(ir.describe(r["triton_per_fused_native_layer_norm_0"]), LAYER_NORM)
        self.assertEqual(r["triton_per_fused_native_layer_norm_0"].notes,
                         ["%getitem, %getitem_1 taken as the elements of %var_mean in fx's order"])

    def test_convolution_bias_added_in_the_epilogue(self):
        r = regions("conv_bias_epilogue")["triton_poi_fused_convolution_div_leaky_relu_0"]
        self.assertEqual(ir.describe(r), CONV_EPILOGUE)
        self.assertEqual(r.notes, ["%convolution: the convolution buf1 holds (triton_poi_fused_convolution_div_leaky_relu_0 adds "
                                   "its bias), plus the bias viewed [32, 1, 1, 1]"])

    def test_binding_twice_gives_the_same_region(self):
        # The path binds a kernel once to list it and again to make its task: the second binding
        # must not see the first one's rewrites (it once kept the bias [32], not [32, 1, 1, 1]).
        p = iw.parse_file(fixture("conv_bias_epilogue"))
        for launch in p.launches():
            first = ir.describe(ir.bind(p, launch))
            self.assertEqual(ir.describe(ir.bind(p, launch)), first)

    def test_convolution_node_without_its_output_is_refused(self):
        # The extern call adds the bias itself: the fragment's convolution is not the kernel's to redo.
        t = text_of("conv_bias_epilogue").replace("groups=1, bias=None)", "groups=1, bias=arg1_1)")
        self.assertEqual(refusal(t, "triton_poi_fused_convolution_div_leaky_relu_0"),
                         "triton_poi_fused_convolution_div_leaky_relu_0: %convolution reads %arg2_1, which is neither one of the "
                         "kernel's inputs nor computed in its fragment")

    def test_split_reductions_are_refused(self):
        r = regions("layer_norm")
        self.assertEqual(r["triton_red_fused_native_layer_norm_1"],
                         "triton_red_fused_native_layer_norm_1: out_ptr0 (buf4) stores the fragment's write 0, %buf4, which no ATen "
                         "node of the fragment computes (a partial result of a split reduction, or a layout copy)")
        self.assertEqual(r["triton_per_fused_native_layer_norm_2"],
                         "triton_per_fused_native_layer_norm_2: out_ptr0 (buf7) stores the fragment's write 0, %getitem_3, which no "
                         "ATen node of the fragment computes (a partial result of a split reduction, or a layout copy)")
        self.assertEqual(r["triton_poi_fused_add_native_layer_norm_3"],
                         "triton_poi_fused_add_native_layer_norm_3: its input in_ptr2 (buf8, %buf8) is not read by the fragment's "
                         "computation of its outputs: the fragment describes another computation than the kernel's")

    def test_not_contiguous(self):
        t = text_of("pointwise_fusion").replace("buf0 = empty_strided_cuda((64, 128), (128, 1)", "buf0 = empty_strided_cuda((64, 128), (1, 64)")
        self.assertEqual(refusal(t, "triton_poi_fused_add_mul_relu_sigmoid_0"),
                         "triton_poi_fused_add_mul_relu_sigmoid_0: out_ptr0 (buf0) is f32[64, 128][1, 64], not contiguous: ksol's "
                         "kernels read and write contiguous tensors")

    def test_symbolic_size(self):
        t = text_of("pointwise_fusion").replace("buf0, 8192, stream=stream0)", "buf0, 128*s0, stream=stream0)")
        self.assertEqual(refusal(t, "triton_poi_fused_add_mul_relu_sigmoid_0"),
                         "triton_poi_fused_add_mul_relu_sigmoid_0: xnumel is 128*s0, a symbolic size (dynamic shapes are not replaced)")

    def test_no_fragment(self):
        t = text_of("pointwise_fusion")
        start = t.index("# Graph fragment:")
        t = t[:start] + t[t.index("triton_poi_fused_add_mul_relu_sigmoid_0 = async_compile"):]
        self.assertEqual(refusal(t, "triton_poi_fused_add_mul_relu_sigmoid_0"),
                         "triton_poi_fused_add_mul_relu_sigmoid_0 has no Graph fragment in the output code (Inductor's comments are off?)")

    def test_a_value_the_fragment_does_not_have(self):
        t = text_of("pointwise_fusion").replace("args = (%mul, %sigmoid)", "args = (%mul, %tanh)")
        self.assertEqual(refusal(t, "triton_poi_fused_add_mul_relu_sigmoid_0"),
                         "triton_poi_fused_add_mul_relu_sigmoid_0: %add_1 reads %tanh, which is neither one of the kernel's inputs nor "
                         "computed in its fragment")

    def test_written_before(self):
        p = iw.parse_file(fixture("extern_mm_epilogue"))
        relu, gelu = p.launches()
        self.assertTrue(ir.written_before(p, relu, "buf1"))   # addmm's out=buf0, which buf1 reuses
        self.assertTrue(ir.written_before(p, gelu, "buf3"))
        p = iw.parse_file(fixture("reduction"))
        self.assertFalse(ir.written_before(p, p.launches()[0], "buf2"))

    def test_problem_source(self):
        src = ir.problem_source(regions("pointwise_fusion")["triton_poi_fused_add_mul_relu_sigmoid_0"], "the test",
                                [{"kind": "tensor", "draw": "uniform", "low": 0.5, "high": 2.0}])
        self.assertIn("    def forward(self, in_ptr0, in_ptr1):\n        arg0_1 = in_ptr0\n", src)
        self.assertIn("INPUTS = [{'draw': 'uniform', 'low': 0.5, 'high': 2.0, 'shape': [64, 128], 'dtype': 'float32'}, "
                      "{'draw': 'normal', 'mean': 0.0, 'std': 1.0, 'shape': [128], 'dtype': 'float32'}]", src)


@needs_torch
class AsPyTorch(unittest.TestCase):
    """The written problems run, compute the fragment's values, and lower."""

    def module(self, region):
        from ksol_torch import problem

        d = tempfile.mkdtemp()
        path = os.path.join(d, region.kernel + ".py")
        with open(path, "w") as fh:
            fh.write(ir.problem_source(region, "the test"))
        prob = problem.load(path)
        model, inputs = problem.instantiate(prob, 3)
        return prob, model, inputs

    def check(self, name, kernel, want):
        region = regions(name)[kernel]
        _, model, inputs = self.module(region)
        with torch.no_grad():
            got = model(*inputs)
            torch.testing.assert_close(got, want(*inputs), rtol=1e-5, atol=1e-6)
            # The recomposed ops compute what the fragment's own ATen ops do.
            literal = regions(name, recompose=False)[kernel]
            _, m2, _ = self.module(literal)
            torch.testing.assert_close(got, m2(*inputs), rtol=1e-5, atol=1e-6)
        return region, model, inputs

    def test_values(self):
        F = torch.nn.functional
        self.check("pointwise_fusion", "triton_poi_fused_add_mul_relu_sigmoid_0", lambda x, b: torch.relu(x + b) * 2 + torch.sigmoid(x))
        self.check("reduction", "triton_per_fused__softmax_0", lambda x: torch.softmax(x, -1))
        self.check("reduction", "triton_per_fused_sum_1", lambda x: x.sum(0))
        self.check("extern_mm_epilogue", "triton_poi_fused_mul_relu_0", lambda y: torch.relu(y) * 0.5)
        self.check("extern_mm_epilogue", "triton_poi_fused_gelu_1", lambda y: F.gelu(y))
        self.check("layer_norm", "triton_per_fused_native_layer_norm_0", lambda x, w, b: F.layer_norm(x, [1000], w, b))
        self.check("conv_bias_epilogue", "triton_poi_fused_convolution_div_leaky_relu_0",
                   lambda y, b: F.leaky_relu(y + b.view(1, 32, 1, 1, 1), 0.2) / 2.0)

    def test_lowered(self):
        from ksol_torch import problem, synth

        want = {("pointwise_fusion", "triton_poi_fused_add_mul_relu_sigmoid_0"): "elementwise",
                ("reduction", "triton_per_fused__softmax_0"): "rowwise",
                ("extern_mm_epilogue", "triton_poi_fused_mul_relu_0"): "elementwise",
                ("extern_mm_epilogue", "triton_poi_fused_gelu_1"): "elementwise",
                ("layer_norm", "triton_per_fused_native_layer_norm_0"): "rowwise",
                ("conv_bias_epilogue", "triton_poi_fused_convolution_div_leaky_relu_0"): "elementwise"}
        for (name, kernel), family in want.items():
            prob, _, _ = self.module(regions(name)[kernel])
            m, xs = problem.instantiate(prob, 0, meta=True)
            syn = synth.synthesize(m, xs)
            self.assertEqual((kernel, syn.get("family")), (kernel, family), syn.get("reason"))


if __name__ == "__main__":
    unittest.main()
