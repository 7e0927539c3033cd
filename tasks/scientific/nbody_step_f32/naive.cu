// nbody_step_f32 naive baseline: one thread per body, a sequential fp32 loop over all bodies (float4
// loads of (x, y, z, m), 1/sqrtf), then v' = v + dt*a and r' = r + dt*v'; no shared-memory tiling.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;
constexpr float kEps2 = 0.01f, kDt = 0.001f;

__global__ void __launch_bounds__(kThreads) nbody(const float4* __restrict__ pos, const float* __restrict__ vel,
                                                  float4* __restrict__ pos_out, float* __restrict__ vel_out,
                                                  int64_t N) {
  const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (i >= N) return;
  const float4 pi = pos[i];
  float ax = 0.0f, ay = 0.0f, az = 0.0f;
  for (int64_t j = 0; j < N; ++j) {
    const float4 pj = pos[j];  // the same j for the whole warp: one broadcast load
    const float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
    const float d2 = dx * dx + dy * dy + dz * dz + kEps2;
    const float inv = 1.0f / sqrtf(d2);
    const float s = pj.w * (inv * inv * inv);
    ax += dx * s;
    ay += dy * s;
    az += dz * s;
  }
  const float vx = vel[3 * i] + kDt * ax, vy = vel[3 * i + 1] + kDt * ay, vz = vel[3 * i + 2] + kDt * az;
  vel_out[3 * i] = vx;
  vel_out[3 * i + 1] = vy;
  vel_out[3 * i + 2] = vz;
  pos_out[i] = make_float4(pi.x + kDt * vx, pi.y + kDt * vy, pi.z + kDt * vz, pi.w);
}
}  // namespace

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  const int64_t blocks = (N + kThreads - 1) / kThreads;
  if (blocks > 2147483647LL) return 3;
  // The harness's buffers are cudaMalloc-aligned, so pos rows can be read and written as float4.
  nbody<<<(unsigned)blocks, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const float4*>(call->tensors[0]), static_cast<const float*>(call->tensors[1]),
      static_cast<float4*>(call->tensors[2]), static_cast<float*>(call->tensors[3]), N);
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
