# Output code in the form torch.compile's Inductor (PyTorch 2.11, Triton, CUDA) writes it, written by
# hand for ksol's tests (tests/python/test_inductor_*.py): layer_norm over 1000 (one persistent
# reduction) and layer_norm over 65536 + 1 (Inductor splits the long rows: partial sums, their combination,
# then a pointwise kernel reading the mean and 1/std).
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


# kernel path: /tmp/torchinductor_ksol/_0/ctriton_per_fused_native_layer_norm_0.py
# Topologically Sorted Source Nodes: [layer_norm], Original ATen: [aten.native_layer_norm]
# Source node to ATen node mapping:
#   layer_norm => add, add_1, mul, mul_1, rsqrt, sub, var_mean
# Graph fragment:
#   %arg0_1 : Tensor "f32[32, 1000][1000, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %getitem_1 : Tensor "f32[32, 1][1, 32]cuda:0" = PlaceHolder[target=getitem_1]
#   %buf1 : Tensor "f32[32, 1][1, 32]cuda:0" = PlaceHolder[target=buf1]
#   %arg1_1 : Tensor "f32[1000][1]cuda:0" = PlaceHolder[target=arg1_1]
#   %arg2_1 : Tensor "f32[1000][1]cuda:0" = PlaceHolder[target=arg2_1]
#   %var_mean : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%arg0_1, [1]), kwargs = {correction: 0, keepdim: True})
#   %sub : Tensor "f32[32, 1000][1000, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%arg0_1, %getitem_1), kwargs = {})
#   %add : Tensor "f32[32, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%getitem, 1e-05), kwargs = {})
#   %rsqrt : Tensor "f32[32, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add,), kwargs = {})
#   %mul : Tensor "f32[32, 1000][1000, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub, %rsqrt), kwargs = {})
#   %mul_1 : Tensor "f32[32, 1000][1000, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul, %arg1_1), kwargs = {})
#   %add_1 : Tensor "f32[32, 1000][1000, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_1, %arg2_1), kwargs = {})
#   return %getitem_1,%buf1,%add_1
triton_per_fused_native_layer_norm_0 = async_compile.triton('triton_per_fused_native_layer_norm_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 32, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'out_ptr2': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused_native_layer_norm_0', 'mutated_arg_names': []}
)
@triton.jit
def triton_per_fused_native_layer_norm_0(in_ptr0, in_ptr1, in_ptr2, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 32
    r0_numel = 1000
    R0_BLOCK: tl.constexpr = 1024
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0_1 = tl.arange(0, R0_BLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (r0_1 + 1000*xindex), (r0_1 < r0_numel) & (xindex < xnumel), other=0.0)
    tmp1 = tl.sum(tmp0, 1)[:, None] / 1000.0
    tl.store(out_ptr2 + (r0_1 + 1000*xindex), tmp0 - tmp1, (r0_1 < r0_numel) & (xindex < xnumel))
''', device_str='cuda')

# kernel path: /tmp/torchinductor_ksol/_1/ctriton_red_fused_native_layer_norm_1.py
# Topologically Sorted Source Nodes: [layer_norm_1], Original ATen: [aten.native_layer_norm]
# Source node to ATen node mapping:
# Graph fragment:
#   %arg3_1 : Tensor "f32[16, 65536][65536, 1]cuda:0" = PlaceHolder[target=arg3_1]
#   %var_mean_1 : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%arg3_1, [1]), kwargs = {correction: 0, keepdim: True})
#   return %buf4,%buf5,%buf6
triton_red_fused_native_layer_norm_1 = async_compile.triton('triton_red_fused_native_layer_norm_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 128, 'r0_': 8192},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'out_ptr1': '*fp32', 'out_ptr2': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_red_fused_native_layer_norm_1', 'mutated_arg_names': []}
)
@triton.jit
def triton_red_fused_native_layer_norm_1(in_ptr0, out_ptr0, out_ptr1, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 128
    r0_numel = 8192
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    tmp0 = tl.load(in_ptr0 + (tl.arange(0, R0_BLOCK)[None, :] + 8192*xindex), None)
    tl.store(out_ptr0 + (xindex), tl.sum(tmp0, 1)[:, None], None)
''', device_str='cuda')

