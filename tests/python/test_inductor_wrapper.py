"""Reading Inductor's output code (python/ksol/inductor_wrapper.py) on files written by hand in its
form (tests/python/inductor/): the launches with their bound arguments, the extern calls, reuse
and views, each kernel's provenance, in the reader's text form; and the exact error, with its
line, for each form the reader does not know. No PyTorch needed."""
import os
import unittest

from fixtures import HERE
from ksol import inductor_wrapper as iw

FIXTURES = os.path.join(HERE, "inductor")


def fixture(name):
    return os.path.join(FIXTURES, name + ".py")


def text_of(name):
    with open(fixture(name)) as fh:
        return fh.read()


def line_of(text, needle):
    """The 1-based line of `needle`'s first occurrence in `text`."""
    return text[:text.index(needle)].count("\n") + 1


POINTWISE = """\
input arg0_1 f32[64, 128][128, 1]
input arg1_1 f32[128][1]
alloc buf0 f32[64, 128][128, 1] cuda
launch triton_poi_fused_add_mul_relu_sigmoid_0 (pointwise) [add, relu, mul, sigmoid, add_1] [aten.add, aten.relu, aten.mul, aten.sigmoid]
  in in_ptr0 = arg0_1 f32[64, 128][128, 1]
  in in_ptr1 = arg1_1 f32[128][1]
  out out_ptr0 = buf0 f32[64, 128][128, 1]
  size xnumel = 8192
free arg0_1
free arg1_1
return buf0
"""

REDUCTION = """\
input arg0_1 f32[32, 256][256, 1]
alloc buf2 f32[32, 256][256, 1] cuda
launch triton_per_fused__softmax_0 (persistent_reduction) [softmax] [aten._softmax]
  in in_ptr0 = arg0_1 f32[32, 256][256, 1]
  out out_ptr2 = buf2 f32[32, 256][256, 1]
  size xnumel = 32
  size r0_numel = 256
alloc buf3 f32[256][1] cuda
launch triton_per_fused_sum_1 (persistent_reduction) [sum_2] [aten.sum]
  in in_ptr0 = arg0_1 f32[32, 256][256, 1]
  out out_ptr0 = buf3 f32[256][1]
  size xnumel = 256
  size r0_numel = 32
free arg0_1
return buf2, buf3
"""

MM_EPILOGUE = """\
input arg0_1 f32[128, 256][256, 1]
input arg1_1 f32[64, 256][256, 1]
input arg2_1 f32[64][1]
input arg3_1 f32[64, 32][32, 1]
alloc buf0 f32[128, 64][64, 1] cuda
extern addmm(arg2_1, arg0_1, arg1_1 as f32[256, 64][1, 256], alpha=1, beta=1, out=buf0)
free arg0_1
free arg1_1
free arg2_1
alias buf1 = buf0
free buf0
launch triton_poi_fused_mul_relu_0 (pointwise) [relu, mul] [aten.relu, aten.mul]
  inout in_out_ptr0 = buf1 f32[128, 64][64, 1]
  size xnumel = 8192
alloc buf2 f32[128, 32][32, 1] cuda
extern mm(buf1, arg3_1, out=buf2)
free arg3_1
alias buf3 = buf2
free buf2
launch triton_poi_fused_gelu_1 (pointwise) [gelu] [aten.gelu]
  inout in_out_ptr0 = buf3 f32[128, 32][32, 1]
  size xnumel = 4096
return buf1, buf3 as f32[4096][1]
"""

