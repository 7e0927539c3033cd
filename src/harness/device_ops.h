// Small device-side helpers of the harness, so that checks on large buffers cost a pass over
// device memory instead of a copy to the host. Each returns the CUDA error it met (cudaSuccess
// when none), as an int so this header needs no CUDA headers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ksol {

// A keyed, order-independent 64-bit fingerprint of `bytes` bytes at `p`: the wrapping sum of a
// key- and position-dependent mix of every 8-byte word (the tail zero-padded). With a secret
// key drawn per evaluation a candidate cannot compute a compensating change. Waits for it.
int device_fingerprint(const void* p, size_t bytes, uint64_t key, void* stream, uint64_t* out);

// Fills `bytes` bytes at `p` with pseudo-random bits from `seed` (queued, not waited for).
int device_fill_random(void* p, size_t bytes, uint64_t seed, void* stream);

// Reads every byte of a buffer (and writes nothing), to evict the L2 with clean lines.
int device_read_all(const void* p, size_t bytes, void* stream);

}  // namespace ksol
