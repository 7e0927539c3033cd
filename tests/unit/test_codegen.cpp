// Code generation (src/codegen): can_implement answers with exact reasons; generated sources hold
// one kernel, compile with nvcc through ksol's compile path and pass the static gate; the schedule
// spaces; the IR interpreter against the tasks' float64 references; and the generated CUDA itself,
// run on the CPU by the host emulation, through the correctness gate's own comparators on every
// input distribution. Golden sources: tests/golden/codegen/*.ksol with the *.cu they generate
// (KSOL_UPDATE_GOLDEN=1 rewrites them).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "task/inputs.h"
#include "task/task.h"
#include "doc_examples.h"
#include "host_reference.h"
#include "program_job.h"

namespace fs = std::filesystem;
using namespace ksol;
using codegen::Binding;
using codegen::Schedule;

using namespace ksol::test_support;

namespace {

// --- programs --------------------------------------------------------------------------------

const char* const kSoftmaxF32 = R"(
kernel softmax(X: f32[R, C]) -> (Y: f32[R, C]) {
  m[r] = max(X[r, c]) over c
  e[r, c] = exp(X[r, c] - m[r])
  s[r] = sum(e[r, c]) over c
  Y[r, c] = e[r, c] / s[r]
}
schedule {
  threads = 256
  vector = 4
  rows_per_block = 1
  reduction = block
}
)";

const char* const kSoftmaxBf16 = R"(
kernel softmax(X: bf16[R, C]) -> (Y: bf16[R, C]) {
  m[r] = max(f32(X[r, c])) over c
  e[r, c] = exp(f32(X[r, c]) - m[r])
  s[r] = sum(e[r, c]) over c
  Y[r, c] = bf16(e[r, c] / s[r])
}
schedule {
  threads = 128
  vector = 8
  reduction = block
  cache_row = registers
}
)";

const char* const kRmsnormBf16 = R"(
# RMSNorm over the last dim, bf16 in and out, fp32 math (docs/DSL.md)
kernel rmsnorm(X: bf16[R, C], W: bf16[C]) -> (Y: bf16[R, C]) {
  ss[r]    = sum(f32(X[r, c]) * f32(X[r, c])) over c
  inv[r]   = rsqrt(ss[r] / C + 1e-6)
  Y[r, c]  = bf16(f32(X[r, c]) * inv[r] * f32(W[c]))
}
schedule {
  threads = 256
  vector = 8
  rows_per_block = 1
  reduction = block
  cache_row = registers
}
)";

const char* const kRmsnormF32 = R"(
kernel rmsnorm(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {
  ss[r] = sum(X[r, c] * X[r, c]) over c
  inv[r] = 1 / sqrt(ss[r] / C + 1e-6)
  Y[r, c] = X[r, c] * inv[r] * W[c]
}
schedule {
  threads = 128
  rows_per_block = 4
  reduction = warp
  vector = 4
}
)";

const char* const kLayernormF32 = R"(
kernel layernorm(X: f32[R, C], W: f32[C], B: f32[C]) -> (Y: f32[R, C]) {
  mu[r] = mean(X[r, c]) over c
  d[r, c] = X[r, c] - mu[r]
  var[r] = mean(d[r, c] * d[r, c]) over c
  rstd[r] = 1 / sqrt(var[r] + 1e-5)
  Y[r, c] = d[r, c] * rstd[r] * W[c] + B[c]
}
schedule {
  threads = 128
  vector = 4
  reduction = block
  cache_row = shared
}
)";

const char* const kLayernormBf16 = R"(
kernel layernorm(X: bf16[R, C], W: bf16[C], B: bf16[C]) -> (Y: bf16[R, C]) {
  mu[r] = mean(f32(X[r, c])) over c
  d[r, c] = f32(X[r, c]) - mu[r]
  var[r] = mean(d[r, c] * d[r, c]) over c
  rstd[r] = 1 / sqrt(var[r] + 1e-5)
  Y[r, c] = bf16(d[r, c] * rstd[r] * f32(W[c]) + f32(B[c]))
}
schedule {
  threads = 256
  vector = 8
  rows_per_block = 2
  reduction = block
  items_per_thread = 2
}
)";

// Softmax, the row's log-sum-exp, then RMSNorm of the probabilities and a SiLU: three reduction
// levels (max; sum; sum of squares) and two outputs, fused into one kernel.
const char* const kChain = R"(
kernel chain(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C], L: f32[R]) {
  m[r] = max(X[r, c]) over c
  e[r, c] = exp(X[r, c] - m[r])
  s[r] = sum(e[r, c]) over c
  L[r] = m[r] + log(s[r])
  p[r, c] = e[r, c] / s[r]
  ss[r] = sum(p[r, c] * p[r, c]) over c
  inv[r] = rsqrt(ss[r] / C + 1e-6)
  Y[r, c] = silu(p[r, c] * inv[r] * W[c])
}
schedule {
  threads = 256
  vector = 4
  reduction = block
  cache_row = registers
}
)";

const char* const kSiluMul = R"(
kernel silu_mul(G: bf16[T, H], U: bf16[T, H]) -> (Y: bf16[T, H]) {
  Y[t, h] = bf16(silu(f32(G[t, h])) * f32(U[t, h]))
}
schedule {
  threads = 256
  vector = 8
  items_per_thread = 2
}
)";

// Argmax, a half-precision min, a scan with a per-row bias, and a sum, over rows [B, T].
const char* const kRowStats = R"(
kernel stats(X: bf16[B, T, C], bias: f32[B, T]) -> (I: i32[B, T], M: bf16[B, T], S: f32[B, T, C], N: f32[B, T]) {
  I[b, t] = argmax(X[b, t, c]) over c
  M[b, t] = min(X[b, t, c]) over c
  S[b, t, c] = scan(f32(X[b, t, c]) + bias[b, t]) over c
  N[b, t] = sum(abs(f32(X[b, t, c]))) over c
}
schedule {
  threads = 128
  vector = 2
  rows_per_block = 2
  reduction = block
  items_per_thread = 2
}
)";

// Broadcasts along leading and trailing indices, a transposed read, a lower-rank intermediate.
// Column reductions (src/codegen/colwise.cpp, generated for the rowwise family).
const char* const kColMean = R"(
kernel colmean(X: f32[R, C], w: f32[C], s: f32[R]) -> (Y: f32[C]) {
  Y[c] = mean(X[r, c] * w[c] + s[r]) over r
}
schedule {
  vector = 4
  reduction = two_pass
}
)";
const char* const kColMax = R"(
kernel colmax(X: bf16[R, C]) -> (Y: bf16[C]) {
  Y[c] = max(abs(X[r, c])) over r
}
)";
// Batched: a reduction over the middle dim of a 3-D tensor, each batch's columns on their own.
const char* const kColSumBatched = R"(
kernel colsum3(X: f32[B, R, C], w: f32[C]) -> (Y: f32[B, C]) {
  Y[b, c] = sum(X[b, r, c] * w[c]) over r
}
schedule {
  vector = 2
}
)";
const char* const kColMinBatched = R"(
kernel colmin3(X: f32[B, R, C], m: f32[B, C]) -> (Y: f32[B, C]) {
  Y[b, c] = min(X[b, r, c] * X[b, r, c] - m[b, c]) over r
}
schedule {
  reduction = two_pass
}
)";

// An elementwise space of rank 4 whose reads sit at general positions (the indices of each element
// come from dividing its flat index) and that uses two indices as a signed value.
const char* const kGeneral4 = R"(
kernel bc4(X: f32[C, D], W: f32[A, B, D]) -> (Y: f32[A, B, C, D]) {
  Y[a, b, c, d] = X[c, d] + W[a, b, d] * f32(c - b)
}
)";

const char* const kBroadcast = R"(
kernel bias_act(A: f32[M, N], b: f32[N], s: f32[M], X: f32[N, M]) -> (C: f32[M, N], D: f32[M, N]) {
  t[m, n] = A[m, n] + b[n]
  g[m] = sigmoid(s[m])
  C[m, n] = gelu_tanh(t[m, n]) * g[m]
  D[m, n] = select(t[m, n] > 0, X[n, m], clamp(t[m, n], -1, 1)) + max(C[m, n], 0.5)
}
schedule {
  threads = 128
  vector = 4
  unroll = 2
}
)";

dsl::Program parse(const std::string& text) { return dsl::parse_program(text, "test.ksol"); }

std::string value_text(const dsl::ScheduleValue& v) {
  return v.kind == dsl::ScheduleValue::Kind::integer ? std::to_string(v.integer) : v.ident;
}

// p with the keys of `changes` set (replaced where written, appended otherwise).
dsl::Program scheduled(const dsl::Program& p, const Schedule& changes) {
  Schedule s;
  for (const auto& [k, v] : p.schedule) s.emplace_back(k, value_text(v));
  for (const auto& [k, v] : changes) {
    bool found = false;
    for (auto& [k2, v2] : s)
      if (k2 == k) v2 = v, found = true;
    if (!found) s.emplace_back(k, v);
  }
  return codegen::with_schedule(p, s);
}

std::string refusal(const dsl::Program& p, const Binding& b = {}) {
  codegen::Support s = codegen::can_implement(p, b);
  return s.ok ? "(accepted)" : s.reason;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

Binding binding_of(const Task& t) {
  Binding b;
  for (const TensorSpec& ts : t.tensors) b.tensor_order.push_back(ts.name);
  b.dim_order = t.dims;
  return b;
}

CompileJob job_for(const std::string& name, const std::string& source) {
  CompileJob j;
  j.source_path = name + ".cu";
  j.source_text = source;
  return j;
}

// --- references and CPU runs -----------------------------------------------------------------

SizeSet size_of(const std::map<std::string, double>& dims) {
  SizeSet s;
  s.name = "cpu";
  s.dims = dims;
  return s;
}

struct TaskProgram {
  const char* task;
  std::string program;
  std::vector<std::map<std::string, double>> sizes;  // small, one of them with rows no pack divides
};

// DSL programs for the built-in tasks the elementwise and rowwise families cover.
std::vector<TaskProgram> task_programs() {
  const std::vector<std::map<std::string, double>> rows = {{{"R", 5}, {"C", 1001}}, {{"R", 3}, {"C", 1024}}};
  const std::vector<std::map<std::string, double>> flat = {{{"N", 1001}}, {{"N", 4096}}};
  return {
      {"softmax_f32", kSoftmaxF32, rows},
      {"softmax_bf16", kSoftmaxBf16, rows},
      {"rmsnorm_bf16", kRmsnormBf16, rows},
      {"rmsnorm_f32", kRmsnormF32, rows},
      {"layernorm_f32", kLayernormF32, rows},
      {"layernorm_bf16", kLayernormBf16, rows},
      {"broadcast_add_f32",
       "kernel add(A: f32[M, N], b: f32[N]) -> (C: f32[M, N]) {\n  C[m, n] = A[m, n] + b[n]\n}\n"
       "schedule {\n  vector = 4\n  items_per_thread = 2\n}\n",
       {{{"M", 5}, {"N", 999}}, {{"M", 3}, {"N", 1024}}}},
      {"relu_f32", "kernel relu(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = relu(X[i])\n}\nschedule {\n  vector = 4\n}\n", flat},
      {"leaky_relu_f32",
       "kernel leaky(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = select(X[i] > 0, X[i], 0.01 * X[i])\n}\n"
       "schedule {\n  vector = 2\n  threads = 64\n}\n",
       flat},
      {"sigmoid_f32", "kernel sig(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = sigmoid(X[i])\n}\nschedule {\n  vector = 4\n}\n",
       flat},
      {"tanh_f32", "kernel th(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = tanh(X[i])\n}\n", flat},
      {"copy_f32", "kernel copy(A: f32[N]) -> (B: f32[N]) {\n  B[i] = A[i]\n}\nschedule {\n  vector = 4\n}\n", flat},
      {"axpy_f32",
       "kernel axpy(x: f32[N], y: f32[N]) -> (z: f32[N]) {\n  z[i] = 1.5 * x[i] + y[i]\n}\n"
       "schedule {\n  vector = 4\n  unroll = 2\n}\n",
       flat},
      {"scan_f32",
       "kernel prefix(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = scan(X[i]) over i\n}\n"
       "schedule {\n  threads = 128\n  vector = 4\n}\n",
       flat},
      // The conv family's seed: partial tiles, taps mostly in the padding (the task's h3), empty sums.
      {"conv2d_f32", read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/tensor/conv2d_f32/program.ksol"),
       {{{"N", 1}, {"C", 8}, {"H", 9}, {"W", 9}, {"K", 8}},
        {{"N", 2}, {"C", 3}, {"H", 5}, {"W", 7}, {"K", 5}},
        {{"N", 1}, {"C", 3}, {"H", 9}, {"W", 2}, {"K", 5}},
        {{"N", 1}, {"C", 0}, {"H", 3}, {"W", 3}, {"K", 2}}}},
  };
}

const char* const kNoFastMath[] = {"__expf", "__logf", "__fdividef", "__powf", "__tanhf", "__sinf", "use_fast_math"};

}  // namespace

// --- can_implement -------------------------------------------------------------------------------

TEST(Codegen, AcceptsTheFamiliesSchedules) {
  dsl::Program sm = parse(kSoftmaxF32);
  EXPECT_EQ(sm.family, "rowwise");
  EXPECT_EQ(refusal(sm), "(accepted)");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "warp"}, {"rows_per_block", "8"}})), "(accepted)");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "two_pass"}, {"items_per_thread", "4"}})), "(accepted)");
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "shared"}, {"rows_per_block", "2"}})), "(accepted)");
  EXPECT_EQ(refusal(parse(kRmsnormBf16)), "(accepted)");
  EXPECT_EQ(refusal(parse(kChain)), "(accepted)");
  EXPECT_EQ(refusal(parse(kRowStats)), "(accepted)");
  dsl::Program silu = parse(kSiluMul);
  EXPECT_EQ(silu.family, "elementwise");
  EXPECT_EQ(refusal(silu), "(accepted)");
  EXPECT_EQ(refusal(parse(kBroadcast)), "(accepted)");
  // A program without a schedule takes every default.
  EXPECT_EQ(refusal(codegen::with_schedule(sm, {})), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(sm, {})), "rowwise_softmax_f32_t256_v1_r1_block");
}

