// The conv code generator (src/codegen/conv.cpp): refusals with exact reasons, kernel names, the
// schedule space, generated sources through nvcc and the static gate, and epilogues, strides and
// dilations run on the CPU by the host emulation against the interpreter. The seed program against
// conv2d_f32's own reference (interpreter and host emulation) is one of test_codegen.cpp's task
// programs.
#include <gtest/gtest.h>

#include <functional>
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
#include "program_job.h"
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
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64, 16]"}, {"split_k", "2"}})),
            "unknown schedule key 'split_k' for the conv family; it accepts mainloop, tile, thread_tile, cluster, stages, gather, "
            "fragments");
  EXPECT_EQ(refusal(scheduled(p, {{"cluster", "[2, 1]"}})),
            "cluster = [2, 1]: clusters are the tma path's; mainloop = simt runs one block per tile (cluster = [1, 1])");
  // The gather: tap masks by default where they apply, a decode of each element on request.
  EXPECT_EQ(codegen::kernel_name(scheduled(p, {{"gather", "taps"}})), "conv_conv2d_f32_64x64x16_t4x4");
  EXPECT_EQ(codegen::kernel_name(scheduled(p, {{"gather", "decode"}})), "conv_conv2d_f32_64x64x16_t4x4_gdec");
  EXPECT_NE(codegen::generate_cuda(p, {}).find("tap_ok[l] & tap_bit"), std::string::npos);
  EXPECT_EQ(codegen::generate_cuda(scheduled(p, {{"gather", "decode"}}), {}).find("tap_ok"), std::string::npos);
  EXPECT_EQ(refusal(scheduled(p, {{"gather", "both"}})), "gather = both must be one of auto, taps, decode");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64, 8]"}, {"thread_tile", "[2, 2]"}, {"gather", "taps"}})),
            "gather = taps: the slice's 512 image elements are not a whole multiple of the 1024 threads (gather = auto "
            "decodes each element's position)");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[64, 64, 8]"}, {"thread_tile", "[2, 2]"}, {"gather", "decode"}})),
            "gather = decode is this kernel's only gather (the slice's 512 image elements are not a whole multiple of "
            "the 1024 threads; tap masks do not apply): leave gather = auto");
  EXPECT_EQ(refusal(scheduled(p, {{"stages", "4"}})),
            "stages = 4: the tma and mma paths'; mainloop = simt stages one slice in registers (stages = auto)");
  EXPECT_EQ(refusal(scheduled(p, {{"mainloop", "tma"}})),
            "mainloop = tma: the image is NCHW; CUTLASS's conv takes channels-last data (an NHWC image and a KRSC "
            "filter); use mainloop = simt");
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

  // Shapes the DSL calls a conv but this generator does not lay out: an NHWC image with an NCHW
  // output, a filter in the other layout's order.
  dsl::Program mixed = parse(
      "kernel c(X: f32[N, H, W, C] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, h+r-1, w+s-1, c] * F[k, c, r, s]) over c, r, s\n}\n");
  ASSERT_EQ(mixed.family, "conv");
  EXPECT_EQ(refusal(mixed), "'X[n, h+r-1, w+s-1, c]' must read the image as X[n, c, h*u+r*d+a, w*v+s*e+b] for Y[n, k, h, w] "
                            "(NCHW) or X[n, h*u+r*d+a, w*v+s*e+b, c] for Y[n, h, w, k] (NHWC) (strides u, v, dilations "
                            "d, e, offsets a, b integers)");
  dsl::Program swapped = parse(
      "kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, s, r]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(swapped), "'F[k, c, s, r]' must read the KCRS filter as F[k, c, r, s]");
  dsl::Program krsc = parse(
      "kernel c(X: f32[N, H, W, C] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, H, W, K]) {\n"
      "  Y[n, h, w, k] = sum(X[n, h+r-1, w+s-1, c] * F[k, c, r, s]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(krsc), "'F[k, c, r, s]' must read the KRSC filter as F[k, r, s, c]");
  // 16-bit data: converted to f32 by both factors; for NCHW on the warp-level tensor cores (CUTLASS's
  // conv takes channels-last data only).
  dsl::Program half = parse(
      "kernel c(X: bf16[N, C, H, W] outside 0, F: bf16[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
      "  Y[n, k, h, w] = sum(f32(X[n, c, h+r-1, w+s-1]) * f32(F[k, c, r, s])) over c, r, s\n}\n");
  ASSERT_EQ(half.family, "conv");
  EXPECT_EQ(refusal(half), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(half), "conv_c_f32_mma_128x128x16_w4x2");
  EXPECT_EQ(refusal(scheduled(half, {{"mainloop", "tma"}})),
            "mainloop = tma: the image is NCHW; CUTLASS's conv takes channels-last data (an NHWC image and a KRSC "
            "filter); use mainloop = simt");
  dsl::Program one_tf32 = parse(
      "kernel c(X: f32[N, H, W, C] outside 0, F: f32[K, 3, 3, C]) -> (Y: f32[N, H, W, K]) {\n"
      "  Y[n, h, w, k] = sum(tf32(X[n, h+r-1, w+s-1, c]) * F[k, r, s, c]) over c, r, s\n}\n");
  EXPECT_EQ(refusal(one_tf32), "one factor of the sum is rounded to TF32 and the other is not; write tf32(...) around "
                               "both reads (TF32 products) or neither (f32 products)");
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
  std::map<std::string, size_t> reasons;
  for (const codegen::Space::ReasonCount& c : space.by_reason()) {
    const std::string& r = c.reason;
    const size_t bracket = r.find(']');
    reasons[bracket == std::string::npos ? r : r.substr(r.find(' ', bracket))] += c.count;
  }
  std::cout << "[ schedule space ] conv2d_f32 (conv): " << space.legal.size() << " legal, " << space.refused()
            << " refused\n";
  for (const auto& [r, n] : reasons) std::cout << "    " << n << " x ..." << r << "\n";
  EXPECT_EQ(space.size(), grid);
  // 81 with each gather but one: a tile whose pixels are not a multiple of what a thread gathers
  // has no tap masks, so gather = decode is refused there; fragments = slice is the mma kernel's.
  EXPECT_EQ(space.legal.size(), 161u);
  EXPECT_EQ(space.refused(), 19999u);  // most of them tma-only knobs, or mainloop = tma or mma on f32 NCHW data
  // Every verdict, the skipped ones included, is can_implement's.
  for (size_t i = 0; i < space.size(); ++i) {
    const codegen::Support r = codegen::can_implement(codegen::with_schedule(p, space.schedule(i)), kTaskBinding);
    ASSERT_EQ(r.ok ? std::string("(legal)") : r.reason,
              space.verdicts[i] == 0 ? std::string("(legal)") : space.reasons[space.verdicts[i] - 1]);
  }
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
  ASSERT_EQ(p.family, "direct");  // a 1-D convolution; the conv family's is 2-D
  EXPECT_EQ(p.dims, (std::vector<std::string>{"N", "C", "W", "K"}));
  // Channel 0 is [1, 2, 3] under the filter [1, 1, 1]; channel 1 is [10, 20, 30] under [0, 0, 1].
  codegen::HostArrays out =
      codegen::interpret(p, {{"N", 1}, {"C", 2}, {"W", 3}, {"K", 1}}, {{"X", {1, 2, 3, 10, 20, 30}}, {"F", {1, 1, 1, 0, 0, 1}}});
  EXPECT_EQ(out["Y"], (std::vector<double>{3 + 20, 6 + 30, 5 + 0}));
  EXPECT_EQ(refusal(p), "(accepted)");
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
  // A change to the generated source (a planted bug) and that every size must then fail.
  std::function<std::string(const std::string&)> mutate = nullptr;
  // Whether `mutate` plants a bug; false: a change that must keep every size right.
  bool planted = true;
};

// The kernel launched with 64-bit element offsets (kFlat false), which every size of these tests
// would otherwise not reach (their tensors have far fewer than 2^31 elements).
std::string wide_offsets(const std::string& src) {
  std::string s = src;
  const std::string from = "const bool flat = ";
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), from + "false && ");
  return s;
}

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
      auto dtype = [](const dsl::Param& prm) { return *parse_dtype(dsl::type_name(prm.type)); };
      for (const dsl::Param& prm : base.inputs) {
        HostVec<uint8_t> bytes(numel(prm) * dtype_size(dtype(prm)));
        std::vector<double>& v = in[prm.name];
        for (int64_t i = 0; i < numel(prm); ++i) {
          store_from_double(dtype(prm), bytes.data(), i, next());
          v.push_back(load_as_double(dtype(prm), bytes.data(), i));
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
        std::string source = codegen::generate_cuda(p, {});
        if (c.mutate) {
          const std::string planted = c.mutate(source);
          ASSERT_NE(planted, source) << name << ": the mutation changed nothing";
          source = planted;
        }
        codegen::HostBuild build = codegen::build_for_host(source);
        ASSERT_TRUE(build.ok) << name << "\n" << build.message;
        OutputBytes run = buffers;
        run.emplace_back(numel(out) * dtype_size(dtype(out)), 0xFF);
        codegen::HostRun r = codegen::run_on_host(build.so_path, run, dv);
        ASSERT_TRUE(r.ok) << name << ": " << r.message;
        ASSERT_EQ(r.rc, 0) << name;
        // Output rounding plus f32 accumulation over the C * R * S products of a sum.
        Tolerance tol;
        tol.u_out = dtype_unit_roundoff(dtype(out));
        tol.u_acc = std::ldexp(1.0, -24);
        tol.growth = 8 + 2 * std::sqrt(static_cast<double>(std::max<int64_t>(1, dims.at("C") * 25)));
        std::vector<double> m(w.size());
        for (size_t i = 0; i < w.size(); ++i) m[i] = std::max(std::fabs(w[i]), std::fabs(mag.at(out.name)[i]));
        CompareResult cr = compare_output(tol, dtype(out), run.back().data(), w.data(), m.data(), static_cast<int64_t>(w.size()));
        if (c.mutate && c.planted)
          EXPECT_FALSE(cr.ok) << name << " C=" << dims.at("C") << ": the planted bug went unnoticed";
        else
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
      {kBiasRelu, {{}, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}, {{"gather", "decode"}}}, int_sizes()},
      {kResidualGelu,
       {{{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}}, {}, {{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}, {"gather", "decode"}}},
       int_sizes()},
      {kClampColumn, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, int_sizes()},
      {kBiasRelu, {{}}, int_sizes(), wide_offsets, false},  // 64-bit element offsets
  });
}