LAYER_NORM_KERNEL = """\
kernel triton_per_fused_native_layer_norm_0 (triton, persistent_reduction) line 42
  params in_ptr0:*fp32:in, in_ptr1:*fp32:in, in_ptr2:*fp32:in, out_ptr2:*fp32:out, xnumel:i32:size, r0_numel:i32:size
  size_hints x=32, r0_=1024
  source nodes [layer_norm] aten [aten.native_layer_norm]
  read %arg0_1 f32[32, 1000][1000, 1]
  read %getitem_1 f32[32, 1][1, 32]
  read %buf1 f32[32, 1][1, 32]
  read %arg1_1 f32[1000][1]
  read %arg2_1 f32[1000][1]
  %var_mean = aten.var_mean.correction(%arg0_1, [1]) {'correction': 0, 'keepdim': True} (not one tensor)
  %sub = aten.sub.Tensor(%arg0_1, %getitem_1) f32[32, 1000][1000, 1]
  %add = aten.add.Tensor(%getitem, 1e-05) f32[32, 1][1, 1]
  %rsqrt = aten.rsqrt.default(%add,) f32[32, 1][1, 1]
  %mul = aten.mul.Tensor(%sub, %rsqrt) f32[32, 1000][1000, 1]
  %mul_1 = aten.mul.Tensor(%mul, %arg1_1) f32[32, 1000][1000, 1]
  %add_1 = aten.add.Tensor(%mul_1, %arg2_1) f32[32, 1000][1000, 1]
  writes %getitem_1, %buf1, %add_1
"""


class Golden(unittest.TestCase):
    def test_pointwise_fusion(self):
        p = iw.parse_file(fixture("pointwise_fusion"))
        self.assertEqual(iw.describe(p), POINTWISE)
        self.assertTrue(p.partitioned)
        self.assertEqual(p.outputs()[0].name, "buf0")

    def test_reduction(self):
        self.assertEqual(iw.describe(iw.parse_file(fixture("reduction"))), REDUCTION)

    def test_extern_mm_and_in_place_epilogue(self):
        p = iw.parse_file(fixture("extern_mm_epilogue"))
        self.assertEqual(iw.describe(p), MM_EPILOGUE)
        ext = p.externs()
        self.assertEqual([(e.op, e.out, e.source_nodes, e.aten) for e in ext],
                         [("addmm", ["buf0"], ["linear"], ["aten.t", "aten.addmm"]), ("mm", ["buf2"], ["matmul"], ["aten.mm"])])
        self.assertEqual((p.root("buf1"), p.root("buf3")), ("buf0", "buf2"))
        k = p.kernels["triton_poi_fused_mul_relu_0"]
        self.assertEqual((k.mutated, k.params, k.constexprs), (["in_out_ptr0"], ["in_out_ptr0", "xnumel"], ["XBLOCK"]))

    def test_kernel_provenance(self):
        p = iw.parse_file(fixture("layer_norm"))
        k = p.kernels["triton_per_fused_native_layer_norm_0"]
        self.assertEqual(iw.describe_kernel(k), LAYER_NORM_KERNEL)
        self.assertEqual(k.provenance.mapping, {"layer_norm": ["add", "add_1", "mul", "mul_1", "rsqrt", "sub", "var_mean"]})
        self.assertEqual((k.heuristic, k.reduction_hint, k.short), ("persistent_reduction", "INNER", "per"))

    def test_layer_norm_split(self):
        p = iw.parse_file(fixture("layer_norm"))
        self.assertEqual([(l.kernel, [b.param for b in l.inputs()], [b.param for b in l.outputs()]) for l in p.launches()],
                         [("triton_per_fused_native_layer_norm_0", ["in_ptr0", "in_ptr1", "in_ptr2"], ["out_ptr2"]),
                          ("triton_red_fused_native_layer_norm_1", ["in_ptr0"], ["out_ptr0", "out_ptr1", "out_ptr2"]),
                          ("triton_per_fused_native_layer_norm_2", ["in_ptr0", "in_ptr1", "in_ptr2"], ["out_ptr0", "out_ptr1"]),
                          ("triton_poi_fused_add_native_layer_norm_3", ["in_ptr0", "in_ptr1", "in_ptr2", "in_ptr3", "in_ptr4"],
                           ["out_ptr0"])])
        self.assertEqual(p.specs["buf4"].text(), "f32[16, 1, 8][8, 128, 1]")
        self.assertTrue(p.specs["buf7"].contiguous())  # [16, 1] with strides (1, 16): the size-1 dim's stride is free

    def test_specs(self):
        s = iw.parse_spec("f32[16, 1][1, 16]cuda:0")
        self.assertEqual((s.shape, s.stride, s.dtype, s.device), ((16, 1), (1, 16), "float32", "cuda:0"))
        self.assertTrue(s.contiguous())  # a size-1 dim's stride does not matter
        self.assertFalse(iw.parse_spec("f32[2, 8, 16, 16][2048, 1, 128, 8]cuda:0").contiguous())
        self.assertEqual(iw.parse_spec("f32[][]cuda:0").shape, ())
        self.assertFalse(iw.parse_spec("f32[s0, 128][128, 1]cuda:0").static)

    def test_param_roles(self):
        self.assertEqual([iw.param_role(p) for p in ("in_ptr0", "out_ptr3", "in_out_ptr1", "xnumel", "r0_numel", "ks0", "ws_ptr", "arg_A")],
                         ["in", "out", "inout", "size", "size", "scalar", "workspace", "in"])