# kernel path: /tmp/torchinductor_ksol/_2/ctriton_per_fused_native_layer_norm_2.py
# Topologically Sorted Source Nodes: [layer_norm_1], Original ATen: [aten.native_layer_norm]
# Source node to ATen node mapping:
# Graph fragment:
#   %buf4 : Tensor "f32[16, 1, 8][8, 128, 1]cuda:0" = PlaceHolder[target=buf4]
#   %buf5 : Tensor "f32[16, 1, 8][8, 128, 1]cuda:0" = PlaceHolder[target=buf5]
#   %buf6 : Tensor "f32[16, 1, 8][8, 128, 1]cuda:0" = PlaceHolder[target=buf6]
#   %var_mean_1 : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%arg3_1, [1]), kwargs = {correction: 0, keepdim: True})
#   return %getitem_3,%buf8
triton_per_fused_native_layer_norm_2 = async_compile.triton('triton_per_fused_native_layer_norm_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 16, 'r0_': 8},
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'out_ptr0': '*fp32', 'out_ptr1': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused_native_layer_norm_2', 'mutated_arg_names': []}
)
@triton.jit
def triton_per_fused_native_layer_norm_2(in_ptr0, in_ptr1, in_ptr2, out_ptr0, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 16
    r0_numel = 8
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    tmp0 = tl.load(in_ptr0 + (tl.arange(0, 8)[None, :] + 8*xindex), xindex < xnumel, other=0.0)
    tl.store(out_ptr0 + (xindex), tl.sum(tmp0, 1)[:, None] / 65536.0, xindex < xnumel)
''', device_str='cuda')

# kernel path: /tmp/torchinductor_ksol/_3/ctriton_poi_fused_add_native_layer_norm_3.py
# Topologically Sorted Source Nodes: [layer_norm_1, add], Original ATen: [aten.native_layer_norm, aten.add]
# Source node to ATen node mapping:
# Graph fragment:
#   %arg3_1 : Tensor "f32[16, 65536][65536, 1]cuda:0" = PlaceHolder[target=arg3_1]
#   %getitem_3 : Tensor "f32[16, 1][1, 16]cuda:0" = PlaceHolder[target=getitem_3]
#   %buf8 : Tensor "f32[16, 1][1, 16]cuda:0" = PlaceHolder[target=buf8]
#   %arg4_1 : Tensor "f32[65536][1]cuda:0" = PlaceHolder[target=arg4_1]
#   %arg5_1 : Tensor "f32[65536][1]cuda:0" = PlaceHolder[target=arg5_1]
#   %var_mean_1 : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%arg3_1, [1]), kwargs = {correction: 0, keepdim: True})
#   %sub_1 : Tensor "f32[16, 65536][65536, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%arg3_1, %getitem_3), kwargs = {})
#   %add_2 : Tensor "f32[16, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%getitem_2, 1e-05), kwargs = {})
#   %rsqrt_1 : Tensor "f32[16, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_2,), kwargs = {})
#   %mul_2 : Tensor "f32[16, 65536][65536, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_1, %rsqrt_1), kwargs = {})
#   %mul_3 : Tensor "f32[16, 65536][65536, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_2, %arg4_1), kwargs = {})
#   %add_3 : Tensor "f32[16, 65536][65536, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_3, %arg5_1), kwargs = {})
#   %add_4 : Tensor "f32[16, 65536][65536, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_3, 1.0), kwargs = {})
#   return %add_4
triton_poi_fused_add_native_layer_norm_3 = async_compile.triton('triton_poi_fused_add_native_layer_norm_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 1048576},
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32', 'in_ptr4': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_add_native_layer_norm_3', 'mutated_arg_names': []}
)
@triton.jit
def triton_poi_fused_add_native_layer_norm_3(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1048576
    x2 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    x1 = x2 // 65536
    x0 = (x2 % 65536)
    tmp0 = tl.load(in_ptr0 + (x2), None)
    tmp1 = tl.load(in_ptr1 + (x1), None)
    tmp3 = tl.load(in_ptr2 + (x1), None)
    tmp5 = tl.load(in_ptr3 + (x0), None)
    tmp7 = tl.load(in_ptr4 + (x0), None)
    tl.store(out_ptr0 + (x2), (tmp0 - tmp1) * tmp3 * tmp5 + tmp7 + 1.0, None)
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
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1 = args
        args.clear()
        assert_size_stride(arg0_1, (32, 1000), (1000, 1))
        assert_size_stride(arg1_1, (1000, ), (1, ))
        assert_size_stride(arg2_1, (1000, ), (1, ))
        assert_size_stride(arg3_1, (16, 65536), (65536, 1))
        assert_size_stride(arg4_1, (65536, ), (1, ))
        assert_size_stride(arg5_1, (65536, ), (1, ))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf3 = empty_strided_cuda((32, 1000), (1000, 1), torch.float32)
            # Topologically Sorted Source Nodes: [layer_norm], Original ATen: [aten.native_layer_norm]
            stream0 = get_raw_stream(0)
            triton_per_fused_native_layer_norm_0.run(arg0_1, arg1_1, arg2_1, buf3, 32, 1000, stream=stream0)
            del arg0_1
            del arg1_1
            del arg2_1
            buf4 = empty_strided_cuda((16, 1, 8), (8, 128, 1), torch.float32)
            buf5 = empty_strided_cuda((16, 1, 8), (8, 128, 1), torch.float32)
            buf6 = empty_strided_cuda((16, 1, 8), (8, 128, 1), torch.float32)
            # Topologically Sorted Source Nodes: [layer_norm_1], Original ATen: [aten.native_layer_norm]
            stream0 = get_raw_stream(0)
            triton_red_fused_native_layer_norm_1.run(arg3_1, buf4, buf5, buf6, 128, 8192, stream=stream0)
            buf7 = empty_strided_cuda((16, 1), (1, 16), torch.float32)
            buf8 = empty_strided_cuda((16, 1), (1, 16), torch.float32)
            # Topologically Sorted Source Nodes: [layer_norm_1], Original ATen: [aten.native_layer_norm]
            stream0 = get_raw_stream(0)
            triton_per_fused_native_layer_norm_2.run(buf4, buf5, buf6, buf7, buf8, 16, 8, stream=stream0)
            del buf4
            del buf5
            del buf6
            buf10 = empty_strided_cuda((16, 65536), (65536, 1), torch.float32)
            # Topologically Sorted Source Nodes: [layer_norm_1, add], Original ATen: [aten.native_layer_norm, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_native_layer_norm_3.run(arg3_1, buf7, buf8, arg4_1, arg5_1, buf10, 1048576, stream=stream0)
            del arg3_1
            del arg4_1
            del arg5_1
            del buf7
            del buf8
        return (buf3, buf10, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((32, 1000), (1000, 1), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((1000, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg2_1 = rand_strided((1000, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg3_1 = rand_strided((16, 65536), (65536, 1), device='cuda:0', dtype=torch.float32)
    arg4_1 = rand_strided((65536, ), (1, ), device='cuda:0', dtype=torch.float32)
    arg5_1 = rand_strided((65536, ), (1, ), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