namespace {

// Convs whose output is a reduction over the filters of an epilogue expression: the minimum of
// conv + bias (NCHW, TF32), the mean of tanh(conv) times a residual plus a column term (f32
// products: CUDA cores; the residual is read at the pixel's full coordinates), the maximum of
// conv - bias (NHWC, TF32) and the sum of relu(conv) (NHWC, CUDA cores).
const char* kMinBias =
    "kernel conv2d_min_bias(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], b: f32[K]) -> (Y: f32[N, H, W]) {\n"
    "  acc[n, k, h, w] = sum(tf32(X[n, c, h+r-1, w+s-1]) * tf32(F[k, c, r, s])) over c, r, s\n"
    "  Y[n, h, w] = min(acc[n, k, h, w] + b[k]) over k\n}\n";
const char* kMeanResidual =
    "kernel conv2d_mean_res(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], Z: f32[N, K, H, W], g: f32[W])\n"
    "    -> (Y: f32[N, H, W]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
    "  Y[n, h, w] = mean(tanh(acc[n, k, h, w]) * Z[n, k, h, w] + g[w]) over k\n}\n";
const char* kNhwcMax =
    "kernel conv2d_nhwc_max(X: f32[N, H, W, C] outside 0, F: f32[K, 3, 3, C], b: f32[K]) -> (Y: f32[N, H, W]) {\n"
    "  acc[n, h, w, k] = sum(tf32(X[n, h+r-1, w+s-1, c]) * tf32(F[k, r, s, c])) over c, r, s\n"
    "  Y[n, h, w] = max(acc[n, h, w, k] - b[k]) over k\n}\n";
const char* kNhwcSum =
    "kernel conv2d_nhwc_sum(X: f32[N, H, W, C] outside 0, F: f32[K, 3, 3, C]) -> (Y: f32[N, H, W]) {\n"
    "  acc[n, h, w, k] = sum(X[n, h+r-1, w+s-1, c] * F[k, r, s, c]) over c, r, s\n"
    "  Y[n, h, w] = sum(relu(acc[n, h, w, k])) over k\n}\n";

// Stride 2 and dilation 2 in w, the output's P x Q dims of their own: the maximum over the filters.
const char* kStridedMax =
    "kernel conv2d_strided_max(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, P, Q]) {\n"
    "  acc[n, k, h, w] = sum(tf32(X[n, c, h*2+r-1, w+s*2-2]) * tf32(F[k, c, r, s])) over c, r, s\n"
    "  Y[n, h, w] = max(acc[n, k, h, w]) over k\n}\n";

// The reduction into an intermediate that the output's definition reads: tanh twice and a scale
// (a fixed filter count, TF32), and a bf16 output converted from it (CUDA cores).
const char* kMinThenTanh =
    "kernel conv2d_min_tanh(X: f32[N, C, H, W] outside 0, F: f32[20, C, 3, 3], b: f32[20]) -> (Y: f32[N, H, W]) {\n"
    "  acc[n, k, h, w] = sum(tf32(X[n, c, h+r-1, w+s-1]) * tf32(F[k, c, r, s])) over c, r, s\n"
    "  m[n, h, w] = min(acc[n, k, h, w] + b[k]) over k\n"
    "  Y[n, h, w] = tanh(tanh(m[n, h, w])) * 0.5\n}\n";
const char* kSumThenBf16 =
    "kernel conv2d_sum_bf16(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: bf16[N, H, W]) {\n"
    "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
    "  m[n, h, w] = sum(sigmoid(acc[n, k, h, w])) over k\n"
    "  Y[n, h, w] = bf16(m[n, h, w] - 1.0)\n}\n";

// Sizes whose filters span several threads (simt) or warps (mma) of a 32-filter tile.
const std::vector<std::map<std::string, int64_t>> kManyFilters = {
    {{"N", 1}, {"C", 3}, {"H", 5}, {"W", 7}, {"K", 20}},
    {{"N", 2}, {"C", 2}, {"H", 3}, {"W", 3}, {"K", 32}},
};

}  // namespace