TEST(Codegen, RefusesWithExactReasons) {
  dsl::Program sm = parse(kSoftmaxF32);
  EXPECT_EQ(refusal(scheduled(parse("kernel rowsum(X: f32[R, C]) -> (Y: f32[R]) {\n  Y[r] = sum(X[r, c] * 2.0) over c\n}\n"),
                              {{"math", "fast"}})),
            "math = fast changes exp, log, tanh, division, sigmoid, silu and gelu_tanh, and 'rowsum' has none; math must be precise");
  EXPECT_EQ(refusal(scheduled(sm, {{"math", "fast"}})), "(accepted)");
  EXPECT_EQ(refusal(scheduled(sm, {{"tile", "4"}})),
            "unknown schedule key 'tile' for the rowwise family; it accepts threads, rows_per_block, vector, "
            "items_per_thread, reduction, cache_row, unroll, math, keep, online, blocks_per_sm, tail, store_hint, preload, "
            "grid");
  EXPECT_EQ(refusal(scheduled(sm, {{"threads", "100"}})), "threads = 100 must be a multiple of 32 between 32 and 1024");
  EXPECT_EQ(refusal(scheduled(sm, {{"keep", "registers"}, {"cache_row", "shared"}})),
            "keep = registers holds values in the register cache's unrolled steps, so cache_row must be registers, "
            "not shared");
  EXPECT_EQ(refusal(scheduled(sm, {{"keep", "registers"}, {"cache_row", "registers"}})), "(accepted)");
  // The budget counts the kept f32 exp beside the cached f32 row: 8 bytes per element, 4 * 8 * 8 = 256
  // bytes of a 128-byte budget at 1024 threads; without keep the same schedule fits exactly.
  EXPECT_EQ(refusal(scheduled(sm, {{"keep", "registers"}, {"cache_row", "registers"}, {"vector", "4"},
                                   {"items_per_thread", "8"}, {"threads", "1024"}})),
            "cache_row = registers needs vector * items_per_thread * 8 = 256 bytes of registers per thread for one "
            "step of the row; the budget at threads = 1024 is 128");
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "registers"}, {"vector", "4"}, {"items_per_thread", "8"},
                                   {"threads", "1024"}})),
            "(accepted)");  // without keep: 4 bytes per element, 128 of 128
  EXPECT_EQ(refusal(scheduled(parse("kernel rowsum(X: f32[R, C]) -> (Y: f32[R, C]) {\n  s[r] = sum(X[r, c]) over c\n"
                                    "  Y[r, c] = X[r, c] / s[r]\n}\n"),
                              {{"keep", "registers"}, {"cache_row", "registers"}})),
            "keep = registers keeps element definitions that call exp, log, tanh, sigmoid, silu or gelu and that "
            "several passes read; this program has none");
  // online = 1 fuses softmax's max pass and sum pass; it needs the row in registers and no kept exp.
  EXPECT_EQ(refusal(scheduled(sm, {{"online", "1"}, {"cache_row", "registers"}})), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(scheduled(sm, {{"online", "1"}, {"cache_row", "registers"}})),
            "rowwise_softmax_f32_t256_v4_r1_block_regs_online");
  EXPECT_EQ(refusal(scheduled(sm, {{"online", "1"}})),
            "online = 1 takes each thread's maximum and then its sum over the row it holds, so cache_row must be "
            "registers, not none");
  EXPECT_EQ(refusal(scheduled(sm, {{"online", "1"}, {"cache_row", "registers"}, {"keep", "registers"}})),
            "online = 1 sums exp(u - m) with each thread's own maximum, which the write pass cannot reuse, so keep "
            "must be none");
  EXPECT_EQ(refusal(scheduled(parse(kRmsnormBf16), {{"online", "1"}, {"cache_row", "registers"}})),
            "online = 1 fuses a max pass with the sum of exp(u - max) after it; this program has no pass m[r] = "
            "max(u) over c followed by a pass s[r] = sum(exp(u - m[r])) over c of the same u, each its pass's only "
            "reduction");
  // The sum of exp of another value than the maximum's is not the pair softmax fuses.
  EXPECT_EQ(refusal(scheduled(parse("kernel sm2(X: f32[R, C], Z: f32[R, C]) -> (Y: f32[R, C]) {\n"
                                    "  m[r] = max(X[r, c]) over c\n  s[r] = sum(exp(Z[r, c] - m[r])) over c\n"
                                    "  Y[r, c] = exp(X[r, c] - m[r]) / s[r]\n}\n"),
                              {{"online", "1"}, {"cache_row", "registers"}}))
                .rfind("online = 1 fuses a max pass", 0),
            0u);
  // cache_row = l2: no row cache; a row's earlier reads keep their lines (evict_last), its last read
  // lets them go (evict_first), and a tensor without a row index (a weight) keeps its lines.
  {
    dsl::Program rms = parse(
        "kernel rms(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {\n  ss[r] = sum(X[r, c] * X[r, c]) over c\n"
        "  Y[r, c] = X[r, c] * rsqrt(ss[r] / C + 1e-6) * W[c]\n}\n");
    const auto l2 = scheduled(rms, {{"cache_row", "l2"}, {"vector", "4"}});
    EXPECT_EQ(codegen::kernel_name(l2), "rowwise_rms_f32_t256_v4_r1_block_l2");
    const std::string cu = codegen::generate_cuda(l2, {});
    EXPECT_NE(cu.find("X_pack = load_pack_keep<kVec>(X_row + c0);"), std::string::npos) << cu;
    EXPECT_NE(cu.find("X_pack = load_pack_last<kVec>(X_row + c0);"), std::string::npos) << cu;
    EXPECT_NE(cu.find("W_pack = load_pack_keep<kVec>(W + c0);"), std::string::npos) << cu;
    EXPECT_NE(cu.find("createpolicy.fractional.L2::evict_last.b64"), std::string::npos);
    EXPECT_NE(cu.find("ld.global.L1::evict_first.L2::cache_hint.v4.u32"), std::string::npos);
    EXPECT_EQ(cu.find("X_cache"), std::string::npos);
    EXPECT_EQ(refusal(scheduled(parse("kernel sums(X: f32[R, C]) -> (S: f32[R]) {\n  S[r] = sum(X[r, c]) over c\n}\n"),
                                {{"cache_row", "l2"}})),
              "cache_row = l2 keeps rows that more than one pass reads, and this program reads each row once");
  }
  // tail = exact: a second instantiation of the register-cache kernel, chosen at launch for rows of
  // exactly its cached steps, whose bounds checks are compile-time true.
  {
    const auto ex = scheduled(sm, {{"cache_row", "registers"}, {"vector", "4"}, {"tail", "exact"}});
    EXPECT_EQ(codegen::kernel_name(ex), "rowwise_softmax_f32_t256_v4_r1_block_regs_exact");
    const std::string cu = codegen::generate_cuda(ex, {});
    EXPECT_NE(cu.find("template <int kVec, int kCacheTiles, bool kExact>"), std::string::npos) << cu;
    EXPECT_NE(cu.find("if (kExact || c0 < C)"), std::string::npos) << cu;
    EXPECT_NE(cu.find("if (!kExact && tile >= C) break;"), std::string::npos) << cu;
    EXPECT_NE(cu.find("if (steps == kTiles && C == steps * (kThreadsPerRow * kVec * kItems))"), std::string::npos) << cu;
    EXPECT_NE(cu.find("<kVec, kTiles, true><<<"), std::string::npos);
    EXPECT_NE(cu.find("<kVec, kTiles, false><<<"), std::string::npos);
    // Without the knob no exact instantiation exists.
    const std::string checked = codegen::generate_cuda(scheduled(sm, {{"cache_row", "registers"}, {"vector", "4"}}), {});
    EXPECT_EQ(checked.find("kExact"), std::string::npos);
  }
  // blocks_per_sm: __launch_bounds__'s second argument, within the SM's 2048 threads.
  EXPECT_EQ(codegen::kernel_name(scheduled(sm, {{"blocks_per_sm", "5"}})), "rowwise_softmax_f32_t256_v4_r1_block_b5");
  EXPECT_NE(codegen::generate_cuda(scheduled(sm, {{"blocks_per_sm", "5"}}), {}).find("__launch_bounds__(kThreads, 5)"),
            std::string::npos);
  EXPECT_EQ(refusal(scheduled(sm, {{"blocks_per_sm", "9"}})),
            "blocks_per_sm = 9 of threads = 256 asks for 2304 threads per SM; an SM holds 2048");
  EXPECT_EQ(refusal(scheduled(sm, {{"blocks_per_sm", "0"}})), "blocks_per_sm = 0 must be between 1 and 32, or auto");
  EXPECT_EQ(refusal(scheduled(sm, {{"blocks_per_sm", "many"}})), "blocks_per_sm = many must be an integer or auto");
  EXPECT_EQ(refusal(scheduled(sm, {{"threads", "2048"}})),
            "threads = 2048 must be a multiple of 32 between 32 and 1024");
  EXPECT_EQ(refusal(scheduled(sm, {{"threads", "warp"}})), "threads = warp must be an integer");
  EXPECT_EQ(refusal(scheduled(sm, {{"vector", "3"}})), "vector = 3 must be one of 1, 2, 4, 8");
  EXPECT_EQ(refusal(scheduled(sm, {{"vector", "8"}})),
            "vector = 8 moves 32 bytes per access of a 4-byte type; one access is at most 16 bytes (a 128-bit load)");
  EXPECT_EQ(refusal(scheduled(sm, {{"rows_per_block", "0"}})), "rows_per_block = 0 must be at least 1");
  EXPECT_EQ(refusal(scheduled(sm, {{"rows_per_block", "3"}})),
            "rows_per_block = 3 does not split threads = 256 into groups of whole warps");
  EXPECT_EQ(refusal(scheduled(sm, {{"rows_per_block", "8"}})),
            "threads = 256 over rows_per_block = 8 leaves 32 threads per row, which is reduction = warp; "
            "reduction = block needs 64 or more");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "warp"}})),
            "reduction = warp serves each row with one warp, so rows_per_block must be threads / 32 = 8, not 1");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "tree"}})), "reduction = tree must be one of warp, block, two_pass");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "two_pass"}, {"rows_per_block", "2"}})),
            "reduction = two_pass splits each row over blocks, so rows_per_block must be 1, not 2");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "two_pass"}, {"cache_row", "shared"}})),
            "reduction = two_pass runs each pass as its own kernel, so no row cache survives between passes; "
            "cache_row must be none");
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "registers"}, {"unroll", "2"}})),
            "cache_row = registers unrolls the row loop fully, so unroll must be 1, not 2");
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "l3"}})), "cache_row = l3 must be one of none, registers, shared, l2");
  EXPECT_EQ(refusal(scheduled(sm, {{"reduction", "two_pass"}, {"cache_row", "l2"}})),
            "cache_row = l2 hints the loads of one kernel's passes; reduction = two_pass runs each pass as its own "
            "kernel, so cache_row must be none");
  EXPECT_EQ(refusal(scheduled(sm, {{"tail", "exact"}})),
            "tail = exact instantiates the register cache's kernel for rows of exactly its cached steps, so cache_row "
            "must be registers, not none");
  // store_hint = evict_last: the output rows' packs go through store_pack_kept (an L2 evict_last
  // policy); a program that writes one value per row has no row stores to hint.
  {
    const auto st = scheduled(sm, {{"cache_row", "registers"}, {"vector", "4"}, {"store_hint", "evict_last"}});
    EXPECT_EQ(codegen::kernel_name(st), "rowwise_softmax_f32_t256_v4_r1_block_regs_stlast");
    const std::string cu = codegen::generate_cuda(st, {});
    EXPECT_NE(cu.find("store_pack_kept(Y_row + c0, Y_pack);"), std::string::npos) << cu;
    EXPECT_NE(cu.find("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"), std::string::npos) << cu;
    EXPECT_EQ(cu.find("store_pack(Y_row"), std::string::npos) << cu;
    EXPECT_EQ(codegen::generate_cuda(scheduled(sm, {{"vector", "4"}}), {}).find("store_pack_kept"), std::string::npos);
  }
  EXPECT_EQ(refusal(scheduled(parse("kernel sums(X: f32[R, C]) -> (S: f32[R]) {\n  S[r] = sum(X[r, c]) over c\n}\n"),
                              {{"store_hint", "evict_last"}})),
            "store_hint = evict_last hints the stores of output rows, and this program writes one value per row");
  EXPECT_EQ(refusal(scheduled(sm, {{"store_hint", "evict_first"}})),
            "store_hint = evict_first must be one of none, evict_last");
  // preload = all: the packs only the write pass reads (the weight W) load with the cached row,
  // before the first pass; preload = write: after the row's last reduction, for every step, before
  // the write pass's first store. Either way the write pass takes them from registers, W is loaded
  // nowhere else, and the register budget counts them (they are live with the cached row).
  {
    const dsl::Program rms = parse(kRmsnormBf16);
    for (const std::string value : {"all", "write"}) {
      const auto pre = scheduled(rms, {{"cache_row", "registers"}, {"vector", "8"}, {"preload", value}});
      EXPECT_EQ(codegen::kernel_name(pre),
                std::string("rowwise_rmsnorm_bf16_t256_v8_r1_block_regs_") + (value == "all" ? "pre" : "prew"));
      // The cached schedule's own code (the uncached kernel for longer rows follows it).
      const std::string full = codegen::generate_cuda(pre, {});
      const std::string cu = full.substr(0, full.find("namespace ksol_long_rows {"));
      const size_t fill = cu.find("if (c0 < C) W_cache[t][item] = load_pack<kVec>(W + c0);");
      ASSERT_NE(fill, std::string::npos) << cu;
      EXPECT_LT(cu.find("X_cache[t][item] = load_pack<kVec>(X_row + c0);"), cu.find("// Pass 1:")) << cu;
      if (value == "all") {
        EXPECT_LT(fill, cu.find("// Pass 1:")) << cu;
      } else {
        EXPECT_GT(fill, cu.find("// Write pass:")) << "W loads after the reductions, in the write pass" << cu;
        EXPECT_GT(fill, cu.find("row_sum(")) << cu;
        EXPECT_LT(fill, cu.find("store_pack(Y_row + c0")) << cu;
      }
      EXPECT_NE(cu.find("const Pack<__nv_bfloat16, kVec> W_pack = W_cache[t][item];"), std::string::npos) << cu;
      const size_t load = fill + std::string("if (c0 < C) W_cache[t][item] = ").size();
      EXPECT_EQ(cu.find("load_pack<kVec>(W + c0)"), load) << "W is loaded only by the preload";
      EXPECT_EQ(cu.find("load_pack<kVec>(W + c0)", load + 1), std::string::npos) << cu;
      // Each element now holds X and W in registers: 4 bytes, so half the row the cache held alone.
      EXPECT_NE(cu.find("constexpr int kCacheValues = 64;"), std::string::npos) << cu;
    }
    EXPECT_NE(codegen::generate_cuda(scheduled(rms, {{"cache_row", "registers"}, {"vector", "8"}}), {})
                  .find("constexpr int kCacheValues = 128;"),
              std::string::npos);
    EXPECT_EQ(refusal(scheduled(rms, {{"cache_row", "none"}, {"preload", "all"}})),
              "preload = all loads the packs that one pass reads with the register cache's, before the first pass, so "
              "cache_row must be registers, not none");
    EXPECT_EQ(refusal(scheduled(rms, {{"cache_row", "shared"}, {"preload", "write"}})),
              "preload = write loads the write pass's packs of every step into registers before its first store, "
              "which needs the register cache's fully unrolled steps, so cache_row must be registers, not shared");
  }
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "registers"}, {"preload", "all"}})),
            "preload = all loads the packs that one pass reads (such as a weight) with the cached rows; every tensor "
            "this program reads along the row is cached already");
  EXPECT_EQ(refusal(scheduled(sm, {{"preload", "some"}})), "preload = some must be one of none, all, write");
  EXPECT_EQ(refusal(scheduled(sm, {{"cache_row", "registers"}, {"preload", "write"}})),
            "preload = write loads the packs that only the write pass reads (such as a weight) before its first "
            "store; every tensor the write pass reads along the row is cached already");
  EXPECT_EQ(refusal(scheduled(parse("kernel var(X: f32[R, C]) -> (V: f32[R]) {\n  mu[r] = mean(X[r, c]) over c\n"
                                    "  V[r] = mean((X[r, c] - mu[r]) * (X[r, c] - mu[r])) over c\n}\n"),
                              {{"cache_row", "registers"}, {"preload", "write"}})),
            "preload = write loads the packs the write pass reads before its first store, and this program writes one "
            "value per row");
  EXPECT_EQ(refusal(scheduled(sm, {{"unroll", "3"}})), "unroll = 3 must be one of 1, 2, 4, 8");
  // grid = rows: one block per rows_per_block rows and no grid-stride loop; with one row per block
  // the slot is the constant 0 and the row predicate a constant true, which the compiler folds.
  {
    const std::string one = codegen::generate_cuda(scheduled(sm, {{"grid", "rows"}}), {});
    EXPECT_EQ(codegen::kernel_name(scheduled(sm, {{"grid", "rows"}})), "rowwise_softmax_f32_t256_v4_r1_block_rowgrid");
    EXPECT_NE(one.find("constexpr int slot = 0;"), std::string::npos) << one;
    EXPECT_NE(one.find("const int lane = threadIdx.x;"), std::string::npos) << one;
    EXPECT_NE(one.find("constexpr bool active = true;"), std::string::npos) << one;
    EXPECT_NE(one.find("const int64_t row_base = (int64_t)blockIdx.x * kRowsPerBlock;"), std::string::npos) << one;
    EXPECT_EQ(one.find("gridDim.x"), std::string::npos) << "no grid-stride loop" << one;
    EXPECT_EQ(one.find("kMaxBlocks"), std::string::npos) << one;
    EXPECT_NE(one.find("const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;"), std::string::npos);
    EXPECT_NE(one.find("if (blocks > 2147483647) return 3;"), std::string::npos) << one;
    const std::string four = codegen::generate_cuda(scheduled(sm, {{"grid", "rows"}, {"rows_per_block", "4"}}), {});
    EXPECT_NE(four.find("const int slot = threadIdx.x / kThreadsPerRow;"), std::string::npos) << four;
    EXPECT_NE(four.find("const bool active = row_base + slot < rows;"), std::string::npos) << four;
    EXPECT_EQ(four.find("gridDim.x"), std::string::npos) << four;
    const std::string stride = codegen::generate_cuda(sm, {});
    EXPECT_NE(stride.find("row_base += (int64_t)gridDim.x * kRowsPerBlock"), std::string::npos) << stride;
    EXPECT_NE(stride.find("const int slot = threadIdx.x / kThreadsPerRow;"), std::string::npos) << stride;
    EXPECT_EQ(refusal(scheduled(sm, {{"grid", "rows"}, {"reduction", "two_pass"}})),
              "grid = rows launches one block per rows_per_block rows of the fused kernel; reduction = two_pass "
              "launches blocks per chunk of a row, so grid must be stride");
    EXPECT_EQ(refusal(scheduled(sm, {{"grid", "cols"}})), "grid = cols must be one of stride, rows");
  }
  // tail = fixed: tail = exact, and in the exact instantiation the row length is the constant
  // kCacheTiles * kTile (the launcher runs it only for such rows); the parameter is renamed.
  {
    const dsl::Program rms = parse(kRmsnormBf16);
    const auto fixed = scheduled(rms, {{"cache_row", "registers"}, {"vector", "8"}, {"tail", "fixed"}});
    EXPECT_EQ(codegen::kernel_name(fixed), "rowwise_rmsnorm_bf16_t256_v8_r1_block_regs_fixed");
    const std::string cu = codegen::generate_cuda(fixed, {});
    EXPECT_NE(cu.find("int64_t R, int64_t C_arg, int64_t rows)"), std::string::npos) << cu;
    const size_t local = cu.find("const int64_t C = kExact ? (int64_t)kCacheTiles * kTile : C_arg;");
    ASSERT_NE(local, std::string::npos) << cu;
    EXPECT_LT(local, cu.find("X + row * C")) << cu;
    EXPECT_NE(cu.find("if (steps == kTiles && C == steps * (kThreadsPerRow * kVec * kItems))"), std::string::npos);
    EXPECT_EQ(codegen::generate_cuda(scheduled(rms, {{"cache_row", "registers"}, {"tail", "exact"}}), {}).find("C_arg"),
              std::string::npos);
    EXPECT_EQ(refusal(scheduled(rms, {{"cache_row", "none"}, {"tail", "fixed"}})),
              "tail = fixed instantiates the register cache's kernel for rows of exactly its cached steps, so "
              "cache_row must be registers, not none");
    EXPECT_EQ(refusal(scheduled(rms, {{"tail", "open"}})), "tail = open must be one of checked, exact, fixed");
  }

  // A row read by one pass only has nothing to cache.
  dsl::Program sums = parse("kernel sums(X: f32[R, C]) -> (S: f32[R]) {\n  S[r] = sum(X[r, c]) over c\n}\n");
  EXPECT_EQ(refusal(scheduled(sums, {{"cache_row", "shared"}})),
            "cache_row = shared keeps rows that more than one pass reads, and this program reads each row once");
  // Three cached f32 rows at 4 x 8 elements a step need 384 bytes of registers per thread.
  dsl::Program three = parse(
      "kernel three(X: f32[R, C], A: f32[R, C], B: f32[R, C]) -> (Y: f32[R, C]) {\n"
      "  m[r] = max(X[r, c] + A[r, c] + B[r, c]) over c\n"
      "  Y[r, c] = X[r, c] + A[r, c] + B[r, c] - m[r]\n}\n");
  EXPECT_EQ(refusal(scheduled(three, {{"cache_row", "registers"}, {"vector", "4"}, {"items_per_thread", "8"}})),
            "cache_row = registers needs vector * items_per_thread * 12 = 384 bytes of registers per thread for one "
            "step of the row; the budget at threads = 256 is 256");
  // Program shapes the rowwise generator does not take.
  dsl::Program half_sum = parse("kernel hs(X: bf16[R, C]) -> (S: bf16[R]) {\n  S[r] = sum(X[r, c]) over c\n}\n");
  EXPECT_EQ(refusal(half_sum), "'S' accumulates bf16 values; accumulate in f32 instead, e.g. sum(f32(...))");
  dsl::Program scan_then_sum = parse(
      "kernel ss(X: f32[R, C]) -> (T: f32[R]) {\n  P[r, c] = scan(X[r, c]) over c\n  T[r] = sum(P[r, c]) over c\n}\n");
  EXPECT_EQ(refusal(scan_then_sum),
            "'T' reduces values that depend on a scan; rowwise computes scans in the last pass only");
  EXPECT_EQ(refusal(scheduled(parse(kRowStats), {{"reduction", "two_pass"}, {"rows_per_block", "1"}})),
            "reduction = two_pass cannot split a scan over blocks");

  // Elementwise.
  dsl::Program silu = parse(kSiluMul);
  EXPECT_EQ(refusal(scheduled(silu, {{"reduction", "warp"}})),
            "unknown schedule key 'reduction' for the elementwise family; it accepts threads, vector, items_per_thread, "
            "unroll, transpose");
  EXPECT_EQ(refusal(scheduled(parse(kBroadcast), {{"vector", "8"}})),
            "vector = 8 moves 32 bytes per access of a 4-byte type; one access is at most 16 bytes (a 128-bit load)");
  EXPECT_EQ(refusal(scheduled(silu, {{"threads", "48"}})), "threads = 48 must be a multiple of 32 between 32 and 1024");

  // Binding to the task's layout.
  EXPECT_EQ(refusal(sm, Binding{{"X", "Y", "Z"}, {"R", "C"}}),
            "task tensor 'Z' is not a parameter of the program (its parameters: X, Y)");
  EXPECT_EQ(refusal(sm, Binding{{"X"}, {"R", "C"}}), "parameter 'Y' is not a tensor of the task (its tensors: X)");
  EXPECT_EQ(refusal(sm, Binding{{"X", "Y"}, {"R"}}), "dim 'C' is not a dim of the task (its dims: R)");

  // The gemm family has its own tests (test_codegen_gemm.cpp); its default schedule is the
  // tensor-core mainloop, which f32 operands cannot use without TF32 rounding.
  dsl::Program gemm = parse(
      "kernel mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n  C[m, n] = sum(A[m, k] * B[k, n]) over k\n}\n");
  EXPECT_EQ(refusal(gemm),
            "mainloop = cooperative: f32 operands reach the tensor cores only as TF32, which rounds the inputs to 10 "
            "mantissa bits; the program asks for f32 products (write tf32(A[m, k]) * tf32(B[k, n]) for TF32), so "
            "mainloop must be simt");
}

