# Output code in the form torch.compile's Inductor (PyTorch 2.11, Triton, CUDA) writes it, written by
# hand for ksol's tests (tests/python/test_inductor_*.py): y = relu(linear(x)) * 0.5, then gelu(y @ w2)
# flattened: two extern calls (addmm, mm), each followed by a pointwise kernel that updates its result in
# place.
# Kernel bodies are abbreviated; the reader never runs them.
# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
from torch._inductor.hooks import run_intermediate_hooks
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


# kernel path: /tmp/torchinductor_ksol/_0/ctriton_poi_fused_mul_relu_0.py
# Topologically Sorted Source Nodes: [relu, mul], Original ATen: [aten.relu, aten.mul]
# Source node to ATen node mapping:
#   mul => mul
#   relu => relu
# Graph fragment:
#   %addmm : Tensor "f32[128, 64][64, 1]cuda:0" = PlaceHolder[target=addmm]
#   %relu : Tensor "f32[128, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.relu.default](args = (%addmm,), kwargs = {})
#   %mul : Tensor "f32[128, 64][64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%relu, 0.5), kwargs = {})
#   return %mul
triton_poi_fused_mul_relu_0 = async_compile.triton('triton_poi_fused_mul_relu_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 8192},
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_mul_relu_0', 'mutated_arg_names': ['in_out_ptr0']}
)
@triton.jit
def triton_poi_fused_mul_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8192
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_out_ptr0 + (x0), None)
    tmp2 = triton_helpers.maximum(tl.full([1], 0, tl.int32), tmp0)
    tl.store(in_out_ptr0 + (x0), tmp2 * 0.5, None)
''', device_str='cuda')

# kernel path: /tmp/torchinductor_ksol/_1/ctriton_poi_fused_gelu_1.py
# Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
# Source node to ATen node mapping:
#   gelu => add, erf, mul_1, mul_2, mul_3
# Graph fragment:
#   %mm : Tensor "f32[128, 32][32, 1]cuda:0" = PlaceHolder[target=mm]
#   %mul_1 : Tensor "f32[128, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mm, 0.5), kwargs = {})
#   %mul_2 : Tensor "f32[128, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mm, 0.7071067811865476), kwargs = {})
#   %erf : Tensor "f32[128, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.erf.default](args = (%mul_2,), kwargs = {})
#   %add : Tensor "f32[128, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%erf, 1), kwargs = {})
#   %mul_3 : Tensor "f32[128, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_1, %add), kwargs = {})
#   return %mul_3
triton_poi_fused_gelu_1 = async_compile.triton('triton_poi_fused_gelu_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 4096},
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_gelu_1', 'mutated_arg_names': ['in_out_ptr0']}
)
@triton.jit
def triton_poi_fused_gelu_1(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 4096
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_out_ptr0 + (x0), None)
    tmp5 = 0.5 * tmp0 * (libdevice.erf(tmp0 * 0.7071067811865476) + 1.0)
    tl.store(in_out_ptr0 + (x0), tmp5, None)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1 = args
        args.clear()
        assert_size_stride(arg0_1, (128, 256), (256, 1))
        assert_size_stride(arg1_1, (64, 256), (256, 1))
        assert_size_stride(arg2_1, (64, ), (1, ))
        assert_size_stride(arg3_1, (64, 32), (32, 1))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((128, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.t, aten.addmm]
            extern_kernels.addmm(arg2_1, arg0_1, reinterpret_tensor(arg1_1, (256, 64), (1, 256), 0), alpha=1, beta=1, out=buf0)
            del arg0_1
            del arg1_1
            del arg2_1
            buf1 = buf0; del buf0  # reuse
            # Topologically Sorted Source Nodes: [relu, mul], Original ATen: [aten.relu, aten.mul]
            stream0 = get_raw_stream(0)
            triton_poi_fused_mul_relu_0.run(buf1, 8192, stream=stream0)
            buf2 = empty_strided_cuda((128, 32), (32, 1), torch.float32)
            # Topologically Sorted Source Nodes: [matmul], Original ATen: [aten.mm]
            extern_kernels.mm(buf1, arg3_1, out=buf2)
            del arg3_1
            buf3 = buf2; del buf2  # reuse
            # Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
            stream0 = get_raw_stream(0)
            triton_poi_fused_gelu_1.run(buf3, 4096, stream=stream0)
        return (buf1, reinterpret_tensor(buf3, (4096, ), (1, ), 0), )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((128, 256), (256, 1), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((64, 256), (256, 1), device='cuda:0', dtype=torch.float32)
    arg2_1 = rand_strided((64, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg3_1 = rand_strided((64, 32), (32, 1), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1, arg2_1, arg3_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