// A reduction over the filters as the conv's epilogue: the recogniser takes it as a conv, the
// tensor-core and CUDA-core kernels combine each pixel's filters within a block, and what CUTLASS
// or the WMMA kernel cannot do is refused with the reason.
TEST(CodegenConv, ReductionsOverTheFiltersAreAcceptedOrRefused) {
  const dsl::Program p = parse(kMinBias);
  ASSERT_EQ(p.family, "conv");
  EXPECT_EQ(refusal(p), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(p), "conv_conv2d_min_bias_f32_tf32_mma_128x128x16_w4x2");
  EXPECT_EQ(codegen::kernel_name(parse(kNhwcSum)), "conv_conv2d_nhwc_sum_f32_64x64x16_t4x4");
  // NHWC with TF32: not CUTLASS's (no fusion reduces over the filters), the mma kernel's.
  const dsl::Program nhwc = parse(kNhwcMax);
  EXPECT_EQ(codegen::kernel_name(nhwc), "conv_conv2d_nhwc_max_f32_tf32_mma_128x128x16_w4x2");
  EXPECT_EQ(refusal(scheduled(nhwc, {{"mainloop", "tma"}})),
            "mainloop = tma: the epilogue has no exact CUTLASS fusion (a reduction over the filters); it must be "
            "out(f(acc)) or out(f(acc + bias[k])); use mainloop = simt");
  // 16-bit data: the WMMA kernel has no reduction; auto takes the CUDA cores.
  const dsl::Program half = parse(
      "kernel conv2d_bf16_max(X: bf16[N, H, W, C] outside 0, F: bf16[K, 3, 3, C]) -> (Y: f32[N, H, W]) {\n"
      "  acc[n, h, w, k] = sum(f32(X[n, h+r-1, w+s-1, c]) * f32(F[k, r, s, c])) over c, r, s\n"
      "  Y[n, h, w] = max(acc[n, h, w, k]) over k\n}\n");
  EXPECT_EQ(codegen::kernel_name(half), "conv_conv2d_bf16_max_f32_64x64x16_t4x4");
  EXPECT_EQ(refusal(scheduled(half, {{"mainloop", "mma"}})),
            "mainloop = mma: a reduction over the filters is the TF32 mma.sync kernel's and the CUDA cores'; the WMMA "
            "kernel of bf16 data has none; use mainloop = simt");
  // The output of a reduction is f32.
  EXPECT_EQ(refusal(parse(
                "kernel conv2d_min_bf16(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: bf16[N, H, W]) {\n"
                "  acc[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n"
                "  Y[n, h, w] = min(bf16(acc[n, k, h, w])) over k\n}\n")),
            "'Y' is bf16; a reduction over the filters gives f32");
  // The partials' shared memory counts against the static limit: the slices' 16 x (128 + 128 + 2)
  // floats and 128 pixels x (64 + 1) slots of partials pass 49152 bytes together (the slices alone
  // do not).
  EXPECT_EQ(refusal(scheduled(parse(kNhwcSum), {{"tile", "[128, 128, 16]"}, {"thread_tile", "[8, 2]"}})),
            "tile = [128, 128, 16] stages 49792 bytes of shared memory per block; static shared memory is at most 49152 "
            "(no opt-in)");
  // A filter count fixed in the program refuses the tiles that hold fewer filters.
  const dsl::Program fixed = parse(
      "kernel conv2d_min64(X: f32[N, C, H, W] outside 0, F: f32[64, C, 3, 3], b: f32[64]) -> (Y: f32[N, H, W]) {\n"
      "  acc[n, k, h, w] = sum(tf32(X[n, c, h+r-1, w+s-1]) * tf32(F[k, c, r, s])) over c, r, s\n"
      "  Y[n, h, w] = min(acc[n, k, h, w] + b[k]) over k\n}\n");
  EXPECT_EQ(refusal(scheduled(fixed, {{"mainloop", "mma"}, {"tile", "[128, 32, 16]"}, {"thread_tile", "[2, 1]"}})),
            "tile = [128, 32, 16] holds 32 filters; the reduction over the filters needs all 64 in one block");
  EXPECT_EQ(refusal(scheduled(fixed, {{"mainloop", "simt"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[4, 4]"}})),
            "tile = [64, 32, 16] holds 32 filters; the reduction over the filters needs all 64 in one block");
  EXPECT_EQ(refusal(scheduled(fixed, {{"mainloop", "mma"}, {"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}})), "(accepted)");
  // One block holds every filter: more filters than the tile's make ksol_run return 3.
  const std::string src = codegen::generate_cuda(scheduled(p, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}), {});
  EXPECT_NE(src.find("if (tiles_n > 1) return 3;"), std::string::npos);
  codegen::HostBuild build = codegen::build_for_host(src);
  ASSERT_TRUE(build.ok) << build.message;
  std::vector<int64_t> dims = {1, 2, 4, 4, 33};  // N, C, H, W, K: 33 filters, a tile of 32
  OutputBytes run;
  run.emplace_back(1 * 2 * 4 * 4 * 4, 0);
  run.emplace_back(33 * 2 * 9 * 4, 0);
  run.emplace_back(33 * 4, 0);
  run.emplace_back(1 * 4 * 4 * 4, 0);
  codegen::HostRun r = codegen::run_on_host(build.so_path, run, dims);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.rc, 3);
  // nvcc for sm_90 takes each kernel: the mma.sync one (registers and the cp.async pipeline) and
  // the CUDA cores' of both layouts.
  std::vector<CompileJob> jobs;
  for (const dsl::Program& q : {p, scheduled(p, {{"stages", "3"}}), nhwc, parse(kNhwcSum), parse(kMeanResidual), half}) {
    CompileJob j = program_job(q);
    EXPECT_TRUE(static_scan(j.source_text).empty()) << j.source_path;
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// The reductions generated and run on the CPU against the interpreter in float64: the TF32
// mma.sync kernel (one and several warps along the filters, the cp.async pipeline) and the CUDA
// cores, NCHW and NHWC, a strided and dilated one with P x Q of its own, odd sizes and empty sums. Planted: each pixel's partials of the other
// warps or threads dropped, the shuffle across a row's lanes dropped.
TEST(CodegenConv, ReductionsOverTheFiltersOnTheHostMatchTheInterpreter) {
  auto drop = [](const std::string& from, const std::string& to) {
    return [from, to](const std::string& src) {
      std::string s = src;
      const size_t at = s.find(from);
      if (at != std::string::npos) s.replace(at, from.size(), to);
      return s;
    };
  };
  std::vector<std::map<std::string, int64_t>> sizes = int_sizes();
  sizes.insert(sizes.end(), kManyFilters.begin(), kManyFilters.end());
  check_on_host({
      {kMinBias,
       {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[2, 1]"}, {"stages", "3"}},
        {{"mainloop", "simt"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}},
       sizes},
      {kMeanResidual, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[2, 4]"}}, {{"tile", "[16, 64, 16]"}, {"thread_tile", "[1, 2]"}}},
       sizes},
      {kNhwcMax,
       {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "mma"}, {"tile", "[32, 64, 16]"}, {"thread_tile", "[1, 2]"}}},
       sizes},
      {kNhwcSum, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 2]"}}}, sizes},
      {kMinThenTanh,
       {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "simt"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[2, 2]"}}},
       {{{"N", 2}, {"C", 3}, {"H", 5}, {"W", 7}}, {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}}}},
      {kSumThenBf16, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 2]"}}}, sizes},
      {kStridedMax,
       {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "simt"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[2, 2]"}}},
       {{{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 20}, {"P", 5}, {"Q", 5}},
        {{"N", 1}, {"C", 5}, {"H", 8}, {"W", 8}, {"K", 3}, {"P", 4}, {"Q", 6}}}},
      {kMinBias, {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}}, kManyFilters,
       drop("ksol_red[r][sl]", "ksol_red[r][0]")},
      {kMinBias, {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}}, kManyFilters,
       drop("__shfl_xor_sync(0xffffffffu, part, 2)", "part")},
      {kNhwcSum, {{{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 2]"}}}, kManyFilters,
       drop("ksol_red[r][sl]", "ksol_red[r][0]")},
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
      {kStride2, {{}, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}, {{"gather", "decode"}}}, stride2},
      {kDilation2,
       {{{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}}, {{"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}, {"gather", "decode"}}},
       same},
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
                           "F[k, c, r, s]) over c, r, s (NCHW) or Y[n, h, w, k] = sum(X[n, h+r-1, w+s-1, c] * F[k, r, s, "
                           "c]) over c, r, s (NHWC), and at most one definition after it (elementwise, or a reduction over "
            "the filters, which one elementwise output definition may follow)");
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

// --- channels last: NHWC images, KRSC filters --------------------------------------------------

namespace {

// bf16 data with a per-filter bias and relu, converted to bf16: CUTLASS's fusion on the tma path.
const char* kNhwcBf16BiasRelu =
    "kernel conv2d_nhwc_bias_relu(X: bf16[N, H, W, C] outside 0, F: bf16[K, 3, 3, C], b: bf16[K]) -> (Y: bf16[N, H, W, K]) {\n"
    "  acc[n, h, w, k] = sum(f32(X[n, h+r-1, w+s-1, c]) * f32(F[k, r, s, c])) over c, r, s\n"
    "  Y[n, h, w, k] = bf16(relu(acc[n, h, w, k] + f32(b[k])))\n}\n";

// TF32 products, stride 2 and a 5x5 filter with padding 2, f32 out.
const char* kNhwcTf32Stride2 =
    "kernel conv2d_nhwc_tf32_s2(X: f32[N, H, W, C] outside 0, F: f32[K, 5, 5, C]) -> (Y: f32[N, P, Q, K]) {\n"
    "  Y[n, h, w, k] = sum(tf32(X[n, h*2+r-2, w*2+s-2, c]) * tf32(F[k, r, s, c])) over c, r, s\n}\n";

// f32 products (CUDA cores only) with a residual Z[n, h, w, k] and a per-row scale g[h].
const char* kNhwcResidual =
    "kernel conv2d_nhwc_residual(X: f32[N, H, W, C] outside 0, F: f32[K, 3, 3, C], Z: f32[N, H, W, K], g: f32[H])\n"
    "    -> (Y: f32[N, H, W, K]) {\n"
    "  acc[n, h, w, k] = sum(X[n, h+r-1, w+s-1, c] * F[k, r, s, c]) over c, r, s\n"
    "  Y[n, h, w, k] = acc[n, h, w, k] * g[h] + Z[n, h, w, k]\n}\n";

}  // namespace

// The CUDA-core kernel in the channels-last layout (the tma path's fallback, and mainloop = simt)
// on the CPU against the interpreter: bf16 data with a fused bias, TF32 rounding with stride 2,
// f32 with a residual; odd sizes, taps mostly in the padding, empty sums.
TEST(CodegenConv, ChannelsLastOnTheHostMatchesTheInterpreter) {
  const std::vector<std::map<std::string, int64_t>> strided = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 5}, {"P", 5}, {"Q", 4}},
      {{"N", 1}, {"C", 8}, {"H", 8}, {"W", 8}, {"K", 8}, {"P", 4}, {"Q", 4}},
      {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}, {"P", 2}, {"Q", 2}},
  };
  check_on_host({
      {kNhwcBf16BiasRelu, {{{"mainloop", "simt"}}, {{"mainloop", "simt"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}},
       int_sizes()},
      {kNhwcTf32Stride2, {{{"mainloop", "simt"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[8, 4]"}}}, strided},
      {kNhwcResidual, {{}, {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}}, int_sizes()},
  });
}

// The tma path: where `auto` takes it, its names, what it refuses and why, and what compiling it
// needs.
TEST(CodegenConv, TensorCorePathNamesAndRefusals) {
  const dsl::Program bf = parse(kNhwcBf16BiasRelu);
  ASSERT_EQ(bf.family, "conv");
  EXPECT_EQ(refusal(bf), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(bf), "conv_conv2d_nhwc_bias_relu_bf16_tma_128x128x64_c1x1_sauto_biasrelu_fbsimt");
  EXPECT_EQ(codegen::compile_needs(bf).arch, "sm_90a");
  EXPECT_EQ(codegen::kernel_name(scheduled(bf, {{"mainloop", "simt"}})), "conv_conv2d_nhwc_bias_relu_bf16_64x64x16_t4x4");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "simt"}, {"gather", "taps"}})),
            "gather = taps: channels-last data are gathered along the channels, not the taps (gather = auto decodes each "
            "element's position)");
  EXPECT_EQ(refusal(scheduled(bf, {{"gather", "decode"}})),
            "gather = decode chooses how the CUDA-core and mma kernels gather the image; mainloop = tma loads it by "
            "TMA's im2col mode (gather = auto)");
  EXPECT_EQ(codegen::compile_needs(scheduled(bf, {{"mainloop", "simt"}})).arch, "sm_90");
  EXPECT_EQ(codegen::kernel_name(scheduled(bf, {{"tile", "[64, 128, 64]"}, {"cluster", "[2, 1]"}, {"stages", "4"}})),
            "conv_conv2d_nhwc_bias_relu_bf16_tma_64x128x64_c2x1_s4_biasrelu_fbsimt");
  const dsl::Program tf = parse(kNhwcTf32Stride2);
  EXPECT_EQ(codegen::kernel_name(tf), "conv_conv2d_nhwc_tf32_s2_f32_tf32_tma_128x128x32_c1x1_sauto_fbsimt");
  // f32 products and epilogues CUTLASS cannot fuse stay on CUDA cores under auto; tma says why.
  const dsl::Program res = parse(kNhwcResidual);
  EXPECT_EQ(codegen::kernel_name(res), "conv_conv2d_nhwc_residual_f32_64x64x16_t4x4");
  EXPECT_EQ(refusal(scheduled(res, {{"mainloop", "tma"}})),
            "mainloop = tma: the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write "
            "tf32(X[...]) * tf32(F[...]) for TF32); use mainloop = simt");
  const dsl::Program gelu_res = parse(
      "kernel c(X: bf16[N, H, W, C] outside 0, F: bf16[K, 3, 3, C], Z: bf16[N, H, W, K]) -> (Y: bf16[N, H, W, K]) {\n"
      "  acc[n, h, w, k] = sum(f32(X[n, h+r-1, w+s-1, c]) * f32(F[k, r, s, c])) over c, r, s\n"
      "  Y[n, h, w, k] = bf16(gelu(acc[n, h, w, k] + f32(Z[n, h, w, k])))\n}\n");
  EXPECT_EQ(codegen::kernel_name(gelu_res), "conv_c_bf16_mma_128x128x16_w4x2");
  EXPECT_EQ(refusal(scheduled(gelu_res, {{"mainloop", "tma"}})),
            "mainloop = tma: the epilogue has no exact CUTLASS fusion (the epilogue reads tensors other than the sum and "
            "one per-column bias added to it (bf16(gelu(acc[n, h, w, k] + f32(Z[n, h, w, k]))))); it must be "
            "out(f(acc)) or out(f(acc + bias[k])); use mainloop = simt");
  const dsl::Program stride9 = parse(
      "kernel c(X: bf16[N, H, W, C] outside 0, F: bf16[K, 3, 3, C]) -> (Y: f32[N, P, Q, K]) {\n"
      "  Y[n, h, w, k] = sum(f32(X[n, h*9+r, w+s, c]) * f32(F[k, r, s, c])) over c, r, s\n}\n");
  EXPECT_EQ(refusal(scheduled(stride9, {{"mainloop", "tma"}})),
            "mainloop = tma: a stride above 8 is beyond the element strides of TMA's im2col loads; use mainloop = simt");
  const dsl::Program shifted = parse(
      "kernel c(X: bf16[N, H, W, C] outside 0, F: bf16[K, 3, 3, C]) -> (Y: f32[N, H, W, K]) {\n"
      "  Y[n, h, w, k] = sum(f32(X[n, h+r+1, w+s, c]) * f32(F[k, r, s, c])) over c, r, s\n}\n");
  EXPECT_EQ(refusal(scheduled(shifted, {{"mainloop", "tma"}})),
            "mainloop = tma: an image offset above 0 is a negative padding, which TMA's im2col loads cannot express; use "
            "mainloop = simt");
  // The tma path's knobs.
  // Under auto the refusal says that auto took tma, and what simt would do.
  EXPECT_EQ(refusal(scheduled(bf, {{"tile", "[256, 128, 64]"}})),
            "tile = [256, 128, 64]: mainloop = tma takes 64 or 128 pixels per tile (one consumer warpgroup of WGMMAs) "
            "(mainloop = auto takes tma for this program; mainloop = simt runs it on CUDA cores)");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[256, 128, 64]"}})),
            "tile = [256, 128, 64]: mainloop = tma takes 64 or 128 pixels per tile (one consumer warpgroup of WGMMAs)");
  EXPECT_EQ(refusal(scheduled(bf, {{"stages", "[2, 3]"}})), "stages = [2, 3] must be an integer or auto");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[128, 256, 64]"}})),
            "tile = [128, 256, 64] holds 256 f32 accumulators per thread of its one consumer warpgroup; at most 128 fit in "
            "the registers");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[128, 96, 64]"}})), "tile = [128, 96, 64]: mainloop = tma takes 64, 128 or 256 filters per tile");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[128, 128, 16]"}})),
            "tile = [128, 128, 16]: mainloop = tma stages 64, 128 or 256 bytes of channels (32, 64 or 128 for 16-bit data)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "tma"}, {"tile", "[128, 128, 128]"}})),
            "tile = [128, 128, 128]: mainloop = tma stages 64, 128 or 256 bytes of channels (16, 32 or 64 for TF32)");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"thread_tile", "[8, 8]"}})),
            "thread_tile = [8, 8] is the simt kernel's; mainloop = tma takes none (leave it [4, 4])");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"cluster", "[2, 2]"}})), "cluster = [2, 2]: mainloop = tma takes cluster [1, 1], [2, 1] or [1, 2]");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"stages", "9"}})), "stages = 9 must be between 2 and 8, or auto");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[128, 256, 128]"}})),
            "tile = [128, 256, 128] holds 256 f32 accumulators per thread of its one consumer warpgroup; at most 128 fit "
            "in the registers");
  EXPECT_EQ(refusal(scheduled(bf, {{"mainloop", "tma"}, {"tile", "[64, 256, 128]"}, {"stages", "4"}})),
            "stages = 4 of tile = [64, 256, 128] take 327744 bytes of shared memory, plus about 11264 for the epilogue: "
            "over the 232448 bytes (227 KB) of an sm_90 block");

  // The bf16 program's schedule space: both paths, every name distinct.
  codegen::Space space = codegen::schedule_space(bf, {});
  std::cout << "[ schedule space ] conv2d_nhwc_bias_relu (conv, bf16 NHWC): " << space.legal.size() << " legal, "
            << space.refused() << " refused\n";
  size_t tma = 0, mma = 0;
  std::set<std::string> names;
  for (const Schedule& s : space.legal) {
    const std::string n = codegen::kernel_name(codegen::with_schedule(bf, s));
    names.insert(n);
    tma += n.find("_tma_") != std::string::npos;
    mma += n.find("_mma_") != std::string::npos;
  }
  EXPECT_EQ(names.size(), space.legal.size()) << "two legal schedules share a kernel name";
  EXPECT_EQ(space.legal.size() - tma - mma, 81u);  // the simt schedules, as for conv2d_f32
  EXPECT_EQ(mma, 19u);  // the rest would spill registers or exceed 48 KB; bf16: no cp.async pipeline (stages = auto only)
  EXPECT_EQ(tma, 81u);  // 7 tiles x 3 clusters x 4 stage counts, less the 3 of 128 x 128 x 128 with 4 stages
}