// --- generated sources ---------------------------------------------------------------------------

TEST(Codegen, OneNamedKernelPerProgramThatCompilesAndPassesTheStaticGate) {
  struct Case {
    const char* program;
    Schedule changes;
    const char* name;
    int kernels;
  };
  const std::vector<Case> cases = {
      {kSoftmaxF32, {}, "rowwise_softmax_f32_t256_v4_r1_block", 1},
      {kRmsnormBf16, {}, "rowwise_rmsnorm_bf16_t256_v8_r1_block_regs", 1},
      {kLayernormF32, {}, "rowwise_layernorm_f32_t128_v4_r1_block_smem", 1},
      {kChain, {}, "rowwise_chain_f32_t256_v4_r1_block_regs", 1},
      {kChain, {{"reduction", "warp"}, {"rows_per_block", "8"}, {"cache_row", "shared"}},
       "rowwise_chain_f32_t256_v4_r8_warp_smem", 1},
      {kSiluMul, {}, "elementwise_silu_mul_bf16_t256_v8_i2", 1},
      {kRowStats, {}, "rowwise_stats_i32_t128_v2_r2_block_i2", 1},
      {kBroadcast, {}, "elementwise_bias_act_f32_t128_v4_i1_u2", 1},
      // two_pass: one kernel per reduction level, and the last.
      {kChain, {{"reduction", "two_pass"}, {"cache_row", "none"}, {"unroll", "2"}},
       "rowwise_chain_f32_t256_v4_r1_two_pass_u2", 4},
      // Column reductions: the chunks' kernel and the one that combines them; one pass.
      {kColMean, {}, "colwise_colmean_f32_t256_v4_two_pass", 2},
      {kColMax, {{"vector", "8"}, {"items_per_thread", "4"}, {"unroll", "2"}}, "colwise_colmax_bf16_t256_v8_i4_u2_block", 1},
      {kColSumBatched, {}, "colwise_colsum3_f32_t256_v2_batched_block", 1},
      {kColMinBatched, {}, "colwise_colmin3_f32_t256_v1_batched_two_pass", 2},
  };
  std::vector<CompileJob> jobs;
  for (const Case& c : cases) {
    dsl::Program p = scheduled(parse(c.program), c.changes);
    ASSERT_EQ(refusal(p), "(accepted)") << c.name;
    EXPECT_EQ(codegen::kernel_name(p), c.name);
    std::string src = codegen::generate_cuda(p, {});
    // A row cache brings the same schedule's uncached kernels, for rows longer than it holds.
    const size_t long_rows = src.find("namespace ksol_long_rows {");
    EXPECT_EQ(count(src.substr(0, long_rows), "__global__"), c.kernels) << c.name;
    EXPECT_NE(src.find("// " + std::string(c.name) + ": generated by ksol"), std::string::npos) << c.name;
    EXPECT_NE(src.find("extern \"C\" int ksol_run(const ksol_call* call)"), std::string::npos);
    for (const char* fast : kNoFastMath) EXPECT_EQ(src.find(fast), std::string::npos) << c.name << " uses " << fast;
    EXPECT_TRUE(static_scan(src).empty()) << c.name;
    jobs.push_back(job_for(c.name, src));
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

TEST(Codegen, GeneratedCodeFollowsTheIR) {
  std::string sm = codegen::generate_cuda(parse(kSoftmaxF32), {});
  // IEEE expf and a NaN-propagating max, one row per 256 threads, 16-byte packs with a scalar
  // fallback when C is not a multiple of 4.
  EXPECT_NE(sm.find("const float e = expf(X_pack.v[j] - m);"), std::string::npos) << sm;
  EXPECT_NE(sm.find("m_acc = max_nan(m_acc, X_pack.v[j]);"), std::string::npos);
  EXPECT_NE(sm.find("Y_pack.v[j] = e / s;"), std::string::npos);
  EXPECT_NE(sm.find("const bool packs_ok = C % kVector == 0 && pack_aligned(X) && pack_aligned(Y);"), std::string::npos);
  std::string rms = codegen::generate_cuda(parse(kRmsnormBf16), {});
  EXPECT_NE(rms.find("Y_pack.v[j] = __float2bfloat16_rn(__bfloat162float(X_pack.v[j]) * inv * __bfloat162float(W_pack.v[j]));"),
            std::string::npos)
      << rms;
  EXPECT_NE(rms.find("const float inv = rsqrtf(ss / (float)C + 1e-06f);"), std::string::npos);
  EXPECT_NE(rms.find("if (C > kMaxRow) return ksol_long_rows::ksol_run(call);"), std::string::npos) << rms;
  std::string ln = codegen::generate_cuda(parse(kLayernormF32), {});
  EXPECT_NE(ln.find("cudaFuncSetAttribute("), std::string::npos);
  EXPECT_NE(ln.find("if (cache_bytes > kMaxCacheBytes) return ksol_long_rows::ksol_run(call);"), std::string::npos) << ln;
  // The task's order of tensors and dims decides the ABI, not the program's.
  std::string swapped = codegen::generate_cuda(parse(kLayernormF32), Binding{{"W", "B", "X", "Y"}, {"C", "R"}});
  EXPECT_NE(swapped.find("const int64_t C = call->dims[0];"), std::string::npos) << swapped;
  EXPECT_NE(swapped.find("const float* X = static_cast<const float*>(call->tensors[2]);"), std::string::npos);
}

// --- schedule spaces ---------------------------------------------------------------------------

TEST(Codegen, ScheduleSpaces) {
  struct Case {
    const char* label;
    const char* program;
  };
  for (const Case& c : {Case{"softmax_f32", kSoftmaxF32}, Case{"rmsnorm_bf16", kRmsnormBf16},
                        Case{"layernorm_f32", kLayernormF32}, Case{"silu_mul_bf16", kSiluMul}}) {
    dsl::Program p = parse(c.program);
    codegen::Space space = codegen::schedule_space(p, {});
    std::map<std::string, size_t> reasons;
    for (const codegen::Space::ReasonCount& r : space.by_reason()) {
      std::string kind = r.reason.substr(0, r.reason.find_first_of("=0123456789"));
      reasons[kind] += r.count;
    }
    std::cout << "[ schedule space ] " << c.label << " (" << p.family << "): " << space.legal.size() << " legal, "
              << space.refused() << " refused\n";
    for (const auto& [kind, n] : reasons) std::cout << "    " << n << " x " << kind << "...\n";
    // (elementwise: transpose = on is refused here, no read is permuted)
    const size_t grid = p.family == "rowwise" ? 6 * 6 * 4 * 3 * 3 * 4 * 3 * 2 * 2 * 2 * 2 * 3 * 2 * 3 * 2 : 5 * 4 * 4 * 3 * 2;
    EXPECT_EQ(space.size(), grid);
    EXPECT_EQ(space.legal.size() + space.refused(), grid);
    EXPECT_GT(space.legal.size(), 100u);
    std::set<std::string> names;
    for (const Schedule& s : space.legal) {
      dsl::Program q = codegen::with_schedule(p, s);
      ASSERT_TRUE(codegen::can_implement(q, {}).ok) << codegen::schedule_text(s);
      names.insert(codegen::kernel_name(q));
    }
    EXPECT_EQ(names.size(), space.legal.size()) << "two legal schedules share a kernel name";
    for (const std::string& reason : space.reasons) EXPECT_FALSE(reason.empty());
    // The verdicts the space skipped (a refusal's block of later knobs) are can_implement's: every
    // 499th schedule of the grid checked one by one, legal ones in their order.
    size_t legal_seen = 0;
    for (size_t i = 0; i < space.size(); ++i) {
      if (space.verdicts[i] == 0) {
        ASSERT_LT(legal_seen, space.legal.size());
        ASSERT_EQ(space.legal[legal_seen++], space.schedule(i)) << i;
      }
      if (i % 499 != 0) continue;
      const codegen::Support r = codegen::can_implement(codegen::with_schedule(p, space.schedule(i)), {});
      ASSERT_EQ(r.ok ? std::string("(legal)") : r.reason,
                space.verdicts[i] == 0 ? std::string("(legal)") : space.reasons[space.verdicts[i] - 1])
          << codegen::schedule_text(space.schedule(i));
    }
    EXPECT_EQ(legal_seen, space.legal.size());
  }
}

TEST(Codegen, ColumnReductionsNameAndRefuse) {
  dsl::Program p = parse(kColMean);
  ASSERT_EQ(p.family, "rowwise");
  EXPECT_EQ(codegen::kernel_name(p), "colwise_colmean_f32_t256_v4_two_pass");
  EXPECT_EQ(codegen::kernel_name(scheduled(p, {{"reduction", "block"}, {"items_per_thread", "2"}})),
            "colwise_colmean_f32_t256_v4_i2_block");
  auto refusal = [](const dsl::Program& q) {
    codegen::Support s = codegen::can_implement(q, {});
    return s.ok ? std::string("(accepted)") : s.reason;
  };
  EXPECT_EQ(refusal(p), "(accepted)");
  EXPECT_EQ(refusal(scheduled(p, {{"reduction", "warp"}})),
            "reduction = warp serves a row with a warp; a column reduction gives each thread its columns: reduction is "
            "block (one pass) or two_pass (the rows split over blocks)");
  EXPECT_EQ(refusal(scheduled(p, {{"rows_per_block", "4"}})),
            "rows_per_block = 4: a column reduction's threads own columns over all their rows, so rows_per_block must be 1");
  EXPECT_EQ(refusal(scheduled(p, {{"cache_row", "shared"}})),
            "cache_row = shared: a column reduction reads each element once, so cache_row must be none");
  EXPECT_EQ(refusal(scheduled(p, {{"store_hint", "evict_last"}})),
            "store_hint: a column reduction writes one value per column, so store_hint must be none");
  EXPECT_EQ(refusal(scheduled(p, {{"preload", "all"}})),
            "preload: a column reduction has no register cache of whole rows, so preload must be none");
  EXPECT_EQ(refusal(scheduled(p, {{"grid", "rows"}})),
            "grid: a column reduction's blocks own columns over all rows, so grid must be stride");
  EXPECT_EQ(refusal(scheduled(p, {{"vector", "8"}})),
            "vector = 8 columns of a 4-byte type are 32 bytes per thread and row; at most 16");
  std::string src = codegen::generate_cuda(p, {});
  EXPECT_NE(src.find("acc[j] += X[row * C + col] * w[col] + s[row];"), std::string::npos) << src;
  EXPECT_NE(src.find("Y[col] = acc / (float)R;"), std::string::npos) << src;
  // Batched: each batch's matrix at b*R*C, its results at b*C; grid z walks the batch.
  std::string b3 = codegen::generate_cuda(parse(kColSumBatched), {});
  EXPECT_NE(b3.find("for (int64_t b = blockIdx.z; b < B; b += gridDim.z)"), std::string::npos) << b3;
  EXPECT_NE(b3.find("acc[j] += X[(b * R + row) * C + col] * w[col];"), std::string::npos) << b3;
  EXPECT_NE(b3.find("Y[b * C + col] = acc[j];"), std::string::npos) << b3;
  std::string m3 = codegen::generate_cuda(parse(kColMinBatched), {});
  EXPECT_NE(m3.find("X[(b * R + row) * C + col] * X[(b * R + row) * C + col] - m[b * C + col]"), std::string::npos) << m3;
}

// Every example of docs/DSL_CARD.md (the card an LLM's prompt carries) through its generator and
// nvcc. The CUTLASS ones are compiled by CodegenGemm.GeneratedSourcesCompile, which takes them
// from the card too (a CUTLASS instantiation costs minutes of CI).
TEST(Codegen, EveryExampleOfTheCardCompiles) {
  std::vector<CompileJob> jobs;
  int cutlass = 0;
  for (const std::string& text : card_examples()) {
    const dsl::Program p = parse(text);
    if (codegen::compile_needs(p).arch == "sm_90a") {
      ++cutlass;
      continue;
    }
    CompileJob j = program_job(p);
    EXPECT_TRUE(static_scan(j.source_text).empty()) << j.source_path;
    jobs.push_back(j);
  }
  EXPECT_GE(jobs.size(), 6u);
  EXPECT_EQ(cutlass, 1);
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// online = 1 on the host against the interpreter where the two-pass form's special values come
// from: rows all -inf (NaN: exp(-inf - (-inf))), a +inf (NaN), a NaN, a single finite value among
// -infs, values whose exp overflows without the shift, and threads that hold no element of a short
// row; then an empty row (the max's identity -inf, the empty sum 0, log-sum-exp -inf).
TEST(Codegen, OnlineMaxSumKeepsTheTwoPassSpecialValues) {
  const dsl::Program lse = parse(
      "kernel lse(X: f32[R, C]) -> (L: f32[R]) {\n  m[r] = max(X[r, c]) over c\n  e[r, c] = exp(X[r, c] - m[r])\n"
      "  s[r] = sum(e[r, c]) over c\n  L[r] = m[r] + log(s[r])\n}\n"
      "schedule {\n  cache_row = registers\n  online = 1\n  threads = 64\n}\n");
  ASSERT_EQ(refusal(lse), "(accepted)");
  const double inf = INFINITY, nan = std::nan("");
  const int64_t R = 6, C = 40;  // 64 threads: 24 of them hold nothing
  std::vector<double> x(R * C);
  for (int64_t c = 0; c < C; ++c) {
    x[0 * C + c] = std::sin(0.7 * c) * 3;
    x[1 * C + c] = -inf;
    x[2 * C + c] = c == 17 ? inf : 1.0;
    x[3 * C + c] = c == 33 ? nan : -2.0;
    x[4 * C + c] = c == 39 ? 3.0 : -inf;
    x[5 * C + c] = 80 + c * 0.25;
  }
  const std::vector<double> want = codegen::interpret(lse, {{"R", R}, {"C", C}}, {{"X", x}})["L"];
  codegen::HostBuild b = codegen::build_for_host(codegen::generate_cuda(lse, {}));
  ASSERT_TRUE(b.ok) << b.message;
  auto run = [&](int64_t rows, int64_t cols, const std::vector<double>& in) {
    std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(std::max<int64_t>(1, rows * cols) * 4), HostVec<uint8_t>(rows * 4, 0xFF)};
    for (size_t i = 0; i < in.size(); ++i) store_from_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i), in[i]);
    codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, {rows, cols});
    EXPECT_TRUE(r.ok && r.rc == 0) << r.message;
    std::vector<double> got;
    for (int64_t i = 0; i < rows; ++i) got.push_back(load_as_double(DType::f32, bufs[1].data(), i));
    return got;
  };
  const std::vector<double> got = run(R, C, x);
  ASSERT_EQ(got.size(), want.size());
  for (int64_t i = 0; i < R; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "row " << i << ": " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i]))) << "row " << i;
    }
  }
  EXPECT_TRUE(std::isnan(want[1]) && std::isnan(want[2]) && std::isnan(want[3]));
  EXPECT_NEAR(got[4], 3.0, 1e-6);
  const std::vector<double> empty = run(2, 0, {});
  EXPECT_EQ(empty, (std::vector<double>{-inf, -inf}));
  EXPECT_EQ(codegen::interpret(lse, {{"R", 2}, {"C", 0}}, {{"X", {}}})["L"], (std::vector<double>{-inf, -inf}));
}

