// Where the harness makes an evaluation's cases and which reference judges them (src/harness/
// case_plan.h), on the built-in tasks, without a GPU.
#include <gtest/gtest.h>

#include "harness/case_plan.h"
#include "task/task.h"

namespace ksol {
namespace {

Task builtin(const std::string& name) { return load_task(resolve_task_path(name)); }

const SizeSet& size_of(const Task& t, const std::string& name) {
  const SizeSet* s = t.find_size(name);
  if (!s) throw std::runtime_error(t.name + " has no size " + name);
  return *s;
}

std::string text(const CasePlan& p) {
  return std::string(p.gpu_reference ? "gpu" : "cpu") + (p.device_cases ? (p.device_inputs ? " device" : " device-uploaded") : " host");
}

TEST(CasePlan, DenseTasksRunOnTheDeviceAtEverySize) {
  // axpy's medium and h1 are within cpu_max_work: their cases used to be drawn on the host and
  // judged by the CPU reference, seconds per evaluation (4-7 s of drawing at h1 per kernel).
  Task t = builtin("axpy_f32");
  for (const char* s : {"small", "medium", "large", "odd", "h1", "h2"})
    EXPECT_EQ(text(plan_cases(t, size_of(t, s), true, false)), "gpu device") << s;
  Task sm = builtin("softmax_bf16");
  EXPECT_EQ(text(plan_cases(sm, size_of(sm, "medium"), true, false)), "gpu device");
}

TEST(CasePlan, HostCasesKeepTheReferenceCpuMaxWorkChooses) {
  Task t = builtin("axpy_f32");
  EXPECT_EQ(text(plan_cases(t, size_of(t, "medium"), true, true)), "cpu host");
  EXPECT_EQ(text(plan_cases(t, size_of(t, "large"), true, true)), "gpu host");
}

TEST(CasePlan, WithoutTheGpuLibraryTheCpuReferenceJudgesEverySize) {
  Task t = builtin("axpy_f32");
  for (const char* s : {"medium", "large"}) EXPECT_EQ(text(plan_cases(t, size_of(t, s), false, false)), "cpu host") << s;
  Task coo = builtin("spmv_coo_f32");  // no GPU reference at all
  for (const SizeSet& s : coo.sizes) EXPECT_EQ(text(plan_cases(coo, s, true, false)), "cpu host") << s.name;
}

TEST(CasePlan, SparseInputsAreDrawnOnTheHostAndKeptOnTheDeviceAboveCpuMaxWork) {
  Task t = builtin("spmm_csr_f32");
  EXPECT_EQ(text(plan_cases(t, size_of(t, "medium"), true, false)), "cpu host");
  EXPECT_EQ(text(plan_cases(t, size_of(t, "odd"), true, false)), "cpu host");
  for (const char* s : {"large_uniform", "large_powerlaw", "large_banded", "h1"})
    EXPECT_EQ(text(plan_cases(t, size_of(t, s), true, false)), "gpu device-uploaded") << s;
  EXPECT_EQ(text(plan_cases(t, size_of(t, "large_powerlaw"), true, true)), "gpu host");
}

TEST(CasePlan, OtherComparatorsStayOnTheHost) {
  Task topk = builtin("topk_f32");  // sorted rows and index_of
  EXPECT_EQ(text(plan_cases(topk, size_of(topk, "large"), true, false)), "gpu host");
  EXPECT_EQ(text(plan_cases(topk, size_of(topk, "medium"), true, false)), "cpu host");
  Task hist = builtin("histogram_i32");  // exact integer counts
  EXPECT_FALSE(outputs_compared_on_device(hist));
  EXPECT_EQ(text(plan_cases(hist, size_of(hist, "large"), true, false)), "gpu host");
}

// Over every built-in task and size: the GPU reference judges a size the CPU reference could
// (use_cpu_reference) only where its cases are made on the device, and that is a size ksol
// refcheck compares the two references at; the CPU reference never judges beyond cpu_max_work.
TEST(CasePlan, EverySizeOfEveryTaskHasOneJudge) {
  int moved = 0;
  for (const std::string& dir : builtin_task_dirs()) {
    Task t = load_task(dir);
    for (const SizeSet& s : t.sizes) {
      CasePlan p = plan_cases(t, s, true, false);
      EXPECT_TRUE(!p.device_inputs || p.device_cases) << t.name << " " << s.name;
      EXPECT_TRUE(!p.device_cases || p.gpu_reference) << t.name << " " << s.name;
      EXPECT_TRUE(p.gpu_reference || t.use_cpu_reference(s)) << t.name << " " << s.name;
      if (p.gpu_reference && t.use_cpu_reference(s)) {
        EXPECT_TRUE(p.device_inputs) << t.name << " " << s.name;
        ++moved;
      }
      CasePlan host = plan_cases(t, s, true, true);
      EXPECT_FALSE(host.device_cases);
      EXPECT_EQ(host.gpu_reference, !t.use_cpu_reference(s)) << t.name << " " << s.name;
    }
  }
  EXPECT_GT(moved, 50) << "the dense tasks' medium, odd and hidden sizes run on the device";
}

}  // namespace
}  // namespace ksol
