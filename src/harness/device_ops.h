// Small device-side helpers of the harness, so that checks on large buffers cost a pass over
// device memory instead of a copy to the host.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ksol {

// An order-independent 64-bit fingerprint of `bytes` bytes at `p` (the wrapping sum of a
// position-keyed mix of every 8-byte word, the tail zero-padded). Queued on `stream` and waited
// for; returns false on a CUDA error.
bool device_fingerprint(const void* p, size_t bytes, void* stream, uint64_t* out);

}  // namespace ksol
