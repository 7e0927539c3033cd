// The conv code generator (src/codegen/conv.cpp): refusals with exact reasons, kernel names, the
// schedule space, generated sources through nvcc and the static gate, the IR interpreter and the
// generated CUDA run on the CPU by the host emulation, both against conv2d_f32's float64
// reference through the correctness gate's comparator.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "codegen/codegen.h"
#include "codegen/common.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "compile/compiler.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "host_reference.h"
#include "task/inputs.h"
#include "task/task.h"

using namespace ksol;
using codegen::Binding;
using codegen::Schedule;
namespace cd = ksol::codegen::detail;

using namespace ksol::test_support;

namespace {

std::string seed_text() { return read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/tensor/conv2d_f32/program.ksol"); }

dsl::Program parse(const std::string& t) { return dsl::parse_program(t, "test.ksol"); }

std::string refusal(const dsl::Program& p, const Binding& b = {}) {
  codegen::Support s = codegen::can_implement(p, b);
  return s.ok ? "(accepted)" : s.reason;
}

// p with the schedule `s` (every knob named; the rest take their defaults).
dsl::Program scheduled(const dsl::Program& p, const Schedule& s) { return codegen::with_schedule(p, s); }

Binding binding_of(const Task& t) {
  Binding b;
  for (const TensorSpec& ts : t.tensors) b.tensor_order.push_back(ts.name);
  b.dim_order = t.dims;
  return b;
}

const Binding kTaskBinding{{"X", "F", "Y"}, {"N", "C", "H", "W", "K"}};

}  // namespace

TEST(CodegenConv, AcceptsRefusesAndNames) {
  dsl::Program p = parse(seed_text());
  ASSERT_EQ(p.family, "conv");
  EXPECT_EQ(refusal(p, kTaskBinding), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(p), "conv_conv2d_f32_64x64x16_t4x4");
  EXPECT_EQ(codegen::kernel_name(scheduled(p, {{"tile", "[128, 64, 8]"}, {"thread_tile", "[8, 4]"}})),
            "conv_conv2d_f32_128x64x8_t8x4");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64, 16]"}, {"stages", "2"}})),
            "unknown schedule key 'stages' for the conv family; it accepts tile, thread_tile");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64]"}})), "tile = [64, 64] must be a list [PIXELS, FILTERS, SLICE]");
  EXPECT_EQ(refusal(scheduled(p, {{"thread_tile", "4"}})), "thread_tile = 4 must be a list [PIXELS, FILTERS]");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[62, 64, 16]"}})),
            "tile = [62, 64, 16] has 62 pixels, not a multiple of thread_tile = [4, 4]'s 4");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64, 16]"}, {"thread_tile", "[8, 3]"}})),
            "thread_tile = [8, 3] must have entries 1, 2, 4 or 8");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 36, 16]"}, {"thread_tile", "[4, 8]"}})),
            "tile = [64, 36, 16] has 36 filters, not a multiple of thread_tile = [4, 8]'s 8");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[256, 128, 16]"}, {"thread_tile", "[4, 4]"}})),
            "tile = [256, 128, 16] with thread_tile = [4, 4] makes 2048 threads per block; a block has 32 to 1024 "
            "threads, whole warps");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[256, 128, 32]"}, {"thread_tile", "[8, 8]"}})),
            "tile = [256, 128, 32] stages 49280 bytes of shared memory per block; static shared memory is at most "
            "49152 (no opt-in)");
  EXPECT_EQ(refusal(p, Binding{{"X", "F", "Y"}, {"N", "C", "H", "W"}}), "dim 'K' is not a dim of the task (its dims: N, C, H, W)");

  // Shapes the DSL calls a conv but this generator does not lay out.
  dsl::Program nhwc = parse(
      "kernel c(X: f32[N, H, W, C] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, h+r-1, w+s-1, c] * F[k, c, r, s]) over c, r, s\n}\n");
  ASSERT_EQ(nhwc.family, "conv");
  EXPECT_EQ(refusal(nhwc), "'X[n, h+r-1, w+s-1, c]' must read the NCHW image as X[n, c, h+r+a, w+s+b] (a, b integers)");
  dsl::Program swapped = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, s, r]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(swapped), "'F[k, c, s, r]' must read the KCRS filter as F[k, c, r, s]");
  dsl::Program half = parse(
      "kernel c(X: bf16[N, C, H, W] outside 0, F: bf16[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(f32(X[n, c, h+r-1, w+s-1]) * f32(F[k, c, r, s])) over c, r, s\n}\n");
  ASSERT_EQ(half.family, "conv");
  EXPECT_EQ(refusal(half), "the sum of 'Y' must be a product of two reads, without casts; it is f32(X[n, c, h+r-1, w+s-1]) * "
                           "f32(F[k, c, r, s])");
  // A filter of dims instead of fixed extents, and a 5x5 one with padding 2, are both convs.
  dsl::Program general = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, R, S]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, c, r+h-2, w+s-2] * F[k, c, r, s]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(general), "(accepted)");
}

