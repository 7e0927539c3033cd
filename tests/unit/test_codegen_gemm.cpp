// The gemm family's code generator (src/codegen/gemm.cpp): can_implement's exact reasons, kernel
// names, the schedule space of the bf16 GEMM, the generated SIMT kernel's arithmetic run on the
// CPU (host emulation) against the IR interpreter on small odd sizes (batched ones too), and three
// CUTLASS sm_90a instantiations compiled through ksol's compile path (slow: one to four minutes each).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "compile/compiler.h"
#include "dsl/ir.h"
#include "ksol/abi.h"
#include "doc_examples.h"
#include "task/inputs.h"
#include "task/task.h"

using namespace ksol;
using codegen::Binding;
using codegen::Schedule;

namespace {

const char* const kGemmBf16 = R"(
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: bf16[M, N]) {
  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k
  C[m, n] = bf16(acc[m, n])
}
schedule {
  tile = [128, 128, 64]
  cluster = [1, 1]
  stages = 4
  mainloop = cooperative
}
)";

const char* const kGemmBiasGeluTanh = R"(
kernel gemm_bias_gelu(A: bf16[M, K], B: bf16[K, N], bias: bf16[N]) -> (C: bf16[M, N]) {
  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k
  C[m, n]   = bf16(gelu_tanh(acc[m, n] + f32(bias[n])))
}
schedule {
  tile = [128, 256, 64]
  cluster = [2, 1]
  stages = 4
  mainloop = cooperative
  raster = along_n
  swizzle = 2
  split_k = 1
}
)";

// Batched (the batch outermost in every tensor), with an epilogue reading a per-row scale and a
// batched residual: the SIMT path.
const char* const kBatchedResidual = R"(
kernel bgemm(A: bf16[BATCH, M, K], B: bf16[BATCH, K, N], R: bf16[BATCH, M, N], s: f32[M]) -> (C: bf16[BATCH, M, N]) {
  acc[b, m, n] = sum(f32(A[b, m, k]) * f32(B[b, k, n])) over k
  C[b, m, n] = bf16(relu(acc[b, m, n] * s[m] + f32(R[b, m, n])))
}
schedule {
  tile = [32, 64, 16]
  mainloop = simt
}
)";

// Batched on the tensor cores (CUTLASS's L mode).
const char* const kBatchedBf16 = R"(
kernel bgemm(A: bf16[BATCH, M, K], B: bf16[BATCH, K, N]) -> (C: bf16[BATCH, M, N]) {
  acc[b, m, n] = sum(f32(A[b, m, k]) * f32(B[b, k, n])) over k
  C[b, m, n] = bf16(acc[b, m, n])
}
schedule {
  tile = [128, 128, 64]
  cluster = [1, 1]
  stages = auto
  mainloop = cooperative
}
)";

const char* const kGemmF32 = R"(
kernel gemm_f32(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  C[m, n] = sum(A[m, k] * B[k, n]) over k
}
schedule {
  tile = [64, 64, 16]
  mainloop = simt
}
)";

// Batched f32 on the SIMT path (its float4 staging offsets each batch's matrices).
const char* const kBatchedF32 = R"(
kernel bgemm_f32(A: f32[BATCH, M, K], B: f32[BATCH, K, N]) -> (C: f32[BATCH, M, N]) {
  C[b, m, n] = sum(A[b, m, k] * B[b, k, n]) over k
}
schedule {
  tile = [64, 64, 8]
  mainloop = simt
}
)";

// TF32: f32 operands rounded to TF32 by the program, on the tensor cores, B as nn.Linear's weight
// (both operands K-major).
const char* const kGemmTf32 = R"(
kernel linear_tf32(A: f32[M, K], B: f32[N, K]) -> (C: f32[M, N]) {
  C[m, n] = sum(tf32(A[m, k]) * tf32(B[n, k])) over k
}
schedule {
  tile = [128, 128, 32]
  cluster = [1, 1]
  stages = auto
  mainloop = cooperative
}
)";

// An epilogue CUTLASS has no exact fusion for: a residual and a row scale.
// nn.Linear's layout: the weight is W[N, K] (ksol optimize FILE.py lowers linear layers so), with
// the product written weight first, and a per-column bias.
const char* const kLinearF32 = R"(
kernel linear(x: f32[M, K], w: f32[N, K], b: f32[N]) -> (y: f32[M, N]) {
  acc[m, n] = sum(w[n, k] * x[m, k]) over k
  y[m, n] = silu(acc[m, n] + b[n])
}
schedule {
  tile = [64, 32, 16]
  mainloop = simt
}
)";

const char* const kGemmResidual = R"(
kernel gemm_res(A: bf16[M, K], B: bf16[K, N], R: bf16[M, N], s: f32[M]) -> (C: bf16[M, N]) {
  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k
  C[m, n] = bf16(relu(acc[m, n] * s[m] + f32(R[m, n])))
}
schedule {
  tile = [64, 32, 8]
  mainloop = simt
  raster = along_m
}
)";

dsl::Program parse(const std::string& text) { return dsl::parse_program(text, "test.ksol"); }

std::string text_of(const dsl::ScheduleValue& v) {
  switch (v.kind) {
    case dsl::ScheduleValue::Kind::integer: return std::to_string(v.integer);
    case dsl::ScheduleValue::Kind::ident: return v.ident;
    case dsl::ScheduleValue::Kind::list: {
      std::string s = "[";
      for (size_t i = 0; i < v.list.size(); ++i) s += (i ? ", " : "") + std::to_string(v.list[i]);
      return s + "]";
    }
  }
  return "";
}

dsl::Program scheduled(const dsl::Program& p, const Schedule& changes) {
  Schedule s;
  for (const auto& [k, v] : p.schedule) s.emplace_back(k, text_of(v));
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

// The gemm_bf16 task's layout: A, B, C and M, N, K.
const Binding kTaskBinding{{"A", "B", "C"}, {"M", "N", "K"}};

}  // namespace

