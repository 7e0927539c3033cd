// The conv code generator (src/codegen/conv.cpp): refusals with exact reasons, kernel names, the
// schedule space, generated sources through nvcc and the static gate, and epilogues, strides and
// dilations run on the CPU by the host emulation against the interpreter. The seed program against
// conv2d_f32's own reference (interpreter and host emulation) is one of test_codegen.cpp's task
// programs.
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
  EXPECT_EQ(refusal(nhwc), "'X[n, h+r-1, w+s-1, c]' must read the NCHW image as X[n, c, h*u+r*d+a, w*v+s*e+b] (strides u, v, "
                          "dilations d, e, offsets a, b integers)");
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
  // Image positions are counted in 32 bits: offsets past 10^8 are refused, not wrapped.
  dsl::Program far = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, c, h+r-4294967291, w+s-1] * F[k, c, r, s]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(far), "'X[n, c, h+r-4294967291, w+s-1]': an offset of -4294967291 is beyond 10^8, and the kernel counts image "
                          "rows and columns in 32 bits");
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

}  // namespace

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

namespace {

const char* kBiasRelu =
    "kernel conv2d_bias_relu(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], b: f32[K]) -> (Y: f32[N, K, H, W]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
    "  Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k])\n}\n";

// A residual of the output's shape, a per-row scale (the pixel's row decoded) and gelu.
const char* kResidualGelu =
    "kernel conv2d_residual_gelu(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], Z: f32[N, K, H, W], g: f32[H])\n"
    "    -> (Y: f32[N, K, H, W]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
    "  Y[n, k, h, w] = gelu(0.5 * acc[n, k, h, w] + Z[n, k, h, w] * g[h])\n}\n";

// A 5x5 filter with padding 2, scalars, clamp, a column scale e[w] and an explicit cast.
const char* kClampColumn =
    "kernel conv2d_clamp(X: f32[N, C, H, W] outside 0, F: f32[K, C, 5, 5], e: f32[W]) -> (Y: f32[N, K, H, W]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r-2, w+s-2] * F[k, c, r, s]) over c, r, s\n"
    "  Y[n, k, h, w] = f32(clamp(acc[n, k, h, w] * e[w], -2.5, 3) + sigmoid(acc[n, k, h, w]))\n}\n";

}  // namespace

// Convs with an epilogue, generated and run on the CPU, against the interpreter in float64 with
// the correctness gate's tolerance: bias + relu, residual + gelu, clamp with a column scale; odd
// sizes (every tile partial), taps mostly in the padding, and empty sums.
namespace {

struct HostCase {
  const char* program;
  std::vector<Schedule> schedules;
  std::vector<std::map<std::string, int64_t>> sizes;
};

std::vector<std::map<std::string, int64_t>> int_sizes() {
  std::vector<std::map<std::string, int64_t>> v;
  for (const auto& dims_f : kSizes) {
    std::map<std::string, int64_t> dims;
    for (const auto& [k, x] : dims_f) dims[k] = static_cast<int64_t>(x);
    v.push_back(dims);
  }
  return v;
}

// Each program in each schedule, generated and run on the CPU, against the interpreter in float64
// with the correctness gate's tolerance.
void check_on_host(const std::vector<HostCase>& cases) {
  for (const HostCase& c : cases) {
    const dsl::Program base = parse(c.program);
    ASSERT_EQ(base.family, "conv");
    for (const auto& dims : c.sizes) {
      auto numel = [&](const dsl::Param& prm) {
        int64_t n = 1;
        for (const std::string& e : prm.extents) n *= dsl::extent_is_number(e) ? std::stoll(e) : dims.at(e);
        return n;
      };
      uint64_t state = 2024;
      auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<double>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) / 500000.0;
      };
      codegen::HostArrays in;
      OutputBytes buffers;
      for (const dsl::Param& prm : base.inputs) {
        HostVec<uint8_t> bytes(numel(prm) * 4);
        std::vector<double>& v = in[prm.name];
        for (int64_t i = 0; i < numel(prm); ++i) {
          store_from_double(DType::f32, bytes.data(), i, next());
          v.push_back(load_as_double(DType::f32, bytes.data(), i));
        }
        buffers.push_back(bytes);
      }
      // The float64 meaning, and magnitudes from |inputs| for the tolerance (as the gate's).
      codegen::HostArrays want = codegen::interpret(base, dims, in);
      codegen::HostArrays abs_in = in;
      for (auto& [name, v] : abs_in)
        for (double& x : v) x = std::fabs(x);
      codegen::HostArrays mag = codegen::interpret(base, dims, abs_in);
      std::vector<int64_t> dv;
      for (const std::string& d : base.dims) dv.push_back(dims.at(d));
      const dsl::Param& out = base.outputs[0];
      const std::vector<double>& w = want.at(out.name);
      for (const Schedule& changes : c.schedules) {
        dsl::Program p = changes.empty() ? base : scheduled(base, changes);
        ASSERT_EQ(refusal(p), "(accepted)");
        const std::string name = codegen::kernel_name(p);
        codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
        ASSERT_TRUE(build.ok) << name << "\n" << build.message;
        OutputBytes run = buffers;
        run.emplace_back(numel(out) * 4, 0xFF);
        codegen::HostRun r = codegen::run_on_host(build.so_path, run, dv);
        ASSERT_TRUE(r.ok) << name << ": " << r.message;
        ASSERT_EQ(r.rc, 0) << name;
        // Output rounding plus f32 accumulation over the C * R * S products of a sum.
        Tolerance tol;
        tol.u_out = dtype_unit_roundoff(DType::f32);
        tol.u_acc = std::ldexp(1.0, -24);
        tol.growth = 8 + 2 * std::sqrt(static_cast<double>(std::max<int64_t>(1, dims.at("C") * 25)));
        std::vector<double> m(w.size());
        for (size_t i = 0; i < w.size(); ++i) m[i] = std::max(std::fabs(w[i]), std::fabs(mag.at(out.name)[i]));
        CompareResult cr = compare_output(tol, DType::f32, run.back().data(), w.data(), m.data(), static_cast<int64_t>(w.size()));
        EXPECT_TRUE(cr.ok) << name << " C=" << dims.at("C") << " H=" << dims.at("H") << " W=" << dims.at("W") << ": "
                           << cr.message;
      }
    }
  }
}

}  // namespace

