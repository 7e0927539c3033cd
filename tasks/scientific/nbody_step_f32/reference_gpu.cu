// nbody_step_f32 float64 GPU reference: one thread per body, all-pairs softened gravity in double
// (G = 1, eps2 = 0.01f, dt = 0.001f as doubles), v' = v + dt*a, r' = r + dt*v', mass copied.
#include <ksol/abi.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) nbody_f64(const double* __restrict__ pos, const double* __restrict__ vel,
                                                      double* __restrict__ pos_out, double* __restrict__ vel_out,
                                                      int64_t N, double eps2, double dt) {
  const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (i >= N) return;
  const double xi = pos[4 * i], yi = pos[4 * i + 1], zi = pos[4 * i + 2];
  double ax = 0.0, ay = 0.0, az = 0.0;
  for (int64_t j = 0; j < N; ++j) {
    const double dx = pos[4 * j] - xi, dy = pos[4 * j + 1] - yi, dz = pos[4 * j + 2] - zi;
    const double d2 = dx * dx + dy * dy + dz * dz + eps2;
    const double inv = 1.0 / sqrt(d2);
    const double s = pos[4 * j + 3] * inv * inv * inv;
    ax += dx * s;
    ay += dy * s;
    az += dz * s;
  }
  const double a[3] = {ax, ay, az};
  for (int c = 0; c < 3; ++c) {
    const double v = vel[3 * i + c] + dt * a[c];
    vel_out[3 * i + c] = v;
    pos_out[4 * i + c] = pos[4 * i + c] + dt * v;
  }
  pos_out[4 * i + 3] = pos[4 * i + 3];
}
}  // namespace

extern "C" int ksol_reference_gpu(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  if (N == 0) return 0;
  const int64_t blocks = (N + kThreads - 1) / kThreads;
  if (blocks > 2147483647LL) return 3;
  nbody_f64<<<(unsigned)blocks, kThreads, 0, static_cast<cudaStream_t>(call->stream)>>>(
      static_cast<const double*>(call->tensors[0]), static_cast<const double*>(call->tensors[1]),
      static_cast<double*>(call->tensors[2]), static_cast<double*>(call->tensors[3]), N,
      static_cast<double>(0.01f), static_cast<double>(0.001f));
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