TEST(CodegenGemm, AcceptsAndNames) {
  const dsl::Program g = parse(kGemmBf16);
  EXPECT_EQ(refusal(g, kTaskBinding), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(g), "gemm_bf16_128x128x64_c1x1_s4_coop_fbsimt_rn");
  const dsl::Program bg = parse(kGemmBiasGeluTanh);
  EXPECT_EQ(refusal(bg, Binding{{"A", "B", "bias", "C"}, {"M", "N", "K"}}), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(bg), "gemm_bf16_128x256x64_c2x1_s4_coop_sw2_bpf_fbsimt_rn_biasgelutanh");
  EXPECT_EQ(codegen::kernel_name(scheduled(bg, {{"mainloop", "pingpong"}, {"tile", "[64, 256, 64]"}, {"stages", "auto"},
                                                {"split_k", "1"}, {"raster", "along_m"}})),
            "gemm_bf16_64x256x64_c2x1_sauto_pp_sw2_bpf_fbsimt_rm_biasgelutanh");
  {
    // A cluster's persistent grid is the clusters the occupancy API says fit, with the kernel's
    // shared memory; a 1x1 grid is the SM count (CUTLASS ignores the cluster count there).
    const std::string src = codegen::generate_cuda(bg, {});
    EXPECT_NE(src.find("attr.val.clusterDim.x = 2;\n"), std::string::npos) << src;
    EXPECT_NE(src.find("config.dynamicSmemBytes = size_t(smem);\n"), std::string::npos);
    EXPECT_NE(src.find("cudaOccupancyMaxActiveClusters(&max_clusters, cutlass::device_kernel<Kernel>, &config) != cudaSuccess) return 4;"),
              std::string::npos);
    EXPECT_NE(src.find("hw.max_active_clusters = max_clusters;"), std::string::npos);
    EXPECT_EQ(codegen::generate_cuda(g, {}).find("max_active_clusters"), std::string::npos);
    // A parameter named like the query's locals is renamed, not redeclared.
    std::string text = kGemmBiasGeluTanh;
    text.replace(text.find("A: bf16"), 1, "config");
    text.replace(text.find("f32(A["), 5, "f32(config");
    const std::string renamed = codegen::generate_cuda(parse(text), {});
    EXPECT_NE(renamed.find("const __nv_bfloat16* config_, "), std::string::npos) << renamed;
    EXPECT_NE(renamed.find("cudaLaunchConfig_t config{};"), std::string::npos);
  }
  EXPECT_EQ(codegen::kernel_name(scheduled(g, {{"split_k", "4"}})), "gemm_bf16_128x128x64_c1x1_s4_coop_sk4_fbsimt_rn");
  EXPECT_EQ(codegen::kernel_name(parse(kGemmF32)), "gemm_f32_64x64x16_simt_rn");
  EXPECT_EQ(codegen::kernel_name(parse(kGemmResidual)), "gemm_bf16_64x32x8_simt_rm_epi");
  // The golden example's epilogue fuses; relu, silu, sigmoid, tanh, clamp, gelu (erf) too.
  for (const char* act : {"relu", "silu", "sigmoid", "tanh", "gelu"}) {
    std::string src = std::string("kernel g(A: f16[M, K], B: f16[K, N], bias: f32[N]) -> (C: f16[M, N]) {\n"
                                  "  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k\n"
                                  "  C[m, n] = f16(") + act + "(acc[m, n] + bias[n]))\n}\n";
    dsl::Program p = parse(src);
    EXPECT_EQ(refusal(p), "(accepted)") << act;
    // bias_prefetch = auto: the activation over acc + bias as a visitor tree with the prefetched
    // bias leaf; bias_prefetch = 0: CUTLASS's fusion operation.
    const std::string tree = codegen::generate_cuda(p, {});
    EXPECT_NE(tree.find("cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<KsolEpilogueFn, "
                        "cutlass::half_t, float, cutlass::FloatRoundStyle::round_to_nearest>, "
                        "cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, float, "
                        "float, cutlass::FloatRoundStyle::round_to_nearest>, cutlass::epilogue::fusion::Sm90AccFetch, "
                        "BiasLoad>>;"),
              std::string::npos)
        << act << tree;
    EXPECT_NE(tree.find("using BiasLoad = ksol::cutlass_ext::Sm90RowBiasPrefetch<EpilogueDescriptor::StagesC, typename "
                        "EpilogueDescriptor::EpilogueTile, float, float>;"),
              std::string::npos)
        << act;
    EXPECT_NE(tree.find("args.epilogue.thread = {{{}, {reinterpret_cast<const float*>(bias)}, {}}, {}};"), std::string::npos) << act;
    EXPECT_EQ(tree.find("LinCombPerColBias"), std::string::npos) << act;
    EXPECT_NE(codegen::generate_cuda(scheduled(p, {{"bias_prefetch", "0"}}), {}).find("LinCombPerColBiasEltAct<KsolEpilogueFn"),
              std::string::npos)
        << act;
  }
  {
    // bias_prefetch: the epilogue descriptor and the assertion that ties it to the built epilogue;
    // an unactivated bias is a one-level tree; the refusals.
    const std::string src = codegen::generate_cuda(bg, {});
    EXPECT_NE(src.find("#include <ksol/cutlass_row_bias.hpp>\n"), std::string::npos);
    EXPECT_NE(src.find("using EpilogueDescriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape, "
                       "cutlass::epilogue::collective::EpilogueTileAuto, void, cutlass::bfloat16_t, "
                       "cutlass::epilogue::TmaWarpSpecializedCooperative>;"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("static_assert(CollectiveEpilogue::DispatchPolicy::StagesC == EpilogueDescriptor::StagesC &&\n"
                       "              cute::is_same_v<typename CollectiveEpilogue::EpilogueTile, typename "
                       "EpilogueDescriptor::EpilogueTile>,\n"),
              std::string::npos)
        << src;
    EXPECT_EQ(src.find("args.epilogue.thread.alpha"), std::string::npos);
    EXPECT_NE(codegen::generate_cuda(scheduled(bg, {{"bias_prefetch", "0"}}), {}).find("args.epilogue.thread.alpha = 1.0f;"),
              std::string::npos);
    EXPECT_EQ(codegen::kernel_name(scheduled(bg, {{"bias_prefetch", "0"}})), "gemm_bf16_128x256x64_c2x1_s4_coop_sw2_fbsimt_rn_biasgelutanh");
    const dsl::Program plain_bias = parse(
        "kernel g(A: bf16[M, K], B: bf16[K, N], bias: bf16[N]) -> (C: bf16[M, N]) {\n"
        "  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k\n"
        "  C[m, n] = bf16(acc[m, n] + f32(bias[n]))\n}\n");
    const std::string pb = codegen::generate_cuda(plain_bias, {});
    EXPECT_NE(pb.find("using FusionCallbacks = cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<"
                      "cutlass::plus, cutlass::bfloat16_t, float, cutlass::FloatRoundStyle::round_to_nearest>, "
                      "cutlass::epilogue::fusion::Sm90AccFetch, BiasLoad>;"),
              std::string::npos)
        << pb;
    EXPECT_NE(pb.find("args.epilogue.thread = {{}, {reinterpret_cast<const cutlass::bfloat16_t*>(bias)}, {}};"), std::string::npos);
    EXPECT_EQ(codegen::kernel_name(plain_bias), "gemm_bf16_128x128x64_c1x1_sauto_coop_bpf_fbsimt_rn_bias");
    // auto is off where there is nothing to prefetch: no bias, swap_ab (a per-row bias), simt.
    EXPECT_EQ(codegen::generate_cuda(g, {}).find("BiasLoad"), std::string::npos);
    EXPECT_EQ(refusal(scheduled(g, {{"bias_prefetch", "1"}})),
              "bias_prefetch = 1 prefetches a per-column bias; this epilogue adds none (bias_prefetch = 0)");
    EXPECT_EQ(refusal(scheduled(bg, {{"bias_prefetch", "1"}, {"swap_ab", "1"}, {"epilogue_tile", "[64, 128]"}, {"stages", "auto"}})),
              "bias_prefetch = 1 prefetches the bias of CUTLASS's columns; with swap_ab = 1 it is per row of CUTLASS's "
              "output and read straight into registers (bias_prefetch = 0)");
    EXPECT_EQ(codegen::generate_cuda(scheduled(bg, {{"swap_ab", "1"}, {"epilogue_tile", "[64, 128]"}, {"stages", "auto"}}), {}).find("BiasLoad"),
              std::string::npos);
    const dsl::Program simt = scheduled(bg, {{"mainloop", "simt"}, {"tile", "[64, 64, 16]"}, {"cluster", "[1, 1]"},
                                             {"stages", "auto"}, {"swizzle", "1"}});
    EXPECT_EQ(codegen::generate_cuda(simt, {}).find("BiasLoad"), std::string::npos);
    EXPECT_EQ(refusal(scheduled(simt, {{"bias_prefetch", "1"}})),
              "bias_prefetch = 1 loads the bias with the TMA epilogue's producer warp; mainloop = simt reads it directly "
              "(bias_prefetch = 0)");
    EXPECT_EQ(refusal(scheduled(bg, {{"bias_prefetch", "2"}})), "bias_prefetch = 2 must be auto, 0 or 1");
    EXPECT_EQ(refusal(scheduled(bg, {{"bias_prefetch", "yes"}})), "bias_prefetch = yes must be auto, 0 or 1");
  }
  dsl::Program clamp = parse(
      "kernel g(A: bf16[M, K], B: bf16[K, N]) -> (C: bf16[M, N]) {\n"
      "  acc[m, n] = sum(f32(A[m, k]) * f32(B[k, n])) over k\n"
      "  C[m, n] = bf16(clamp(acc[m, n] * 0.5, -1, 1))\n}\n");
  EXPECT_EQ(refusal(clamp), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(clamp), "gemm_bf16_128x128x64_c1x1_sauto_coop_fbsimt_rn_clamp");
  EXPECT_NE(codegen::generate_cuda(clamp, {}).find("LinCombEltAct<KsolEpilogueFn"), std::string::npos);
}

TEST(CodegenGemm, RefusesWithExactReasons) {
  EXPECT_EQ(refusal(scheduled(parse(kLinearF32), {{"mainloop", "cooperative"}, {"tile", "[128, 128, 64]"}})),
            "mainloop = cooperative: f32 operands reach the tensor cores only as TF32, which rounds the inputs to 10 "
            "mantissa bits; the program asks for f32 products (write tf32(A[m, k]) * tf32(B[k, n]) for TF32), so "
            "mainloop must be simt");
  const dsl::Program g = parse(kGemmBf16);
  const dsl::Program bg = parse(kGemmBiasGeluTanh);
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[96, 128, 64]"}})),
            "tile = [96, 128, 64]: WGMMA tiles take M in {64, 128, 256} per block");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[128, 264, 64]"}})),
            "tile = [128, 264, 64]: WGMMA takes N a multiple of 8 up to 256");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[128, 128, 32]"}})),
            "tile = [128, 128, 32]: tile K must be 64 for 16-bit operands (one 128-byte swizzle row per stage)");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[64, 128, 64]"}})),
            "tile = [64, 128, 64]: mainloop = cooperative splits the tile's M across two consumer warpgroups of 64 "
            "rows, so M >= 128");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[256, 256, 64]"}})),
            "tile = [256, 256, 64] with mainloop = cooperative holds 256 f32 accumulators per consumer thread; at "
            "most 128 fit in the registers");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[128, 256, 64]"}, {"mainloop", "pingpong"}})),
            "tile = [128, 256, 64] with mainloop = pingpong holds 256 f32 accumulators per consumer thread; at most "
            "128 fit in the registers");
  EXPECT_EQ(refusal(scheduled(g, {{"tile", "[128, 128]"}})), "tile = [128, 128] must be a list [M, N, K]");
  EXPECT_EQ(refusal(scheduled(g, {{"cluster", "[4, 2]"}})),
            "cluster = [4, 2]: cluster sizes are 1, 2 or 4 with at most 4 blocks per cluster");
  EXPECT_EQ(refusal(scheduled(g, {{"cluster", "2"}})), "cluster = 2 must be a list [M, N]");
  EXPECT_EQ(refusal(scheduled(bg, {{"stages", "7"}})),
            "stages = 7 of tile = [128, 256, 64] take 344176 bytes of shared memory, plus about 19456 for the "
            "epilogue: over the 232448 bytes (227 KB) of an sm_90 block");
  EXPECT_EQ(refusal(scheduled(g, {{"stages", "1"}})), "stages = 1 must be between 2 and 8, or auto");
  EXPECT_EQ(refusal(scheduled(g, {{"mainloop", "pingpong"}, {"tile", "[64, 128, 64]"}, {"split_k", "2"}})),
            "split_k / stream_k use the stream-K tile scheduler, which CUTLASS runs with mainloop = cooperative only");
  EXPECT_EQ(refusal(scheduled(g, {{"split_k", "2"}, {"stream_k", "1"}})),
            "split_k = 2 and stream_k = 1 are two decompositions; pick one");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue", "default"}})),
            "epilogue = default (no shared memory) applies no fusion; this epilogue (biasgelutanh) needs epilogue = "
            "tma or auto");
  // epilogue_tile: the TMA epilogue's subtile, whose M the mainloop fixes (CUTLASS's static_assert).
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[64, 64]"}})),
            "epilogue_tile = [64, 64]: mainloop = cooperative stores subtiles of 128 rows (CUTLASS's sm_90 epilogue: 128 "
            "for the two warpgroups of cooperative, 64 for one of pingpong)");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[128, 48]"}})),
            "epilogue_tile = [128, 48]: its N must be a multiple of 16 that divides the tile's N (256)");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[128, 8]"}})),
            "epilogue_tile = [128, 8]: its N must be a multiple of 16 that divides the tile's N (256)");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[128, 512]"}})),
            "epilogue_tile = [128, 512]: its N must be a multiple of 16 that divides the tile's N (256)");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "64"}})), "epilogue_tile = 64 must be a list [M, N]");
  EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[0, 0]"}})), "epilogue_tile = [0, 0]: its sides must be positive");
  EXPECT_EQ(refusal(scheduled(g, {{"epilogue", "default"}, {"epilogue_tile", "[128, 64]"}})),
            "epilogue_tile = [128, 64] is the subtile of the TMA epilogue; epilogue = default stores from registers "
            "(epilogue_tile = auto)");
  EXPECT_EQ(refusal(scheduled(g, {{"mainloop", "pingpong"}, {"epilogue_tile", "[128, 64]"}})),
            "epilogue_tile = [128, 64]: mainloop = pingpong stores subtiles of 64 rows (CUTLASS's sm_90 epilogue: 128 "
            "for the two warpgroups of cooperative, 64 for one of pingpong)");
  EXPECT_EQ(refusal(scheduled(parse(kGemmF32), {{"epilogue_tile", "[128, 64]"}})),
            "epilogue_tile is the subtile of the TMA epilogue; mainloop = simt stores directly (epilogue_tile = auto)");
  {
    // Accepted: the subtile in the builder and the name, and in the shared-memory estimate (a
    // 128 x 128 bf16 subtile, staged twice, leaves room for three stages of 128x256x64, not four).
    const dsl::Program e = scheduled(bg, {{"mainloop", "pingpong"}, {"tile", "[128, 128, 64]"}, {"epilogue_tile", "[64, 128]"}});
    EXPECT_EQ(refusal(e), "(accepted)");
    EXPECT_EQ(codegen::kernel_name(e), "gemm_bf16_128x128x64_c2x1_s4_pp_e64x128_sw2_bpf_fbsimt_rn_biasgelutanh");
    const std::string src = codegen::generate_cuda(e, {});
    EXPECT_NE(src.find("    cute::Shape<cute::_64, cute::_128>, float, float,\n"), std::string::npos) << src;
    EXPECT_EQ(src.find("EpilogueTileAuto"), std::string::npos);
    EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[128, 128]"}, {"stages", "3"}})), "(accepted)");
    EXPECT_EQ(refusal(scheduled(bg, {{"epilogue_tile", "[128, 128]"}, {"stages", "4"}})),
              "stages = 4 of tile = [128, 256, 64] take 196672 bytes of shared memory, plus about 68608 for the "
              "epilogue: over the 232448 bytes (227 KB) of an sm_90 block");
  }
  EXPECT_EQ(refusal(scheduled(g, {{"swizzle", "3"}})), "swizzle = 3 must be one of 1, 2, 4, 8");
  EXPECT_EQ(refusal(scheduled(g, {{"raster", "diagonal"}})), "raster = diagonal must be one of along_m, along_n");
  EXPECT_EQ(refusal(scheduled(g, {{"threads", "128"}})),
            "unknown schedule key 'threads' for the gemm family; it accepts tile, cluster, stages, mainloop, warp_tile, "
            "epilogue, raster, swizzle, split_k, stream_k, swap_ab, bias_prefetch, math, epilogue_tile, unaligned");
  {
    // swap_ab = 1: CUTLASS computes C^T = B^T A^T. Its tile and cluster are the program's swapped,
    // its A is B (N-major: ColumnMajor) and its B is A (K-major: ColumnMajor), C^T is column-major
    // with the bias per row, and the raster along the program's M is along CUTLASS's N.
    const dsl::Program x = scheduled(bg, {{"swap_ab", "1"}, {"raster", "along_m"}, {"epilogue_tile", "[64, 128]"}, {"stages", "auto"}});
    EXPECT_EQ(refusal(x), "(accepted)");
    EXPECT_EQ(codegen::kernel_name(x), "gemm_bf16_128x256x64_c2x1_sauto_coop_e64x128_sw2_swab_fbsimt_rm_biasgelutanh");
    const std::string src = codegen::generate_cuda(x, {});
    for (const char* line : {"using TileShape = cute::Shape<cute::_256, cute::_128, cute::_64>;\n",
                             "using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;\n",
                             "    cute::Shape<cute::_128, cute::_64>, float, float,\n",
                             "    void, cutlass::layout::ColumnMajor, 8, cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8,\n",
                             "LinCombPerRowBiasEltAct<KsolEpilogueFn, cutlass::bfloat16_t, float, cutlass::bfloat16_t, void, float>",
                             "    cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8, cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8, float,\n",
                             "const StrideA stride_a{cute::Int<1>{}, int64_t(N_), int64_t(K_) * N_};\n",
                             "const StrideB stride_b{int64_t(K_), cute::Int<1>{}, int64_t(M_) * K_};\n",
                             "const StrideD stride_d{cute::Int<1>{}, int64_t(N_), int64_t(M_) * N_};\n",
                             "args.problem_shape = {N_, M_, K_, L_};\n",
                             "args.mainloop.ptr_A = reinterpret_cast<const cutlass::bfloat16_t*>(B);\n",
                             "args.mainloop.ptr_B = reinterpret_cast<const cutlass::bfloat16_t*>(A);\n",
                             "attr.val.clusterDim.x = 1;\n", "attr.val.clusterDim.y = 2;\n",
                             "raster_order = decltype(args.scheduler.raster_order)::AlongN;\n"})
      EXPECT_NE(src.find(line), std::string::npos) << line << "\n" << src;
    EXPECT_EQ(src.find("LinCombPerColBias"), std::string::npos);
    // Only the 16-bit, unbatched kernels that have been through the gates on a GPU.
    EXPECT_EQ(refusal(scheduled(parse(kGemmTf32), {{"swap_ab", "1"}})),
              "swap_ab = 1 is implemented for unbatched GEMMs of 16-bit operands (the ones checked on the H200); this "
              "one is a TF32 GEMM (swap_ab = 0)");
    EXPECT_EQ(refusal(scheduled(parse(kBatchedBf16), {{"swap_ab", "1"}}), Binding{{"A", "B", "C"}, {"BATCH", "M", "N", "K"}}),
              "swap_ab = 1 is implemented for unbatched GEMMs of 16-bit operands (the ones checked on the H200); this "
              "one is batched (swap_ab = 0)");
    // The checks in CUTLASS's view.
    EXPECT_EQ(refusal(scheduled(bg, {{"swap_ab", "1"}, {"tile", "[256, 64, 64]"}})),
              "tile = [256, 64, 64]: mainloop = cooperative with swap_ab = 1 splits the tile's N across two consumer "
              "warpgroups of 64 columns, so N >= 128");
    EXPECT_EQ(refusal(scheduled(bg, {{"swap_ab", "1"}, {"tile", "[128, 192, 64]"}})),
              "tile = [128, 192, 64]: WGMMA tiles take M in {64, 128, 256} per block (with swap_ab = 1 CUTLASS's M is "
              "the tile's N and its N the tile's M)");
    EXPECT_EQ(refusal(scheduled(bg, {{"swap_ab", "1"}, {"epilogue_tile", "[128, 64]"}})),
              "epilogue_tile = [128, 64]: mainloop = cooperative stores subtiles of 128 columns (swap_ab = 1: CUTLASS's "
              "sm_90 epilogue: 128 for the two warpgroups of cooperative, 64 for one of pingpong)");
    EXPECT_EQ(refusal(scheduled(bg, {{"swap_ab", "1"}, {"epilogue_tile", "[48, 128]"}})),
              "epilogue_tile = [48, 128]: its M must be a multiple of 16 that divides the tile's M (128)");
    EXPECT_EQ(refusal(scheduled(parse(kGemmF32), {{"swap_ab", "1"}})),
              "swap_ab = 1 swaps CUTLASS's operands; mainloop = simt computes C directly (swap_ab = 0)");
    EXPECT_EQ(refusal(scheduled(bg, {{"swap_ab", "2"}})), "swap_ab = 2 must be one of 0, 1");
  }
  // f32 without TF32 is the SIMT kernel's.
  const dsl::Program f = parse(kGemmF32);
  EXPECT_EQ(refusal(f), "(accepted)");
  EXPECT_EQ(refusal(scheduled(f, {{"mainloop", "cooperative"}, {"tile", "[128, 128, 64]"}})),
            "mainloop = cooperative: f32 operands reach the tensor cores only as TF32, which rounds the inputs to 10 "
            "mantissa bits; the program asks for f32 products (write tf32(A[m, k]) * tf32(B[k, n]) for TF32), so "
            "mainloop must be simt");
  // TF32: the program rounds both factors; the tensor-core path takes it with a K tile of 32.
  const dsl::Program tf = parse(kGemmTf32);
  EXPECT_EQ(refusal(tf), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(tf), "gemm_tf32_128x128x32_bnk_c1x1_sauto_coop_fbsimt_rn");
  // With a row-major B[K, N] the TF32 tensor-core path is refused (CUTLASS's path for it was wrong
  // on the H200); the SIMT kernel takes it.
  const dsl::Program tk = parse("kernel mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
                                "  C[m, n] = sum(tf32(A[m, k]) * tf32(B[k, n])) over k\n}\n"
                                "schedule {\n  tile = [128, 128, 32]\n}\n");
  EXPECT_EQ(refusal(tk),
            "mainloop = cooperative: a TF32 GEMM on the tensor cores takes B as B[n, k] (K-major, both operands "
            "straight from shared memory); with a row-major B[K, N] CUTLASS's TF32 mainloop (its register-sourced, "
            "swapped-operand path) gave wrong results on the H200 (docs/results/2026-12-01-h200-issue4-g2.txt), so "
            "mainloop must be simt or mma");
  EXPECT_EQ(refusal(scheduled(tk, {{"mainloop", "simt"}, {"tile", "[64, 64, 16]"}})), "(accepted)");
  EXPECT_EQ(refusal(scheduled(tf, {{"tile", "[128, 128, 64]"}})),
            "tile = [128, 128, 64]: tile K must be 32 for TF32 operands (one 128-byte swizzle row of f32 per stage)");
  EXPECT_EQ(refusal(scheduled(tf, {{"mainloop", "simt"}, {"tile", "[64, 64, 16]"}})), "(accepted)");
  // Without a schedule a TF32 program gets the default tile with K = 32.
  const dsl::Program bare = parse("kernel l(A: f32[M, K], B: f32[N, K]) -> (C: f32[M, N]) {\n"
                                  "  C[m, n] = sum(tf32(A[m, k]) * tf32(B[n, k])) over k\n}\n");
  EXPECT_EQ(refusal(bare), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(bare), "gemm_tf32_128x128x32_bnk_c1x1_sauto_coop_fbsimt_rn");
  EXPECT_EQ(refusal(parse("kernel mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
                          "  C[m, n] = sum(tf32(A[m, k]) * B[k, n]) over k\n}\n")),
            "one factor of the sum is rounded to TF32 and the other is not; write tf32(...) around both reads (TF32 "
            "tensor cores) or neither (f32 products)");
  EXPECT_EQ(refusal(scheduled(f, {{"cluster", "[2, 1]"}})),
            "cluster = [2, 1]: clusters multicast TMA loads; mainloop = simt runs one block per tile (cluster = [1, 1])");
  EXPECT_EQ(refusal(scheduled(f, {{"stages", "3"}})),
            "stages = 3: the SIMT mainloop has one shared-memory buffer or two (stages = 1, 2 or auto)");
  EXPECT_EQ(refusal(scheduled(f, {{"tile", "[128, 128, 64]"}})),
            "tile = [128, 128, 64]: mainloop = simt takes tile K in {8, 16, 32}");
  EXPECT_EQ(refusal(scheduled(f, {{"stream_k", "1"}})),
            "stream_k needs the CUTLASS stream-K scheduler; mainloop = simt splits K with split_k");
  EXPECT_EQ(refusal(scheduled(f, {{"split_k", "17"}})), "split_k = 17 must be between 1 and 16");
  EXPECT_EQ(refusal(scheduled(f, {{"split_k", "16"}})), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(scheduled(f, {{"split_k", "4"}})), "gemm_f32_64x64x16_simt_sk4_rn");
  // Epilogues CUTLASS cannot fuse exactly run on the SIMT path only.
  const dsl::Program res = parse(kGemmResidual);
  EXPECT_EQ(refusal(res), "(accepted)");
  EXPECT_EQ(refusal(scheduled(res, {{"mainloop", "cooperative"}, {"tile", "[128, 128, 64]"}})),
            "mainloop = cooperative: the epilogue has no exact CUTLASS fusion (the epilogue reads tensors other than "
            "the sum and one per-column bias added to it (bf16(relu(acc[m, n] * s[m] + f32(R[m, n]))))); it must be "
            "out(f(acc)) or out(f(acc + bias[n])); use mainloop = simt");
  // B[n, k] (an nn.Linear weight) is K-major: the tensor-core path takes it as a column-major B.
  const dsl::Program bnk = parse("kernel g(A: bf16[M, K], B: bf16[N, K]) -> (C: f32[M, N]) {\n"
                                 "  C[m, n] = sum(f32(A[m, k]) * f32(B[n, k])) over k\n}\n");
  EXPECT_EQ(refusal(bnk), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(bnk), "gemm_bf16_128x128x64_bnk_c1x1_sauto_coop_fbsimt_rn");
  const std::string bnk_src = codegen::generate_cuda(bnk, {});
  EXPECT_NE(bnk_src.find("cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8, float,"), std::string::npos) << bnk_src;
  EXPECT_NE(bnk_src.find("const StrideB stride_b{int64_t(K_), cute::Int<1>{}, int64_t(N_) * K_};"), std::string::npos);
  EXPECT_EQ(refusal(parse("kernel g(A: bf16[M, K], B: bf16[K, N]) -> (C: bf16[M, N]) {\n"
                          "  C[m, n] = sum(A[m, k] * B[k, n]) over k\n}\n")),
            "the sum accumulates in bf16; the gemm family accumulates in f32 (write sum(f32(A[m, k]) * f32(B[k, n])))");
  // Binding.
  EXPECT_EQ(refusal(g, Binding{{"A", "B", "C"}, {"M", "N"}}), "dim 'K' is not a dim of the task (its dims: M, N)");
  // Batched: accepted on both paths; a bias in the fused epilogue is not (yet).
  EXPECT_EQ(refusal(parse(kBatchedBf16)), "(accepted)");
  EXPECT_EQ(refusal(parse(kBatchedResidual)), "(accepted)");
  EXPECT_EQ(codegen::kernel_name(parse(kBatchedBf16)), "bgemm_bf16_128x128x64_c1x1_sauto_coop_fbsimt_rn");
  EXPECT_EQ(refusal(parse("kernel g(A: bf16[BATCH, M, K], B: bf16[BATCH, K, N], bias: bf16[N]) -> (C: bf16[BATCH, M, N]) {\n"
                          "  acc[b, m, n] = sum(f32(A[b, m, k]) * f32(B[b, k, n])) over k\n"
                          "  C[b, m, n] = bf16(acc[b, m, n] + f32(bias[n]))\n}\n")),
            "mainloop = cooperative: the epilogue has no exact CUTLASS fusion (a batched GEMM's fused epilogue takes no bias (its "
            "broadcast over the batch is not set up)); it must be out(f(acc)) or out(f(acc + bias[n])); use mainloop = simt");
}