// Convs with an epilogue: bias + relu, residual + gelu, clamp with a column scale; odd sizes (every
// tile partial), taps mostly in the padding, and empty sums.
TEST(CodegenConv, EpiloguesOnTheHostMatchTheInterpreter) {
  check_on_host({
      {kBiasRelu, {{}, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, int_sizes()},
      {kResidualGelu, {{{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}}, {}}, int_sizes()},
      {kClampColumn, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, int_sizes()},
  });
}

namespace {

// Stride 2 with padding 1: the output's P x Q is its own dims, (H + 2 - 3) / 2 + 1 for the
// frameworks' size; the image's bounds are H x W.
const char* kStride2 =
    "kernel conv2d_stride2(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, P, Q]) {\n"
    "  Y[n, k, h, w] = sum(X[n, c, h*2+r-1, w*2+s-1] * F[k, c, r, s]) over c, r, s\n}\n";

// Dilation 2 with padding 2 (same size), and a bias + relu epilogue.
const char* kDilation2 =
    "kernel conv2d_dilation2(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], b: f32[K]) -> (Y: f32[N, K, P, Q]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r*2-2, w+s*2-2] * F[k, c, r, s]) over c, r, s\n"
    "  Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k])\n}\n";

// Stride 2 in h only, dilation 3 in w, the filter index written first (r*1 + h*2).
// A filter of dims (R x S given at run time), read first in the subscript, padding 2.
const char* kGeneral =
    "kernel conv2d_general(X: f32[N, C, H, W] outside 0, F: f32[K, C, R, S]) -> (Y: f32[N, K, H, W]) {\n"
    "  Y[n, k, h, w] = sum(X[n, c, r+h-2, w+s-2] * F[k, c, r, s]) over c, r, s\n}\n";

const char* kMixed =
    "kernel conv2d_mixed(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 2]) -> (Y: f32[N, K, P, Q]) {\n"
    "  Y[n, k, h, w] = sum(X[n, c, r+h*2, w+s*3-1] * F[k, c, r, s]) over c, r, s\n}\n";

}  // namespace

// Strided and dilated convs on the CPU against the interpreter: odd sizes, an output larger than
// the image covers (its edge reads only padding), and empty sums.
TEST(CodegenConv, StrideAndDilationOnTheHostMatchTheInterpreter) {
  const std::vector<std::map<std::string, int64_t>> stride2 = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 5}, {"P", 5}, {"Q", 4}},
      {{"N", 1}, {"C", 8}, {"H", 8}, {"W", 8}, {"K", 8}, {"P", 4}, {"Q", 4}},
      {{"N", 1}, {"C", 2}, {"H", 3}, {"W", 2}, {"K", 3}, {"P", 3}, {"Q", 3}},
      {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}, {"P", 2}, {"Q", 2}},
  };
  const std::vector<std::map<std::string, int64_t>> same = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 5}, {"P", 9}, {"Q", 7}},
      {{"N", 1}, {"C", 5}, {"H", 5}, {"W", 2}, {"K", 3}, {"P", 5}, {"Q", 2}},
      {{"N", 1}, {"C", 2}, {"H", 3}, {"W", 3}, {"K", 2}, {"P", 1}, {"Q", 5}},
  };
  check_on_host({
      {kStride2, {{}, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, stride2},
      {kDilation2, {{{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}}}, same},
      {kMixed, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, stride2},
      {kGeneral, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}},
       {{{"N", 1}, {"C", 3}, {"H", 7}, {"W", 6}, {"K", 5}, {"R", 5}, {"S", 5}}, {{"N", 2}, {"C", 2}, {"H", 4}, {"W", 9}, {"K", 3}, {"R", 3}, {"S", 1}}}},
  });
  // The interpreter's meaning by hand: 1-D, stride 2, dilation 2, padding 2 on a 5-wide image.
  dsl::Program p = parse(
      "kernel c(X: f32[N, C, W] outside 0, F: f32[K, C, 3]) -> (Y: f32[N, K, Q]) {\n"
      "  Y[n, k, w] = sum(X[n, c, w*2+s*2-2] * F[k, c, s]) over c, s\n}\n");
  // Q = 3 outputs at 0, 2, 4 read taps {-2, 0, 2}, {0, 2, 4}, {2, 4, 6} of [1, 2, 3, 4, 5].
  codegen::HostArrays out =
      codegen::interpret(p, {{"N", 1}, {"C", 1}, {"W", 5}, {"K", 1}, {"Q", 3}}, {{"X", {1, 2, 3, 4, 5}}, {"F", {1, 10, 100}}});
  EXPECT_EQ(out["Y"], (std::vector<double>{0 + 10 + 300, 1 + 30 + 500, 3 + 50 + 0}));
}