// The maximum (minimum) of a widened 16-bit input, taken in pairs in the input's own type: the
// same values as widening each element, NaN winning, -inf rows, and odd row lengths (the packs of
// one element, where the pairs repeat it).
TEST(Codegen, PackedExtremesOf16BitInputsMatchTheInterpreter) {
  const double inf = INFINITY, nan = std::nan("");
  for (const char* type : {"bf16", "f16"}) {
    const std::string text = std::string("kernel ext(X: ") + type + "[R, C]) -> (M: f32[R], N: f32[R]) {\n"
                             "  M[r] = max(f32(X[r, c])) over c\n  N[r] = min(f32(X[r, c])) over c\n}\n"
                             "schedule {\n  vector = 8\n  threads = 64\n}\n";
    const dsl::Program p = parse(text);
    ASSERT_EQ(refusal(p), "(accepted)");
    const std::string src = codegen::generate_cuda(p, {});
    EXPECT_NE(src.find("__hmax2_nan("), std::string::npos) << src;
    EXPECT_NE(src.find("__hmin2_nan("), std::string::npos) << src;
    codegen::HostBuild b = codegen::build_for_host(src);
    ASSERT_TRUE(b.ok) << b.message;
    const DType dt = *parse_dtype(type);
    for (int64_t C : {int64_t(48), int64_t(45)}) {  // packs of 8, and of 1 (45 is no multiple of 8)
      const int64_t R = 5;
      std::vector<double> x(R * C);
      for (int64_t c = 0; c < C; ++c) {
        x[0 * C + c] = std::cos(0.3 * c) * 100;
        x[1 * C + c] = -inf;
        x[2 * C + c] = c == C - 2 ? nan : 1.5;
        x[3 * C + c] = c == 7 ? inf : -c;
        x[4 * C + c] = c == C - 1 ? -inf : 0.25 * c;
      }
      std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(R * C * dtype_size(dt)), HostVec<uint8_t>(R * 4, 0xFF),
                                            HostVec<uint8_t>(R * 4, 0xFF)};
      std::vector<double> rounded(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        store_from_double(dt, bufs[0].data(), static_cast<int64_t>(i), x[i]);
        rounded[i] = load_as_double(dt, bufs[0].data(), static_cast<int64_t>(i));
      }
      codegen::HostArrays want = codegen::interpret(p, {{"R", R}, {"C", C}}, {{"X", rounded}});
      codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, {R, C});
      ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
      for (int64_t i = 0; i < R; ++i) {
        for (int k : {1, 2}) {
          const double got = load_as_double(DType::f32, bufs[k].data(), i), w = want[k == 1 ? "M" : "N"][i];
          if (std::isnan(w))
            EXPECT_TRUE(std::isnan(got)) << type << " C=" << C << " row " << i;
          else
            EXPECT_EQ(got, w) << type << " C=" << C << " row " << i << (k == 1 ? " max" : " min");
        }
      }
    }
  }
}

// A program scheduled, checked to be `family`'s and accepted, its source and its build for the host.
struct HostBuilt {
  dsl::Program program;
  std::string source;
  codegen::HostBuild build;
};
HostBuilt host_built(const std::string& text, const Schedule& changes, const std::string& family) {
  HostBuilt r{scheduled(parse(text), changes), "", {}};
  EXPECT_EQ(r.program.family, family);
  EXPECT_EQ(refusal(r.program), "(accepted)");
  r.source = codegen::generate_cuda(r.program, {});
  r.build = codegen::build_for_host(r.source);
  return r;
}

// A column reduction with an epilogue (one elementwise definition of the reduction's value at its
// own index): the values of the interpreter, in one pass and in two, batched and not; an epilogue
// that reads anything else is the rowwise family's to refuse.
TEST(Codegen, ColumnReductionEpilogueMatchesTheInterpreter) {
  const std::string text = "kernel colepi(X: f32[B, R, C]) -> (Y: f32[B, C]) {\n"
                           "  m[b, c] = min(X[b, r, c]) over r\n"
                           "  Y[b, c] = tanh(tanh(m[b, c])) * 2.0 + m[b, c]\n}\n";
  for (const char* red : {"block", "two_pass"}) {
    SCOPED_TRACE(red);
    const HostBuilt hb = host_built(text, {{"reduction", red}}, "rowwise");
    const dsl::Program& p = hb.program;
    const std::string& src = hb.source;
    const codegen::HostBuild& b = hb.build;
    EXPECT_NE(src.find("{ const float red = "), std::string::npos) << src;
    EXPECT_NE(src.find("Y[" + std::string(std::string(red) == "block" ? "b * C + col" : "col") + "] = tanhf(tanhf(red)) * 2.0f + red; }"),
              std::string::npos)
        << src;
    ASSERT_TRUE(b.ok) << b.message;
    const int64_t B = 3, R = 70, C = 37;
    std::vector<double> x(B * R * C);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * 1.5;
    std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(x.size() * 4), HostVec<uint8_t>(B * C * 4, 0xFF)};
    for (size_t i = 0; i < x.size(); ++i) {
      store_from_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i), x[i]);
      x[i] = load_as_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i));
    }
    codegen::HostArrays want = codegen::interpret(p, {{"B", B}, {"R", R}, {"C", C}}, {{"X", x}});
    codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, {B, R, C});
    ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
    ASSERT_EQ(want["Y"].size(), static_cast<size_t>(B * C));
    for (int64_t i = 0; i < B * C; ++i) EXPECT_NEAR(load_as_double(DType::f32, bufs[1].data(), i), want["Y"][i], 1e-5) << i;
  }
  // The epilogue reads another tensor: no column reduction, and no other family takes it.
  try {
    parse("kernel e2(X: f32[R, C], w: f32[C]) -> (Y: f32[C]) {\n  m[c] = sum(X[r, c]) over r\n  Y[c] = m[c] * w[c]\n}\n");
    ADD_FAILURE() << "an epilogue that reads another tensor was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("and at most an elementwise one of Y alone after it), is not supported"), std::string::npos)
        << e.what();
  }
}