TEST(CodegenConv, ScheduleSpace) {
  dsl::Program p = parse(seed_text());
  codegen::Space space = codegen::schedule_space(p, kTaskBinding);
  const cd::FamilyGenerator* f = cd::family_by_name("conv");
  ASSERT_NE(f, nullptr);
  size_t grid = 1;
  for (const cd::Knob& k : f->knobs) grid *= k.grid.size();
  std::map<std::string, int> reasons;
  for (const auto& [s, r] : space.refused) ++reasons[r.substr(r.find(' ', r.find(']')))];
  std::cout << "[ schedule space ] conv2d_f32 (conv): " << space.legal.size() << " legal, " << space.refused.size()
            << " refused\n";
  for (const auto& [r, n] : reasons) std::cout << "    " << n << " x ..." << r << "\n";
  EXPECT_EQ(space.legal.size() + space.refused.size(), grid);
  EXPECT_EQ(space.legal.size(), 51u);
  EXPECT_EQ(space.refused.size(), 5u);
  std::set<std::string> names;
  for (const Schedule& s : space.legal) names.insert(codegen::kernel_name(codegen::with_schedule(p, s)));
  EXPECT_EQ(names.size(), space.legal.size()) << "two legal schedules share a kernel name";
}

TEST(CodegenConv, GeneratedSourcesCompileAndPassTheStaticGate) {
  const dsl::Program seed = parse(seed_text());
  std::vector<CompileJob> jobs;
  for (const Schedule& s : std::vector<Schedule>{{}, {{"tile", "[128, 128, 8]"}, {"thread_tile", "[8, 8]"}}}) {
    dsl::Program p = s.empty() ? seed : scheduled(seed, s);
    ASSERT_EQ(refusal(p, kTaskBinding), "(accepted)");
    const std::string name = codegen::kernel_name(p);
    std::string src = codegen::generate_cuda(p, kTaskBinding);
    EXPECT_NE(src.find("// " + name + ": generated by ksol"), std::string::npos) << name;
    EXPECT_NE(src.find("__global__ void __launch_bounds__(kThreads) " + name + "("), std::string::npos) << src;
    EXPECT_EQ(src.find("tf32"), std::string::npos) << name;
    EXPECT_TRUE(static_scan(src).empty()) << name;
    CompileJob j;
    j.source_path = name + ".cu";
    j.source_text = src;
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

namespace {

const std::vector<std::map<std::string, double>> kSizes = {
    {{"N", 1}, {"C", 8}, {"H", 9}, {"W", 9}, {"K", 8}},
    {{"N", 2}, {"C", 3}, {"H", 5}, {"W", 7}, {"K", 5}},   // odd: every tile partial
    {{"N", 1}, {"C", 3}, {"H", 9}, {"W", 2}, {"K", 5}},   // most taps in the padding (the task's h3)
    {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}},   // empty sums: zeros
};

SizeSet size_of(const std::map<std::string, double>& dims) {
  SizeSet s;
  s.name = "cpu";
  s.dims = dims;
  return s;
}

}  // namespace

// The interpreter (float64) against the task's own reference, on every distribution it draws.
TEST(CodegenConv, InterpreterAgreesWithTheTasksReference) {
  Task t = load_task(resolve_task_path("conv2d_f32"));
  Reference ref(t);
  dsl::Program p = parse(seed_text());
  for (const auto& dims : kSizes) {
    SizeSet s = size_of(dims);
    for (Distribution d : distributions_for(t)) {
      std::vector<HostTensor> in = generate_inputs(t, s, d, 7);
      std::vector<HostTensor> want = ref.run(t, s, in, false);
      std::vector<HostTensor> mag = ref.run(t, s, in, true);
      std::vector<HostTensor> got = make_reference_outputs(t, s);
      std::vector<void*> ptrs;
      for (size_t k = 0; k < t.tensors.size(); ++k)
        ptrs.push_back(t.tensors[k].role == Role::in ? in[k].f64.data() : got[k].f64.data());
      std::vector<int64_t> dv = dims_of(t, s);
      ksol_call call{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dv.size()),
                     dv.data(), nullptr};
      ASSERT_EQ(codegen::interpret_call(p, binding_of(t), &call), 0);
      OutputBytes bytes(t.tensors.size());
      for (size_t k = 0; k < t.tensors.size(); ++k) {
        if (t.tensors[k].role != Role::out) continue;
        bytes[k].resize(got[k].numel * dtype_size(got[k].dtype));
        for (int64_t i = 0; i < got[k].numel; ++i) store_from_double(got[k].dtype, bytes[k].data(), i, got[k].f64[i]);
      }
      EXPECT_EQ(check_outputs(t, s, in, bytes, want, &mag), "") << distribution_name(d);
    }
  }
}