TEST(CodegenGemm, UnalignedShapesRunTheSimtKernelOrArePaddedForTheTensorCores) {
  const dsl::Program g = parse(kGemmBf16);
  // auto: rows TMA cannot take run the SIMT kernel, as the name says.
  EXPECT_EQ(codegen::generate_cuda(g, {}).find("ksol_run_pad"), std::string::npos);
  EXPECT_EQ(codegen::kernel_name(scheduled(g, {{"unaligned", "simt"}})), codegen::kernel_name(g));
  // pad: they are padded into aligned buffers and the aligned kernel runs there.
  const dsl::Program padded = scheduled(g, {{"unaligned", "pad"}});
  EXPECT_EQ(codegen::kernel_name(padded), "gemm_bf16_128x128x64_c1x1_s4_coop_fbpad_rn");
  const std::string pad = codegen::generate_cuda(padded, {});
  EXPECT_NE(pad.find("static int ksol_run_pad("), std::string::npos);
  EXPECT_NE(pad.find("const int64_t Kp_ = (K + 7) / 8 * 8;"), std::string::npos) << pad;
  EXPECT_NE(pad.find("const int64_t Np_ = (N + 7) / 8 * 8;"), std::string::npos);
  EXPECT_NE(pad.find("const int r = ksol_run_tma(Ap_, Bp_, Cp_, M, Np_, Kp_, stream);"), std::string::npos);
  EXPECT_NE(pad.find("else if (M > 0 && N > 0 && K > 0)"), std::string::npos);
  EXPECT_NE(pad.find("return ksol_run_simt("), std::string::npos);  // K = 0 and refused shapes
  // A bias is padded with the operands (one copy kernel for the three).
  const std::string bias = codegen::generate_cuda(scheduled(parse(kGemmBiasGeluTanh), {{"unaligned", "pad"}}), {});
  EXPECT_NE(bias.find("segs.nseg = 3;"), std::string::npos);
  EXPECT_NE(bias.find("ksol_run_tma(Ap_, Bp_, biasp_, Cp_, M, Np_, Kp_, stream)"), std::string::npos) << bias;
  EXPECT_EQ(refusal(scheduled(parse(kGemmF32), {{"unaligned", "pad"}})),
            "unaligned = pad chooses what the TMA mainloops do with shapes TMA cannot take; mainloop = simt takes every "
            "shape (unaligned = auto)");
  EXPECT_EQ(refusal(scheduled(g, {{"unaligned", "never"}})), "unaligned = never must be one of auto, pad, simt");
}