// A read of the whole space through a permutation (a channels-last tensor in [N, C, H, W] order):
// the transposing kernel (tiles in shared memory; transpose = auto with the other knobs at 1) and
// the gathering one (transpose = off) both give the interpreter's values, at extents that leave
// partial tiles along both tiled axes and along the rows, for each tile shape (32 or 8 along the
// channels by 32 or 8 along the width).
TEST(Codegen, TransposedReadsMatchTheInterpreter) {
  const std::string text = "kernel tr(X: f32[N, H, W, C], b: f32[C], Z: f32[N, C, H, W]) -> (Y: f32[N, C, H, W]) {\n"
                           "  t[n, c, h, w] = X[n, h, w, c] + b[c]\n"
                           "  Y[n, c, h, w] = tanh(t[n, c, h, w]) * Z[n, c, h, w] + t[n, c, h, w]\n}\n";
  const dsl::Program plain = scheduled(parse(text), {{"threads", "256"}});
  EXPECT_EQ(codegen::kernel_name(plain), "elementwise_tr_f32_t256_v1_i1_tt");
  EXPECT_EQ(codegen::kernel_name(scheduled(parse(text), {{"transpose", "off"}})), "elementwise_tr_f32_t256_v1_i1");
  EXPECT_EQ(codegen::kernel_name(scheduled(parse(text), {{"vector", "4"}})), "elementwise_tr_f32_t256_v4_i1");
  EXPECT_EQ(refusal(scheduled(parse(text), {{"transpose", "on"}, {"vector", "2"}})),
            "transpose = on: its tiles take 256 threads and one element per thread and step (leave threads 256, vector, "
            "items_per_thread and unroll 1)");
  EXPECT_EQ(refusal(scheduled(parse("kernel f(X: f32[N, C]) -> (Y: f32[N, C]) {\n  Y[n, c] = X[n, c] * 2.0\n}\n"),
                              {{"transpose", "on"}})),
            "transpose = on: no read of the whole index space through a permutation whose contiguous index is not the "
            "innermost");
  for (const char* tr : {"auto", "off"}) {
    SCOPED_TRACE(tr);
    const HostBuilt hb = host_built(text, {{"transpose", tr}}, "elementwise");
    const dsl::Program& p = hb.program;
    const codegen::HostBuild& b = hb.build;
    EXPECT_EQ(hb.source.find("__shared__") != std::string::npos, std::string(tr) == "auto") << hb.source;
    ASSERT_TRUE(b.ok) << b.message;
    if (std::string(tr) == "auto")
      for (const char* shape : {"<32, 32, int, true>", "<32, 8, int, true>", "<8, 32, int, true>", "<8, 8, int, true>",
                                "<32, 32, int64_t, false>"})
        EXPECT_NE(hb.source.find("elementwise_tr_f32_t256_v1_i1_tt" + std::string(shape)), std::string::npos) << shape;
    // The transposing kernel also with 64-bit indices (KSOL_TRANSPOSE_INDEX32_MAX 0: every space too
    // large for 32 bits).
    std::vector<std::pair<std::string, codegen::HostBuild>> builds = {{"", b}};
    if (std::string(tr) == "auto")
      builds.emplace_back("64-bit", codegen::build_for_host("#define KSOL_TRANSPOSE_INDEX32_MAX 0LL\n" + hb.source));
    for (const auto& [width, build] : builds)
    for (const auto& [W, C] : std::vector<std::pair<int64_t, int64_t>>{{37, 35}, {37, 5}, {6, 35}, {8, 8}}) {
      SCOPED_TRACE("W " + std::to_string(W) + " C " + std::to_string(C) + " " + width);
      ASSERT_TRUE(build.ok) << build.message;
      const int64_t N = 2, H = 3;
      std::map<std::string, std::vector<double>> in = {{"X", std::vector<double>(N * H * W * C)},
                                                       {"b", std::vector<double>(C)},
                                                       {"Z", std::vector<double>(N * C * H * W)}};
      std::vector<HostVec<uint8_t>> bufs;
      int which = 0;
      for (const char* name : {"X", "b", "Z"}) {
        std::vector<double>& v = in[name];
        bufs.emplace_back(v.size() * 4);
        for (size_t i = 0; i < v.size(); ++i) {
          store_from_double(DType::f32, bufs.back().data(), static_cast<int64_t>(i), std::sin(0.37 * i + which) * 1.5);
          v[i] = load_as_double(DType::f32, bufs.back().data(), static_cast<int64_t>(i));
        }
        ++which;
      }
      bufs.emplace_back(N * C * H * W * 4, 0xFF);
      codegen::HostArrays want = codegen::interpret(p, {{"N", N}, {"H", H}, {"W", W}, {"C", C}}, in);
      codegen::HostRun r = codegen::run_on_host(build.so_path, bufs, {N, H, W, C});
      ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
      for (int64_t i = 0; i < N * C * H * W; ++i)
        ASSERT_NEAR(load_as_double(DType::f32, bufs.back().data(), i), want["Y"][i], 1e-5) << i;
    }
  }
}

// A plain 2-D transpose (no axes besides the two tiled ones): every tile shape, partial tiles.
// The channels-last image piece of the vendor-call plan (a 5-D permutation moving the channel
// last, 8 channels): the tile kernel and the flat kernel at several vector widths, items and
// unrolls, each against the interpreter on the host emulator.
TEST(Codegen, ImagePermutationMatchesTheInterpreterAcrossSchedules) {
  const std::string text = "kernel img(X: f32[N, C, D, H, W]) -> (Y: f32[N, D, H, W, C]) {\n"
                           "  Y[n, d, h, w, c] = X[n, c, d, h, w]\n}\n";
  const std::vector<Schedule> schedules = {
      {{"threads", "256"}},
      {{"transpose", "off"}},
      {{"transpose", "off"}, {"vector", "4"}},
      {{"transpose", "off"}, {"vector", "2"}, {"items_per_thread", "4"}},
      {{"transpose", "off"}, {"threads", "64"}, {"vector", "4"}, {"items_per_thread", "2"}, {"unroll", "2"}},
      {{"transpose", "off"}, {"threads", "128"}, {"items_per_thread", "8"}, {"unroll", "4"}}};
  const std::map<std::string, int64_t> dims = {{"N", 2}, {"C", 8}, {"D", 6}, {"H", 10}, {"W", 12}};
  const int64_t total = 2 * 8 * 6 * 10 * 12;
  for (const Schedule& sched : schedules) {
    const HostBuilt hb = host_built(text, sched, "elementwise");
    SCOPED_TRACE(codegen::kernel_name(hb.program));
    ASSERT_TRUE(hb.build.ok) << hb.build.message;
    std::vector<double> x(total);
    std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(total * 4), HostVec<uint8_t>(total * 4, 0xFF)};
    for (int64_t i = 0; i < total; ++i) {
      store_from_double(DType::f32, bufs[0].data(), i, std::sin(0.37 * static_cast<double>(i)));
      x[i] = load_as_double(DType::f32, bufs[0].data(), i);
    }
    codegen::HostArrays want = codegen::interpret(hb.program, dims, {{"X", x}});
    std::vector<int64_t> abi_dims;
    for (const std::string& d : hb.program.dims) abi_dims.push_back(dims.at(d));
    codegen::HostRun r = codegen::run_on_host(hb.build.so_path, bufs, abi_dims);
    ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
    for (int64_t i = 0; i < total; ++i) ASSERT_EQ(load_as_double(DType::f32, bufs[1].data(), i), want["Y"][i]) << i;
  }
}

TEST(Codegen, TransposedTwoDimensionalReadMatchesTheInterpreter) {
  const HostBuilt hb = host_built("kernel t2(X: f32[W, C]) -> (Y: f32[C, W]) {\n  Y[c, w] = X[w, c] * 2.0 - 1.0\n}\n",
                                  {{"threads", "256"}}, "elementwise");
  ASSERT_TRUE(hb.build.ok) << hb.build.message;
  EXPECT_NE(hb.source.find("__shared__"), std::string::npos) << hb.source;
  for (const auto& [W, C] : std::vector<std::pair<int64_t, int64_t>>{{37, 35}, {5, 37}, {37, 5}, {3, 3}}) {
    SCOPED_TRACE("W " + std::to_string(W) + " C " + std::to_string(C));
    std::vector<double> x(W * C);
    std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(x.size() * 4), HostVec<uint8_t>(x.size() * 4, 0xFF)};
    for (size_t i = 0; i < x.size(); ++i) {
      store_from_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i), std::cos(0.41 * static_cast<double>(i)));
      x[i] = load_as_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i));
    }
    codegen::HostArrays want = codegen::interpret(hb.program, {{"W", W}, {"C", C}}, {{"X", x}});
    codegen::HostRun r = codegen::run_on_host(hb.build.so_path, bufs, {W, C});
    ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
    for (int64_t i = 0; i < W * C; ++i) ASSERT_NEAR(load_as_double(DType::f32, bufs[1].data(), i), want["Y"][i], 1e-6) << i;
  }
}

// An index and a dim used as values stay 64-bit in the tile kernel's 32-bit instantiation: w * w * c
// and c * W * W pass 2^31 where every tensor is far below it.
TEST(Codegen, TransposedReadKeepsIndexValuesSixtyFourBit) {
  const HostBuilt hb = host_built("kernel t4(X: f32[W, C]) -> (Y: f32[C, W]) {\n"
                                  "  Y[c, w] = X[w, c] + f32(w * w * c) + select(c * W * W + w < W, 1.0, 0.0)\n}\n",
                                  {{"threads", "256"}}, "elementwise");
  ASSERT_TRUE(hb.build.ok) << hb.build.message;
  ASSERT_NE(hb.source.find("__shared__"), std::string::npos) << hb.source;
  const int64_t W = 20000, C = 8;
  std::vector<double> x(W * C);
  std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(x.size() * 4), HostVec<uint8_t>(x.size() * 4, 0xFF)};
  for (size_t i = 0; i < x.size(); ++i) {
    store_from_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i), std::sin(0.29 * static_cast<double>(i)));
    x[i] = load_as_double(DType::f32, bufs[0].data(), static_cast<int64_t>(i));
  }
  codegen::HostArrays want = codegen::interpret(hb.program, {{"W", W}, {"C", C}}, {{"X", x}});
  codegen::HostRun r = codegen::run_on_host(hb.build.so_path, bufs, {W, C});
  ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
  for (int64_t i = 0; i < W * C; ++i) {
    const double v = want["Y"][i];
    ASSERT_NEAR(load_as_double(DType::f32, bufs[1].data(), i), v, 1e-6 * std::abs(v) + 1e-6) << i;
  }
}

// --- the interpreter ---------------------------------------------------------------------------

