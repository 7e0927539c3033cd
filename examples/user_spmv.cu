// A user's existing CSR SpMV with a plain pointer-and-int signature (no ksol ABI), launched on
// the default stream. ksol wraps it:
//   ksol eval --task spmv_csr_f32 --candidate examples/user_spmv.cu \
//     --function "void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y)"
#include <cuda_runtime.h>

__global__ void spmv_csr_kernel(int m, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float acc = 0.0f;
  for (int j = row_ptr[row]; j < row_ptr[row + 1]; ++j) acc = fmaf(values[j], x[col_idx[j]], acc);
  y[row] = acc;
}

void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y) {
  spmv_csr_kernel<<<(M + 127) / 128, 128>>>(M, row_ptr, col_idx, values, x, y);
}
