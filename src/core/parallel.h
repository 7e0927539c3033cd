// A minimal fork-join loop for host-side work on large tensors (input generation, comparison).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace ksol {

// Calls f(begin, end) on contiguous chunks of [0, n) from up to all hardware threads; small n
// runs inline; at most 1024 chunks. Returns the number of chunks used (chunk k covers [n*k/c, n*(k+1)/c)).
template <class F>
int64_t parallel_for(int64_t n, F f, int64_t min_chunk = 1 << 16) {
  int64_t threads = std::min<int64_t>({std::max(1u, std::thread::hardware_concurrency()), std::max<int64_t>(1, n / min_chunk), 1024});
  if (threads <= 1) {
    f(int64_t{0}, n, int64_t{0});
    return 1;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back([=] { f(n * t / threads, n * (t + 1) / threads, t); });
  for (auto& th : pool) th.join();
  return threads;
}

// A 64-bit digest of host bytes, from every thread; the chunking depends on the length only, so
// the digest does too.
inline uint64_t digest_bytes(const void* data, size_t n, uint64_t h) {
  const size_t chunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((n + chunk - 1) / chunk);
  std::vector<uint64_t> part(static_cast<size_t>(chunks), 0);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  parallel_for(
      chunks,
      [&](int64_t a, int64_t b, int64_t) {
        for (int64_t c = a; c < b; ++c) {
          size_t lo = static_cast<size_t>(c) * chunk, hi = std::min(n, lo + chunk);
          uint64_t x = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(c);
          size_t i = lo;
          for (; i + 8 <= hi; i += 8) {
            uint64_t w;
            std::memcpy(&w, p + i, 8);
            x = (x ^ w) * 0xff51afd7ed558ccdull;
            x ^= x >> 32;
          }
          for (; i < hi; ++i) x = (x ^ p[i]) * 0xc4ceb9fe1a85ec53ull;
          part[static_cast<size_t>(c)] = x;
        }
      },
      16);
  h ^= n * 0x2545f4914f6cdd1dull;
  for (uint64_t x : part) h = (h ^ x) * 0x9e3779b97f4a7c15ull, h ^= h >> 29;
  return h;
}

// An allocator whose value-initialisation (resize(n)) leaves trivial elements uninitialised,
// for host buffers of a gigabyte or more that are written in full right away: zeroing them
// first would fault every page in on one thread.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), p, std::forward<A>(a)...);
  }
};
template <class T>
using HostVec = std::vector<T, DefaultInitAllocator<T>>;

// v.resize(n) with every element set to `value`, the pages touched from all threads.
template <class T>
void parallel_assign(HostVec<T>& v, size_t n, T value) {
  v.clear();
  v.resize(n);
  T* p = v.data();
  parallel_for(static_cast<int64_t>(n), [&](int64_t a, int64_t b, int64_t) { std::fill(p + a, p + b, value); });
}

}  // namespace ksol