TEST(Interpreter, ArgmaxScanAndCastSemantics) {
  dsl::Program p = parse(kRowStats);
  const double nan = std::nan(""), inf = INFINITY;
  codegen::HostArrays in;
  // Rows: a tie (first maximum wins), a NaN (counts as the maximum), all -inf.
  in["X"] = {1, 3, 3, 2, 5, nan, 7, nan, -inf, -inf, -inf, -inf};
  in["bias"] = {0.5, 0, 1};
  codegen::HostArrays out = codegen::interpret(p, {{"B", 1}, {"T", 3}, {"C", 4}}, in);
  EXPECT_EQ(out["I"], (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(out["M"][0], 1);
  EXPECT_TRUE(std::isnan(out["M"][1]));
  EXPECT_EQ(out["M"][2], -inf);
  EXPECT_EQ(std::vector<double>(out["S"].begin(), out["S"].begin() + 4), (std::vector<double>{1.5, 5, 8.5, 11}));
  EXPECT_TRUE(std::isnan(out["S"][5]));
  // prodscan: the running product along the row, restarting at each row.
  dsl::Program prod = parse("kernel t(X: f32[R, C]) -> (Y: f32[R, C]) {\n  Y[r, c] = prodscan(X[r, c] + 1) over c\n}\n");
  EXPECT_EQ(dsl::print_source(prod).find("Y[r, c] = prodscan((X[r, c] + 1)) over c") != std::string::npos ||
                dsl::print_source(prod).find("Y[r, c] = prodscan(X[r, c] + 1) over c") != std::string::npos,
            true)
      << dsl::print_source(prod);
  EXPECT_EQ(codegen::interpret(prod, {{"R", 2}, {"C", 3}}, {{"X", {1, 2, 3, -1, 4, 0.5}}})["Y"],
            (std::vector<double>{2, 6, 24, 0, 0, 0}));
  // An integer product overflows within a few steps (the kernel's integers wrap where the
  // interpreter saturates): the generator refuses it and says how to write it.
  const codegen::Support ints = codegen::can_implement(
      parse("kernel t(X: i32[R, C]) -> (Y: i32[R, C]) {\n  Y[r, c] = prodscan(X[r, c]) over c\n}\n"), {});
  EXPECT_FALSE(ints.ok);
  EXPECT_NE(ints.reason.find("multiplies i32 values"), std::string::npos) << ints.reason;

  // Typed arithmetic rounds every value to its type; exact keeps float64.
  dsl::Program third = parse("kernel t(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i] / 3\n}\n");
  double exact = codegen::interpret(third, {{"N", 1}}, {{"X", {1}}})["Y"][0];
  double typed = codegen::interpret(third, {{"N", 1}}, {{"X", {1}}}, codegen::Arithmetic::typed)["Y"][0];
  EXPECT_EQ(exact, 1.0 / 3);
  EXPECT_EQ(typed, static_cast<double>(1.0f / 3.0f));
  dsl::Program to_bf16 = parse("kernel t(X: f32[N]) -> (Y: bf16[N], Z: i32[N]) {\n  Y[i] = bf16(X[i])\n  Z[i] = i32(X[i])\n}\n");
  codegen::HostArrays b = codegen::interpret(to_bf16, {{"N", 3}}, {{"X", {1.00390625, -2.7, nan}}}, codegen::Arithmetic::typed);
  EXPECT_EQ(b["Y"][0], 1.0);  // 1 + 2^-8 rounds to even
  EXPECT_EQ(b["Z"], (std::vector<double>{1, -2, 0}));  // truncation; NaN converts to 0 as on the GPU

  // tf32(x): to nearest at 10 mantissa bits, ties to even (1 + 2^-11 down to 1, 1 + 3 * 2^-11 up to
  // 1 + 2^-9); inf stays. The generated CUDA's tf32_round (its host form, as the emulator runs it)
  // agrees.
  dsl::Program tf = parse("kernel t(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = tf32(X[i])\n}\n");
  const std::vector<double> x = {1 + std::ldexp(1.0, -11), 1 + std::ldexp(1.0, -12), -(1 + std::ldexp(3.0, -12)),
                                 1 + std::ldexp(3.0, -11), inf, 3.0};
  const std::vector<double> want = {1, 1, -(1 + std::ldexp(1.0, -10)), 1 + std::ldexp(1.0, -9), inf, 3.0};
  EXPECT_EQ(codegen::interpret(tf, {{"N", 6}}, {{"X", x}})["Y"], want);
  codegen::HostBuild tb = codegen::build_for_host(codegen::generate_cuda(tf, {}));
  ASSERT_TRUE(tb.ok) << tb.message;
  std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(6 * 4), HostVec<uint8_t>(6 * 4, 0)};
  for (size_t i = 0; i < x.size(); ++i) {
    const float f = static_cast<float>(x[i]);
    std::memcpy(bufs[0].data() + 4 * i, &f, 4);
  }
  codegen::HostRun tr = codegen::run_on_host(tb.so_path, bufs, {6});
  ASSERT_TRUE(tr.ok && tr.rc == 0) << tr.message;
  for (size_t i = 0; i < want.size(); ++i) {
    float f;
    std::memcpy(&f, bufs[1].data() + 4 * i, 4);
    EXPECT_EQ(static_cast<double>(f), want[i]) << i;
  }

  // Offset reads past a tensor have no value.
  dsl::Program stencil = parse("kernel s(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i+1] - X[i]\n}\n");
  EXPECT_THROW(codegen::interpret(stencil, {{"N", 4}}, {{"X", {1, 2, 3, 4}}}), std::runtime_error);
  EXPECT_THROW(codegen::interpret(p, {{"B", 1}, {"T", 3}}, in), std::runtime_error);  // dim C missing
}

// The interpreter (exact float64) against every covered task's own float64 reference, through the
// correctness gate's comparators, on every distribution the task is evaluated with.
TEST(Interpreter, AgreesWithTheTasksReferences) {
  for (const TaskProgram& tp : task_programs()) {
    Task t = load_task(resolve_task_path(tp.task));
    dsl::Program p = parse(tp.program);
    Reference ref(t);
    for (const auto& dims : tp.sizes) {
      SizeSet s = size_of(dims);
      for (Distribution d : distributions_for(t)) {
        std::vector<HostTensor> in = generate_inputs(t, s, d, 7);
        std::vector<HostTensor> want = ref.run(t, s, in, false);
        std::vector<HostTensor> mag = t.magnitude == "abs" ? ref.run(t, s, in, true) : want;
        std::vector<HostTensor> got = make_reference_outputs(t, s);
        std::vector<void*> ptrs;
        for (size_t k = 0; k < t.tensors.size(); ++k) {
          HostTensor& h = t.tensors[k].role == Role::in ? in[k] : got[k];
          ptrs.push_back(dtype_is_float(h.dtype) ? static_cast<void*>(h.f64.data()) : h.bytes.data());
        }
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
        EXPECT_EQ(check_outputs(t, s, in, bytes, want, t.magnitude == "abs" ? &mag : nullptr), "")
            << tp.task << " " << distribution_name(d);
      }
    }
  }
}

// --- generated code on the CPU -----------------------------------------------------------------

TEST(HostEmulation, RewritesLaunchesAndDynamicSharedMemory) {
  EXPECT_EQ(codegen::rewrite_for_host("  k<kVec><<<(unsigned)blocks, kThreads, 0, stream>>>(X, f(Y, 2), C);\n"),
            "  ::ksol_emu::launch((const void*)&k<kVec>, [&] { k<kVec>(X, f(Y, 2), C); }, (unsigned)blocks, kThreads, 0, "
            "stream);\n");
  EXPECT_EQ(codegen::rewrite_for_host("  extern __shared__ uint4 row_cache[];  // rows\n"),
            "  uint4* row_cache = ::ksol_emu::dynamic_shared<uint4>();  // rows\n");
}

TEST(HostEmulation, ReportsDeadlocksAndWritesOutsideATensor) {
  const std::string prologue = "#include <ksol/abi.h>\n#include <cuda_runtime.h>\n";
  // Half the block waits at a barrier the other half never reaches.
  codegen::HostBuild dead = codegen::build_for_host(
      prologue + "__global__ void k(float* y) { if (threadIdx.x < 32) __syncthreads(); y[threadIdx.x] = 1; }\n"
                 "extern \"C\" int ksol_run(const ksol_call* c) { k<<<1, 64, 0, (cudaStream_t)c->stream>>>((float*)c->tensors[0]);\n"
                 "  return cudaGetLastError() == cudaSuccess ? 0 : 4; }\n");
  ASSERT_TRUE(dead.ok) << dead.message;
  OutputBytes buffers = {HostVec<uint8_t>(64 * 4, 0)};
  codegen::HostRun r = codegen::run_on_host(dead.so_path, buffers, {});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "barrier deadlock (some threads never reached a __syncthreads or shuffle)");
  // Writes one float past the end of a 4096-byte tensor (4096 = a page: the guard is right after).
  codegen::HostBuild past = codegen::build_for_host(
      prologue + "__global__ void k(float* y) { y[threadIdx.x] = 1; }\n"
                 "extern \"C\" int ksol_run(const ksol_call* c) { k<<<1, 1025>>>((float*)c->tensors[0]);\n"
                 "  if (cudaGetLastError() != cudaSuccess) k<<<1, 1024>>>((float*)c->tensors[0] + 1); return 0; }\n");
  ASSERT_TRUE(past.ok) << past.message;
  buffers = {HostVec<uint8_t>(1024 * 4)};
  r = codegen::run_on_host(past.so_path, buffers, {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("Segmentation fault"), std::string::npos) << r.message;
}

// The elementwise family's index dividers (magic number and shift where every index is under
// 2^31) against plain division, as generated: divisors from 1 to 2^31 - 1, numerators up to 2^31 - 1.
TEST(HostEmulation, IndexDividersMatchDivision) {
  const std::string src = codegen::generate_cuda(parse(kGeneral4), {});
  const size_t from = src.find("struct KsolDiv {");
  const size_t to = src.find("template <int kVec, bool kFast>");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  // ksol_run returns 0, or writes the first wrong (n, d) into its tensor and returns 3.
  const std::string check = R"(
extern "C" int ksol_run(const ksol_call* c) {
  int64_t* bad = static_cast<int64_t*>(c->tensors[0]);
  const int64_t top = 2147483647;
  std::vector<int64_t> ds = {1, 2, 3, 5, 7, 10, 62, 64, 100, 641, 1000, 3844, 6700417, 65535, 65536, 65537,
                             123457, (1 << 20) + 1, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, top - 1, top};
  uint64_t state = 42;
  for (int i = 0; i < 200; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    ds.push_back(1 + static_cast<int64_t>(state >> 33) % top);
  }
  for (const int64_t d : ds) {
    const KsolDiv v = ksol_divider(d);
    std::vector<int64_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, top / d * d - 1, top / d * d, top - 1, top};
    for (int i = 0; i < 2000; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      ns.push_back(static_cast<int64_t>(state >> 33) % (top + 1));
    }
    for (const int64_t n : ns) {
      if (n < 0 || n > top) continue;
      if (ksol_div<true>(n, v) != n / d || ksol_mod<true>(n, v) != n % d || ksol_div<false>(n, v) != n / d) {
        bad[0] = n;
        bad[1] = d;
        return 3;
      }
    }
  }
  return 0;
}
)";
  codegen::HostBuild b = codegen::build_for_host("#include <ksol/abi.h>\n#include <cstdint>\n#include <vector>\n" +
                                                 src.substr(from, to - from) + check);
  ASSERT_TRUE(b.ok) << b.message;
  OutputBytes buffers = {HostVec<uint8_t>(16, 0)};
  codegen::HostRun r = codegen::run_on_host(b.so_path, buffers, {});
  ASSERT_TRUE(r.ok) << r.message;
  int64_t bad[2];
  std::memcpy(bad, buffers[0].data(), sizeof bad);
  EXPECT_EQ(r.rc, 0) << "n = " << bad[0] << ", d = " << bad[1];
}

// The generated CUDA for every covered task, run on the CPU, through the correctness gate's
// comparators on every distribution; each program also with a second schedule.
TEST(HostEmulation, GeneratedCodePassesTheTasksCorrectnessChecks) {
  const std::map<std::string, Schedule> second = {
      {"softmax_f32", {{"reduction", "two_pass"}, {"items_per_thread", "2"}}},
      {"softmax_bf16", {{"reduction", "warp"}, {"rows_per_block", "4"}, {"cache_row", "shared"}, {"math", "fast"}}},
      {"rmsnorm_bf16", {{"reduction", "two_pass"}, {"cache_row", "none"}}},
      {"rmsnorm_f32", {{"reduction", "block"}, {"rows_per_block", "2"}, {"cache_row", "registers"}}},
      {"layernorm_f32", {{"reduction", "warp"}, {"rows_per_block", "4"}, {"cache_row", "registers"}}},
      {"layernorm_bf16", {{"reduction", "two_pass"}, {"rows_per_block", "1"}, {"vector", "2"}}},
      {"broadcast_add_f32", {{"vector", "1"}, {"threads", "32"}}},
      {"relu_f32", {{"vector", "2"}, {"items_per_thread", "4"}}},
      {"leaky_relu_f32", {{"vector", "1"}}},
      {"sigmoid_f32", {{"unroll", "4"}}},
      {"tanh_f32", {{"vector", "4"}}},
      {"copy_f32", {{"vector", "1"}, {"items_per_thread", "8"}}},
      {"axpy_f32", {{"threads", "1024"}}},
      {"scan_f32", {{"reduction", "warp"}, {"threads", "64"}, {"rows_per_block", "2"}, {"vector", "1"}}},
      {"conv2d_f32", {{"tile", "[32, 32, 8]"}, {"thread_tile", "[4, 4]"}}},
  };
  // keep = registers: softmax's exp computed once, kept between the sum's pass and the write pass,
  // with the division by the row's sum as one reciprocal per row (math = fast).
  const std::map<std::string, Schedule> third = {
      {"softmax_f32", {{"cache_row", "registers"}, {"keep", "registers"}, {"vector", "4"}, {"threads", "64"}}},
      {"softmax_bf16", {{"cache_row", "registers"}, {"keep", "registers"}, {"math", "fast"}, {"vector", "8"},
                        {"items_per_thread", "2"}, {"threads", "128"}}},
  };
  // online = 1: softmax's max and sum passes as one, each thread's (max, sum) pair merged by
  // rescaling; by warps (several rows per block) and by blocks.
  const std::map<std::string, Schedule> fourth = {
      {"softmax_f32", {{"cache_row", "registers"}, {"online", "1"}, {"reduction", "warp"}, {"threads", "64"},
                       {"rows_per_block", "2"}}},
      {"softmax_bf16", {{"cache_row", "registers"}, {"online", "1"}, {"math", "fast"}, {"vector", "8"},
                        {"items_per_thread", "2"}, {"threads", "128"}}},
  };
  for (const TaskProgram& tp : task_programs()) {
    Task t = load_task(resolve_task_path(tp.task));
    Reference ref(t);
    const dsl::Program base = parse(tp.program);
    std::vector<dsl::Program> programs = {base, scheduled(base, second.at(tp.task))};
    if (third.count(tp.task)) programs.push_back(scheduled(base, third.at(tp.task)));
    if (fourth.count(tp.task)) programs.push_back(scheduled(base, fourth.at(tp.task)));
    for (const dsl::Program& p : programs) {
      ASSERT_EQ(refusal(p, binding_of(t)), "(accepted)") << tp.task;
      const std::string name = codegen::kernel_name(p);
      codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, binding_of(t)));
      ASSERT_TRUE(build.ok) << name << "\n" << build.message;
      for (const auto& dims : tp.sizes) {
        SizeSet s = size_of(dims);
        for (Distribution d : distributions_for(t)) {
          std::vector<HostTensor> in = generate_inputs(t, s, d, 11);
          std::vector<HostTensor> want = ref.run(t, s, in, false);
          std::vector<HostTensor> mag = t.magnitude == "abs" ? ref.run(t, s, in, true) : want;
          OutputBytes buffers = poisoned_outputs(t, s);
          for (size_t k = 0; k < t.tensors.size(); ++k)
            if (t.tensors[k].role == Role::in) buffers[k] = in[k].bytes;
          codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dims_of(t, s));
          ASSERT_TRUE(r.ok) << name << ": " << r.message;
          ASSERT_EQ(r.rc, 0) << name;
          EXPECT_EQ(check_outputs(t, s, in, buffers, want, t.magnitude == "abs" ? &mag : nullptr), "")
              << name << " at " << dims.begin()->second << "x" << dims.rbegin()->second << ", "
              << distribution_name(d);
        }
      }
    }
  }
}

