// nbody_step_f32 float64 CPU reference: all-pairs softened gravity (G = 1, eps2 = 0.01f, dt = 0.001f
// as doubles), then v' = v + dt*a and r' = r + dt*v'; mass copied. pos [N,4] = (x, y, z, m), vel [N,3].
#include <ksol/abi.h>
#include <cmath>
#include <cstdint>

extern "C" int ksol_reference(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 4 || call->num_dims != 1)
    return 1;
  const int64_t N = call->dims[0];
  if (N < 0) return 2;
  const double* pos = static_cast<const double*>(call->tensors[0]);
  const double* vel = static_cast<const double*>(call->tensors[1]);
  double* pos_out = static_cast<double*>(call->tensors[2]);
  double* vel_out = static_cast<double*>(call->tensors[3]);
  const double eps2 = static_cast<double>(0.01f), dt = static_cast<double>(0.001f);
  for (int64_t i = 0; i < N; ++i) {
    const double xi = pos[4 * i], yi = pos[4 * i + 1], zi = pos[4 * i + 2];
    double ax = 0.0, ay = 0.0, az = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      const double dx = pos[4 * j] - xi, dy = pos[4 * j + 1] - yi, dz = pos[4 * j + 2] - zi;
      const double d2 = dx * dx + dy * dy + dz * dz + eps2;
      const double inv = 1.0 / std::sqrt(d2);
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
  return 0;
}
