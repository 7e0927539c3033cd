// Small device-side helpers of the harness, so that checks on large buffers cost a pass over
// device memory instead of a copy to the host. Each returns the CUDA error it met (cudaSuccess
// when none), as an int so this header needs no CUDA headers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ksol {

// A keyed, order-independent 64-bit fingerprint of `bytes` bytes at `p`: the wrapping sum of a
// key- and position-dependent mix of every 8-byte word (an unaligned head and the tail each
// zero-padded into a word of their own; `p` need not be aligned). With a secret
// key drawn per evaluation a candidate cannot compute a compensating change. Waits for it.
int device_fingerprint(const void* p, size_t bytes, uint64_t key, void* stream, uint64_t* out);

// Fills `bytes` bytes at `p` (any alignment) with pseudo-random bits from `seed` (queued, not
// waited for).
int device_fill_random(void* p, size_t bytes, uint64_t seed, void* stream);

// Converts `n` floats stored as `from` at `src` (device) to doubles at `dst` (device), taking
// the absolute value if asked (the magnitude pass of a float64 GPU reference). Queued.
enum class WidenFrom { f32, f64, bf16, f16 };
int device_widen(const void* src, WidenFrom from, size_t n, double* dst, bool absolute, void* stream);

// Reads every byte of a buffer (and writes nothing), to evict the L2 with clean lines.
int device_read_all(const void* p, size_t bytes, void* stream);

}  // namespace ksol