// The tma path's sources through nvcc (sm_90a, CUTLASS) and the static gate: bf16 with a fused
// bias + relu, TF32 with stride 2 and a 5x5 filter. Two CUTLASS instantiations (about a minute
// each on two cores), compiled in parallel.
TEST(CodegenConv, TensorCoreSourcesCompile) {
  std::vector<CompileJob> jobs;
  for (const char* text : {kNhwcBf16BiasRelu, kNhwcTf32Stride2}) {
    const dsl::Program p = parse(text);
    ASSERT_EQ(refusal(p), "(accepted)");
    CompileJob j = program_job(p);
    EXPECT_NE(j.source_text.find("cutlass::conv::collective::CollectiveBuilder<"), std::string::npos);
    EXPECT_NE(j.source_text.find("__global__ void __launch_bounds__(kThreads) ksol_conv_simt("), std::string::npos);
    EXPECT_TRUE(static_scan(j.source_text).empty()) << j.source_path;
    jobs.push_back(j);
  }
  EXPECT_NE(jobs[0].source_text.find("LinCombPerColBiasEltAct<KsolEpilogueFn, cutlass::bfloat16_t, float, cutlass::bfloat16_t, void, float>"),
            std::string::npos);
  EXPECT_NE(jobs[0].source_text.find("args.epilogue.thread.bias_ptr"), std::string::npos);
  EXPECT_NE(jobs[1].source_text.find("{2, 2}, {1, 1}, 1);"), std::string::npos) << "stride 2, dilation 1";
  EXPECT_NE(jobs[1].source_text.find("const int64_t pad_h = 2, pad_w = 2;"), std::string::npos);
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// --- mainloop = mma: warp-level tensor cores on the staged slices, either layout ---------------

namespace {

// TF32 products on NCHW data with a bias and relu: what a float32 nn.Conv2d + ReLU lowers to where
// its precision mode lets convolutions use TF32.
const char* kNchwTf32BiasRelu =
    "kernel conv2d_tf32_bias_relu(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3], b: f32[K]) -> (Y: f32[N, K, H, W]) {\n"
    "  acc[n, k, h, w] = sum(tf32(X[n, c, h+r-1, w+s-1]) * tf32(F[k, c, r, s])) over c, r, s\n"
    "  Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k])\n}\n";

// bf16 NCHW data, stride 2, a residual and a per-row scale read at h, f32 out.
const char* kNchwBf16Stride2 =
    "kernel conv2d_bf16_s2(X: bf16[N, C, H, W] outside 0, F: bf16[K, C, 3, 3], Z: f32[N, K, P, Q], g: f32[P])\n"
    "    -> (Y: f32[N, K, P, Q]) {\n"
    "  acc[n, k, h, w] = sum(f32(X[n, c, h*2+r-1, w*2+s-1]) * f32(F[k, c, r, s])) over c, r, s\n"
    "  Y[n, k, h, w] = acc[n, k, h, w] * g[h] + Z[n, k, h, w]\n}\n";

// f16 NCHW data, a 5x5 filter dilated by 2, no epilogue.
const char* kNchwF16Dilated =
    "kernel conv2d_f16_d2(X: f16[N, C, H, W] outside 0, F: f16[K, C, 5, 5]) -> (Y: f32[N, K, P, Q]) {\n"
    "  Y[n, k, h, w] = sum(f32(X[n, c, h+r*2-4, w+s*2-4]) * f32(F[k, c, r, s])) over c, r, s\n}\n";

// A 5 x 9 filter dilated by 2 and 3 (KernelBench level 1's 80): 45 taps, so each pixel's mask of
// the taps inside the image is 64 bits wide.
const char* kWideFilterTf32 =
    "kernel conv2d_wide(X: f32[N, C, H, W] outside 0, F: f32[K, C, 5, 9]) -> (Y: f32[N, K, P, Q]) {\n"
    "  Y[n, k, h, w] = sum(tf32(X[n, c, h+r*2-4, w+s*3-12]) * tf32(F[k, c, r, s])) over c, r, s\n}\n";

}  // namespace

// The mma kernel on the CPU against the interpreter (the host emulation's WMMA checks each
// fragment load's and store's alignment and leading dimension, as the GPU does): NCHW TF32 with
// a fused bias, bf16 with stride 2 and a residual, f16 dilated, NHWC TF32 and bf16; tiles of one
// to eight warps, odd sizes (every tile partial), channel counts below one slice, empty sums; and
// a planted bug, TF32 data staged without their rounding, fails.
TEST(CodegenConv, TensorCoreFragmentsOnTheHostMatchTheInterpreter) {
  const std::vector<std::map<std::string, int64_t>> stride2 = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 5}, {"P", 5}, {"Q", 4}},
      {{"N", 1}, {"C", 19}, {"H", 8}, {"W", 8}, {"K", 40}, {"P", 4}, {"Q", 4}},
      {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}, {"P", 2}, {"Q", 2}},
  };
  const std::vector<std::map<std::string, int64_t>> dilated = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 17}, {"P", 9}, {"Q", 7}},
      {{"N", 1}, {"C", 1}, {"H", 4}, {"W", 5}, {"K", 3}, {"P", 2}, {"Q", 3}},
  };
  check_on_host({
      {kNchwTf32BiasRelu,
       {{}, {{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[2, 1]"}},
        {{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[2, 1]"}, {"gather", "decode"}}},
       int_sizes()},
      {kNchwBf16Stride2,
       {{{"mainloop", "mma"}, {"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}},
        {{"mainloop", "mma"}, {"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}, {"gather", "decode"}}},
       stride2},
      {kNchwF16Dilated, {{{"mainloop", "mma"}, {"tile", "[64, 64, 32]"}, {"thread_tile", "[2, 2]"}}}, dilated},
      {kWideFilterTf32,
       {{}, {{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}},
        {{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[2, 1]"}, {"gather", "decode"}},
        {{"mainloop", "simt"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}},
       dilated},
      {kNhwcTf32Stride2, {{{"mainloop", "mma"}, {"tile", "[32, 64, 16]"}, {"thread_tile", "[1, 2]"}}}, stride2},
      {kNhwcBf16BiasRelu, {{{"mainloop", "mma"}, {"tile", "[32, 32, 32]"}, {"thread_tile", "[1, 1]"}}}, int_sizes()},
      // The same kernels with 64-bit element offsets (the tap-mask gather's and the filter rows').
      {kNchwTf32BiasRelu, {{{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[2, 1]"}}}, int_sizes(),
       wide_offsets, false},
      {kNchwBf16Stride2, {{{"mainloop", "mma"}, {"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}}}, stride2, wide_offsets,
       false},
      // Planted: the image's TF32 rounding dropped at the stores into the slice. The fragments take
      // the slices as they are, and the emulated tensor cores read a TF32 operand's upper 19 bits.
      {kNhwcTf32Stride2, {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}},
       {stride2.begin(), stride2.begin() + 2},  // not the empty sum, which rounds nothing
       [](const std::string& src) {
         std::string s = src;
         for (size_t at = s.find("= tf32_round(ra[l]);"); at != std::string::npos; at = s.find("= tf32_round(ra[l]);", at))
           s.replace(at, 20, "= ra[l];");
         return s;
       }},
      // Planted: the tap-mask gather's elements stored one pixel off in the slice (the gather and the
      // slice's layout disagree).
      {kNchwTf32BiasRelu, {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}},
       {int_sizes().front()},
       [](const std::string& src) {
         std::string s = src;
         const std::string from = "ksol_a_slot(tid % kPX, tid / kPX)", to = "ksol_a_slot((tid % kPX + 1) % kBM, tid / kPX)";
         const size_t at = s.find(from);
         if (at != std::string::npos) s.replace(at, from.size(), to);
         return s;
       }},
      // Planted: a lane's second A register taken from its own row at position t + 4 instead of
      // from 8 rows on at t (mma.sync's operand order broken).
      {kNchwTf32BiasRelu, {{{"mainloop", "mma"}, {"tile", "[32, 32, 8]"}, {"thread_tile", "[1, 1]"}}},
       {int_sizes().front()},
       [](const std::string& src) {
         std::string s = src;
         const size_t at = s.find("a_frag[i][1] = ksol_bits(v.y);");
         if (at != std::string::npos) s.replace(at, 30, "a_frag[i][1] = ksol_bits(v.z);");
         return s;
       }},
      // Planted: B's slots with a column's two tiles and its two positions swapped (the slices'
      // layout and the operand loads disagree).
      {kNchwTf32BiasRelu, {{{"mainloop", "mma"}, {"tile", "[32, 64, 16]"}, {"thread_tile", "[1, 2]"}}},
       {int_sizes().front()},
       [](const std::string& src) {
         std::string s = src;
         const std::string from = "c / 8 % 2 * 2 + k / 4 % 2;", to = "k / 4 % 2 * 2 + c / 8 % 2;";
         const size_t at = s.find(from);
         if (at != std::string::npos) s.replace(at, from.size(), to);
         return s;
       }},
  });
}

// The mma kernel's cp.async pipeline (stages 2 to 4) on the CPU against the interpreter. The host
// emulation holds each thread's copies until a wait asks for their group, so a slice multiplied
// before its copies are waited for reads the buffer's old contents: waiting for one group fewer
// fails, and so do copies left unrounded where they landed (tf32_round made the identity: the
// fragments take the slices as they are). (A dropped
// barrier is a race between threads, which the emulation may or may not order badly: not a
// reliable test.)
TEST(CodegenConv, TensorCorePipelineOnTheHostMatchesTheInterpreter) {
  const std::vector<std::map<std::string, int64_t>> deep = {
      {{"N", 2}, {"C", 3}, {"H", 9}, {"W", 7}, {"K", 5}, {"P", 5}, {"Q", 4}},
      {{"N", 1}, {"C", 19}, {"H", 8}, {"W", 8}, {"K", 40}, {"P", 4}, {"Q", 4}},
      {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}, {"P", 2}, {"Q", 2}},
  };
  const std::vector<std::map<std::string, int64_t>> many_slices = {
      {{"N", 1}, {"C", 19}, {"H", 8}, {"W", 8}, {"K", 40}, {"P", 4}, {"Q", 4}},
  };
  auto mma = [](const char* tile, const char* tt, const char* stages) {
    return Schedule{{"mainloop", "mma"}, {"tile", tile}, {"thread_tile", tt}, {"stages", stages}};
  };
  auto sliced = [](Schedule s) {
    s.push_back({"fragments", "slice"});
    return s;
  };
  auto replaced = [](std::string from, std::string to) {
    return [from, to](const std::string& src) {
      std::string s = src;
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
      return s;
    };
  };
  check_on_host({
      {kNchwTf32BiasRelu,
       {mma("[32, 32, 8]", "[1, 1]", "2"), mma("[64, 32, 16]", "[2, 1]", "3"), mma("[32, 64, 8]", "[1, 2]", "4"),
        [&] {
          Schedule d = mma("[64, 32, 16]", "[2, 1]", "3");
          d.push_back({"gather", "decode"});
          return d;
        }()},
       int_sizes()},
      {kNhwcTf32Stride2, {mma("[32, 64, 16]", "[1, 2]", "3"), mma("[32, 32, 8]", "[2, 2]", "2")}, deep},
      {kNchwTf32BiasRelu, {mma("[64, 32, 16]", "[2, 1]", "3")}, int_sizes(), wide_offsets, false},  // 64-bit element offsets
      {kNhwcTf32Stride2, {mma("[32, 32, 8]", "[1, 1]", "3")}, many_slices,
       replaced("ksol_cp_wait<kStages - 2>()", "ksol_cp_wait<kStages - 1>()")},
      {kNhwcTf32Stride2, {mma("[32, 32, 8]", "[1, 1]", "2")}, many_slices,
       replaced("u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;", "(void)0;")},
      // Buffers past 48 KB of dynamic shared memory (51200 bytes), opted into at the launch.
      {kNchwTf32BiasRelu, {mma("[128, 64, 16]", "[2, 2]", "4")}, int_sizes()},
      // fragments = slice: every k-step's operands loaded after the barrier, staged and pipelined;
      // planted: every k-step multiplies the first k-step's A fragments.
      {kNchwTf32BiasRelu, {sliced(mma("[64, 32, 16]", "[2, 1]", "1")), sliced(mma("[64, 32, 16]", "[2, 1]", "3"))}, int_sizes()},
      {kNhwcTf32Stride2, {sliced(mma("[32, 64, 16]", "[1, 2]", "2"))}, deep},
      {kNhwcTf32Stride2, {sliced(mma("[32, 32, 16]", "[1, 1]", "1"))}, many_slices,
       replaced("ksol_mma_tf32(c_acc[i][j], a_all[kstep][i], b_all[kstep][j])", "ksol_mma_tf32(c_acc[i][j], a_all[0][i], b_all[kstep][j])")},
  });
}

// The pipeline's buffers past 48 KB launch only with the opt-in: without it ksol_run reports the
// failed launch (4), as the device would.
TEST(CodegenConv, PipelineBuffersPast48KBLaunchWithTheOptIn) {
  const dsl::Program p = scheduled(parse(kNchwTf32BiasRelu),
                                   {{"mainloop", "mma"}, {"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "4"}});
  const std::string source = codegen::generate_cuda(p, {});
  std::string no_opt_in = source;
  const std::string from = "kSliceBytes > 48 * 1024 && cudaFuncSetAttribute";
  for (size_t at; (at = no_opt_in.find(from)) != std::string::npos;) no_opt_in.replace(at, from.size(), "false && cudaFuncSetAttribute");
  ASSERT_NE(no_opt_in, source);
  const std::vector<int64_t> dims = {1, 3, 6, 5, 4};  // N, C, H, W, K (padding 1: P = H, Q = W)
  for (const auto& [src, rc] : {std::pair{source, 0}, std::pair{no_opt_in, 4}}) {
    codegen::HostBuild build = codegen::build_for_host(src);
    ASSERT_TRUE(build.ok) << build.message;
    std::vector<HostVec<uint8_t>> tensors = {HostVec<uint8_t>(1 * 3 * 6 * 5 * 4, 0), HostVec<uint8_t>(4 * 3 * 9 * 4, 0),
                                             HostVec<uint8_t>(4 * 4, 0), HostVec<uint8_t>(1 * 4 * 6 * 5 * 4, 0)};
    codegen::HostRun r = codegen::run_on_host(build.so_path, tensors, dims);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.rc, rc);
  }
}

// Where `auto` takes the mma kernel, its names, and what it refuses and why.
TEST(CodegenConv, TensorCoreFragmentPathNamesAndRefusals) {
  const dsl::Program tf = parse(kNchwTf32BiasRelu);
  ASSERT_EQ(tf.family, "conv");
  EXPECT_EQ(refusal(tf), "(accepted)");
  // NCHW TF32: CUTLASS's conv does not take it, the warp-level tensor cores do.
  EXPECT_EQ(codegen::kernel_name(tf), "conv_conv2d_tf32_bias_relu_f32_tf32_mma_128x128x16_w4x2");
  EXPECT_EQ(codegen::compile_needs(tf).arch, "sm_90");
  EXPECT_EQ(codegen::kernel_name(scheduled(tf, {{"mainloop", "simt"}})), "conv_conv2d_tf32_bias_relu_f32_tf32_64x64x16_t4x4");
  // f32 products stay on the CUDA cores under auto; mma refuses them.
  const dsl::Program f32 = parse(kBiasRelu);
  EXPECT_EQ(codegen::kernel_name(f32), "conv_conv2d_bias_relu_f32_64x64x16_t4x4");
  EXPECT_EQ(refusal(scheduled(f32, {{"mainloop", "mma"}})),
            "mainloop = mma: the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write "
            "tf32(X[...]) * tf32(F[...]) for TF32); use mainloop = simt");
  // NHWC bf16 with a fusable epilogue: auto still takes CUTLASS's conv.
  EXPECT_EQ(codegen::kernel_name(scheduled(parse(kNhwcBf16BiasRelu), {{"mainloop", "mma"}})),
            "conv_conv2d_nhwc_bias_relu_bf16_mma_128x128x16_w4x2");
  EXPECT_EQ(refusal(scheduled(tf, {{"tile", "[64, 48, 16]"}})),
            "tile = [64, 48, 16] is not whole warps of thread_tile = [4, 2] (64 pixels x 32 filters each, in mainloop = mma) "
            "(mainloop = auto takes mma for this program; mainloop = simt runs it on CUDA cores)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"thread_tile", "[8, 4]"}})),
            "thread_tile = [8, 4]: mainloop = mma holds 256 f32 accumulators per thread (8 a fragment); at most 128 fit in "
            "the registers");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"tile", "[64, 64, 12]"}, {"thread_tile", "[2, 2]"}})),
            "tile = [64, 64, 12]: mainloop = mma takes a slice that is a multiple of 8 (TF32 fragments are 16 x 16 x 8)");
  EXPECT_EQ(refusal(scheduled(parse(kNchwBf16Stride2), {{"mainloop", "mma"}, {"tile", "[64, 64, 8]"}, {"thread_tile", "[2, 2]"}})),
            "tile = [64, 64, 8]: mainloop = mma takes a slice that is a multiple of 16 (bf16 fragments are 16 x 16 x 16)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"tile", "[512, 64, 8]"}, {"thread_tile", "[1, 1]"}})),
            "tile = [512, 64, 8] with thread_tile = [1, 1] makes 4096 threads per block (mainloop = mma: one warp per 16 x 16 "
            "outputs); a block has at most 1024");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"tile", "[128, 128, 64]"}, {"thread_tile", "[4, 4]"}})),
            "tile = [128, 128, 64] with thread_tile = [4, 4] stages 67584 bytes of shared memory per block (mainloop = mma); "
            "static shared memory is at most 49152 (no opt-in; stages = 2 to 4 take dynamic shared memory)");
  // Registers: one warp of 16 fragments staging 32 + 32 elements would spill.
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"tile", "[64, 64, 16]"}, {"thread_tile", "[4, 4]"}})),
            "tile = [64, 64, 16] with thread_tile = [4, 4] needs about 392 registers a thread (128 accumulators, 32 + 32 staged "
            "elements); 32 threads a block leave at most 255 (mainloop = mma)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "mma"}, {"cluster", "[2, 1]"}})),
            "cluster = [2, 1]: clusters are the tma path's; mainloop = mma runs one block per tile (cluster = [1, 1])");
  // stages: 1 (as auto) stages the next slice in registers; 2 to 4 shared buffers filled by
  // cp.async, for 32-bit data (TF32, whose mma.sync epilogue has no staging tile).
  EXPECT_EQ(codegen::kernel_name(scheduled(tf, {{"stages", "1"}})), "conv_conv2d_tf32_bias_relu_f32_tf32_mma_128x128x16_w4x2");
  EXPECT_EQ(codegen::kernel_name(scheduled(tf, {{"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "3"}})),
            "conv_conv2d_tf32_bias_relu_f32_tf32_mma_128x64x16_w2x2_s3");
  EXPECT_EQ(refusal(scheduled(tf, {{"stages", "5"}})),
            "stages = 5 must be between 1 and 4, or auto (mainloop = mma: 1 stages the next slice in registers, 2 to 4 fill as "
            "many shared buffers by cp.async) (mainloop = auto takes mma for this program; mainloop = simt runs it on CUDA cores)");
  // fragments = slice: the TF32 mma.sync kernel's, its registers counted.
  EXPECT_EQ(codegen::kernel_name(scheduled(tf, {{"tile", "[128, 128, 16]"}, {"thread_tile", "[2, 2]"}, {"fragments", "slice"}})),
            "conv_conv2d_tf32_bias_relu_f32_tf32_mma_128x128x16_w2x2_fs");
  EXPECT_EQ(refusal(scheduled(parse(kNchwBf16Stride2), {{"mainloop", "mma"}, {"fragments", "slice"}})),
            "fragments = slice: the TF32 mma.sync kernel's; WMMA's bf16 fragments load a k-step at a time (fragments = auto)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "simt"}, {"fragments", "slice"}})),
            "fragments = slice: the mma kernel's; mainloop = simt has no fragments to load (fragments = auto)");
  EXPECT_EQ(refusal(scheduled(tf, {{"tile", "[256, 128, 16]"}, {"thread_tile", "[4, 4]"}, {"stages", "2"}, {"fragments", "slice"}})),
            "tile = [256, 128, 16] with thread_tile = [4, 4] with stages = 2 with fragments = slice needs about 280 registers a "
            "thread (128 accumulators, 16 gathered elements' state, 32 more operand registers); 256 threads a block leave at "
            "most 255 (mainloop = mma) (mainloop = auto takes mma for this program; mainloop = simt runs it on CUDA cores)");
  // The pipeline's buffers are dynamic shared memory, past 48 KB up to sm_90's opt-in maximum.
  EXPECT_EQ(codegen::kernel_name(scheduled(tf, {{"stages", "3"}})), "conv_conv2d_tf32_bias_relu_f32_tf32_mma_128x128x16_w4x2_s3");
  EXPECT_EQ(refusal(scheduled(tf, {{"tile", "[256, 128, 64]"}, {"thread_tile", "[4, 4]"}, {"stages", "4"}})),
            "tile = [256, 128, 64] with thread_tile = [4, 4] with stages = 4 stages 401408 bytes of shared memory per block "
            "(mainloop = mma); dynamic shared memory is at most 232448 (sm_90's opt-in maximum) (mainloop = auto takes mma for "
            "this program; mainloop = simt runs it on CUDA cores)");
  EXPECT_EQ(refusal(scheduled(parse(kNchwBf16Stride2), {{"mainloop", "mma"}, {"stages", "2"}})),
            "stages = 2: mainloop = mma pipelines slices of 32-bit elements only (cp.async copies 4 bytes at least, and the "
            "gather reads one bf16 element at a time); stages = 1 stages them in registers");
  const std::string piped = codegen::generate_cuda(scheduled(tf, {{"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "2"}}), {});
  EXPECT_NE(piped.find("cp.async.ca.shared.global"), std::string::npos);
  EXPECT_NE(piped.find("ksol_cp_wait<kStages - 2>()"), std::string::npos);
  // The copies land as they are; the fragments round them to TF32 as they load (not in place).
  EXPECT_NE(piped.find("a_frag[i][0] = ksol_tf32_bits(v.x);"), std::string::npos);
  EXPECT_NE(piped.find("b_frag[2 * j][0] = ksol_tf32_bits(v.x);"), std::string::npos);
  EXPECT_EQ(piped.find("= tf32_round(As["), std::string::npos);
  // The schedule space: every mma name distinct, and the simt names unchanged beside them.
  codegen::Space space = codegen::schedule_space(tf, {});
  std::set<std::string> names;
  size_t mma = 0;
  for (const Schedule& s : space.legal) {
    const std::string n = codegen::kernel_name(codegen::with_schedule(tf, s));
    names.insert(n);
    mma += n.find("_mma_") != std::string::npos;
  }
  std::cout << "[ schedule space ] conv2d_tf32_bias_relu (conv, TF32 NCHW): " << space.legal.size() << " legal, " << mma
            << " of them mma\n";
  EXPECT_EQ(names.size(), space.legal.size()) << "two legal schedules share a kernel name";
  EXPECT_GT(mma, 10u);
}

// The mma kernel's sources through nvcc (sm_90, mma.h) and the static gate: TF32, bf16 and f16, both
// layouts.
TEST(CodegenConv, TensorCoreFragmentSourcesCompile) {
  std::vector<CompileJob> jobs;
  // The last two: the cp.async pipeline, NCHW and NHWC.
  const std::vector<std::pair<const char*, Schedule>> cases = {
      {kNchwTf32BiasRelu, {{"mainloop", "mma"}}},
      {kNchwBf16Stride2, {{"mainloop", "mma"}}},
      {kNchwF16Dilated, {{"mainloop", "mma"}}},
      {kNhwcTf32Stride2, {{"mainloop", "mma"}}},
      {kNchwTf32BiasRelu, {{"mainloop", "mma"}, {"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "3"}}},
      {kNhwcTf32Stride2, {{"mainloop", "mma"}, {"tile", "[128, 128, 8]"}, {"stages", "4"}}},
  };
  for (const auto& [text, sched] : cases) {
    const dsl::Program p = scheduled(parse(text), sched);
    ASSERT_EQ(refusal(p), "(accepted)") << text;
    CompileJob j = program_job(p);
    const bool tf32 = std::string(text).find("tf32(") != std::string::npos;
    EXPECT_NE(j.source_text.find(tf32 ? "ksol_mma_tf32(c_acc[i][j], a_frag[i], b_frag[j]);" : "nvcuda::wmma::mma_sync("),
              std::string::npos) << j.source_path;
    EXPECT_TRUE(static_scan(j.source_text).empty()) << j.source_path;
    jobs.push_back(j);
  }
  EXPECT_NE(jobs[0].source_text.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
  EXPECT_NE(jobs[1].source_text.find("nvcuda::wmma::col_major> a_frag[kFM];"), std::string::npos);
  EXPECT_NE(jobs[1].source_text.find("__shared__ __align__(32) __nv_bfloat16 As[kSR][kPA];"), std::string::npos);
  EXPECT_NE(jobs[4].source_text.find("extern __shared__ uint4 ksol_slice_smem[];"), std::string::npos);
  EXPECT_NE(jobs[4].source_text.find("kSliceBytes, stream>>>("), std::string::npos);
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}