TEST(CodegenGemm, ScheduleSpaceOfTheBf16Gemm) {
  codegen::Space s = codegen::schedule_space(parse(kGemmBf16), kTaskBinding);
  std::cout << "gemm bf16 schedule space: " << s.legal.size() << " legal, " << s.refused() << " refused\n";
  EXPECT_GE(s.legal.size(), 100u);
  // 5904 tensor-core schedules (3936 with epilogue_tile = auto, 1968 with [128, 64] or [64, 64]),
  // each with unaligned = auto (the SIMT fallback) and pad, and 48 SIMT ones (unaligned = auto only).
  EXPECT_EQ(s.legal.size(), 2u * 5904 + 48);
  EXPECT_EQ(s.size(), 14u * 4 * 5 * 4 * 2 * 2 * 2 * 3 * 2 * 2 * 2 * 3 * 2);
  EXPECT_EQ(s.legal.size() + s.refused(), s.size());
  for (const Schedule& sch : s.legal) {
    dsl::Program p = codegen::with_schedule(parse(kGemmBf16), sch);
    ASSERT_EQ(refusal(p, kTaskBinding), "(accepted)") << codegen::schedule_text(sch);
  }
  // Every refusal has a reason, and every verdict (the skipped ones too) is can_implement's.
  for (const std::string& why : s.reasons) EXPECT_FALSE(why.empty());
  const dsl::Program g = parse(kGemmBf16);
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string want = s.verdicts[i] == 0 ? std::string("(accepted)") : s.reasons[s.verdicts[i] - 1];
    ASSERT_EQ(refusal(codegen::with_schedule(g, s.schedule(i)), kTaskBinding), want)
        << codegen::schedule_text(s.schedule(i));
  }
  codegen::Space f = codegen::schedule_space(parse(kGemmF32), {});
  std::cout << "gemm f32 schedule space: " << f.legal.size() << " legal, " << f.refused() << " refused\n";
  EXPECT_EQ(f.legal.size(), 3u * 2 * 2 * 2 * 2);  // simt tiles x stages {auto, 1} x epilogue x raster x split_k {1, 2}
  // TF32: the three tensor-core tiles with K = 32 beside the same SIMT schedules.
  codegen::Space t = codegen::schedule_space(parse(kGemmTf32), {});
  std::cout << "gemm tf32 schedule space: " << t.legal.size() << " legal, " << t.refused() << " refused\n";
  EXPECT_GE(t.legal.size(), 100u);
  size_t tensor = 0;
  for (const codegen::Schedule& sch : t.legal)
    for (const auto& [k, v] : sch)
      if (k == "mainloop" && v != "simt") ++tensor;
  EXPECT_EQ(tensor + 3u * 2 * 2 * 2 * 2, t.legal.size());
}