class OtherForms(unittest.TestCase):
    """Forms of call() the fixtures do not have: a fallback's tuple result, a workspace zeroed,
    a device copy, an extern call returning its result."""

    def test_fallback_items_workspace_copy(self):
        t = text_of("pointwise_fusion").replace(
            "            del arg0_1\n",
            "            buf3 = torch.ops.aten.max.dim(buf0, 1)\n            buf4 = buf3[0]\n            buf5 = buf3[1][0]\n"
            "            ws0 = empty_strided_cuda((64, ), (1, ), torch.int32)\n            ws0.zero_()\n"
            "            buf6 = empty_strided_cuda((64, 128), (128, 1), torch.float32)\n            buf6.copy_(buf0, False)\n"
            "            del arg0_1\n")
        out = iw.describe(iw.parse(t, "w.py"))
        self.assertIn("extern aten.max.dim(buf0, 1) -> buf3\nitem buf4 = buf3[0]\nitem buf5 = buf3[1][0]\n"
                      "alloc ws0 i32[64][1] cuda\nwrite ws0 zero\nalloc buf6 f32[64, 128][128, 1] cuda\nwrite buf6 copy of buf0\n", out)


    def test_factory_node_with_a_bare_device(self):
        # fx prints a factory's device kwarg bare: `device: cuda:0` (an iota, say), not a string.
        frag = iw.parse_fragment([(7, "%iota : Tensor \"i64[4096][1]cuda:0\"[num_users=1] = call_function["
                                      "target=torch.ops.prims.iota.default](args = (4096,), kwargs = {start: 0, step: 1, "
                                      "dtype: torch.int64, device: cuda:0, requires_grad: False})"),
                                  (8, "return %iota")], "w.py")
        node = frag.nodes[0]
        self.assertEqual((node.name, node.target, node.args), ("iota", "prims.iota.default", (4096,)))
        self.assertEqual(node.kwargs, {"start": 0, "step": 1, "dtype": "torch.int64", "device": "cuda:0", "requires_grad": False})
        self.assertEqual(iw._fx_args("([cuda:0, cuda:1], 'cuda:0')"), (["cuda:0", "cuda:1"], "cuda:0"))


