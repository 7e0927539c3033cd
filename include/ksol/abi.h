/* ksol candidate ABI, version 1.
 *
 * Every candidate (DSL output, hand-written CUDA, a vendor-library baseline, or a shim
 * around a user's plain C function) is a shared library exporting ksol_run. The harness
 * passes device pointers in the order the task declares its tensors, the bound dims in
 * the order the task declares its dims, and the stream the work must be queued on.
 * The call returns 0 on success; any other value is recorded as a launch failure.
 *
 * A candidate must queue all of its device work on `stream` before returning, must not
 * create streams or threads, and must not touch memory outside the tensors it is given.
 * The harness checks these rules; see docs/HARNESS.md.
 */
#ifndef KSOL_ABI_H
#define KSOL_ABI_H
#include <stdint.h>

#define KSOL_ABI_VERSION 1

typedef struct ksol_call {
  int32_t abi_version;   /* KSOL_ABI_VERSION */
  int32_t num_tensors;
  void* const* tensors;  /* device pointers, task tensor order (inputs and outputs) */
  int32_t num_dims;
  const int64_t* dims;   /* task dim order */
  void* stream;          /* cudaStream_t */
} ksol_call;

/* Float64 references use the same call shape: float tensors arrive as double arrays,
 * integer tensors in their declared integer type. `ksol_reference` receives host pointers
 * (reference.cpp, compiled for the CPU); `ksol_reference_gpu` receives device pointers and
 * a stream (reference_gpu.cu). Both must write every element of every output. */

#ifdef __cplusplus
extern "C" {
#endif
typedef int (*ksol_run_fn)(const ksol_call* call);
typedef int (*ksol_reference_fn)(const ksol_call* call);
#ifdef __cplusplus
}
#endif

#endif