namespace {

struct HostCase {
  const char* program;
  Schedule changes;
  std::map<std::string, int64_t> dims;
};

// One generated GEMM on the CPU (host emulation) against the IR interpreter: the f32 rounding of K
// products of magnitude up to 4 in any order, then the output's rounding.
void expect_host_matches_interpreter(const HostCase& c) {
  const dsl::Program p = scheduled(parse(c.program), c.changes);
  ASSERT_EQ(refusal(p), "(accepted)");
  const std::string name = codegen::kernel_name(p);
  uint64_t state = 99;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) / 500000.0;
  };
  auto dtype = [](dsl::Type t) { return *parse_dtype(dsl::type_name(t)); };
  auto numel = [&](const dsl::Param& prm) {
    int64_t n = 1;
    for (const std::string& e : prm.extents) n *= c.dims.at(e);
    return n;
  };
  codegen::HostArrays in;
  OutputBytes buffers;
  for (const dsl::Param& prm : p.inputs) {
    std::vector<uint8_t> bytes(numel(prm) * dtype_size(dtype(prm.type)) + 1);
    std::vector<double>& v = in[prm.name];
    for (int64_t i = 0; i < numel(prm); ++i) {
      store_from_double(dtype(prm.type), bytes.data(), i, next());
      v.push_back(load_as_double(dtype(prm.type), bytes.data(), i));
    }
    bytes.resize(numel(prm) * dtype_size(dtype(prm.type)));
    buffers.emplace_back(bytes.begin(), bytes.end());
  }
  const dsl::Param& out = p.outputs[0];
  buffers.emplace_back(numel(out) * dtype_size(dtype(out.type)), 0xFF);
  std::vector<int64_t> dims;
  for (const std::string& d : p.dims) dims.push_back(c.dims.at(d));
  codegen::HostArrays want = codegen::interpret(p, c.dims, in, codegen::Arithmetic::typed);
  codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
  ASSERT_TRUE(build.ok) << name << "\n" << build.message;
  codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dims);
  ASSERT_TRUE(r.ok) << name << ": " << r.message;
  ASSERT_EQ(r.rc, 0) << name;
  const std::vector<double>& w = want.at(out.name);
  const DType dt = dtype(out.type);
  const double u = dtype_unit_roundoff(dt);
  const double kdim = static_cast<double>(std::max<int64_t>(1, c.dims.at("K")));
  int bad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double got = load_as_double(dt, buffers.back().data(), static_cast<int64_t>(i));
    // The interpreter rounds each product then adds; the kernel fuses them: f32 rounding over K
    // terms of magnitude up to 4, then the output's rounding (two ulps: the rounded values may
    // fall on either side of a tie).
    double bound = 2 * u * std::fabs(w[i]) + kdim * 4 * 4 * std::ldexp(1.0, -23) * 2 + 1e-30;
    if (!(std::fabs(got - w[i]) <= bound) && bad++ < 5)
      ADD_FAILURE() << name << ": element " << i << " is " << got << ", the interpreter says " << w[i];
  }
  EXPECT_EQ(bad, 0) << name;
}

}  // namespace