// Fused programs with no task of their own, checked on the CPU against the interpreter with the
// correctness gate's tolerance formula: the three-level chain, argmax/min/scan over 3-D rows
// (including a block whose last row is missing), broadcasts and a transposed read; each in
// several schedules.
TEST(HostEmulation, FusedProgramsMatchTheInterpreter) {
  struct Case {
    const char* program;
    std::vector<Schedule> schedules;
    std::map<std::string, int64_t> dims;
  };
  const std::vector<Case> cases = {
      {kChain,
       {{}, {{"reduction", "warp"}, {"rows_per_block", "8"}}, {{"reduction", "two_pass"}, {"cache_row", "none"}}},
       {{"R", 5}, {"C", 1001}}},
      {kChain, {{{"cache_row", "shared"}, {"rows_per_block", "2"}, {"threads", "128"}}}, {{"R", 3}, {"C", 2048}}},
      {kRowStats,
       {{}, {{"reduction", "warp"}, {"rows_per_block", "4"}}, {{"vector", "1"}, {"items_per_thread", "1"}}},
       {{"B", 1}, {"T", 3}, {"C", 333}}},
      {kRowStats, {{{"vector", "4"}, {"threads", "256"}, {"rows_per_block", "4"}}}, {{"B", 2}, {"T", 3}, {"C", 1000}}},
      // keep = registers with a scan in the write pass: exp(x - m) kept from the sum's pass, read
      // by the scan's packs (0 past the row's end, where the slot was never written) and the output.
      {"kernel ls(X: f32[R, C]) -> (Y: f32[R, C], P: f32[R, C]) {\n  m[r] = max(X[r, c]) over c\n"
       "  e[r, c] = exp(X[r, c] - m[r])\n  s[r] = sum(e[r, c]) over c\n  Y[r, c] = e[r, c] / s[r]\n"
       "  P[r, c] = scan(e[r, c]) over c\n}\n",
       {{{"cache_row", "registers"}, {"keep", "registers"}, {"vector", "4"}, {"threads", "64"}},
        {{"cache_row", "registers"}, {"keep", "registers"}, {"math", "fast"}, {"threads", "128"}}},
       {{"R", 3}, {"C", 999}}},
      // A cumulative product beside a cumulative sum, and an output of the product's values: the
      // scans' identity 1 for the product (in the lanes' and warps' exclusive scans, the carry
      // across steps). Its factors are positive, so that the tolerance's magnitudes (the program
      // on |inputs|) are the product's own and the bound is the float32 one, not a looser one.
      {"kernel cp(X: f32[R, C]) -> (P: f32[R, C], S: f32[R, C], Y: f32[R, C]) {\n"
       "  P[r, c] = prodscan(1 + X[r, c] * X[r, c] * 0.001) over c\n  S[r, c] = scan(X[r, c]) over c\n"
       "  Y[r, c] = P[r, c] * 2 - S[r, c]\n}\n",
       {{}, {{"reduction", "warp"}, {"rows_per_block", "8"}}, {{"vector", "4"}, {"threads", "64"}}, {{"vector", "1"}, {"threads", "128"}}},
       {{"R", 3}, {"C", 999}}},
      // Rows of whole packs (C % vector == 0): each thread multiplies its pack's elements in turn.
      {"kernel cp(X: f32[R, C]) -> (P: f32[R, C], S: f32[R, C], Y: f32[R, C]) {\n"
       "  P[r, c] = prodscan(1 + X[r, c] * X[r, c] * 0.001) over c\n  S[r, c] = scan(X[r, c]) over c\n"
       "  Y[r, c] = P[r, c] * 2 - S[r, c]\n}\n",
       {{{"vector", "4"}, {"threads", "64"}}, {{"vector", "2"}, {"items_per_thread", "4"}, {"threads", "128"}},
        {{"reduction", "warp"}, {"rows_per_block", "8"}, {"vector", "4"}, {"items_per_thread", "2"}}},
       {{"R", 3}, {"C", 1000}}},
      {kBroadcast, {{}, {{"vector", "1"}}}, {{"M", 5}, {"N", 64}}},
      {kBroadcast, {{}}, {{"M", 5}, {"N", 63}}},
      // A causal softmax: the row-wise kernels give an element's row and column (row, c0 + j) in
      // every pass and kernel shape, and a divisor that reads a position is not hoisted per row.
      {"kernel causal(X: f32[R, C]) -> (Y: f32[R, C]) {\n  v[r, c] = select(c <= r + 1, X[r, c], -1e30)\n"
       "  m[r] = max(v[r, c]) over c\n  e[r, c] = exp(v[r, c] - m[r])\n  s[r] = sum(e[r, c]) over c\n"
       "  Y[r, c] = e[r, c] / s[r] + X[r, c] / f32(c + 1)\n}\n",
       {{},
        {{"reduction", "warp"}, {"rows_per_block", "8"}},
        {{"reduction", "two_pass"}, {"cache_row", "none"}},
        {{"cache_row", "registers"}, {"vector", "4"}, {"threads", "64"}},
        {{"cache_row", "shared"}, {"rows_per_block", "2"}, {"threads", "128"}},
        {{"cache_row", "l2"}, {"vector", "2"}},
        {{"cache_row", "registers"}, {"online", "1"}, {"threads", "64"}},
        {{"math", "fast"}, {"vector", "4"}}},
       {{"R", 37}, {"C", 45}}},
      // A norm's statistics as one pass's two float64 sums (ksol_torch's lowering of rows no
      // cache holds): double accumulators through every reduction kind.
      {"kernel ln(X: f32[R, C], W: f32[C], B: f32[C]) -> (Y: f32[R, C]) {\n  t[r, c] = X[r, c] * 2.0 + 3.0\n"
       "  m1[r] = mean(f64(t[r, c])) over c\n  m2[r] = mean(f64(t[r, c]) * f64(t[r, c])) over c\n"
       "  rs[r] = f32(rsqrt(max(m2[r] - m1[r] * m1[r], 0.0) + 1e-05))\n  mu[r] = f32(m1[r])\n"
       "  Y[r, c] = (t[r, c] - mu[r]) * rs[r] * W[c] + B[c]\n}\n",
       {{},
        {{"reduction", "warp"}, {"rows_per_block", "8"}},
        {{"reduction", "two_pass"}, {"cache_row", "none"}},
        {{"reduction", "two_pass"}, {"cache_row", "none"}, {"items_per_thread", "2"}, {"threads", "64"}},
        {{"cache_row", "registers"}, {"vector", "4"}, {"threads", "64"}},
        {{"vector", "1"}, {"threads", "64"}}},
       {{"R", 5}, {"C", 1001}}},
      // One value read everywhere (s: f32[], read s[]): a scalar parameter.
      {"kernel sc(X: f32[M, N], s: f32[], b: f32[N]) -> (Y: f32[M, N]) {\n  Y[m, n] = X[m, n] * s[] + b[n]\n}\n",
       {{}, {{"vector", "4"}, {"items_per_thread", "2"}}, {{"vector", "1"}}},
       {{"M", 5}, {"N", 66}}},
      {"kernel sm(X: f32[R, C], s: f32[]) -> (Y: f32[R, C]) {\n  m[r] = max(X[r, c]) over c\n"
       "  e[r, c] = exp(X[r, c] * s[] - m[r] * s[])\n  t[r] = sum(e[r, c]) over c\n  Y[r, c] = e[r, c] / t[r]\n}\n",
       {{}, {{"cache_row", "registers"}, {"vector", "4"}, {"threads", "64"}}, {{"reduction", "warp"}, {"rows_per_block", "8"}}},
       {{"R", 3}, {"C", 301}}},
      // Indices as values (tril's mask, a band): each element's own position, also in packs that
      // straddle rows (N = 7, vector 4).
      {"kernel band(X: f32[B, M, N]) -> (Y: f32[B, M, N]) {\n  Y[b, m, n] = select(n <= m + 1, X[b, m, n], 0) + "
       "select(n >= m - 2, f32(b), 0)\n}\n",
       {{}, {{"vector", "4"}}, {{"vector", "1"}, {"threads", "32"}}},
       {{"B", 2}, {"M", 5}, {"N", 7}}},
      // unroll = 4: a grid of a quarter the blocks, each thread looping over its steps.
      {kBroadcast,
       {{{"unroll", "4"}, {"threads", "32"}, {"vector", "2"}}, {{"unroll", "2"}, {"threads", "32"}, {"items_per_thread", "2"}}},
       {{"M", 7}, {"N", 130}}},
      {kColMean,
       {{}, {{"reduction", "block"}}, {{"vector", "1"}, {"threads", "32"}, {"items_per_thread", "4"}, {"unroll", "2"}}},
       {{"R", 77}, {"C", 133}}},
      {kColMean, {{}, {{"reduction", "block"}, {"vector", "2"}}}, {{"R", 1}, {"C", 7}}},
      {kColMax, {{}, {{"vector", "8"}, {"reduction", "two_pass"}, {"threads", "64"}}}, {{"R", 300}, {"C", 70}}},
      {kColSumBatched,
       {{}, {{"reduction", "two_pass"}}, {{"vector", "4"}, {"threads", "32"}, {"items_per_thread", "2"}}},
       {{"B", 3}, {"R", 77}, {"C", 45}}},
      {kColMinBatched, {{}, {{"reduction", "block"}, {"vector", "1"}}}, {{"B", 5}, {"R", 300}, {"C", 7}}},
      // Reads at general positions and indices as (signed) values: every index from the flat one
      // through the dividers, with extents of 1 among them (a bias over [1, N, M, 1]).
      {kGeneral4,
       {{}, {{"vector", "4"}}, {{"vector", "1"}, {"items_per_thread", "2"}, {"threads", "64"}}},
       {{"A", 2}, {"B", 3}, {"C", 5}, {"D", 4}}},
      {kGeneral4, {{}, {{"vector", "2"}}}, {{"A", 1}, {"B", 37}, {"C", 29}, {"D", 1}}},
  };
  for (const Case& c : cases) {
    const dsl::Program base = parse(c.program);
    // Inputs: normal values, rounded to their dtypes.
    codegen::HostArrays in;
    OutputBytes buffers;
    uint64_t state = 12345;
    auto next = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<double>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) / 250000.0;
    };
    auto dtype = [](dsl::Type t) { return *parse_dtype(dsl::type_name(t)); };
    auto numel = [&](const dsl::Param& prm) {
      int64_t n = 1;
      for (const std::string& e : prm.extents) n *= c.dims.at(e);
      return n;
    };
    for (const dsl::Param& prm : base.inputs) {
      std::vector<uint8_t> bytes(numel(prm) * dtype_size(dtype(prm.type)));
      std::vector<double>& v = in[prm.name];
      for (int64_t i = 0; i < numel(prm); ++i) {
        store_from_double(dtype(prm.type), bytes.data(), i, next());
        v.push_back(load_as_double(dtype(prm.type), bytes.data(), i));
      }
      buffers.emplace_back(bytes.begin(), bytes.end());
    }
    // The float64 meaning, and magnitudes from |inputs| for the tolerance (as the harness's).
    codegen::HostArrays want = codegen::interpret(base, c.dims, in);
    codegen::HostArrays abs_in = in;
    for (auto& [name, v] : abs_in)
      for (double& x : v) x = std::fabs(x);
    codegen::HostArrays mag = codegen::interpret(base, c.dims, abs_in);
    int64_t longest = 1;
    std::vector<int64_t> dims;
    for (const std::string& d : base.dims) {
      dims.push_back(c.dims.at(d));
      longest = std::max(longest, c.dims.at(d));
    }
    for (const Schedule& changes : c.schedules) {
      dsl::Program p = scheduled(base, changes);
      const std::string name = codegen::kernel_name(p);
      codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
      ASSERT_TRUE(build.ok) << name << "\n" << build.message;
      OutputBytes run = buffers;
      for (const dsl::Param& prm : p.outputs) run.emplace_back(numel(prm) * dtype_size(dtype(prm.type)), 0xFF);
      codegen::HostRun r = codegen::run_on_host(build.so_path, run, dims);
      ASSERT_TRUE(r.ok) << name << ": " << r.message;
      ASSERT_EQ(r.rc, 0) << name;
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        const dsl::Param& out = p.outputs[k];
        const std::vector<double>& w = want.at(out.name);
        const DType dt = dtype(out.type);
        // The correctness gate's bound: output rounding plus f32 accumulation over the longest row.
        Tolerance tol;
        tol.u_out = dtype_is_float(dt) ? dtype_unit_roundoff(dt) : 0;
        tol.u_acc = dtype_is_float(dt) ? std::ldexp(1.0, -24) : 0;
        tol.growth = 8 + 2 * std::sqrt(static_cast<double>(longest));
        std::vector<double> m(w.size());
        for (size_t i = 0; i < w.size(); ++i) m[i] = std::max(std::fabs(w[i]), std::fabs(mag.at(out.name)[i]));
        CompareResult cr = compare_output(tol, dt, run[p.inputs.size() + k].data(), w.data(), m.data(),
                                          static_cast<int64_t>(w.size()));
        EXPECT_TRUE(cr.ok) << name << ": " << out.name << ": " << cr.message;
      }
    }
  }
}

// cache_row = registers instantiates the kernel for 1, 2, 4, ... cached steps and the launcher
// picks the first that covers the row: rows of 1 to kMaxRow elements (64 threads, 64 values
// each) go through every instantiation and pass the task's checks.
TEST(HostEmulation, RegisterCacheTakesEveryRowLength) {
  Task t = load_task(resolve_task_path("rmsnorm_f32"));
  Reference ref(t);
  const dsl::Program p = scheduled(parse(kRmsnormF32), {{"cache_row", "registers"}, {"threads", "64"}, {"vector", "1"},
                                                        {"items_per_thread", "1"}, {"rows_per_block", "1"}, {"reduction", "block"}});
  codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, binding_of(t)));
  ASSERT_TRUE(build.ok) << build.message;
  for (double C : {1.0, 64.0, 65.0, 130.0, 300.0, 1000.0, 4096.0}) {
    SizeSet s = size_of({{"R", 3}, {"C", C}});
    std::vector<HostTensor> in = generate_inputs(t, s, Distribution::normal, 7);
    std::vector<HostTensor> want = ref.run(t, s, in, false);
    OutputBytes buffers = poisoned_outputs(t, s);
    for (size_t k = 0; k < t.tensors.size(); ++k)
      if (t.tensors[k].role == Role::in) buffers[k] = in[k].bytes;
    codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dims_of(t, s));
    ASSERT_TRUE(r.ok) << r.message;
    ASSERT_EQ(r.rc, 0) << "C = " << C;
    EXPECT_EQ(check_outputs(t, s, in, buffers, want, nullptr), "") << "C = " << C;
  }
}

// Two cached rows of 4 + 2 bytes per element: 256 bytes of registers hold 42 elements of each, so
// at most 42 steps of 64 elements, not a power of two. Rows of 33 to 42 steps need the 42-step
// instantiation (a launcher that stopped at 32 would leave their ends unwritten).
TEST(HostEmulation, RegisterCacheTakesRowsUpToABudgetThatIsNoPowerOfTwo) {
  const char* text = R"(
kernel mixed(X: f32[R, C], Z: bf16[R, C]) -> (Y: f32[R, C]) {
  s[r] = sum(X[r, c] * f32(Z[r, c])) over c
  Y[r, c] = X[r, c] * s[r] + f32(Z[r, c])
}
schedule {
  threads = 64
  vector = 1
  rows_per_block = 1
  reduction = block
  cache_row = registers
}
)";
  const dsl::Program p = parse(text);
  const std::string src = codegen::generate_cuda(p, {});
  ASSERT_NE(src.find("constexpr int kCacheValues = 42;"), std::string::npos) << src.substr(0, 3000);
  codegen::HostBuild build = codegen::build_for_host(src);
  ASSERT_TRUE(build.ok) << build.message;
  for (int64_t C : {int64_t{64 * 32 + 1}, int64_t{64 * 42}}) {
    const int64_t R = 2;
    std::vector<float> x(R * C), want(R * C);
    // Z's values are quarters, exact in bf16: their bits are the upper half of the f32 bits.
    std::vector<float> zf(R * C);
    std::vector<uint16_t> z(R * C);
    for (int64_t i = 0; i < R * C; ++i) {
      x[i] = static_cast<float>((i * 7 % 11) - 5) / 8.0f;
      zf[i] = static_cast<float>((i * 5 % 13) - 6) / 4.0f;
      uint32_t bits;
      std::memcpy(&bits, &zf[i], 4);
      z[i] = static_cast<uint16_t>(bits >> 16);
    }
    for (int64_t r = 0; r < R; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += double(x[r * C + c]) * double(zf[r * C + c]);
      for (int64_t c = 0; c < C; ++c) want[r * C + c] = float(x[r * C + c] * sum + zf[r * C + c]);
    }
    auto bytes = [](const void* p, size_t n) { return HostVec<uint8_t>((const uint8_t*)p, (const uint8_t*)p + n); };
    OutputBytes buffers = {bytes(x.data(), x.size() * 4), bytes(z.data(), z.size() * 2), HostVec<uint8_t>(R * C * 4, 0xFF)};
    codegen::HostRun run = codegen::run_on_host(build.so_path, buffers, {R, C});
    ASSERT_TRUE(run.ok) << run.message;
    ASSERT_EQ(run.rc, 0) << "C = " << C;
    const float* got = reinterpret_cast<const float*>(buffers[2].data());
    int bad = 0;
    for (int64_t i = 0; i < R * C; ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i]))) && bad++ < 3)
        ADD_FAILURE() << "C = " << C << ": element " << i << " is " << got[i] << ", want " << want[i];
  }
}

// A row longer than the register cache holds, or than shared memory holds, runs the same schedule
// without the cache (the generated source carries both): every row length passes the task's checks.
TEST(HostEmulation, RowsBeyondTheCacheTakeTheUncachedKernel) {
  Task t = load_task(resolve_task_path("softmax_f32"));
  Reference ref(t);
  for (const char* cache : {"registers", "shared"}) {
    // tail = exact (no bounds checks in the cached kernel) goes back to checked in the uncached one.
    dsl::Program p = std::string(cache) == "registers"
                         ? scheduled(parse(kSoftmaxF32), {{"cache_row", cache}, {"threads", "64"}, {"tail", "exact"}})
                         : scheduled(parse(kSoftmaxF32), {{"cache_row", cache}, {"threads", "64"}});
    std::string src = codegen::generate_cuda(p, binding_of(t));
    ASSERT_NE(src.find("return ksol_long_rows::ksol_run(call);"), std::string::npos) << cache;
    EXPECT_EQ(src.find("return 3;  // longer than the register cache holds"), std::string::npos) << cache;
    codegen::HostBuild build = codegen::build_for_host(src);
    ASSERT_TRUE(build.ok) << build.message;
    const double longest = std::string(cache) == "registers" ? 64 * 64 : 232448 / 4;
    for (double C : {longest - 1, longest + 4, 2 * longest + 3}) {
      SizeSet s = size_of({{"R", 2}, {"C", C}});
      std::vector<HostTensor> in = generate_inputs(t, s, Distribution::normal, 11);
      std::vector<HostTensor> want = ref.run(t, s, in, false);
      OutputBytes buffers = poisoned_outputs(t, s);
      for (size_t k = 0; k < t.tensors.size(); ++k)
        if (t.tensors[k].role == Role::in) buffers[k] = in[k].bytes;
      codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dims_of(t, s));
      ASSERT_TRUE(r.ok) << r.message;
      ASSERT_EQ(r.rc, 0) << cache << ", C = " << C;
      EXPECT_EQ(check_outputs(t, s, in, buffers, want, nullptr), "") << cache << ", C = " << C;
    }
  }
}

