// GPU tier: runs only where ksol-worker sees a GPU; elsewhere each test is skipped with the
// worker's reason. These are checks, not benchmarks.
#include <gtest/gtest.h>

#include "coord/worker_client.h"
#include "core/util.h"

namespace {
std::string gpu_absent_reason() {
  ksol::WorkerClient w({std::string(KSOL_BUILD_DIR) + "/ksol-worker"});
  ksol::WorkerReply r = w.call({{"op", "hello"}}, 120);
  if (!r.ok) return "the worker did not start: " + r.message;
  if (!r.body.value("gpu", false)) return r.body.value("reason", "no CUDA device");
  return "";
}
}  // namespace

TEST(Gpu, CpuAndGpuReferencesAgreeOnSmallSizes) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  ksol::ProcessResult r = ksol::run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "refcheck"}, 1800);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Buffers whose byte size is not a multiple of 8 (a scalar output, odd-length index arrays) put
// the trailing guard zone at an unaligned address; the canary fill and fingerprint must cope.
TEST(Gpu, BaselinesWithOddSizedBuffersPassTheGate) {
  std::string why = gpu_absent_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU: " << why;
  ksol::ProcessResult r = ksol::run_process({std::string(KSOL_BUILD_DIR) + "/ksol", "--store", "", "bench", "--tasks",
                                             "dot_f32,spmv_csr_f32,reduction_sum_f32", "--sizes", "small,odd,odd_tall"},
                                            1800);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