// The SIMT kernel on the CPU (host emulation) against the IR interpreter, on small odd sizes
// (partial tiles in M, N and K).
TEST(CodegenGemm, SimtKernelMatchesTheInterpreterOnTheHost) {
  using Case = HostCase;
  // A product whose epilogue keeps the sum where `cond` holds of the output's position, else 0.
  std::deque<std::string> masked_programs;
  auto masked = [&](const char* cond) {
    masked_programs.push_back(std::string("kernel model(a: f32[M, K], b: f32[K, N]) -> (y: f32[M, N]) {\n"
                                          "  acc[m, n] = sum(a[m, k] * b[k, n]) over k\n  y[m, n] = select(") +
                              cond + ", acc[m, n], 0)\n}\n");
    return masked_programs.back().c_str();
  };
  const std::vector<Case> cases = {
      {kGemmF32, {}, {{"M", 37}, {"N", 70}, {"K", 19}}},
      {kGemmF32, {{"tile", "[32, 64, 8]"}, {"raster", "along_m"}}, {{"M", 33}, {"N", 65}, {"K", 0}}},
      {kGemmF32, {{"stages", "2"}}, {{"M", 37}, {"N", 70}, {"K", 19}}},  // double-buffered
      {kGemmF32, {{"tile", "[128, 128, 8]"}, {"stages", "2"}}, {{"M", 130}, {"N", 129}, {"K", 17}}},
      {kGemmResidual, {}, {{"M", 70}, {"N", 31}, {"K", 9}}},
      {kGemmBiasGeluTanh, {{"mainloop", "simt"}, {"tile", "[32, 32, 16]"}, {"cluster", "[1, 1]"}, {"stages", "auto"},
                           {"swizzle", "1"}}, {{"M", 45}, {"N", 33}, {"K", 37}}},
      {kGemmBiasGeluTanh, {{"mainloop", "simt"}, {"tile", "[32, 32, 16]"}, {"cluster", "[1, 1]"}, {"stages", "auto"},
                           {"swizzle", "1"}, {"math", "fast"}}, {{"M", 45}, {"N", 33}, {"K", 37}}},
      {kBatchedResidual, {}, {{"BATCH", 3}, {"M", 37}, {"N", 70}, {"K", 19}}},
      {kBatchedBf16, {{"mainloop", "simt"}, {"tile", "[64, 32, 8]"}, {"stages", "auto"}}, {{"BATCH", 2}, {"M", 65}, {"N", 9}, {"K", 33}}},
      // TF32 on the SIMT path (the tensor-core kernel's fallback): each staged operand rounded, so the
      // products are the interpreter's (without the rounding they miss this bound by ~2^-11).
      {kGemmTf32, {{"mainloop", "simt"}, {"tile", "[64, 64, 16]"}}, {{"M", 37}, {"N", 70}, {"K", 19}}},
      {kLinearF32, {}, {{"M", 45}, {"N", 37}, {"K", 50}}},
      {kLinearF32, {{"tile", "[128, 128, 8]"}}, {{"M", 130}, {"N", 129}, {"K", 17}}},
      // K and N multiples of 4 (and so 16-byte aligned buffers): the float4 staging (kVec), with partial
      // tiles in M, N and K, one and two buffers, B[k, n] and B[n, k], batched, TF32-rounded.
      {kGemmF32, {{"tile", "[128, 128, 8]"}}, {{"M", 130}, {"N", 132}, {"K", 20}}},
      {kGemmF32, {{"tile", "[128, 128, 16]"}, {"stages", "2"}}, {{"M", 37}, {"N", 68}, {"K", 36}}},
      {kGemmF32, {{"tile", "[32, 64, 32]"}, {"stages", "2"}, {"raster", "along_m"}}, {{"M", 33}, {"N", 100}, {"K", 44}}},
      {kGemmF32, {{"tile", "[64, 32, 8]"}}, {{"M", 64}, {"N", 32}, {"K", 4}}},
      // Interior blocks with several whole K tiles (the unchecked loads), then a partial one.
      {kGemmF32, {{"tile", "[128, 128, 8]"}}, {{"M", 130}, {"N", 132}, {"K", 36}}},
      {kLinearF32, {{"tile", "[64, 64, 8]"}, {"stages", "2"}}, {{"M", 130}, {"N", 70}, {"K", 44}}},
      // Two buffers with B[k, n] copied by cp.async: interior blocks, edges, split slices.
      {kGemmF32, {{"tile", "[64, 64, 8]"}, {"stages", "2"}}, {{"M", 130}, {"N", 132}, {"K", 44}}},
      {kGemmF32, {{"tile", "[64, 64, 8]"}, {"stages", "2"}, {"split_k", "4"}}, {{"M", 70}, {"N", 68}, {"K", 100}}},
      {kBatchedF32, {{"tile", "[32, 32, 8]"}, {"stages", "2"}, {"split_k", "2"}}, {{"BATCH", 2}, {"M", 65}, {"N", 36}, {"K", 44}}},
      {masked("n <= m - 1"),
       {{"tile", "[32, 32, 8]"}, {"mainloop", "simt"}, {"stages", "2"}, {"split_k", "4"}}, {{"M", 70}, {"N", 68}, {"K", 52}}},
      {kLinearF32, {{"tile", "[128, 64, 16]"}, {"stages", "2"}}, {{"M", 45}, {"N", 37}, {"K", 52}}},
      {kGemmTf32, {{"mainloop", "simt"}, {"tile", "[64, 64, 16]"}}, {{"M", 37}, {"N", 72}, {"K", 24}}},
      {kBatchedF32, {}, {{"BATCH", 3}, {"M", 65}, {"N", 36}, {"K", 28}}},
      // split_k (the emulator has 132 SMs, so these few tiles split as far as the knob lets them): the
      // float4 path with a K cut inside a slice's last tile, the element-wise path (K = 99), two
      // buffers, an epilogue applied after the slices' sum, batched slices, and K shorter than a tile.
      {kGemmF32, {{"tile", "[64, 64, 8]"}, {"split_k", "4"}}, {{"M", 70}, {"N", 68}, {"K", 100}}},
      {kGemmF32, {{"tile", "[32, 64, 16]"}, {"split_k", "16"}, {"stages", "2"}}, {{"M", 37}, {"N", 70}, {"K", 99}}},
      {kLinearF32, {{"tile", "[64, 32, 8]"}, {"split_k", "3"}}, {{"M", 45}, {"N", 37}, {"K", 52}}},
      {kBatchedResidual, {{"split_k", "2"}}, {{"BATCH", 3}, {"M", 37}, {"N", 70}, {"K", 41}}},
      {kBatchedF32, {{"split_k", "5"}}, {{"BATCH", 2}, {"M", 65}, {"N", 36}, {"K", 44}}},
      {kGemmF32, {{"split_k", "8"}}, {{"M", 37}, {"N", 70}, {"K", 5}}},
      {"kernel model(input0: f32[M, K], w: f32[N, K], b: f32[N]) -> (output0: f32[M, N]) {\n"
       "  acc[m, n] = sum(input0[m, k] * w[n, k]) over k\n"
       "  output0[m, n] = (min(acc[m, n] + b[n], 0.25) - 0.25) * 1.5\n}\n",
       {{"tile", "[64, 64, 16]"}, {"split_k", "16"}, {"mainloop", "simt"}, {"stages", "1"}}, {{"M", 24}, {"N", 32}, {"K", 40}}},
      // An epilogue that reads the output's position (torch.tril of a product), split and not.
      {masked("n <= m - 1"),
       {{"tile", "[32, 32, 8]"}, {"mainloop", "simt"}, {"stages", "1"}}, {{"M", 70}, {"N", 65}, {"K", 19}}},
      {masked("n >= m"),
       {{"tile", "[32, 32, 8]"}, {"mainloop", "simt"}, {"stages", "1"}, {"split_k", "4"}}, {{"M", 70}, {"N", 50}, {"K", 33}}},
      // Tiles of unequal sides and offsets that put one kept element in a tile's corner (row 63, column
      // 32 of the 64 x 32 tile at (0, 32); row 32, column 63 of the 32 x 64 tile at (32, 0)): a
      // mask condition one off drops that tile.
      {masked("n <= m - 31"),
       {{"tile", "[64, 32, 8]"}, {"mainloop", "simt"}, {"stages", "1"}}, {{"M", 130}, {"N", 129}, {"K", 9}}},
      {masked("n >= m + 31"),
       {{"tile", "[32, 64, 8]"}, {"mainloop", "simt"}, {"stages", "1"}}, {{"M", 130}, {"N", 193}, {"K", 9}}},
      {masked("m - 31 < n"),
       {{"tile", "[64, 32, 8]"}, {"mainloop", "simt"}, {"stages", "1"}}, {{"M", 130}, {"N", 97}, {"K", 9}}},
      {"kernel model(a: f32[M, K], b: f32[N, K]) -> (y: f32[M, N]) {\n"
       "  acc[m, n] = sum(a[m, k] * b[n, k]) over k\n  y[m, n] = select(m + 3 > n, acc[m, n] * 2, -1)\n}\n",
       {{"tile", "[32, 32, 16]"}, {"mainloop", "simt"}, {"stages", "2"}}, {{"M", 64}, {"N", 96}, {"K", 40}}},
  };
  for (const Case& c : cases) expect_host_matches_interpreter(c);
}