// --- golden sources ------------------------------------------------------------------------------

// Each tests/golden/codegen/NAME.ksol generates exactly NAME.cu (a readable record of what the
// generators write; review a diff there like code).
TEST(Codegen, GoldenSources) {
  const fs::path dir = fs::path(source_root()) / "tests" / "golden" / "codegen";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const bool update = std::getenv("KSOL_UPDATE_GOLDEN") != nullptr;
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".ksol") continue;
    ++cases;
    dsl::Program p = dsl::parse_program(read_file(entry.path().string()), entry.path().filename().string());
    std::string got = codegen::generate_cuda(p, {});
    fs::path expected = entry.path();
    expected.replace_extension(".cu");
    if (update) write_file_atomic(expected.string(), got);
    ASSERT_TRUE(fs::exists(expected)) << expected << " is missing (KSOL_UPDATE_GOLDEN=1 writes it)";
    EXPECT_EQ(got, read_file(expected.string())) << entry.path().filename();
  }
  EXPECT_GE(cases, 3);
}

// cache_row = l2, tail = exact, store_hint = evict_last, preload = all (the weight loaded with the
// cached row), preload = write (loaded at the write pass's start), grid = rows (one block per row;
// with two rows per block, R = 3 leaves the last block a slot without a row) and tail = fixed (the
// exact instantiation's row length a constant) on the host against the interpreter:
// rows of exactly the register cache's steps (64 threads x 4 = 256 per step: 256 and 512 run the
// kExact instantiation), and rows that are not (300, 768: three steps in a four-step cache, 4, 1:
// the scalar packs). nvcc compiles each source for sm_90: the hinted stores' 16-, 8- and 4-byte
// forms (vector 4 and 2, and the scalar packs of f32).
TEST(Codegen, L2HintsAndExactTailMatchTheInterpreter) {
  const std::string kernel =
      "kernel rms(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {\n  ss[r] = sum(X[r, c] * X[r, c]) over c\n"
      "  Y[r, c] = X[r, c] * rsqrt(ss[r] / C + 1e-6) * W[c]\n}\n";
  for (const char* sched : {"schedule {\n  threads = 64\n  vector = 4\n  cache_row = l2\n  unroll = 2\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n"
                            "  store_hint = evict_last\n}\n",
                            "schedule {\n  threads = 64\n  vector = 2\n  store_hint = evict_last\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n"
                            "  preload = all\n}\n",
                            "schedule {\n  threads = 64\n  vector = 2\n  cache_row = registers\n  preload = all\n"
                            "  store_hint = evict_last\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n"
                            "  preload = write\n}\n",
                            "schedule {\n  threads = 64\n  vector = 2\n  cache_row = registers\n  preload = write\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n"
                            "  preload = write\n  grid = rows\n}\n",
                            "schedule {\n  threads = 128\n  rows_per_block = 2\n  vector = 2\n  grid = rows\n}\n",
                            "schedule {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = fixed\n"
                            "  grid = rows\n}\n"}) {
    const dsl::Program p = parse(kernel + sched);
    ASSERT_EQ(refusal(p), "(accepted)") << sched;
    // The host build skips the sm_80+ inline PTX of the hinted loads: nvcc compiles it here.
    CompileJob j;
    j.source_path = codegen::kernel_name(p) + ".cu";
    j.source_text = codegen::generate_cuda(p, {});
    j.arch = codegen::compile_needs(p).arch;
    const std::vector<CompileResult> built = compile_all({j});
    ASSERT_TRUE(built[0].ok) << built[0].message;
    codegen::HostBuild b = codegen::build_for_host(codegen::generate_cuda(p, {}));
    ASSERT_TRUE(b.ok) << b.message;
    for (int64_t C : {256, 512, 300, 768, 4, 1}) {
      const int64_t R = 3;
      std::vector<double> x(R * C), w(C);
      for (int64_t i = 0; i < R * C; ++i) x[i] = std::sin(0.37 * i) * 2 + 0.1;
      for (int64_t c = 0; c < C; ++c) w[c] = 1 + 0.01 * c;
      const std::vector<double> want = codegen::interpret(p, {{"R", R}, {"C", C}}, {{"X", x}, {"W", w}})["Y"];
      std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(R * C * 4), HostVec<uint8_t>(C * 4),
                                            HostVec<uint8_t>(R * C * 4, 0xFF)};
      for (int64_t i = 0; i < R * C; ++i) store_from_double(DType::f32, bufs[0].data(), i, x[i]);
      for (int64_t c = 0; c < C; ++c) store_from_double(DType::f32, bufs[1].data(), c, w[c]);
      codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, {R, C});
      ASSERT_TRUE(r.ok && r.rc == 0) << r.message << " C = " << C;
      for (int64_t i = 0; i < R * C; ++i)
        ASSERT_NEAR(load_as_double(DType::f32, bufs[2].data(), i), want[i], 1e-5 * std::max(1.0, std::fabs(want[i])))
            << sched << "C = " << C << ", element " << i;
    }
  }
}

// --- schedules by problem size -------------------------------------------------------------------

// A guard picks the first schedule whose terms all hold; the last schedule takes the rest.
TEST(Codegen, GuardedSchedulesPickTheFirstThatHolds) {
  const dsl::Program p = parse(
      "kernel rms(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {\n  ss[r] = sum(X[r, c] * X[r, c]) over c\n"
      "  Y[r, c] = X[r, c] * rsqrt(ss[r] / C + 1e-6) * W[c]\n}\n"
      "schedule when C % 4 != 0 {\n  vector = 1\n}\n"
      "schedule when R * C >= 4096 and C <= 1024 {\n  vector = 4\n  cache_row = registers\n}\n"
      "schedule {\n  vector = 2\n}\n");
  ASSERT_EQ(p.guarded.size(), 2u);
  EXPECT_EQ(dsl::guard_text(p.guarded[1].when), "R * C >= 4096 and C <= 1024");
  auto vec = [&](int64_t R, int64_t C) { return dsl::variant_at(p, {{"R", R}, {"C", C}}).knob("vector")->integer; };
  EXPECT_EQ(vec(8, 300), 2);     // R * C = 2400 < 4096: the last
  EXPECT_EQ(vec(8, 301), 1);     // C % 4 != 0 comes first
  EXPECT_EQ(vec(16, 512), 4);    // both terms hold
  EXPECT_EQ(vec(16, 2048), 2);   // C > 1024
  EXPECT_EQ(vec(4, 1024), 4);    // 4096 >= 4096
  // Products past 64 bits do not wrap.
  const dsl::Program big = parse(
      "kernel s(X: f32[R, C]) -> (Y: f32[R, C]) {\n  Y[r, c] = X[r, c] * 2\n}\n"
      "schedule when R * C * R >= 9000000000000000000 {\n  vector = 4\n}\nschedule {\n  vector = 1\n}\n");
  EXPECT_EQ(dsl::variant_at(big, {{"R", 3000000000LL}, {"C", 3000000000LL}}).knob("vector")->integer, 4);
  EXPECT_EQ(dsl::variant_at(big, {{"R", 1}, {"C", 3}}).knob("vector")->integer, 1);
  // The source form reads back to the same program; a child's schedule replaces all of them.
  EXPECT_EQ(dsl::print_program(parse(dsl::print_source(p))), dsl::print_program(p));
  EXPECT_TRUE(codegen::with_schedule(p, {{"vector", "4"}}).guarded.empty());
  // Every variant must be implementable: the refusal names the schedule.
  const dsl::Program bad = parse(
      "kernel rms(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {\n  ss[r] = sum(X[r, c] * X[r, c]) over c\n"
      "  Y[r, c] = X[r, c] * rsqrt(ss[r] / C + 1e-6) * W[c]\n}\n"
      "schedule when C >= 64 {\n  vector = 3\n}\nschedule {\n  vector = 2\n}\n");
  EXPECT_NE(refusal(bad).find("the schedule at line 5 (when C >= 64): "), std::string::npos) << refusal(bad);
  // A sparse program binds one parameter to several task tensors: its guards read the task's dims.
  {
    const Task sp = load_task(resolve_task_path("spmv_csr_f32"));
    std::string text = read_file(sp.dir + "/program.ksol");
    text = text.substr(0, text.find("\nschedule")) + "\nschedule when M >= 100000 {\n  strategy = vector_per_row\n  vector = 4\n}\nschedule {\n  strategy = row_per_thread\n}\n";
    const dsl::Program g = parse(text);
    EXPECT_EQ(refusal(g, codegen::binding_for(sp)), "(accepted)");
    EXPECT_NE(codegen::generate_cuda(g, codegen::binding_for(sp)).find("return ksol_v1::ksol_run(call);"), std::string::npos);
  }
  // The kernel's name lists every variant's; the needs are the union (a CUTLASS variant: sm_90a).
  EXPECT_EQ(codegen::kernel_name(p), codegen::kernel_name(dsl::variant(p, 0)) + "|" + codegen::kernel_name(dsl::variant(p, 1)) + "|" +
                                         codegen::kernel_name(dsl::variant(p, 2)));
  const dsl::Program g = parse(
      "kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: bf16[M, N]) {\n  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k\n"
      "  C[m, n] = bf16(acc[m, n])\n}\n"
      "schedule when M * N * K >= 1000000000 {\n  tile = [128, 256, 64]\n}\nschedule {\n  mainloop = simt\n  tile = [64, 64, 16]\n}\n");
  EXPECT_EQ(codegen::compile_needs(dsl::variant(g, 1)).arch, "sm_90");
  EXPECT_EQ(codegen::compile_needs(g).arch, "sm_90a");
  EXPECT_EQ(codegen::compile_needs(g).libs, std::vector<std::string>{"cuda"});
}

// The dispatching source compiles with nvcc and, run on the host, gives the interpreter's values
// at sizes that take each schedule (the scalar one for rows not a multiple of 4, the register
// cache for the larger rows, the rest).
TEST(Codegen, GuardedSchedulesDispatchByTheCallsDims) {
  const dsl::Program p = parse(
      "kernel rms(X: f32[R, C], W: f32[C]) -> (Y: f32[R, C]) {\n  ss[r] = sum(X[r, c] * X[r, c]) over c\n"
      "  Y[r, c] = X[r, c] * rsqrt(ss[r] / C + 1e-6) * W[c]\n}\n"
      "schedule when C % 4 != 0 {\n  threads = 64\n  vector = 1\n}\n"
      "schedule when R * C >= 1024 {\n  threads = 64\n  vector = 4\n  cache_row = registers\n  tail = exact\n}\n"
      "schedule {\n  threads = 64\n  vector = 2\n}\n");
  ASSERT_EQ(refusal(p), "(accepted)");
  const std::string src = codegen::generate_cuda(p, {});
  EXPECT_NE(src.find("namespace ksol_v2 {"), std::string::npos);
  EXPECT_NE(src.find("if (((static_cast<__int128>(call->dims[1])) % 4) != static_cast<__int128>(0LL)) return ksol_v0::ksol_run(call);"),
            std::string::npos)
      << src.substr(src.size() - 800);
  // The dims by the task's order: with C first, the guard on C reads dims[0] and R * C dims[1] * dims[0].
  codegen::Binding permuted;
  permuted.dim_order = {"C", "R"};
  const std::string src2 = codegen::generate_cuda(p, permuted);
  EXPECT_NE(src2.find("if (((static_cast<__int128>(call->dims[0])) % 4) != static_cast<__int128>(0LL)) return ksol_v0::ksol_run(call);"),
            std::string::npos);
  EXPECT_NE(src2.find("if ((static_cast<__int128>(call->dims[1]) * static_cast<__int128>(call->dims[0])) >= static_cast<__int128>(1024LL)) return ksol_v1::ksol_run(call);"),
            std::string::npos)
      << src2.substr(src2.size() - 800);
  CompileJob j;
  j.source_path = "dispatch.cu";
  j.source_text = src;
  j.arch = codegen::compile_needs(p).arch;
  const std::vector<CompileResult> built = compile_all({j});
  ASSERT_TRUE(built[0].ok) << built[0].message;
  codegen::HostBuild b = codegen::build_for_host(src);
  ASSERT_TRUE(b.ok) << b.message;
  for (auto [R, C] : std::vector<std::pair<int64_t, int64_t>>{{3, 301}, {4, 256}, {2, 64}, {5, 7}}) {
    std::vector<double> x(R * C), w(C);
    for (int64_t i = 0; i < R * C; ++i) x[i] = std::sin(0.37 * i) * 2 + 0.1;
    for (int64_t c = 0; c < C; ++c) w[c] = 1 + 0.01 * c;
    const std::vector<double> want = codegen::interpret(p, {{"R", R}, {"C", C}}, {{"X", x}, {"W", w}})["Y"];
    std::vector<HostVec<uint8_t>> bufs = {HostVec<uint8_t>(R * C * 4), HostVec<uint8_t>(C * 4), HostVec<uint8_t>(R * C * 4, 0xFF)};
    for (int64_t i = 0; i < R * C; ++i) store_from_double(DType::f32, bufs[0].data(), i, x[i]);
    for (int64_t c = 0; c < C; ++c) store_from_double(DType::f32, bufs[1].data(), c, w[c]);
    codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, {R, C});
    ASSERT_TRUE(r.ok && r.rc == 0) << r.message << " R = " << R << ", C = " << C;
    for (int64_t i = 0; i < R * C; ++i)
      ASSERT_NEAR(load_as_double(DType::f32, bufs[2].data(), i), want[i], 1e-5 * std::max(1.0, std::fabs(want[i])))
          << "R = " << R << ", C = " << C << ", element " << i;
  }
}

// A run's report folder keeps the libraries of its returned programs (lib/<name>.so, named in the
// JSON), built once: the second export is served by the compile cache, byte for byte the same.
TEST(Codegen, ExportLibrariesCopiesTheBuiltLibraryBesideTheReport) {
  const Task t = load_task(resolve_task_path("relu_f32"));
  const dsl::Program p = dsl::parse_program(read_file(t.dir + "/program.ksol"), "program.ksol");
  const fs::path dir = fs::temp_directory_path() / ("ksol-export-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  nlohmann::json doc = {{"results", nlohmann::json::array()}};
  ASSERT_EQ(codegen::export_libraries(dir.string(), {{"best", &t, &p}}, doc), 1);
  EXPECT_EQ(doc["libraries"]["best"], "lib/best.so");
  ASSERT_TRUE(fs::exists(dir / "lib" / "best.so"));
  const CompileResult again = compile_all({codegen::compile_job(t, p, "another label")})[0];
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(read_file((dir / "lib" / "best.so").string()), read_file(again.so_path));
  // The library exports the candidate ABI's entry point (read from its symbol table: loading it
  // needs the CUDA runtime's driver).
  const ProcessResult nm = run_process({"nm", "-D", "--defined-only", (dir / "lib" / "best.so").string()}, 60);
  EXPECT_NE(nm.output.find(" T ksol_run\n"), std::string::npos) << nm.output;
  // A program that does not fit the task is the caller's error.
  nlohmann::json none;
  const Task g = load_task(resolve_task_path("gemm_bf16"));
  EXPECT_THROW(codegen::export_libraries(dir.string(), {{"x", &g, &p}}, none), std::runtime_error);
  fs::remove_all(dir);
}
