# Output code in the form torch.compile's Inductor (PyTorch 2.11, Triton, CUDA) writes it, written by
# hand for ksol's tests (tests/python/test_inductor_*.py): a transposed 3-D convolution, then
# leaky_relu(conv + bias, 0.2) / 2. Inductor calls the convolution without its bias and adds the bias
# in the kernel after it, whose Graph fragment holds the whole convolution node.
# Kernel bodies are abbreviated; the reader never runs them.
# AOT ID: ['0_inference']
import torch
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor_ksol/cv/ccvbiasepilogue.py
# Topologically Sorted Source Nodes: [conv_transpose3d, leaky_relu, div], Original ATen: [aten.convolution, aten.gt, aten.mul, aten.where, aten.div]
# Source node to ATen node mapping:
#   conv_transpose3d => convolution
#   div => div
#   leaky_relu => gt, mul, where
# Graph fragment:
#   %buf0 : Tensor "f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0" = PlaceHolder[target=buf0]
#   %arg1_1 : Tensor "f32[32][1]cuda:0" = PlaceHolder[target=arg1_1]
#   %convolution : Tensor "f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.convolution.default](args = (%arg2_1, %arg0_1, %arg1_1, [2, 2, 2], [1, 1, 1], [1, 1, 1], True, [0, 0, 0], 1), kwargs = {})
#   %gt : Tensor "b8[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.gt.Scalar](args = (%convolution, 0), kwargs = {})
#   %mul : Tensor "f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convolution, 0.2), kwargs = {})
#   %where : Tensor "f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.where.self](args = (%gt, %convolution, %mul), kwargs = {})
#   %div : Tensor "f32[4, 32, 15, 31, 31][461280, 14415, 961, 31, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%where, 2.0), kwargs = {})
#   return %div
triton_poi_fused_convolution_div_leaky_relu_0 = async_compile.triton('triton_poi_fused_convolution_div_leaky_relu_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 2097152},
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_convolution_div_leaky_relu_0', 'mutated_arg_names': ['in_out_ptr0']},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_convolution_div_leaky_relu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1845120
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x1 = ((xindex // 14415) % 32)
    tmp0 = tl.load(in_out_ptr0 + (xindex), xmask)
    tmp2 = tmp0 + tl.load(in_ptr0 + (x1), xmask, eviction_policy='evict_last')
    tmp6 = tl.where(tmp2 > 0.0, tmp2, tmp2 * 0.2)
    tl.store(in_out_ptr0 + (xindex), tmp6 * 0.5, xmask)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg0_1, (16, 32, 3, 3, 3), (864, 27, 9, 3, 1))
        assert_size_stride(arg1_1, (32, ), (1, ))
        assert_size_stride(arg2_1, (4, 16, 8, 16, 16), (32768, 2048, 256, 16, 1))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            # Topologically Sorted Source Nodes: [conv_transpose3d], Original ATen: [aten.convolution]
            buf0 = extern_kernels.convolution(arg2_1, arg0_1, stride=(2, 2, 2), padding=(1, 1, 1), dilation=(1, 1, 1), transposed=True, output_padding=(0, 0, 0), groups=1, bias=None)
            assert_size_stride(buf0, (4, 32, 15, 31, 31), (461280, 14415, 961, 31, 1), 'torch.ops.aten.convolution.default')
            del arg0_1
            del arg2_1
            buf1 = buf0; del buf0  # reuse
            # Topologically Sorted Source Nodes: [conv_transpose3d, leaky_relu, div], Original ATen: [aten.convolution, aten.gt, aten.mul, aten.where, aten.div]
            stream0 = get_raw_stream(0)
            triton_poi_fused_convolution_div_leaky_relu_0.run(buf1, arg1_1, 1845120, stream=stream0)
            del arg1_1
        return (buf1, )

runner = Runner(partitions=[])
call = runner.call


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((16, 32, 3, 3, 3), (864, 27, 9, 3, 1), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((32, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg2_1 = rand_strided((4, 16, 8, 16, 16), (32768, 2048, 256, 16, 1), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1, arg2_1]