// TF32 programs for mainloop = mma: B[k, n], B[n, k] with an epilogue, batched.
const char* const kMmaTf32 = "kernel mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
                             "  C[m, n] = sum(tf32(A[m, k]) * tf32(B[k, n])) over k\n}\n";
const char* const kMmaLinearTf32 = "kernel linear(x: f32[M, K], w: f32[N, K], b: f32[N]) -> (y: f32[M, N]) {\n"
                                   "  acc[m, n] = sum(tf32(w[n, k]) * tf32(x[m, k])) over k\n"
                                   "  y[m, n] = silu(acc[m, n] + b[n])\n}\n";
const char* const kMmaBatchedTf32 = "kernel bmm(A: f32[BATCH, M, K], B: f32[BATCH, K, N]) -> (C: f32[BATCH, M, N]) {\n"
                                    "  C[b, m, n] = sum(tf32(A[b, m, k]) * tf32(B[b, k, n])) over k\n}\n";

// mainloop = mma takes TF32 products only: f32 products stay on CUDA cores (three TF32 products
// each missed gemm_f32's bound on heavy-tailed inputs). warp_tile is its knob alone.
TEST(CodegenGemm, MmaTakesTf32ProductsWithExactRefusals) {
  const dsl::Program p = scheduled(parse(kMmaTf32), {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}});
  EXPECT_EQ(codegen::kernel_name(p), "gemm_tf32_128x128x16_mma_w64x64_s3_rn");
  EXPECT_EQ(refusal(p), "(accepted)");
  // Without a tile: the family's default with K 16.
  EXPECT_EQ(codegen::kernel_name(parse(std::string(kMmaTf32) + "schedule {\n  mainloop = mma\n}\n")),
            "gemm_tf32_128x128x16_mma_w64x64_s3_rn");
  const dsl::Program t = scheduled(parse(kGemmTf32), {{"mainloop", "mma"}, {"tile", "[64, 128, 32]"}, {"warp_tile", "[32, 64]"},
                                                      {"stages", "4"}, {"raster", "along_m"}});
  EXPECT_EQ(codegen::kernel_name(t), "gemm_tf32_64x128x32_mma_w32x64_s4_bnk_rm");
  EXPECT_EQ(refusal(t), "(accepted)");
  EXPECT_EQ(refusal(scheduled(parse(kGemmF32), {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}})),
            "mainloop = mma multiplies TF32 products (write tf32(A[m, k]) * tf32(B[k, n])); this program asks for f32 "
            "products, which run on CUDA cores (mainloop = simt)");
  EXPECT_EQ(refusal(scheduled(parse(kGemmF32), {{"tile", "[64, 64, 16]"}, {"warp_tile", "[32, 32]"}})),
            "warp_tile divides the block's tile among the warps of mainloop = mma; mainloop = simt has no warp tiles of "
            "its own (warp_tile = auto)");
  auto mma = [&](Schedule more) {
    Schedule s = {{"mainloop", "mma"}, {"tile", "[128, 128, 16]"}};
    for (auto& kv : more) s.push_back(kv);
    return refusal(scheduled(parse(kMmaTf32), s));
  };
  EXPECT_EQ(mma({{"tile", "[128, 128, 8]"}}), "tile = [128, 128, 8]: mainloop = mma takes tile K 16 or 32 (k-steps of 8)");
  EXPECT_EQ(mma({{"tile", "[96, 128, 16]"}}), "tile = [96, 128, 16]: mainloop = mma takes tile M and N in {32, 64, 128, 256}");
  EXPECT_EQ(mma({{"warp_tile", "[64, 48]"}}),
            "warp_tile = [64, 48]: a warp's tile has M in {16, 32, 64} and N in {8, 16, 32, 64} (m16n8k8 instructions)");
  EXPECT_EQ(mma({{"tile", "[256, 256, 16]"}, {"warp_tile", "[64, 32]"}}),
            "tile = [256, 256, 16] in warp tiles of [64, 32] takes 32 warps; a block of mainloop = mma has at most 16 (512 threads)");
  EXPECT_EQ(mma({{"tile", "[256, 256, 16]"}}),
            "tile = [256, 256, 16] in warp tiles of [64, 64]: 16 warps of 128 accumulators a thread spill (at most 128 "
            "registers a thread past 8 warps); use a smaller tile or fewer warps");
  EXPECT_EQ(mma({{"split_k", "2"}}), "split_k = 2: mainloop = mma does not split K (split_k = 1)");
  EXPECT_EQ(mma({{"tile", "[256, 256, 32]"}, {"warp_tile", "[64, 64]"}, {"stages", "6"}}),
            "stages = 6 of tile = [256, 256, 32] take 423936 bytes of shared memory: over the 232448 bytes (227 KB) of an sm_90 block");
  EXPECT_EQ(refusal(scheduled(parse(kGemmBf16), {{"mainloop", "mma"}})),
            "mainloop = mma multiplies f32 operands rounded to TF32; bf16 operands take mainloop = cooperative or pingpong");
}