// The epilogues' and the strided and dilated convs' sources through nvcc and the static gate; and what the generator refuses of an
// epilogue the DSL accepts.
TEST(CodegenConv, EpilogueSourcesCompileAndRefusals) {
  std::vector<CompileJob> jobs;
  for (const char* text : {kBiasRelu, kResidualGelu, kClampColumn, kStride2, kDilation2, kMixed}) {
    dsl::Program p = parse(text);
    ASSERT_EQ(refusal(p), "(accepted)");
    const std::string src = codegen::generate_cuda(p, {});
    EXPECT_TRUE(static_scan(src).empty()) << p.name;
    CompileJob j;
    j.source_path = codegen::kernel_name(p) + ".cu";
    j.source_text = src;
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;

  // Two outputs: the sum's and the epilogue's.
  dsl::Program both = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (A: f32[N, K, H, W], Y: f32[N, K, H, W]) {\n"
      "  A[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
      "  Y[n, k, h, w] = relu(A[n, k, h, w])\n}\n");
  ASSERT_EQ(both.family, "conv");
  EXPECT_EQ(refusal(both), "the conv family generates one output from a sum, Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * "
                           "F[k, c, r, s]) over c, r, s, and at most one elementwise definition after it");
  // A bf16 output through a cast is generated; the sum stays f32.
  dsl::Program half = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: bf16[N, K, H, W]) {\n"
      "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
      "  Y[n, k, h, w] = bf16(silu(acc[n, k, h, w]))\n}\n");
  EXPECT_EQ(refusal(half), "(accepted)");
  CompileJob hj;
  hj.source_path = codegen::kernel_name(half) + ".cu";
  hj.source_text = codegen::generate_cuda(half, {});
  EXPECT_NE(hj.source_text.find("__nv_bfloat16* out = Y + "), std::string::npos);
  std::vector<CompileResult> hr = compile_all({hj});
  EXPECT_TRUE(hr[0].ok) << hr[0].message;
}