class Errors(unittest.TestCase):
    """Each form the reader does not know is an error at its line, saying what it is."""

    def error_of(self, text, where="w.py"):
        with self.assertRaises(iw.WrapperFormatError) as cm:
            iw.parse(text, where)
        return str(cm.exception)

    def test_unknown_call_in_call(self):
        t = text_of("pointwise_fusion").replace("            del arg0_1\n", "            some_library.fancy(arg0_1)\n            del arg0_1\n")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'some_library')}: error: a call this reader does not know: "
                                           "some_library.fancy(arg0_1)")

    def test_launch_with_other_arguments_than_the_kernel_takes(self):
        t = text_of("pointwise_fusion").replace(".run(arg0_1, arg1_1, buf0, 8192,", ".run(arg0_1, buf0, 8192,")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, '.run(arg0_1, buf0')}: error: triton_poi_fused_add_mul_relu_sigmoid_0 "
                                           "is launched with 3 arguments, but its kernel takes 4 (in_ptr0, in_ptr1, out_ptr0, xnumel)")

    def test_launch_keyword_unknown(self):
        t = text_of("pointwise_fusion").replace("8192, stream=stream0)", "8192, stream=stream0, num_warps=4)")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'num_warps')}: error: triton_poi_fused_add_mul_relu_sigmoid_0.run with "
                                           "keyword arguments this reader does not know: num_warps")

    def test_launch_of_an_undefined_kernel(self):
        t = text_of("pointwise_fusion").replace("triton_poi_fused_add_mul_relu_sigmoid_0.run(", "triton_poi_other_1.run(")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'triton_poi_other_1.run')}: error: triton_poi_other_1.run: a launch of a "
                                           "kernel the output code does not define")

    def test_kernel_kind_unknown(self):
        t = text_of("pointwise_fusion").replace("= async_compile.triton(", "= async_compile.pallas(")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'async_compile.pallas')}: error: kernel "
                                           "triton_poi_fused_add_mul_relu_sigmoid_0: async_compile.pallas, a kind of kernel this reader "
                                           "does not know")

    def test_branch_in_call(self):
        t = text_of("pointwise_fusion").replace("            del arg1_1\n", "            if arg1_1.numel() > 0:\n                del arg1_1\n")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'if arg1_1')}: error: a branch (control flow, or asserts on dynamic "
                                           "sizes) in call(), which this reader does not know: if arg1_1.numel() > 0:")

    def test_fragment_line_unknown(self):
        t = text_of("pointwise_fusion").replace("= PlaceHolder[target=arg1_1]", "= get_attr[target=arg1_1]")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'get_attr[')}: error: a graph fragment line of a form this reader does "
                                           "not know: %arg1_1 : Tensor \"f32[128][1]cuda:0\" = get_attr[target=arg1_1]")

    def test_module_statement_unknown(self):
        t = text_of("pointwise_fusion") + "\nprint('hello')\n"
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'print(')}: error: a module-level expression this reader does not "
                                           "know: print('hello')")

    def test_not_python(self):
        t = text_of("pointwise_fusion").replace("def call(self, args):", "def call(self, args)")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'def call(self, args)')}: error: not Python: expected ':'")

    def test_no_call(self):
        self.assertEqual(self.error_of("import torch\naten = torch.ops.aten\n"),
                         "w.py:1: error: no call function: not Inductor's Python output code (a C++ wrapper, cpp_wrapper=True, "
                         "is not read)")

    def test_graph_partitions(self):
        t = text_of("pointwise_fusion").replace("class Runner:", "def partition_0(args):\n    return args\n\n\nclass Runner:")
        self.assertEqual(self.error_of(t), f"w.py:{line_of(t, 'def partition_0')}: error: partition_0: the graph is split into "
                                           "partitions (CUDA graphs: mode='reduce-overhead'); compile in the default mode")

    def test_kernel_without_jit(self):
        t = text_of("pointwise_fusion").replace("@triton.jit\n", "")
        self.assertIn("error: kernel triton_poi_fused_add_mul_relu_sigmoid_0 is not decorated with @triton.jit", self.error_of(t))

    def test_kernel_parameter_not_in_signature(self):
        t = text_of("pointwise_fusion").replace("'in_ptr1': '*fp32', ", "")
        self.assertIn("error: kernel triton_poi_fused_add_mul_relu_sigmoid_0's parameter in_ptr1 is not in its triton_meta signature",
                      self.error_of(t))


if __name__ == "__main__":
    unittest.main()