// The generated CUDA on the CPU against the task's reference, in three schedules.
TEST(CodegenConv, HostEmulationMatchesTheTasksReference) {
  Task t = load_task(resolve_task_path("conv2d_f32"));
  Reference ref(t);
  const Binding b = binding_of(t);
  const dsl::Program seed = parse(seed_text());
  for (const Schedule& sched : std::vector<Schedule>{{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}},
                                                     {{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}},
                                                     {}}) {
    dsl::Program p = sched.empty() ? seed : scheduled(seed, sched);
    ASSERT_EQ(refusal(p, b), "(accepted)");
    const std::string name = codegen::kernel_name(p);
    codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, b));
    ASSERT_TRUE(build.ok) << name << "\n" << build.message;
    for (const auto& dims : kSizes) {
      SizeSet s = size_of(dims);
      for (Distribution d : distributions_for(t)) {
        std::vector<HostTensor> in = generate_inputs(t, s, d, 5);
        std::vector<HostTensor> want = ref.run(t, s, in, false);
        std::vector<HostTensor> mag = ref.run(t, s, in, true);
        OutputBytes buffers(t.tensors.size());
        for (size_t k = 0; k < t.tensors.size(); ++k)
          buffers[k] = t.tensors[k].role == Role::in
                           ? in[k].bytes
                           : HostVec<uint8_t>(t.numel(t.tensors[k], s) * dtype_size(t.tensors[k].dtype), 0xFF);
        codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dims_of(t, s));
        ASSERT_TRUE(r.ok) << name << ": " << r.message;
        ASSERT_EQ(r.rc, 0) << name;
        EXPECT_EQ(check_outputs(t, s, in, buffers, want, &mag), "")
            << name << " " << distribution_name(d) << " C=" << dims.at("C") << " H=" << dims.at("H");
      }
    }
  }
}

// `outside 0` and sums over several indices, by hand: a 1-D convolution of two channels.
TEST(CodegenConv, InterpreterReadsZeroOutsideAPaddedInput) {
  dsl::Program p = parse(
      "kernel conv1d(X: f32[N, C, W] outside 0, F: f32[K, C, 3]) -> (Y: f32[N, K, W]) {\n"
      "  Y[n, k, w] = sum(X[n, c, w+s-1] * F[k, c, s]) over c, s\n}\n");
  ASSERT_EQ(p.family, "conv");
  EXPECT_EQ(p.dims, (std::vector<std::string>{"N", "C", "W", "K"}));
  // Channel 0 is [1, 2, 3] under the filter [1, 1, 1]; channel 1 is [10, 20, 30] under [0, 0, 1].
  codegen::HostArrays out =
      codegen::interpret(p, {{"N", 1}, {"C", 2}, {"W", 3}, {"K", 1}}, {{"X", {1, 2, 3, 10, 20, 30}}, {"F", {1, 1, 1, 0, 0, 1}}});
  EXPECT_EQ(out["Y"], (std::vector<double>{3 + 20, 6 + 30, 5 + 0}));
  EXPECT_EQ(refusal(p), "the conv family generates a 2-D convolution with a batch: Y[n, k, h, w] = sum(X[n, c, h+r-1, "
                        "w+s-1] * F[k, c, r, s]) over c, r, s");
  // Without `outside 0` the same read has no value past the edge (a DSL error says so first).
  dsl::Program unpadded = parse("kernel s(X: f32[W]) -> (Y: f32[W]) {\n  Y[w] = X[w+1]\n}\n");
  EXPECT_THROW(codegen::interpret(unpadded, {{"W", 3}}, {{"X", {1, 2, 3}}}), std::runtime_error);
}
