// A minimal fork-join loop for host-side work on large tensors (input generation, comparison).
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
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

}  // namespace ksol