// mainloop = mma on the CPU: mma.sync emulated, cp.async copies deferred until their wait (so a
// stage read before its copies landed reads stale data and fails); partial tiles in M, N and K,
// the 16-byte and the element copies, B[k, n] and B[n, k], 2 to 4 stages, batched, K = 0, an
// epilogue and a masked triangle.
TEST(CodegenGemm, MmaKernelMatchesTheInterpreterOnTheHost) {
  const char* const masked = "kernel model(a: f32[M, K], b: f32[K, N]) -> (y: f32[M, N]) {\n"
                             "  acc[m, n] = sum(tf32(a[m, k]) * tf32(b[k, n])) over k\n"
                             "  y[m, n] = select(n <= m - 1, acc[m, n], 0)\n}\n";
  const char* const batched_epilogue =
      "kernel bg(A: f32[BATCH, M, K], B: f32[BATCH, N, K], R: f32[BATCH, M, N], s: f32[M]) -> (C: f32[BATCH, M, N]) {\n"
      "  acc[b, m, n] = sum(tf32(A[b, m, k]) * tf32(B[b, n, k])) over k\n  C[b, m, n] = relu(acc[b, m, n] * s[m] + R[b, m, n])\n}\n";
  const Schedule mma = {{"mainloop", "mma"}, {"tile", "[64, 64, 16]"}, {"stages", "auto"}, {"cluster", "[1, 1]"},
                        {"swizzle", "1"}, {"split_k", "1"}};
  auto with = [&](Schedule more) {
    Schedule s = mma;
    for (auto& kv : more) s.push_back(kv);
    return s;
  };
  const std::vector<HostCase> cases = {
      {kMmaTf32, with({}), {{"M", 37}, {"N", 70}, {"K", 19}}},
      {kMmaTf32, with({{"tile", "[128, 128, 32]"}, {"warp_tile", "[64, 32]"}}), {{"M", 130}, {"N", 132}, {"K", 100}}},
      {kMmaTf32, with({{"tile", "[32, 64, 16]"}, {"raster", "along_m"}}), {{"M", 33}, {"N", 65}, {"K", 0}}},
      {kMmaLinearTf32, with({{"stages", "2"}}), {{"M", 45}, {"N", 37}, {"K", 50}}},
      {kMmaLinearTf32, with({{"tile", "[128, 64, 16]"}, {"warp_tile", "[32, 32]"}, {"stages", "4"}}),
       {{"M", 130}, {"N", 70}, {"K", 100}}},
      {kMmaLinearTf32, with({{"tile", "[256, 128, 16]"}, {"warp_tile", "[64, 64]"}, {"stages", "2"}}),
       {{"M", 260}, {"N", 132}, {"K", 20}}},
      {kGemmTf32, with({{"tile", "[64, 32, 16]"}, {"warp_tile", "[16, 8]"}}), {{"M", 37}, {"N", 72}, {"K", 24}}},
      {kMmaBatchedTf32, with({{"tile", "[32, 32, 32]"}, {"warp_tile", "[16, 16]"}}), {{"BATCH", 3}, {"M", 65}, {"N", 36}, {"K", 44}}},
      {batched_epilogue, with({{"tile", "[32, 64, 16]"}, {"stages", "3"}}), {{"BATCH", 2}, {"M", 37}, {"N", 68}, {"K", 41}}},
      {masked, with({{"tile", "[32, 32, 16]"}, {"warp_tile", "[16, 16]"}}), {{"M", 70}, {"N", 68}, {"K", 52}}},
  };
  for (const HostCase& c : cases) expect_host_matches_interpreter(c);
}

// Two emulated SIMT GEMMs of different tiles loaded into one process, as the Python worker loads
// every candidate of a search: each runs on its own shared memory (the emulator's __shared__ arrays
// are function-local statics of the same template instantiation in both libraries), so the second
// one's result is still the interpreter's after the first ran.
TEST(CodegenGemm, TwoEmulatedKernelsInOneProcessKeepTheirOwnSharedMemory) {
  const std::map<std::string, int64_t> sizes = {{"M", 24}, {"N", 32}, {"K", 40}};
  const dsl::Program base = parse(kLinearF32);
  std::vector<double> x(24 * 40), w(32 * 40), b(32);
  uint64_t state = 7;
  for (std::vector<double>* v : {&x, &w, &b})
    for (double& e : *v) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      e = static_cast<double>(static_cast<int64_t>(state >> 11) % 2001 - 1000) / 500.0;
    }
  codegen::HostArrays in = {{"x", x}, {"w", w}, {"b", b}};
  const std::vector<double> want = codegen::interpret(base, sizes, in, codegen::Arithmetic::typed).at("y");
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end());
  std::vector<int64_t> dims;
  for (const std::string& d : base.dims) dims.push_back(sizes.at(d));
  std::vector<void*> handles;
  for (const char* tile : {"[128, 128, 8]", "[64, 64, 16]"}) {
    const dsl::Program p = scheduled(base, {{"tile", tile}, {"split_k", "16"}});
    codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
    ASSERT_TRUE(build.ok) << build.message;
    void* h = dlopen(build.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    handles.push_back(h);
    auto run = reinterpret_cast<int (*)(const ksol_call*)>(dlsym(h, "ksol_run"));
    ASSERT_NE(run, nullptr);
    std::vector<float> y(24 * 32, -1.0f);
    void* tensors[] = {xf.data(), wf.data(), bf.data(), y.data()};
    const ksol_call call{KSOL_ABI_VERSION, 4, tensors, static_cast<int32_t>(dims.size()), dims.data(), nullptr};
    ASSERT_EQ(run(&call), 0) << tile;
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - want[i]) / (1 + std::fabs(want[i])));
    EXPECT_LT(worst, 1e-4) << "tile " << tile << " after " << handles.size() - 1 << " other library(ies) in the process";
  }
  for (void* h : handles) dlclose(h);
}

// The generated sources compile with nvcc through ksol's compile path: the SIMT f32 kernel, and
// CUTLASS sm_90a instantiations (the plain bf16 GEMM, the bias + gelu_tanh epilogue, the batched
// bf16 GEMM and the TF32 GEMM). Slow: each CUTLASS compile takes minutes.
TEST(CodegenGemm, GeneratedSourcesCompile) {
  struct Case {
    const char* program;
    Schedule changes;
    Binding binding;
  };
  const std::vector<Case> cases = {
      {kGemmF32, {}, {}},
      {kGemmBf16, {}, kTaskBinding},
      // math = fast: the epilogue's gelu_tanh_fast (h + h tanh_fast(u), h = x / 2) inside CUTLASS's fusion.
      {kGemmBiasGeluTanh, {{"math", "fast"}}, Binding{{"A", "B", "bias", "C"}, {"M", "N", "K"}}},
      {kBatchedBf16, {}, Binding{{"A", "B", "C"}, {"BATCH", "M", "N", "K"}}},
      {kGemmTf32, {}, kTaskBinding},
  };
  std::vector<CompileJob> jobs;
  for (const Case& c : cases) {
    const dsl::Program p = scheduled(parse(c.program), c.changes);
    ASSERT_EQ(refusal(p, c.binding), "(accepted)");
    const std::string name = codegen::kernel_name(p);
    const std::string src = codegen::generate_cuda(p, c.binding);
    EXPECT_TRUE(static_scan(src).empty()) << name;
    const codegen::CompileNeeds needs = codegen::compile_needs(p);
    CompileJob j;
    j.source_path = name + ".cu";
    j.source_text = src;
    j.arch = needs.arch;
    j.extra_flags = needs.extra_flags;
    j.libs = needs.libs;
    jobs.push_back(j);
  }
  EXPECT_EQ(jobs[0].arch, "sm_90");
  EXPECT_EQ(jobs[1].arch, "sm_90a");
  // The card's CUTLASS examples (docs/DSL_CARD.md), compiled here once: one whose source is a
  // case's above costs nothing more.
  int card = 0;
  for (const std::string& text : ksol::test_support::card_examples()) {
    const dsl::Program p = parse(text);
    const codegen::CompileNeeds needs = codegen::compile_needs(p);
    if (needs.arch != "sm_90a") continue;
    ++card;
    // With the binding of the case of the same kernel name, if any (the dims' order is the ABI's).
    Binding bind;
    for (const Case& c : cases)
      if (codegen::kernel_name(scheduled(parse(c.program), c.changes)) == codegen::kernel_name(p)) bind = c.binding;
    const std::string src = codegen::generate_cuda(p, bind);
    bool same = false;
    for (const CompileJob& j : jobs) same = same || j.source_text == src;
    if (same) continue;
    CompileJob j;
    j.source_path = "card_" + codegen::kernel_name(p) + ".cu";
    j.source_text = src;
    j.arch = needs.arch;
    j.extra_flags = needs.extra_flags;
    j.libs = needs.libs;
    jobs.push_back(j);
  }
  EXPECT_EQ(card, 1);
  EXPECT_EQ(jobs.size(), cases.size()) << "the card's GEMM example is meant to be a case above (no extra CUTLASS compile)";
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message.substr(0, 20000);
}
