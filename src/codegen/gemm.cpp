// The gemm family: acc[m, n] = sum(A[m, k] * B[k, n]) over k with row-major A[M, K], B[K, N],
// then an elementwise epilogue into the output C[M, N] (bias broadcasts, activations, ...).
// Batched: acc[b, m, n] = sum(A[b, m, k] * B[b, k, n]) over k, every operand's batch outermost
// and contiguous (CUTLASS's L mode; the SIMT kernel's grid z).
//
// Two code paths:
//  - mainloop = cooperative | pingpong (bf16 / f16 operands, or f32 operands the program rounds
//    with tf32(A[m, k]) * tf32(B[n, k]), B K-major; f32 accumulation, sm_90a): a
//    CUTLASS 3.x kernel built with the sm90 CollectiveBuilder (TMA, WGMMA, warp-specialized),
//    with the epilogue as a CUTLASS fusion operation when it is `out(act(acc [+ bias[n]]))`.
//    Shapes whose rows are not 16-byte aligned (or whose bases are not) run the SIMT kernel
//    (unaligned = auto or simt: `_fbsimt`), or, with unaligned = pad, are copied into zero-padded
//    aligned buffers, multiplied there by the same CUTLASS kernel and the output copied back
//    (`_fbpad`). K = 0 and shapes CUTLASS's can_implement refuses at run time run the SIMT
//    kernel, which is emitted into the same source, so the candidate is correct for every size.
//    The fallback is part of the kernel's name and of docs/DSL.md.
//  - mainloop = simt: a CUDA-core kernel (shared-memory tiles, register blocking, f32 FMA) with
//    any elementwise epilogue; the path for f32 operands (full f32 products, no TF32 rounding;
//    with tf32(...) factors it rounds each staged operand as the program says).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "codegen/common.h"
#include "core/util.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::ReduceOp;
using dsl::Type;

// Shared memory one block may use on sm_90 (227 KB, with the opt-in attribute).
// Static shared memory without the opt-in (the SIMT kernel uses static arrays).
constexpr int64_t kStaticSharedBytes = 48 * 1024;

const std::vector<std::string> kInternal = {
    "row", "col", "tile_m", "tile_n", "acc", "a_frag", "b_frag", "As", "Bs", "k0", "kk", "tid", "tx", "ty", "v",
    "x", "i", "j", "e", "bat", "M_", "N_", "K_", "Gemm", "GemmKernel", "KsolEpilogueFn", "ksol_gemm_simt", "ksol_epilogue",
    "ksol_run_simt", "ksol_run_tma", "g_workspace", "g_workspace_bytes", "args", "status", "hw", "ws_bytes", "cutlass",
    "cute", "grid", "block", "kBM", "kBN", "kBK", "kTM", "kTN", "kThreads", "kTX", "kTY", "epi_out", "kVA", "kVB",
    "kGA", "kGB", "kPadA", "kPadB", "ksol_lds", "frag_row", "frag_col", "g", "kStages", "buf", "more", "kSplitK",
    "ksol_ws", "ksol_k_split", "ksol_splits", "k_begin", "k_stop", "k_end", "k_live", "split", "ksol_gemm_splitk_reduce", "g_simt_ws",
    "g_simt_ws_bytes", "sms", "device", "idx", "total", "want", "k_tiles", "blocks", "bytes", "warp", "lane", "qa", "qb",
    "va", "vb", "pa", "pb", "oka", "okb", "ra", "rb", "kQA", "kQB", "kRowsB", "kLA4", "kLB4", "kLA", "kLB", "l", "r", "q",
    "vec", "tiles_m", "tiles_n", "t", "kVec", "kSplit", "Kernel", "clusters_device", "max_clusters", "smem", "attr",
    "config", "RowStride", "ColStride", "StrideA", "StrideB", "StrideC", "StrideD", "stride_a", "stride_b", "stride_c",
    "stride_d", "TileShape", "ClusterShape", "CollectiveEpilogue", "CollectiveMainloop", "EpilogueDescriptor", "BiasLoad",
    "FusionCallbacks", "ksol", "ksol_run_pad", "ksol_pad_in", "ksol_unpad_out", "KsolPadSeg", "g_pad", "g_pad_bytes",
    "Kp_", "Np_", "seg", "segs", "nseg", "pad_bytes", "off", "Ap_", "Bp_", "Cp_", "biasp_", "base", "esize", "fast_end",
    "ksol_cp_async4", "ksol_cp_async16", "ksol_cp_commit", "ksol_cp_wait", "okc", "ksol_gemm_mma", "ksol_run_mma",
    "ksol_mma_smem", "ksol_mma_tf32", "ksol_tf32_bits", "ksol_bits", "smem_f", "kWM", "kWN", "kWarpsM",
    "kWarpsN", "kMI", "kNI", "kLdA", "kLdB", "kTileA", "kTileB", "kStageFloats", "kSmemBytes", "wm0", "wn0", "mi", "ni",
    "ah", "bh", "kt", "nt", "k_tiles_", "load_tile", "compute", "as", "bs", "c", "ok",
    "stage", "rr", "s", "k", "smem_set"};

struct GemmKnobs {
  int64_t tm = 128, tn = 128, tk = 64;
  int64_t cm = 1, cn = 1;
  int64_t stages = 0;  // 0 = auto
  std::string mainloop = "cooperative", epilogue = "auto", raster = "along_n";
  int64_t swizzle = 1, split_k = 1, stream_k = 0;
  // swap_ab: CUTLASS computes C^T = B^T A^T (its M runs along the output's N, so cooperative's two
  // warpgroups split the tile's N, and the output is column-major in its view).
  int64_t swap_ab = 0;
  // bias_prefetch: the per-column bias is copied into shared memory by the epilogue's producer load
  // warp during the tile's mainloop (ksol::cutlass_ext::Sm90RowBiasPrefetch), not by the consumers
  // when the epilogue starts (CUTLASS's Sm90RowBroadcast: a global round trip and a barrier per tile).
  int64_t bias_prefetch = 0;
  int64_t em = 0, en = 0;  // epilogue_tile: the TMA epilogue's subtile; 0 = auto (CUTLASS's EpilogueTileAuto)
  bool fast_math = false;  // math = fast: the epilogue's exp, division and activations (ExprEmitter::fast_math)
  // unaligned: what the tensor-core path does with shapes TMA cannot take (rows not 16-byte
  // aligned, unaligned bases): "simt" (auto) runs the SIMT kernel, "pad" copies them into
  // zero-padded buffers for the aligned kernel. The SIMT mainloop has no such case ("" there).
  std::string unaligned = "simt";
  // warp_tile (mainloop = mma): each warp's part of the block's tile; 0 = auto.
  int64_t wm = 0, wn = 0;
};

// The program read as a GEMM.
struct Analysis {
  const Definition* acc = nullptr;  // the sum over k
  const Definition* out = nullptr;  // the output (acc itself for a plain f32 GEMM)
  const Param* a = nullptr;
  const Param* b = nullptr;
  std::string m_dim, n_dim, k_dim;
  std::string batch_dim;            // "" unless batched: acc[b, m, n]
  bool b_trans = false;             // B read as B[n, k] (an nn.Linear weight): N rows of K, K-major
  Type in_type = Type::f32;
  bool tf32 = false;                // f32 operands whose factors are tf32(A[m, k]) * tf32(B[k, n])
  // The CUTLASS fusion: out = cast(act(core)), core = acc or acc + f32(bias[n]).
  CutlassFusion fu;
};

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool is_tf32(const Expr& e) { return e.kind == Expr::Kind::call && e.name == "tf32"; }

// e with casts (and a tf32 rounding) peeled off, and the read it reaches (or nullptr).
const Expr* peel_read(const Expr& e) {
  const Expr* x = &e;
  while (x->kind == Expr::Kind::cast || is_tf32(*x)) x = &x->args[0];
  return x->kind == Expr::Kind::read ? x : nullptr;
}

bool reads_name(const Expr& e, const std::string& name) {
  if (e.kind == Expr::Kind::read && e.name == name) return true;
  for (const Expr& a : e.args)
    if (reads_name(a, name)) return true;
  return false;
}

class Analyser {
 public:
  explicit Analyser(const dsl::Program& p) : p_(p) {}

  Analysis run() {
    if (p_.outputs.size() != 1) throw Refused("a gemm program has exactly one output; this one has " + std::to_string(p_.outputs.size()));
    for (const Definition& d : p_.defs) {
      if (d.reduce == ReduceOp::none) continue;
      if (a_.acc) throw Refused("definition '" + d.name + "' is a second reduction; the gemm family fuses one sum over k");
      a_.acc = &d;
    }
    if (!a_.acc || a_.acc->reduce != ReduceOp::sum || a_.acc->indices.size() < 2 || a_.acc->indices.size() > 3)
      throw Refused("the gemm family needs a definition acc[m, n] = sum(A[m, k] * B[k, n]) over k (or acc[b, m, n] for a batch)");
    const Definition& acc = *a_.acc;
    const Expr& body = acc.body;
    if (body.kind != Expr::Kind::binary || body.op != "*")
      throw Refused("the sum of '" + acc.name + "' must be a product A[m, k] * B[k, n], not " + format_expr(body));
    const Expr* ra = peel_read(body.args[0]);
    const Expr* rb = peel_read(body.args[1]);
    const bool batched = acc.indices.size() == 3;
    const size_t o = batched ? 1 : 0;  // m and n after the batch index
    const std::string &m = acc.indices[o], &n = acc.indices[o + 1], &k = acc.over;
    const std::string bv = batched ? acc.indices[0] : "";
    auto is_read = [&](const Expr* r, const std::string& i0, const std::string& i1) {
      if (!r || r->indices.size() != o + 2 || !p_.param(r->name) || p_.param(r->name)->format != "dense") return false;
      for (auto& ix : r->indices)
        if (ix.offset != 0) return false;
      return (!batched || r->indices[0].var == bv) && r->indices[o].var == i0 && r->indices[o + 1].var == i1;
    };
    if ((is_read(rb, m, k) && is_read(ra, k, n)) || (is_read(rb, m, k) && is_read(ra, n, k))) std::swap(ra, rb);
    const std::string b_ = batched ? bv + ", " : "";
    if (is_read(ra, m, k) && is_read(rb, n, k) && m != n) a_.b_trans = true;
    if (!is_read(ra, m, k) || !(is_read(rb, k, n) || a_.b_trans))
      throw Refused("the sum of '" + acc.name + "' must read A[" + b_ + m + ", " + k + "] and B[" + b_ + k + ", " + n +
                    "] (or B[" + b_ + n + ", " + k + "]) from row-major parameters (A[" + (batched ? "BATCH, " : "") + "M, K], B[" +
                    (batched ? "BATCH, " : "") + "K, N] or B[" + (batched ? "BATCH, " : "") + "N, K]); it is " + format_expr(body));
    a_.a = p_.param(ra->name);
    a_.b = p_.param(rb->name);
    if (batched) {
      a_.batch_dim = acc.extents[0];
      if (a_.a->extents[0] != a_.batch_dim || a_.b->extents[0] != a_.batch_dim)
        throw Refused("A, B and the sum must share the batch extent " + a_.batch_dim);
    }
    a_.m_dim = acc.extents[o];
    a_.n_dim = acc.extents[o + 1];
    a_.k_dim = acc.over_extent;
    if (a_.a->type != a_.b->type)
      throw Refused(std::string("A is ") + dsl::type_name(a_.a->type) + " and B is " + dsl::type_name(a_.b->type) +
                    "; the gemm family needs operands of one type");
    a_.in_type = a_.a->type;
    if (a_.in_type != Type::bf16 && a_.in_type != Type::f16 && a_.in_type != Type::f32)
      throw Refused(std::string("operands of type ") + dsl::type_name(a_.in_type) + " are not supported (bf16, f16, f32)");
    // The factors: f32(A) * f32(B) for half operands, A * B for f32 (full f32 products) or
    // tf32(A) * tf32(B) (inputs rounded to TF32, as the tensor cores take f32 data); the sum
    // accumulates in f32.
    int rounded = 0;
    for (const Expr* f : {&body.args[0], &body.args[1]}) {
      const Expr* g = is_tf32(*f) ? &f->args[0] : f;
      rounded += is_tf32(*f);
      bool ok = g->kind == Expr::Kind::read || (g->kind == Expr::Kind::cast && g->type == Type::f32 &&
                                                 g->args[0].kind == Expr::Kind::read);
      if (!ok)
        throw Refused("the factors of the sum must be the reads themselves, their f32 casts or tf32(read), not " +
                      format_expr(*f));
      if (is_tf32(*f) && g->kind != Expr::Kind::read)
        throw Refused("tf32(...) rounds f32 operands; " + format_expr(*f) + " rounds a cast of " +
                      dsl::type_name(g->args[0].type) + " values, which the tensor cores take as they are");
    }
    if (rounded == 1)
      throw Refused("one factor of the sum is rounded to TF32 and the other is not; write tf32(...) around both "
                    "reads (TF32 tensor cores) or neither (f32 products)");
    a_.tf32 = rounded == 2;
    if (acc.type != Type::f32 || body.type != Type::f32)
      throw Refused(std::string("the sum accumulates in ") + dsl::type_name(acc.type) +
                    "; the gemm family accumulates in f32 (write sum(f32(A[m, k]) * f32(B[k, n])))");
    // The output: acc itself, or one elementwise definition over [m, n] reading acc[m, n].
    for (const Definition& d : p_.defs) {
      if (&d == &acc) continue;
      if (!d.is_output)
        throw Refused("intermediate '" + d.name + "' after the sum is not supported; write the epilogue as one output definition");
      if (a_.out) throw Refused("a second output definition '" + d.name + "'");
      a_.out = &d;
    }
    for (const Definition& d : p_.defs) {
      if (&d == a_.acc) break;
      throw Refused("definition '" + d.name + "' before the sum is not supported (a prologue); the gemm family reads A and B directly");
    }
    if (!a_.out) {
      if (!acc.is_output) throw Refused("the program has no output definition");
      a_.out = &acc;
      a_.fu.fusable = true;
      return a_;
    }
    const Definition& out = *a_.out;
    if (out.indices.size() != o + 2 || out.extents[o] != a_.m_dim || out.extents[o + 1] != a_.n_dim || (batched && out.extents[0] != a_.batch_dim))
      throw Refused("output '" + out.name + "' must range over [" + (batched ? a_.batch_dim + ", " : "") + a_.m_dim + ", " + a_.n_dim +
                    "] like the sum");
    check_epilogue_reads(out.body, out);
    check_emittable(out.body);
    fusion(out);
    return a_;
  }

 private:
  // Every read in the epilogue is acc[m, n] or a parameter indexed by the output's indices.
  void check_epilogue_reads(const Expr& e, const Definition& out) {
    if (e.kind == Expr::Kind::read) {
      for (const dsl::IndexExpr& ix : e.indices)
        if (ix.offset != 0) throw Refused("read " + format_expr(e) + " has an offset index; gemm epilogues read whole rows");
      if (e.name == a_.acc->name) {
        bool same = e.indices.size() == out.indices.size();
        for (size_t i = 0; same && i < e.indices.size(); ++i) same = e.indices[i].var == out.indices[i];
        if (!same) throw Refused("the epilogue must read " + a_.acc->name + "[" + join(out.indices, ", ") + "], not " + format_expr(e));
      } else {
        const Param* prm = p_.param(e.name);
        if (!prm) throw Refused("epilogue read " + format_expr(e) + " is not a parameter or the sum");
        if (prm->format != "dense") throw Refused("parameter '" + prm->name + "' is " + prm->format);
        const size_t o = a_.batch_dim.empty() ? 0 : 1;
        for (size_t i = 0; i < e.indices.size(); ++i) {
          const std::string& v = e.indices[i].var;
          if (std::find(out.indices.begin(), out.indices.end(), v) == out.indices.end())
            throw Refused("epilogue read " + format_expr(e) + " uses an index other than the output's");
          const std::string& want = o && v == out.indices[0] ? a_.batch_dim : v == out.indices[o] ? a_.m_dim : a_.n_dim;
          if (prm->extents[i] != want)
            throw Refused("epilogue read " + format_expr(e) + ": index '" + v + "' ranges over " + want + ", not " + prm->extents[i]);
        }
      }
    }
    for (const Expr& a : e.args) check_epilogue_reads(a, out);
  }

  // The epilogue as CUTLASS's fusion out(act(acc [+ bias[n]])), or why it is not one.
  void fusion(const Definition& out) {
    CutlassFusion f = cutlass_fusion(p_, out, a_.acc->name);
    if (f.bias && !a_.batch_dim.empty()) {
      a_.fu.not_fusable = "a batched GEMM's fused epilogue takes no bias (its broadcast over the batch is not set up)";
      return;
    }
    a_.fu = f;
  }

  const dsl::Program& p_;
  Analysis a_;
};

// --- knobs -------------------------------------------------------------------------------------

const FamilyGenerator& family();

std::vector<int64_t> list_knob(const Knobs& k, const std::string& key, size_t n) {
  const dsl::ScheduleValue& v = k.value(key);
  if (v.kind != dsl::ScheduleValue::Kind::list || v.list.size() != n) {
    std::string shape = n == 3 ? "[M, N, K]" : "[M, N]";
    std::string text = v.kind == dsl::ScheduleValue::Kind::list ? list_text(v.list)
                       : v.kind == dsl::ScheduleValue::Kind::integer ? std::to_string(v.integer) : v.ident;
    throw Refused(key + " = " + text + " must be a list " + shape);
  }
  return v.list;
}

int64_t auto_or_int(const Knobs& k, const std::string& key) {
  const dsl::ScheduleValue& v = k.value(key);
  if (v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto") return 0;
  if (v.kind == dsl::ScheduleValue::Kind::integer) return v.integer;
  throw Refused(key + " = " + v.ident + " must be an integer or auto");
}

// Shared memory the TMA epilogue takes from the mainloop: two D staging buffers of the
// epilogue subtile (EpilogueTileAuto: at most 128 x 32; else epilogue_tile), the bias row in f32
// twice, and 1 KB for the barriers.
int64_t epilogue_smem(const GemmKnobs& s, const Analysis& a) {
  if (s.epilogue == "default") return 1024;
  // CUTLASS's M and N (swapped by swap_ab); an explicit subtile has the same area either way.
  const int64_t wm = s.swap_ab ? s.tn : s.tm, wn = s.swap_ab ? s.tm : s.tn;
  const int64_t area = s.em ? s.em * s.en : std::min<int64_t>(wm, 128) * std::min<int64_t>(wn, 32);
  return 2 * area * type_bytes(a.out->type) + (a.fu.bias ? s.tn * 4 * 2 : 0) + 1024;
}

int64_t stage_bytes(const GemmKnobs& s, int elem) { return (s.tm * s.tk + s.tn * s.tk) * elem + 16; }

// The stage count `auto` gives: as many as fit beside the epilogue (CUTLASS's carveout rule).
int64_t auto_stages(const GemmKnobs& s, const Analysis& a, int elem) {
  return (kSharedLimitBytes - epilogue_smem(s, a)) / stage_bytes(s, elem);
}

// warp_tile is mainloop = mma's: refused with any other mainloop unless auto.
void no_warp_tile(const Knobs& k, const GemmKnobs& s) {
  const dsl::ScheduleValue& v = k.value("warp_tile");
  if (!(v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto"))
    throw Refused("warp_tile divides the block's tile among the warps of mainloop = mma; mainloop = " + s.mainloop +
                  " has no warp tiles of its own (warp_tile = auto)");
}

// The knobs of CUTLASS's kernels that the kernels ksol writes itself (mainloop = simt or mma, one
// block a tile, stores straight from registers) have no use for: refused unless at their defaults.
void refuse_cutlass_knobs(const GemmKnobs& s, const std::string& cluster_text) {
  const std::string ml = "mainloop = " + s.mainloop;
  if (s.cm != 1 || s.cn != 1)
    throw Refused(cluster_text + ": clusters multicast TMA loads; " + ml + " runs one block per tile (cluster = [1, 1])");
  if (s.epilogue == "tma") throw Refused("epilogue = tma stores through the TMA; " + ml + " stores directly (epilogue = default or auto)");
  if (s.em) throw Refused("epilogue_tile is the subtile of the TMA epilogue; " + ml + " stores directly (epilogue_tile = auto)");
  if (s.swap_ab != 0) throw Refused("swap_ab = 1 swaps CUTLASS's operands; " + ml + " computes C directly (swap_ab = 0)");
  if (s.bias_prefetch == 1)
    throw Refused("bias_prefetch = 1 loads the bias with the TMA epilogue's producer warp; " + ml + " reads it directly (bias_prefetch = 0)");
}

// Shared memory of one stage of mainloop = mma: A's tile as kBM rows of kBK floats padded by 4,
// B's as kBN rows of kBK (B[n, k]) padded by 4 or kBK rows of kBN padded by 8 (B[k, n]); the pads
// keep a warp's fragment reads on 32 distinct banks.
int64_t mma_stage_bytes(const GemmKnobs& s, const Analysis& a) {
  return (s.tm * (s.tk + 4) + (a.b_trans ? s.tn * (s.tk + 4) : s.tk * (s.tn + 8))) * 4;
}

// The knobs of mainloop = mma: warp-level mma.sync (m16n8k8, TF32 operands, f32 accumulators) fed
// by cp.async stages, storing through the elementwise epilogue like the SIMT kernel.
// The products mainloop = mma takes: TF32 ones (the program's tf32(...) factors), checked as soon
// as the mainloop is read.
void mma_products(const Analysis& a) {
  if (a.in_type != Type::f32)
    throw Refused(std::string("mainloop = mma multiplies f32 operands rounded to TF32; ") + dsl::type_name(a.in_type) +
                  " operands take mainloop = cooperative or pingpong");
  // f32 products as three TF32 products (3xTF32) lose about 2^-21 of each product against f32's
  // 2^-24: on gemm_f32's heavy-tailed inputs they missed its f32 bound by 1.8-2.9x on an H100
  // (docs/results/2026-12-07-h100-3xtf32-gemm.txt), so f32 products stay on CUDA cores.
  if (!a.tf32)
    throw Refused("mainloop = mma multiplies TF32 products (write tf32(A[m, k]) * tf32(B[k, n])); this program asks for "
                  "f32 products, which run on CUDA cores (mainloop = simt)");
}

GemmKnobs mma_knobs(const Knobs& k, const Analysis& a, GemmKnobs s, const std::string& tile_text, const std::string& cluster_text) {
  auto side = [](int64_t v) { return v == 32 || v == 64 || v == 128 || v == 256; };
  if (!side(s.tm) || !side(s.tn)) throw Refused(tile_text + ": mainloop = mma takes tile M and N in {32, 64, 128, 256}");
  if (s.tk != 16 && s.tk != 32) throw Refused(tile_text + ": mainloop = mma takes tile K 16 or 32 (k-steps of 8)");
  if (s.stages == 0) s.stages = 3;
  if (s.stages < 2 || s.stages > 6)
    throw Refused("stages = " + std::to_string(s.stages) + ": mainloop = mma keeps 2 to 6 cp.async stages (or auto: 3)");
  if (s.stages * mma_stage_bytes(s, a) > kSharedLimitBytes)
    throw Refused("stages = " + std::to_string(s.stages) + " of " + tile_text + " take " + std::to_string(s.stages * mma_stage_bytes(s, a)) +
                  " bytes of shared memory: over the 232448 bytes (227 KB) of an sm_90 block");
  refuse_cutlass_knobs(s, cluster_text);
  if (s.swizzle != 1) throw Refused("swizzle = " + std::to_string(s.swizzle) + ": mainloop = mma's tile order is not swizzled (swizzle = 1)");
  if (s.split_k != 1) throw Refused("split_k = " + std::to_string(s.split_k) + ": mainloop = mma does not split K (split_k = 1)");
  if (s.stream_k != 0) throw Refused("stream_k needs the CUTLASS stream-K scheduler; mainloop = mma does not split K (stream_k = 0)");
  s.bias_prefetch = 0;
  const dsl::ScheduleValue& v = k.value("warp_tile");
  if (v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto") {
    s.wm = std::min<int64_t>(s.tm, 64);
    s.wn = std::min<int64_t>(s.tn, 64);
  } else {
    const std::vector<int64_t> wt = list_knob(k, "warp_tile", 2);
    s.wm = wt[0], s.wn = wt[1];
    const std::string text = "warp_tile = " + list_text(wt);
    if (!(s.wm == 16 || s.wm == 32 || s.wm == 64) || !(s.wn == 8 || s.wn == 16 || s.wn == 32 || s.wn == 64))
      throw Refused(text + ": a warp's tile has M in {16, 32, 64} and N in {8, 16, 32, 64} (m16n8k8 instructions)");
    if (s.tm % s.wm != 0 || s.tn % s.wn != 0) throw Refused(text + " does not divide " + tile_text);
  }
  const int64_t warps = (s.tm / s.wm) * (s.tn / s.wn);
  if (warps > 16)
    throw Refused(tile_text + " in warp tiles of " + list_text({s.wm, s.wn}) + " takes " + std::to_string(warps) +
                  " warps; a block of mainloop = mma has at most 16 (512 threads)");
  // A thread holds wm * wn / 32 accumulators beside its fragments: past 8 warps a block's threads
  // get at most 128 registers each, which warp tiles of more than 32 accumulators a thread spill.
  if (warps > 8 && s.wm * s.wn / 32 > 32)
    throw Refused(tile_text + " in warp tiles of " + list_text({s.wm, s.wn}) + ": " + std::to_string(warps) +
                  " warps of " + std::to_string(s.wm * s.wn / 32) +
                  " accumulators a thread spill (at most 128 registers a thread past 8 warps); use a smaller tile or fewer warps");
  return s;
}

GemmKnobs read_knobs(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, family());
  GemmKnobs s;
  s.mainloop = k.one_of("mainloop", std::vector<std::string>{"cooperative", "pingpong", "simt", "mma"});
  if (s.mainloop != "mma") no_warp_tile(k, s);
  if (s.mainloop == "mma") mma_products(a);
  s.epilogue = k.one_of("epilogue", std::vector<std::string>{"auto", "tma", "default"});
  s.raster = k.one_of("raster", std::vector<std::string>{"along_m", "along_n"});
  s.swizzle = k.one_of("swizzle", {1, 2, 4, 8});
  s.split_k = k.integer("split_k");
  if (s.split_k < 1 || s.split_k > 16) throw Refused("split_k = " + std::to_string(s.split_k) + " must be between 1 and 16");
  s.stream_k = k.one_of("stream_k", {0, 1});
  s.swap_ab = k.one_of("swap_ab", {0, 1});
  // bias_prefetch: auto (-1 until resolved below: 1 where the bias can be prefetched), 0 or 1.
  if (const dsl::ScheduleValue& v = k.value("bias_prefetch"); v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto")
    s.bias_prefetch = -1;
  else if (v.kind == dsl::ScheduleValue::Kind::integer && (v.integer == 0 || v.integer == 1))
    s.bias_prefetch = v.integer;
  else
    throw Refused("bias_prefetch = " + (v.kind == dsl::ScheduleValue::Kind::integer ? std::to_string(v.integer) : v.ident) +
                  " must be auto, 0 or 1");
  s.stages = auto_or_int(k, "stages");
  if (const dsl::ScheduleValue& v = k.value("epilogue_tile"); !(v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto")) {
    const std::vector<int64_t> e = list_knob(k, "epilogue_tile", 2);
    if (e[0] <= 0 || e[1] <= 0) throw Refused("epilogue_tile = " + list_text(e) + ": its sides must be positive");
    s.em = e[0], s.en = e[1];
  }
  s.fast_math = k.one_of("math", std::vector<std::string>{"precise", "fast"}) == "fast";
  if (s.fast_math) check_fast_math(p);
  s.unaligned = k.one_of("unaligned", std::vector<std::string>{"auto", "pad", "simt"});
  if (s.mainloop == "simt" || s.mainloop == "mma") {
    if (s.unaligned != "auto")
      throw Refused("unaligned = " + s.unaligned + " chooses what the TMA mainloops do with shapes TMA cannot take; mainloop = " +
                    s.mainloop + " takes every shape (unaligned = auto)");
    s.unaligned = "";
  } else if (s.unaligned == "auto") {
    s.unaligned = "simt";
  }
  std::vector<int64_t> tile = list_knob(k, "tile", 3), cluster = list_knob(k, "cluster", 2);
  // The family's default tile has K = 64 (16-bit operands); a TF32 program's default is K = 32,
  // and mainloop = mma's 16.
  if (a.tf32 && !p.knob("tile")) tile[2] = 32;
  if (s.mainloop == "mma" && !p.knob("tile")) tile[2] = 16;
  s.tm = tile[0], s.tn = tile[1], s.tk = tile[2];
  s.cm = cluster[0], s.cn = cluster[1];
  const std::string tile_text = "tile = " + list_text(tile);
  const std::string cluster_text = "cluster = " + list_text(cluster);

  if (s.mainloop == "simt") {
    if (!(s.tm == 32 || s.tm == 64 || s.tm == 128) || !(s.tn == 32 || s.tn == 64 || s.tn == 128))
      throw Refused(tile_text + ": mainloop = simt takes tile M and N in {32, 64, 128}");
    if (!(s.tk == 8 || s.tk == 16 || s.tk == 32)) throw Refused(tile_text + ": mainloop = simt takes tile K in {8, 16, 32}");
    // One buffer of A's and B's tiles (rows padded by 4 floats: kPadA, kPadB); stages = 2 holds two.
    const int64_t buffer = s.tk * (s.tm + 4 + s.tn + (a.b_trans ? 4 : 0)) * 4;
    // auto is one buffer: on the H200 the double-buffered kernel was slower at both tiles compared
    // (docs/results/2026-11-30-h200-issue4-sweeps.txt, 8192^3: 64x128x8 31.9 ms with one buffer,
    // 45.5 ms with two; 128x128x8 33.2 ms and 35.0 ms).
    if (s.stages == 0) s.stages = 1;
    if (s.stages != 1 && s.stages != 2)
      throw Refused("stages = " + std::to_string(s.stages) + ": the SIMT mainloop has one shared-memory buffer or two "
                    "(stages = 1, 2 or auto)");
    if (s.stages * buffer > kStaticSharedBytes)
      throw Refused(tile_text + " with stages = " + std::to_string(s.stages) + " needs " + std::to_string(s.stages * buffer) +
                    " bytes of shared memory; the SIMT kernel's static tiles take at most 49152");
    refuse_cutlass_knobs(s, cluster_text);
    if (s.swizzle != 1) throw Refused("swizzle = " + std::to_string(s.swizzle) + ": the SIMT kernel's tile order is not swizzled (swizzle = 1)");
    if (s.stream_k != 0)
      throw Refused("stream_k needs the CUTLASS stream-K scheduler; mainloop = simt splits K with split_k");
    s.bias_prefetch = 0;
    return s;
  }
  if (s.mainloop == "mma") return mma_knobs(k, a, s, tile_text, cluster_text);

  // Tensor cores.
  if (a.in_type == Type::f32 && !a.tf32)
    throw Refused("mainloop = " + s.mainloop +
                  ": f32 operands reach the tensor cores only as TF32, which rounds the inputs to 10 mantissa bits; the "
                  "program asks for f32 products (write tf32(A[m, k]) * tf32(B[k, n]) for TF32), so mainloop must be simt");
  if (a.tf32 && !a.b_trans)
    throw Refused("mainloop = " + s.mainloop + ": a TF32 GEMM on the tensor cores takes B as B[n, k] (K-major, both "
                  "operands straight from shared memory); with a row-major B[K, N] CUTLASS's TF32 mainloop (its "
                  "register-sourced, swapped-operand path) gave wrong results on the H200 "
                  "(docs/results/2026-12-01-h200-issue4-g2.txt), so mainloop must be simt or mma");
  const int elem = type_bytes(a.in_type);
  // The swapped kernel has been run through the gates on a GPU for 16-bit, unbatched programs only.
  if (s.swap_ab && (a.tf32 || !a.batch_dim.empty()))
    throw Refused(std::string("swap_ab = 1 is implemented for unbatched GEMMs of 16-bit operands (the ones checked on the "
                              "H200); this one is ") + (a.tf32 ? "a TF32 GEMM" : "batched") + " (swap_ab = 0)");
  // CUTLASS's M and N: with swap_ab = 1 its M is the tile's N.
  const int64_t wm = s.swap_ab ? s.tn : s.tm, wn = s.swap_ab ? s.tm : s.tn;
  const std::string swapped = s.swap_ab ? " (with swap_ab = 1 CUTLASS's M is the tile's N and its N the tile's M)" : "";
  if (!(wm == 64 || wm == 128 || wm == 256))
    throw Refused(tile_text + ": WGMMA tiles take M in {64, 128, 256} per block" + swapped);
  if (wn < 8 || wn > 256 || wn % 8 != 0) throw Refused(tile_text + ": WGMMA takes N a multiple of 8 up to 256" + swapped);
  if (s.tn % 16 != 0 && !a.b_trans && !s.swap_ab)
    throw Refused(tile_text + ": B is N-major (row-major B[K, N]), and its shared-memory swizzle needs N a multiple of 16");
  if (elem == 2 && s.tk != 64)
    throw Refused(tile_text + ": tile K must be 64 for 16-bit operands (one 128-byte swizzle row per stage)");
  if (elem == 4 && s.tk != 32)
    throw Refused(tile_text + ": tile K must be 32 for TF32 operands (one 128-byte swizzle row of f32 per stage)");
  if (s.mainloop == "cooperative" && wm < 128)
    throw Refused(tile_text + (s.swap_ab ? ": mainloop = cooperative with swap_ab = 1 splits the tile's N across two consumer warpgroups of 64 columns, so N >= 128"
                                         : ": mainloop = cooperative splits the tile's M across two consumer warpgroups of 64 rows, so M >= 128"));
  const int64_t consumers = s.mainloop == "cooperative" ? 256 : 128;
  const int64_t regs = s.tm * s.tn / consumers;
  if (regs > 128)
    throw Refused(tile_text + " with mainloop = " + s.mainloop + " holds " + std::to_string(regs) +
                  " f32 accumulators per consumer thread; at most 128 fit in the registers");
  if (!(s.cm == 1 || s.cm == 2 || s.cm == 4) || !(s.cn == 1 || s.cn == 2 || s.cn == 4) || s.cm * s.cn > 4)
    throw Refused(cluster_text + ": cluster sizes are 1, 2 or 4 with at most 4 blocks per cluster");
  if (s.mainloop == "pingpong" && (s.split_k != 1 || s.stream_k != 0))
    throw Refused("split_k / stream_k use the stream-K tile scheduler, which CUTLASS runs with mainloop = cooperative only");
  if (s.split_k > 1 && s.stream_k == 1)
    throw Refused("split_k = " + std::to_string(s.split_k) + " and stream_k = 1 are two decompositions; pick one");
  if (s.epilogue == "default" && !a.fu.identity)
    throw Refused("epilogue = default (no shared memory) applies no fusion; this epilogue (" + a.fu.tag +
                  ") needs epilogue = tma or auto");
  if (s.epilogue == "default" && a.fu.bias)
    throw Refused("epilogue = default (no shared memory) has no bias broadcast; the bias needs epilogue = tma or auto");
  if (s.bias_prefetch == -1) s.bias_prefetch = a.fu.bias && !s.swap_ab && s.epilogue != "default" ? 1 : 0;
  if (s.bias_prefetch) {
    if (!a.fu.bias)
      throw Refused("bias_prefetch = 1 prefetches a per-column bias; this epilogue adds none (bias_prefetch = 0)");
    if (s.swap_ab)
      throw Refused("bias_prefetch = 1 prefetches the bias of CUTLASS's columns; with swap_ab = 1 it is per row of CUTLASS's "
                    "output and read straight into registers (bias_prefetch = 0)");
  }
  if (s.em) {
    const std::string e = "epilogue_tile = " + list_text({s.em, s.en});
    if (s.epilogue == "default")
      throw Refused(e + " is the subtile of the TMA epilogue; epilogue = default stores from registers (epilogue_tile = auto)");
    const int64_t want_m = s.mainloop == "cooperative" ? 128 : 64;
    // In CUTLASS's view: with swap_ab = 1 the subtile's columns are its rows.
    const int64_t sm = s.swap_ab ? s.en : s.em, sn = s.swap_ab ? s.em : s.en;
    if (sm != want_m)
      throw Refused(e + ": mainloop = " + s.mainloop + " stores subtiles of " + std::to_string(want_m) +
                    (s.swap_ab ? " columns (swap_ab = 1: " : " rows (") +
                    "CUTLASS's sm_90 epilogue: 128 for the two warpgroups of cooperative, 64 for one of pingpong)");
    if (sn < 16 || sn % 16 != 0 || wn % sn != 0)
      throw Refused(e + (s.swap_ab ? ": its M must be a multiple of 16 that divides the tile's M ("
                                   : ": its N must be a multiple of 16 that divides the tile's N (") +
                    std::to_string(wn) + ")");
    // Its M divides the tile's: WGMMA tiles have M 64, 128 or 256, and cooperative M >= 128.
  }
  if (!a.fu.fusable)
    throw Refused("mainloop = " + s.mainloop + ": the epilogue has no exact CUTLASS fusion (" + a.fu.not_fusable +
                  "); it must be out(f(acc)) or out(f(acc + bias[n])); use mainloop = simt");
  const int64_t per_stage = stage_bytes(s, elem);
  const int64_t epi = epilogue_smem(s, a);
  if (s.stages == 0) {
    if (auto_stages(s, a, elem) < 2)
      throw Refused(tile_text + ": not even two stages fit in 227 KB of shared memory");
  } else {
    if (s.stages < 2 || s.stages > 8) throw Refused("stages = " + std::to_string(s.stages) + " must be between 2 and 8, or auto");
    if (s.stages * per_stage + epi > kSharedLimitBytes)
      throw Refused("stages = " + std::to_string(s.stages) + " of " + tile_text + " take " + std::to_string(s.stages * per_stage) +
                    " bytes of shared memory, plus about " + std::to_string(epi) + " for the epilogue: over the 232448 bytes (227 KB) of an sm_90 block");
  }
  return s;
}

std::string name_of(const GemmKnobs& s, const Analysis& a) {
  std::string n = std::string(a.batch_dim.empty() ? "gemm_" : "bgemm_") + (a.tf32 ? "tf32" : dsl::type_name(a.in_type)) + "_" + std::to_string(s.tm) + "x" + std::to_string(s.tn) +
                  "x" + std::to_string(s.tk);
  if (s.mainloop == "mma") {
    n += "_mma";
    n += "_w" + std::to_string(s.wm) + "x" + std::to_string(s.wn) + "_s" + std::to_string(s.stages);
    if (a.b_trans) n += "_bnk";
  } else if (s.mainloop == "simt") {
    n += "_simt";
    if (s.stages == 2) n += "_db";  // double-buffered
    if (s.split_k > 1) n += "_sk" + std::to_string(s.split_k);  // K split up to this many ways
    if (a.b_trans) n += "_bnk";  // B read as B[n, k]
  } else {
    if (a.b_trans) n += "_bnk";
    n += "_c" + std::to_string(s.cm) + "x" + std::to_string(s.cn);
    n += s.stages ? "_s" + std::to_string(s.stages) : "_sauto";
    n += s.mainloop == "cooperative" ? "_coop" : "_pp";
    if (s.epilogue == "default") n += "_nosmem";
    if (s.em) n += "_e" + std::to_string(s.em) + "x" + std::to_string(s.en);
    if (s.swizzle != 1) n += "_sw" + std::to_string(s.swizzle);
    if (s.split_k > 1) n += "_sk" + std::to_string(s.split_k);
    if (s.stream_k) n += "_streamk";
    if (s.swap_ab) n += "_swab";
    if (s.bias_prefetch) n += "_bpf";
    // What the tensor-core path does with shapes TMA cannot take is in the name, so a timing of
    // such a shape is never mistaken for the aligned kernel's.
    n += s.unaligned == "pad" ? "_fbpad" : "_fbsimt";
  }
  n += s.raster == "along_m" ? "_rm" : "_rn";
  if (!a.fu.tag.empty()) n += "_" + a.fu.tag;
  else if (!a.fu.fusable) n += "_epi";
  if (s.fast_math) n += "_fast";
  return n;
}

void check(const dsl::Program& p, const Binding& b) {
  if (p.family != "gemm") throw Refused("the program is in the " + p.family + " family, not gemm");
  Analysis a = Analyser(p).run();
  read_knobs(p, a);
  resolve_binding(p, b);
}

}  // namespace

bool gemm_allows_tensor_cores(const dsl::Program& p) {
  try {
    const Analysis a = Analyser(p).run();
    return a.in_type != Type::f32 || a.tf32;
  } catch (const Refused&) {
    return false;
  }
}

namespace {

std::string kernel_name_of(const dsl::Program& p) {
  Analysis a = Analyser(p).run();
  return name_of(read_knobs(p, a), a);
}

// --- generation --------------------------------------------------------------------------------

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(Analyser(p).run()), s_(read_knobs(p, a_)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Definition& d : p_.defs) names_.add(d.name);
  }

  std::string run() {
    const bool tma = s_.mainloop == "cooperative" || s_.mainloop == "pingpong";
    const bool mma = s_.mainloop == "mma";
    Writer w;
    w.comment(name_of(s_, a_) + ": generated by ksol from the DSL program '" + p_.name + "' (gemm family).");
    for (const Definition& d : p_.defs) w.line("//   " + format_definition(d));
    if (tma) {
      w.comment("CUTLASS 3.x sm90 kernel (TMA loads, WGMMA, warp-specialized " + s_.mainloop +
                " mainloop) for shapes whose rows are 16-byte aligned; the SIMT kernel below for the rest.");
      w.line("#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1");
      w.comment("Device asserts are calls, and a call inside the mainloop serializes the WGMMA pipeline (ptxas C7510).");
      w.line("#ifndef NDEBUG");
      w.line("#define NDEBUG 1");
      w.line("#endif");
    }
    w.raw(includes(p_));
    if (tma) {
      for (const char* h : {"cutlass/cutlass.h", "cute/tensor.hpp", "cutlass/numeric_types.h",
                            "cutlass/gemm/device/gemm_universal_adapter.h", "cutlass/gemm/kernel/gemm_universal.hpp",
                            "cutlass/gemm/collective/collective_builder.hpp",
                            "cutlass/epilogue/collective/collective_builder.hpp", "cutlass/epilogue/fusion/operations.hpp"})
        w.line(std::string("#include <") + h + ">");
      if (s_.bias_prefetch) w.line("#include <ksol/cutlass_row_bias.hpp>");
    }
    w.line();
    Helpers helpers;
    if (a_.tf32) helpers.use("tf32_round", Type::f32);
    if (b_async() || mma) helpers.use("cp_async", Type::f32);
    if (mma) helpers.use("mma_tf32", Type::f32);
    // The epilogue as a device function of (acc, row, col) for the SIMT kernel.
    std::string epi_body = simt_epilogue(helpers);
    std::string act_body;
    if (tma && !a_.fu.identity) act_body = cutlass_activation_code(a_.fu, helpers, s_.fast_math);
    if (!helpers.empty()) w.raw(helpers.source() + "\n");
    if (mma)
      mma_kernel(w, epi_body);
    else
      simt_kernel(w, epi_body);
    if (tma) cutlass_kernel(w, act_body);
    if (tma && s_.unaligned == "pad") pad_path(w);
    ksol_run(w, tma);
    return w.text();
  }

 private:
  std::string id(const std::string& n) const { return names_[n]; }
  // Two buffers of f32 operands with a row-major B[k, n] (the simt schedule's stages = 2): the
  // float4 path copies B's tiles by cp.async straight into the other buffer (16-byte quads, no
  // transposition), so only A's tile is staged through registers.
  bool b_async() const { return s_.mainloop == "simt" && s_.stages == 2 && a_.in_type == Type::f32 && !a_.tf32 && !a_.b_trans; }
  // An operand as the SIMT kernel stores it into shared memory: rounded to TF32 when the program
  // says tf32(...). The registers hold the data as loaded, so that no load waits for its rounding.
  std::string rounded(const std::string& v) const { return a_.tf32 ? "tf32_round(" + v + ")" : v; }

  // Where the epilogue is select(cond, X, Y) (under casts) with cond comparing the output's column
  // with its row plus a constant and Y not reading the sum: the condition, over tile_m and tile_n,
  // under which cond fails at every element of the tile (so the sum is never used there); "" when
  // the epilogue has no such form.
  std::string masked_tile_condition() const {
    if (a_.out == a_.acc) return "";
    const Definition& out = *a_.out;
    const size_t o = a_.batch_dim.empty() ? 0 : 1;
    if (out.indices.size() != o + 2) return "";
    const std::string& mv = out.indices[o];
    const std::string& nv = out.indices[o + 1];
    const Expr* e = &out.body;
    while (e->kind == Expr::Kind::cast) e = &e->args[0];
    if (e->kind != Expr::Kind::call || e->name != "select" || e->args.size() != 3) return "";
    std::function<bool(const Expr&)> reads_sum = [&](const Expr& x) {
      if (x.kind == Expr::Kind::read && x.name == a_.acc->name) return true;
      for (const Expr& a : x.args)
        if (reads_sum(a)) return true;
      return false;
    };
    const Expr& cond = e->args[0];
    if (reads_sum(e->args[2]) || cond.kind != Expr::Kind::compare) return "";
    // A side of the comparison: an index, plus or minus an integer.
    auto linear = [&](const Expr& x, std::string* var, int64_t* off) {
      const Expr* v = &x;
      int64_t c = 0;
      if (x.kind == Expr::Kind::binary && (x.op == "+" || x.op == "-") && x.args[1].kind == Expr::Kind::number &&
          x.args[1].number == std::floor(x.args[1].number)) {
        v = &x.args[0];
        c = static_cast<int64_t>(x.args[1].number) * (x.op == "-" ? -1 : 1);
      }
      if (v->kind != Expr::Kind::index || (v->name != mv && v->name != nv)) return false;
      *var = v->name;
      *off = c;
      return true;
    };
    std::string lv, rv;
    int64_t lo = 0, ro = 0;
    if (!linear(cond.args[0], &lv, &lo) || !linear(cond.args[1], &rv, &ro) || lv == rv) return "";
    // As n OP m + k: kept where the column is at most (<=) or at least (>=) the row plus k.
    std::string op = cond.op;
    if (lv == mv) op = op == "<=" ? ">=" : op == ">=" ? "<=" : op == "<" ? ">" : op == ">" ? "<" : op;
    int64_t k = lv == nv ? ro - lo : lo - ro;
    if (op == "<") op = "<=", k -= 1;
    if (op == ">") op = ">=", k += 1;
    if (op == "<=") return "tile_n > tile_m + (kBM - 1) + (" + std::to_string(k) + ")";
    if (op == ">=") return "tile_n + (kBN - 1) < tile_m + (" + std::to_string(k) + ")";
    return "";
  }

  // The output element from the accumulator `v` at (row, col): the epilogue expression.
  std::string simt_epilogue(Helpers& helpers) {
    if (a_.out == a_.acc) return "v";
    const Definition& out = *a_.out;
    ExprEmitter em;
    em.helpers = &helpers;
    em.fast_math = s_.fast_math;
    em.dim = [&](const std::string& d) { return id(d); };
    const size_t batch_axes = a_.batch_dim.empty() ? 0 : 1;
    em.index = [&](const std::string& v) -> std::string {  // the output element's position
      return batch_axes && v == out.indices[0] ? "bat" : v == out.indices[batch_axes] ? "row" : "col";
    };
    em.read = [&](const Expr& e) -> std::string {
      if (e.name == a_.acc->name) return "v";
      const Param* prm = p_.param(e.name);
      std::string off;
      const size_t o = a_.batch_dim.empty() ? 0 : 1;
      for (size_t i = 0; i < e.indices.size(); ++i) {
        const std::string& v = e.indices[i].var;
        std::string var = o && v == out.indices[0] ? "bat" : v == out.indices[o] ? "row" : "col";
        off = off.empty() ? var : "(" + off + ") * " + id(prm->extents[i]) + " + " + var;
      }
      return id(prm->name) + "[" + (off.empty() ? "0" : off) + "]";
    };
    return em(out.body);
  }

  // Opens a kernel's launcher `fn` (the SIMT or mma kernel's): its tile counts over kBM x kBN,
  // nothing to do for an empty output, 3 past the grid's limits. Returns the batch dim's
  // identifier ("" unbatched).
  std::string open_launcher(Writer& w, const std::string& fn, bool along_m) {
    const std::string M = id(a_.m_dim), N = id(a_.n_dim);
    w.open("static int " + fn + "(" + simt_params() + ", cudaStream_t stream)");
    w.line("const int64_t tiles_m = (" + M + " + kBM - 1) / kBM, tiles_n = (" + N + " + kBN - 1) / kBN;");
    w.line("if (tiles_m == 0 || tiles_n == 0) return 0;");
    w.line(std::string("if (") + (along_m ? "tiles_n" : "tiles_m") + " > 65535) return 3;");
    const std::string nb = a_.batch_dim.empty() ? "" : id(a_.batch_dim);
    if (!nb.empty()) {
      w.line("if (" + nb + " == 0) return 0;");
      w.line("if (" + nb + " > 65535) return 3;");
    }
    return nb;
  }

  // Parameters of the SIMT kernel: every tensor and every dim, by their identifiers.
  std::string simt_params() const {
    std::string s;
    for (const std::string& t : abi_.tensors) {
      const Param* prm = p_.param(t);
      bool input = prm != &p_.outputs[0];
      s += std::string(input ? "const " : "") + cuda_type(prm->type) + "* __restrict__ " + id(t) + ", ";
    }
    for (size_t i = 0; i < p_.dims.size(); ++i) s += "int64_t " + id(p_.dims[i]) + (i + 1 < p_.dims.size() ? ", " : "");
    return s;
  }
  std::string simt_args() const {
    std::string s;
    for (const std::string& t : abi_.tensors) s += id(t) + ", ";
    for (size_t i = 0; i < p_.dims.size(); ++i) s += id(p_.dims[i]) + (i + 1 < p_.dims.size() ? ", " : "");
    return s;
  }

  void simt_kernel(Writer& w, const std::string& epi) {
    // Tile: the simt schedule's, or 64 x 64 x 16 as the fallback of the tensor-core path.
    const bool own = s_.mainloop == "simt";
    const int64_t bm = own ? s_.tm : 64, bn = own ? s_.tn : 64, bk = own ? s_.tk : 16;
    const int kStages = own ? static_cast<int>(s_.stages) : 2;
    const int64_t tm = std::max<int64_t>(1, bm / 16), tn = std::max<int64_t>(1, bn / 16);
    // f32 operands can be read from global memory as float4s where K (and N for B[k, n]) are
    // multiples of 4 and the bases 16-byte aligned; the launcher checks and picks the kernel.
    const bool vec = a_.in_type == Type::f32;
    // split_k > 1 (the simt schedule's): grid z also runs over slices of K, each block's partial
    // sums go to a workspace, and a second kernel adds the slices in order and applies the epilogue.
    const int64_t split_max = own ? s_.split_k : 1;
    const bool split = split_max > 1;
    const std::string A = id(a_.a->name), B = id(a_.b->name), C = id(p_.outputs[0].name);
    const std::string M = id(a_.m_dim), N = id(a_.n_dim), K = id(a_.k_dim);
    // The end of the block's slice of K: K itself without split-K (k_live below where a tile's
    // outputs may all be masked off).
    std::string KE = split ? "k_end" : K;
    w.comment("SIMT GEMM: a " + std::to_string(bm) + " x " + std::to_string(bn) + " output tile per block of " +
              std::to_string((bm / tm) * (bn / tn)) + " threads, each holding " + std::to_string(tm) + " x " +
              std::to_string(tn) + " accumulators in groups of up to 4 consecutive rows and columns (frag_row, "
              "frag_col), so each k step reads a thread's operands from shared memory as float4s and a warp's "
              "stores cover consecutive columns; K advances " + std::to_string(bk) +
              " at a time through shared memory (the next tile staged in registers meanwhile), in f32, "
              "with one FMA per product in increasing k.");
    w.line("constexpr int kBM = " + std::to_string(bm) + ", kBN = " + std::to_string(bn) + ", kBK = " + std::to_string(bk) + ";");
    w.line("constexpr int kTM = " + std::to_string(tm) + ", kTN = " + std::to_string(tn) + ";");
    w.line("constexpr int kTX = kBN / kTN, kTY = kBM / kTM, kThreads = kTX * kTY;");
    w.comment("A thread's rows: kGA groups of kVA consecutive rows, kBM / kGA apart (columns likewise).");
    w.line("constexpr int kVA = kTM < 4 ? kTM : 4, kVB = kTN < 4 ? kTN : 4, kGA = kTM / kVA, kGB = kTN / kVB;");
    w.comment("Rows of As are padded by 4 floats: the transposing stores (consecutive threads along k) spread over "
              "the banks, and rows stay 16-byte aligned for the float4 reads. Bs likewise when B is B[n, k].");
    w.line(std::string("constexpr int kPadA = 4, kPadB = ") + (a_.b_trans ? "4" : "0") + ";");
    w.line("constexpr int kStages = " + std::to_string(kStages) + ";  // shared-memory buffers of A's and B's tiles");
    if (split) w.line("constexpr int kSplitK = " + std::to_string(split_max) + ";  // the most slices of K the launcher takes");
    w.line("__device__ __forceinline__ int frag_row(int ty, int i) { return (i / kVA) * (kBM / kGA) + ty * kVA + i % kVA; }");
    w.line("__device__ __forceinline__ int frag_col(int tx, int j) { return (j / kVB) * (kBN / kGB) + tx * kVB + j % kVB; }");
    w.comment("V consecutive floats of shared memory (16- or 8-byte aligned for V = 4 or 2) into registers.");
    w.open("template <int V> __device__ __forceinline__ void ksol_lds(float* dst, const float* src)");
    w.open("if constexpr (V == 4)");
    w.line("const float4 t = *reinterpret_cast<const float4*>(src);");
    w.line("dst[0] = t.x; dst[1] = t.y; dst[2] = t.z; dst[3] = t.w;");
    w.close();
    w.open("else if constexpr (V == 2)");
    w.line("const float2 t = *reinterpret_cast<const float2*>(src);");
    w.line("dst[0] = t.x; dst[1] = t.y;");
    w.close();
    w.open("else");
    w.line("dst[0] = src[0];");
    w.close();
    w.close();
    w.line();
    w.comment(vec ? "kVec: A's and B's tiles are read as float4s (the launcher checked the alignment); otherwise one "
                    "element per load, bounds-checked."
                  : "kVec is false for 16-bit operands: one element per load, bounds-checked.");
    // Threads of 8 x 8 accumulators ask for two blocks per SM (at most 128 registers a thread). On
    // the H200 that ran 128 x 128 x 8 3-4% faster than the 127 registers ptxas picked without it,
    // two buffers of 128 x 128 x 8 1.44x and of 128 x 128 x 16 1.17x, one buffer of 128 x 128 x 16
    // the same; K = 16 and 32 then spill a little (not compared without the bound at K = 32, nor on
    // the element-wise path). Smaller thread tiles ask nothing: the bound let 64 x 128 x 8 grow from
    // 80 registers (three blocks per SM) to 93 (two), 27% slower, and a bound of one block does the
    // same (docs/results/2026-12-01-h200-simt-gemm-s11.txt).
    if (tm * tn >= 64) w.comment("Threads of 8 x 8 accumulators: two blocks per SM (at most 128 registers a thread).");
    const std::string bounds = tm * tn >= 64 ? "kThreads, 2" : "kThreads";
    const std::string split_params = split ? ", float* __restrict__ ksol_ws, int64_t ksol_k_split, int ksol_splits" : "";
    if (split)
      w.comment("kSplit: this launch runs slices of K (the workspace's); without it the kernel is the unsplit one, the "
                "slice being all of K (the split bookkeeping cost 2.5% at 8192^3 when it stayed in the unsplit launch).");
    w.open(std::string("template <bool kVec") + (split ? ", bool kSplit" : "") +
           "> __global__ void __launch_bounds__(" + bounds + ") ksol_gemm_simt(" + simt_params() + split_params + ")");
    w.line("__shared__ __align__(16) float As[kStages][kBK][kBM + kPadA];");
    w.line("__shared__ __align__(16) float Bs[kStages][kBK][kBN + kPadB];");
    w.comment("A warp is 8 threads along N by 4 along M (kTX and kTY are 16), so its reads of a k step (kVA and kVB "
              "floats a thread) cover at most 128 bytes of As and of Bs: one shared-memory wavefront each.");
    w.line("static_assert(kTX % 8 == 0 && kTY % 4 == 0, \"the warp layout: 8 x 4 threads\");");
    w.line("const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;");
    w.line("const int tx = (warp % (kTX / 8)) * 8 + lane % 8, ty = (warp / (kTX / 8)) * 4 + lane / 8;");
    const bool batched = !a_.batch_dim.empty();
    if (batched && split) {
      w.comment("Grid z: a batch's slices of K together; A, B and C advance by one matrix per batch.");
      w.line("const int64_t bat = kSplit ? blockIdx.z / ksol_splits : blockIdx.z;");
      w.line("const int split = kSplit ? int(blockIdx.z % ksol_splits) : 0;");
    } else if (batched) {
      w.comment("One batch per grid z; A, B and C advance by one matrix each.");
      w.line("const int64_t bat = blockIdx.z;");
    } else if (split) {
      w.line("const int split = kSplit ? int(blockIdx.z) : 0;");
    }
    if (split) {
      w.comment("This block's slice of K: whole kBK tiles, the last one cut at K.");
      w.line("const int64_t k_begin = kSplit ? split * ksol_k_split : 0;");
      w.line("const int64_t k_stop = k_begin + ksol_k_split;");
      w.line("const int64_t k_end = !kSplit ? " + K + " : (k_stop < " + K + " ? k_stop : " + K + ");");
    }
    // The batch's matrices (the whole tensors without a batch).
    const std::string Ab = batched ? "(" + A + " + bat * " + M + " * " + K + ")" : A;
    const std::string Bb = batched ? "(" + B + " + bat * " + K + " * " + N + ")" : B;
    const std::string Cb = batched ? "(" + C + " + bat * " + M + " * " + N + ")" : C;
    const bool along_m = s_.raster == "along_m";
    w.line(std::string("const int64_t tile_m = int64_t(") + (along_m ? "blockIdx.x" : "blockIdx.y") + ") * kBM;");
    w.line(std::string("const int64_t tile_n = int64_t(") + (along_m ? "blockIdx.y" : "blockIdx.x") + ") * kBN;");
    if (const std::string masked = masked_tile_condition(); !masked.empty()) {
      w.comment("The epilogue selects by the output's position and its other branch does not read the sum (a "
                "triangle, torch.tril of a product): where that branch holds for the whole tile, its K range is "
                "empty, the sums stay 0, and the epilogue writes the other branch as always.");
      w.line("const int64_t k_live = (" + masked + ") ? " + (split ? std::string("k_begin") : std::string("0")) + " : " + KE + ";");
      KE = "k_live";
    }
    w.line("float acc[kTM][kTN];");
    w.line("#pragma unroll");
    w.line("for (int i = 0; i < kTM; ++i)");
    w.line("  #pragma unroll");
    w.line("  for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;");
    // Each thread stages kLA elements of A's tile and kLB of B's in registers: the next tile's
    // global loads are issued before the current tile's products, so they are in flight while the
    // FMAs run (one shared-memory buffer, the pipeline in registers). Consecutive threads read
    // consecutive addresses: along k for A[m, k] (and B[n, k]), along n for B[k, n].
    const std::string b_addr = a_.b_trans ? Bb + "[col * " + K + " + k]" : Bb + "[k * " + N + " + col]";
    const std::string b_split = a_.b_trans ? "const int j = e / kBK, kk = e % kBK;" : "const int kk = e / kBN, j = e % kBN;";
    w.line("constexpr int kLA = (kBM * kBK + kThreads - 1) / kThreads, kLB = (kBK * kBN + kThreads - 1) / kThreads;");
    w.line("float ra[kLA], rb[kLB];");
    if (vec) {
      // The float4 staging: a thread's float4s of a tile share one column of quads (q), since
      // kThreads is a multiple of the quads per row; their sources are pointers set once and
      // advanced by the tile's k, so a load costs one add and one compare.
      w.comment("float4 staging (kVec): A's tile is kBM rows of kQA quads along k; B's is kBK rows of kQB quads along n" +
                std::string(a_.b_trans ? " (B[n, k]: kBN rows of kQB quads along k)." : "."));
      w.line("constexpr int kQA = kBK / 4, kQB = " + std::string(a_.b_trans ? "kBK / 4" : "kBN / 4") + ";");
      w.line("constexpr int kRowsB = " + std::string(a_.b_trans ? "kBN" : "kBK") + ";");
      w.line("constexpr int kLA4 = (kBM * kQA + kThreads - 1) / kThreads, kLB4 = (kRowsB * kQB + kThreads - 1) / kThreads;");
      w.line("static_assert(kThreads % kQA == 0 && kThreads % kQB == 0, \"a thread's quads share one column\");");
      w.line(b_async() ? "float4 va[kLA4];  // B's tiles bypass the registers (cp.async)" : "float4 va[kLA4], vb[kLB4];");
      w.line("const float* pa[kLA4];");
      w.line("const float* pb[kLB4];");
      w.line("bool oka[kLA4], okb[kLB4];");
      w.line("const int qa = tid % kQA, qb = tid % kQB;");
      w.open("if constexpr (kVec)");
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA4; ++l)");
      w.line("const int e = tid + l * kThreads, i = e / kQA;");
      w.line("oka[l] = e < kBM * kQA && tile_m + i < " + M + ";");
      w.line("pa[l] = oka[l] ? " + Ab + " + (tile_m + i) * " + K + " + qa * 4 : " + A + ";");
      w.close();
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB4; ++l)");
      w.line("const int e = tid + l * kThreads, r = e / kQB;");
      if (a_.b_trans) {
        w.line("okb[l] = e < kRowsB * kQB && tile_n + r < " + N + ";");
        w.line("pb[l] = okb[l] ? " + Bb + " + (tile_n + r) * " + K + " + qb * 4 : " + B + ";");
      } else {
        w.comment("B's rows are k: the row's bound is checked per tile; the quad's column here.");
        w.line("okb[l] = e < kRowsB * kQB && tile_n + qb * 4 < " + N + ";");
        w.line("pb[l] = okb[l] ? " + Bb + " + int64_t(r) * " + N + " + tile_n + qb * 4 : " + B + ";");
      }
      w.close();
      w.close();
    }
    // bbuf: the buffer B's tile is copied into where b_async() (B bypasses the registers).
    const bool bas = b_async();
    auto async_b = [&](const std::string& kbase, const std::string& bbuf, bool checked) {
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB4; ++l)");
      w.line("const int e = tid + l * kThreads, kk = e / kQB;");
      w.open("if (kRowsB * kQB % kThreads == 0 || e < kRowsB * kQB)");
      w.line(std::string("const bool okc = ") + (checked ? "okb[l] && " + kbase + " + kk < " + KE : std::string("true")) + ";");
      w.line("ksol_cp_async16(&Bs[" + bbuf + "][kk][qb * 4], okc ? pb[l] + " + kbase + " * " + N + " : " + B + ", okc);");
      w.close();
      w.close();
      w.line("ksol_cp_commit();");
    };
    auto load = [&](const std::string& kbase, const std::string& bbuf = "0") {
      if (vec) {
        w.open("if constexpr (kVec)");
        w.line("#pragma unroll");
        w.open("for (int l = 0; l < kLA4; ++l)");
        w.line("va[l] = (oka[l] && " + kbase + " + qa * 4 < " + KE + ") ? *reinterpret_cast<const float4*>(pa[l] + " + kbase +
               ") : make_float4(0.0f, 0.0f, 0.0f, 0.0f);");
        w.close();
        if (bas) {
          async_b(kbase, bbuf, true);
        } else {
          w.line("#pragma unroll");
          w.open("for (int l = 0; l < kLB4; ++l)");
          if (a_.b_trans) {
            w.line("vb[l] = (okb[l] && " + kbase + " + qb * 4 < " + KE + ") ? *reinterpret_cast<const float4*>(pb[l] + " + kbase +
                   ") : make_float4(0.0f, 0.0f, 0.0f, 0.0f);");
          } else {
            w.line("const int kk = (tid + l * kThreads) / kQB;");
            w.line("vb[l] = (okb[l] && " + kbase + " + kk < " + KE + ") ? *reinterpret_cast<const float4*>(pb[l] + " + kbase +
                   " * " + N + ") : make_float4(0.0f, 0.0f, 0.0f, 0.0f);");
          }
          w.close();
        }
        w.close();
        w.open("else");
      }
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("const int e = tid + l * kThreads, i = e / kBK, kk = e % kBK;");
      w.line("const int64_t row = tile_m + i, k = " + kbase + " + kk;");
      w.line("ra[l] = (e < kBM * kBK && row < " + M + " && k < " + KE + ") ? " +
             to_float(Ab + "[row * " + K + " + k]", a_.in_type) + " : 0.0f;");
      w.close();
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB; ++l)");
      w.line("const int e = tid + l * kThreads;");
      w.line(b_split);
      w.line("const int64_t col = tile_n + j, k = " + kbase + " + kk;");
      w.line("rb[l] = (e < kBK * kBN && col < " + N + " && k < " + KE + ") ? " + to_float(b_addr, a_.in_type) + " : 0.0f;");
      w.close();
      if (vec) w.close();
    };
    // The float4 loads of a tile that lies inside M, N and the slice's K: no bounds checks and no
    // zero fill (the launcher's kVec shapes, a block away from the edges, a tile before the last).
    auto load_full = [&](const std::string& kbase, const std::string& bbuf) {
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA4; ++l)");
      w.line("if (kBM * kQA % kThreads == 0 || tid + l * kThreads < kBM * kQA) va[l] = *reinterpret_cast<const float4*>(pa[l] + " +
             kbase + ");");
      w.close();
      if (bas) {
        async_b(kbase, bbuf, false);
        return;
      }
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB4; ++l)");
      w.line("if (kRowsB * kQB % kThreads == 0 || tid + l * kThreads < kRowsB * kQB) vb[l] = *reinterpret_cast<const float4*>(pb[l] + " +
             kbase + (a_.b_trans ? std::string() : " * " + N) + ");");
      w.close();
    };
    // The next tile's loads: unchecked where the block is interior and the tile whole, else checked.
    auto load_next = [&](const std::string& kbase, const std::string& bbuf = "0") {
      if (vec) {
        w.open("if (" + kbase + " + kBK <= fast_end)");
        w.open("if constexpr (kVec)");  // fast_end is 0 in the element instantiation
        load_full(kbase, bbuf);
        w.close();
        w.reopen("else if (" + kbase + " < " + KE + ")");
      } else {
        w.open("if (" + kbase + " < " + KE + ")");
      }
      load(kbase, bbuf);
      w.close();
    };
    // The staged registers into shared-memory buffer `buf`.
    auto store = [&](const std::string& buf) {
      if (vec) {
        w.open("if constexpr (kVec)");
        w.line("#pragma unroll");
        w.open("for (int l = 0; l < kLA4; ++l)");
        w.line("const int e = tid + l * kThreads, i = e / kQA;");
        w.open("if (kBM * kQA % kThreads == 0 || e < kBM * kQA)");
        for (const char* c : {"x", "y", "z", "w"})
          w.line("As[" + buf + "][qa * 4 + " + std::to_string(c[0] == 'w' ? 3 : c[0] - 'x') + "][i] = " +
                 rounded(std::string("va[l].") + c) + ";");
        w.close();
        w.close();
        if (!bas) {
          w.line("#pragma unroll");
          w.open("for (int l = 0; l < kLB4; ++l)");
          w.line("const int e = tid + l * kThreads, r = e / kQB;");
          w.open("if (kRowsB * kQB % kThreads == 0 || e < kRowsB * kQB)");
          if (a_.b_trans) {
            for (const char* c : {"x", "y", "z", "w"})
              w.line("Bs[" + buf + "][qb * 4 + " + std::to_string(c[0] == 'w' ? 3 : c[0] - 'x') + "][r] = " +
                     rounded(std::string("vb[l].") + c) + ";");
          } else if (a_.tf32) {
            w.line("*reinterpret_cast<float4*>(&Bs[" + buf + "][r][qb * 4]) = make_float4(" + rounded("vb[l].x") + ", " +
                   rounded("vb[l].y") + ", " + rounded("vb[l].z") + ", " + rounded("vb[l].w") + ");");
          } else {
            w.line("*reinterpret_cast<float4*>(&Bs[" + buf + "][r][qb * 4]) = vb[l];");
          }
          w.close();
          w.close();
        }
        w.close();
        w.open("else");
      }
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("const int e = tid + l * kThreads;");
      w.line("if (e < kBM * kBK) As[" + buf + "][e % kBK][e / kBK] = " + rounded("ra[l]") + ";");
      w.close();
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB; ++l)");
      w.line("const int e = tid + l * kThreads;");
      w.open("if (e < kBK * kBN)");
      w.line(b_split);
      w.line("Bs[" + buf + "][kk][j] = " + rounded("rb[l]") + ";");
      w.close();
      w.close();
      if (vec) w.close();
    };
    auto products = [&](const std::string& buf) {
      w.line("#pragma unroll");
      w.open("for (int kk = 0; kk < kBK; ++kk)");
      w.line("float a_frag[kTM], b_frag[kTN];");
      w.line("#pragma unroll");
      w.line("for (int g = 0; g < kGA; ++g) ksol_lds<kVA>(a_frag + g * kVA, &As[" + buf + "][kk][frag_row(ty, g * kVA)]);");
      w.line("#pragma unroll");
      w.line("for (int g = 0; g < kGB; ++g) ksol_lds<kVB>(b_frag + g * kVB, &Bs[" + buf + "][kk][frag_col(tx, g * kVB)]);");
      w.line("#pragma unroll");
      w.line("for (int i = 0; i < kTM; ++i)");
      w.line("  #pragma unroll");
      w.line("  for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);");
      w.close();
    };
    const std::string KB = split ? "k_begin" : "0";
    if (vec) {
      w.comment("A block whose tile lies inside M and N loads the K tiles that end by fast_end without bounds checks "
                "(0 elsewhere: no tile does).");
      w.line("const int64_t fast_end = kVec && tile_m + kBM <= " + M + " && tile_n + kBN <= " + N + " ? " + KE + " : 0;");
    }
    load(KB);
    if (kStages == 2) {
      w.comment(std::string("Two buffers: tile t + 1 goes into the other buffer while tile t is multiplied, one barrier per "
                            "tile") + (bas ? "; on the float4 path B's tiles land there by cp.async, waited for before the barrier." : "."));
      store("0");
      if (bas) w.line("ksol_cp_wait<0>();");
      w.line("__syncthreads();");
      w.line("int buf = 0;");
      w.open("for (int64_t k0 = " + KB + "; k0 < " + KE + "; k0 += kBK)");
      w.line("const bool more = k0 + kBK < " + KE + ";");
      load_next("(k0 + kBK)", "buf ^ 1");
      products("buf");
      w.open("if (more)");
      store("buf ^ 1");
      w.close();
      if (bas) w.line("ksol_cp_wait<0>();  // this thread's copies of B's next tile have landed");
      w.line("__syncthreads();");
      w.line("buf ^= 1;");
      w.close();
    } else {
      w.open("for (int64_t k0 = " + KB + "; k0 < " + KE + "; k0 += kBK)");
      store("0");
      w.line("__syncthreads();");
      load_next("(k0 + kBK)");
      products("0");
      w.line("__syncthreads();");
      w.close();
    }
    auto write = [&](const std::string& what) {
      w.line("#pragma unroll");
      w.open("for (int i = 0; i < kTM; ++i)");
      w.line("const int64_t row = tile_m + frag_row(ty, i);");
      w.line("if (row >= " + M + ") continue;");
      w.line("#pragma unroll");
      w.open("for (int j = 0; j < kTN; ++j)");
      w.line("const int64_t col = tile_n + frag_col(tx, j);");
      w.line("if (col >= " + N + ") continue;");
      w.line("const float v = acc[i][j];");
      w.line(what);
      w.close();
      w.close();
    };
    if (split) {
      w.comment("Split K: the slice's raw sums to the workspace ([batch, ] slice, row, col); ksol_gemm_splitk_reduce adds them.");
      w.open("if constexpr (kSplit)");
      write(std::string("ksol_ws[((") + (batched ? "bat * ksol_splits + " : "") + "split) * " + M + " + row) * " + N + " + col] = v;");
      w.reopen("else");
    }
    write(Cb + "[row * " + N + " + col] = " + epi + ";");
    if (split) w.close();
    w.close();
    if (split) {
      w.line();
      w.comment("Split K's second kernel: each output's slices added in slice order (deterministic), then the epilogue.");
      w.open("__global__ void __launch_bounds__(256) ksol_gemm_splitk_reduce(" + simt_params() +
             ", const float* __restrict__ ksol_ws, int ksol_splits)");
      const std::string total = (batched ? id(a_.batch_dim) + " * " : "") + M + " * " + N;
      w.line("const int64_t total = " + total + ";");
      w.open("for (int64_t idx = int64_t(blockIdx.x) * 256 + threadIdx.x; idx < total; idx += int64_t(gridDim.x) * 256)");
      w.line("const int64_t col = idx % " + N + ", row = (idx / " + N + ") % " + M + ";");
      if (batched) w.line("const int64_t bat = idx / (" + M + " * " + N + ");");
      w.line("float v = 0.0f;");
      w.line("for (int split = 0; split < ksol_splits; ++split) v += ksol_ws[((" + std::string(batched ? "bat * ksol_splits + " : "") +
             "split) * " + M + " + row) * " + N + " + col];");
      w.line(Cb + "[row * " + N + " + col] = " + epi + ";");
      w.close();
      w.close();
    }
    w.line();
    const std::string nb = open_launcher(w, "ksol_run_simt", along_m);
    std::string split_args;
    if (split) {
      w.comment("Split K runs only grids that leave an SM without a block (fewer blocks than SMs), in the fewest slices "
                "(up to kSplitK, whole tiles of K each) that give every SM two; other grids run unsplit. On the H200 two "
                "slices of a 2048^3 grid of 256 blocks ran 10% slower than none.");
      w.line("const int64_t k_tiles = (" + K + " + kBK - 1) / kBK;");
      w.line("int ksol_splits = 1;");
      w.open("if (k_tiles > 1)");
      w.line("static int sms = 0;");
      w.open("if (sms == 0)");
      w.line("int device = 0;");
      w.line("if (cudaGetDevice(&device) != cudaSuccess) return 4;");
      w.line("if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 4;");
      w.close();
      w.line("const int64_t blocks = tiles_m * tiles_n" + std::string(batched ? " * " + nb : "") + ";");
      w.line("const int64_t want = blocks < sms ? (2 * int64_t(sms) + blocks - 1) / blocks : 1;");
      w.line("ksol_splits = int(want < kSplitK ? (want < k_tiles ? want : k_tiles) : (kSplitK < k_tiles ? kSplitK : k_tiles));");
      w.close();
      w.line("const int64_t ksol_k_split = ((k_tiles + ksol_splits - 1) / ksol_splits) * kBK;");
      w.comment("Rounding the slices up to whole tiles can leave the last slices empty: drop them.");
      w.line("if (ksol_splits > 1) ksol_splits = int((" + K + " + ksol_k_split - 1) / ksol_k_split);");
      w.line(std::string("if (") + (batched ? nb + " * " : "") + "ksol_splits > 65535) return 3;");
      w.line("static float* g_simt_ws = nullptr;");
      w.line("static size_t g_simt_ws_bytes = 0;");
      w.open("if (ksol_splits > 1)");
      w.line("const size_t bytes = size_t(ksol_splits) * size_t(" + (batched ? nb + " * " : "") + M + " * " + N + ") * sizeof(float);");
      w.open("if (bytes > g_simt_ws_bytes)");
      w.line("if (g_simt_ws) cudaFree(g_simt_ws);");
      w.line("g_simt_ws = nullptr;");
      w.line("g_simt_ws_bytes = 0;");
      w.line("if (cudaMalloc(&g_simt_ws, bytes) != cudaSuccess) return 5;");
      w.line("g_simt_ws_bytes = bytes;");
      w.close();
      w.close();
      w.comment("The workspace and the SM count are the process's: ksol's worker runs one GPU and one stream.");
      split_args = ", g_simt_ws, ksol_k_split, ksol_splits";
    }
    w.line(std::string("const dim3 grid{unsigned(") + (along_m ? "tiles_m" : "tiles_n") + "), unsigned(" +
           (along_m ? "tiles_n" : "tiles_m") + "), " + (batched ? "unsigned(" + nb + (split ? " * ksol_splits" : "") + ")" : split ? "unsigned(ksol_splits)" : "1u") + "};");
    if (vec) {
      w.line("const bool vec = " + K + " % 4 == 0 && " + (a_.b_trans ? "" : N + " % 4 == 0 && ") + "reinterpret_cast<uintptr_t>(" +
             A + ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + B + ") % 16 == 0;");
      if (split) {
        for (const char* v : {"true", "false"}) {
          w.line(std::string(v[0] == 't' ? "if (vec && " : "else if (") + "ksol_splits > 1) ksol_gemm_simt<" + v + ", true><<<grid, kThreads, 0, stream>>>(" +
                 simt_args() + split_args + ");");
          w.line(std::string(v[0] == 't' ? "else if (vec) " : "else ") + "ksol_gemm_simt<" + v + ", false><<<grid, kThreads, 0, stream>>>(" +
                 simt_args() + split_args + ");");
        }
      } else {
        w.line("if (vec) ksol_gemm_simt<true><<<grid, kThreads, 0, stream>>>(" + simt_args() + ");");
        w.line("else ksol_gemm_simt<false><<<grid, kThreads, 0, stream>>>(" + simt_args() + ");");
      }
    } else if (split) {
      w.line("if (ksol_splits > 1) ksol_gemm_simt<false, true><<<grid, kThreads, 0, stream>>>(" + simt_args() + split_args + ");");
      w.line("else ksol_gemm_simt<false, false><<<grid, kThreads, 0, stream>>>(" + simt_args() + split_args + ");");
    } else {
      w.line("ksol_gemm_simt<false><<<grid, kThreads, 0, stream>>>(" + simt_args() + ");");
    }
    if (split) {
      w.open("if (ksol_splits > 1)");
      w.line("if (cudaGetLastError() != cudaSuccess) return 4;");
      w.line("const int64_t total = " + std::string(batched ? nb + " * " : "") + M + " * " + N + ";");
      w.line("const int64_t blocks = (total + 255) / 256;");
      w.line("ksol_gemm_splitk_reduce<<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(" + simt_args() +
             ", g_simt_ws, ksol_splits);");
      w.close();
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
    w.line();
  }

  // mainloop = mma: each warp computes a kWM x kWN part of the block's tile with mma.sync.m16n8k8
  // (TF32 operands, f32 accumulators) from shared-memory stages that cp.async fills kStages - 1
  // tiles ahead; the accumulators go through the elementwise epilogue straight to C.
  void mma_kernel(Writer& w, const std::string& epi) {
    const bool batched = !a_.batch_dim.empty();
    const std::string A = id(a_.a->name), B = id(a_.b->name), C = id(p_.outputs[0].name);
    const std::string M = id(a_.m_dim), N = id(a_.n_dim), K = id(a_.k_dim);
    const std::string Ab = batched ? "(" + A + " + bat * " + M + " * " + K + ")" : A;
    const std::string Bb = batched ? "(" + B + " + bat * " + K + " * " + N + ")" : B;
    const std::string Cb = batched ? "(" + C + " + bat * " + M + " * " + N + ")" : C;
    const bool along_m = s_.raster == "along_m";
    w.comment("Tensor-core GEMM (mma.sync.m16n8k8, TF32 operands, f32 accumulators): a " + std::to_string(s_.tm) + " x " +
              std::to_string(s_.tn) + " output tile per block, " + std::to_string(s_.wm) + " x " + std::to_string(s_.wn) +
              " per warp; K advances " + std::to_string(s_.tk) + " at a time through " + std::to_string(s_.stages) +
              " shared-memory stages filled by cp.async; the operands rounded to TF32 as the program says.");
    w.line("constexpr int kBM = " + std::to_string(s_.tm) + ", kBN = " + std::to_string(s_.tn) + ", kBK = " + std::to_string(s_.tk) + ";");
    w.line("constexpr int kWM = " + std::to_string(s_.wm) + ", kWN = " + std::to_string(s_.wn) + ";");
    w.line("constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN, kThreads = 32 * kWarpsM * kWarpsN;");
    w.line("constexpr int kMI = kWM / 16, kNI = kWN / 8;  // a warp's m16 x n8 instruction tiles");
    w.line("constexpr int kStages = " + std::to_string(s_.stages) + ";");
    w.comment(std::string("A's tile: kBM rows of kBK floats (as in memory), padded by 4. B's: ") +
              (a_.b_trans ? "kBN rows of kBK (B[n, k]), padded by 4." : "kBK rows of kBN (B[k, n]), padded by 8.") +
              " A warp's fragment reads then fall on 32 distinct banks.");
    w.line("constexpr int kLdA = kBK + 4, kLdB = " + std::string(a_.b_trans ? "kBK + 4" : "kBN + 8") + ";");
    w.line("constexpr int kTileA = kBM * kLdA, kTileB = " + std::string(a_.b_trans ? "kBN" : "kBK") + " * kLdB;");
    w.line("constexpr int kStageFloats = kTileA + kTileB;");
    w.line("constexpr int kSmemBytes = kStages * kStageFloats * int(sizeof(float));");
    w.comment("kVec: K (and N for B[k, n]) multiples of 4 and 16-byte aligned bases, so the tiles are copied in 16-byte "
              "quads; otherwise one element per copy. Either way a copy outside the matrices fills zeros.");
    // Warp tiles of up to 64 accumulators a thread in blocks of up to 8 warps ask for two blocks
    // an SM (at most 128 registers a thread), as the SIMT kernel's 8 x 8 threads do.
    const bool two = s_.wm * s_.wn / 32 <= 64 && (s_.tm / s_.wm) * (s_.tn / s_.wn) <= 8;
    w.open(std::string("template <bool kVec> __global__ void __launch_bounds__(kThreads") + (two ? ", 2" : "") +
           ") ksol_gemm_mma(" + simt_params() + ")");
    w.line("extern __shared__ uint4 ksol_mma_smem[];");
    w.line("float* smem_f = reinterpret_cast<float*>(ksol_mma_smem);");
    w.line("const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;");
    w.line("const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;");
    if (batched) w.line("const int64_t bat = blockIdx.z;");
    w.line(std::string("const int64_t tile_m = int64_t(") + (along_m ? "blockIdx.x" : "blockIdx.y") + ") * kBM;");
    w.line(std::string("const int64_t tile_n = int64_t(") + (along_m ? "blockIdx.y" : "blockIdx.x") + ") * kBN;");
    std::string KE = K;
    if (const std::string masked = masked_tile_condition(); !masked.empty()) {
      w.comment("The epilogue's other branch covers the whole tile and does not read the sum: no K tiles there.");
      w.line("const int64_t k_live = (" + masked + ") ? 0 : " + K + ";");
      KE = "k_live";
    }
    w.line("float acc[kMI][kNI][4];");
    w.line("#pragma unroll");
    w.line("for (int mi = 0; mi < kMI; ++mi)");
    w.line("  #pragma unroll");
    w.line("  for (int ni = 0; ni < kNI; ++ni) acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;");
    // One loop of cp.async copies of a `rows` x `cols` tile into `dst` (row stride `ld`), in 16-byte
    // quads or single floats: `at` gives the tile's row r and column c their global indices, `ok`
    // bounds them, `src` is the source address and `base` the tensor's (read by no copy).
    auto copy_loop = [&](bool quads, const std::string& rows, const std::string& cols, const std::string& dst,
                         const std::string& ld, const std::string& at, const std::string& ok, const std::string& src,
                         const std::string& base) {
      const std::string per = quads ? "(" + cols + " / 4)" : cols;
      w.line("#pragma unroll");
      w.open("for (int q = tid; q < " + rows + " * " + per + "; q += kThreads)");
      w.line("const int r = q / " + per + ", c = (q % " + per + ")" + (quads ? " * 4" : "") + ";");
      w.line(at);
      w.line("const bool ok = " + ok + ";");
      w.line(std::string(quads ? "ksol_cp_async16(" : "ksol_cp_async4(") + dst + " + r * " + ld + " + c, ok ? " + src + " : " +
             base + ", ok);");
      w.close();
    };
    // One stage's copies: A's rows along k; B's rows along k (B[n, k]) or along n (B[k, n]).
    auto copies = [&](bool quads) {
      copy_loop(quads, "kBM", "kBK", "as", "kLdA", "const int64_t row = tile_m + r, k = k0 + c;", "row < " + M + " && k < " + KE,
                Ab + " + row * " + K + " + k", A);
      if (a_.b_trans)
        copy_loop(quads, "kBN", "kBK", "bs", "kLdB", "const int64_t col = tile_n + r, k = k0 + c;", "col < " + N + " && k < " + KE,
                  Bb + " + col * " + K + " + k", B);
      else
        copy_loop(quads, "kBK", "kBN", "bs", "kLdB", "const int64_t k = k0 + r, col = tile_n + c;", "k < " + KE + " && col < " + N,
                  Bb + " + k * " + N + " + col", B);
    };
    w.open("auto load_tile = [&](int stage, int64_t k0)");
    w.line("float* as = smem_f + stage * kStageFloats;");
    w.line("float* bs = as + kTileA;");
    w.open("if constexpr (kVec)");
    copies(true);
    w.reopen("else");
    copies(false);
    w.close();
    w.close(("};"));
    // One stage's products.
    w.open("auto compute = [&](int stage)");
    w.line("const float* as = smem_f + stage * kStageFloats;");
    w.line("const float* bs = as + kTileA;");
    w.line("#pragma unroll");
    w.open("for (int kk = 0; kk < kBK; kk += 8)");
    w.line("unsigned ah[kMI][4], bh[kNI][2];");
    w.comment("Lane (g, t) holds A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4] of an m16 tile and B[t][g], "
              "B[t + 4][g] of an n8 tile (k x n).");
    w.line("#pragma unroll");
    w.open("for (int mi = 0; mi < kMI; ++mi)");
    w.line("#pragma unroll");
    w.open("for (int rr = 0; rr < 4; ++rr)");
    w.line("const float x = as[(wm0 + mi * 16 + g + (rr & 1) * 8) * kLdA + kk + t + (rr >> 1) * 4];");
    w.line("ah[mi][rr] = ksol_tf32_bits(x);");
    w.close();
    w.close();
    w.line("#pragma unroll");
    w.open("for (int ni = 0; ni < kNI; ++ni)");
    w.line("#pragma unroll");
    w.open("for (int rr = 0; rr < 2; ++rr)");
    w.line(a_.b_trans ? "const float x = bs[(wn0 + ni * 8 + g) * kLdB + kk + t + rr * 4];"
                      : "const float x = bs[(kk + t + rr * 4) * kLdB + wn0 + ni * 8 + g];");
    w.line("bh[ni][rr] = ksol_tf32_bits(x);");
    w.close();
    w.close();
    w.line("#pragma unroll");
    w.open("for (int mi = 0; mi < kMI; ++mi)");
    w.line("#pragma unroll");
    w.line("for (int ni = 0; ni < kNI; ++ni) ksol_mma_tf32(acc[mi][ni], ah[mi], bh[ni]);");
    w.close();
    w.close();
    w.close("};");
    w.comment("The pipeline: tiles 0 .. kStages - 2 in flight, then per tile: wait for it, a barrier (its copies seen by "
              "every thread, and the stage the next copy refills done with), the copy kStages - 1 tiles ahead, the "
              "products. Every thread commits one group per tile, empty past the end, so the wait counts stay exact.");
    w.line("const int64_t k_tiles_ = (" + KE + " + kBK - 1) / kBK;");
    w.line("#pragma unroll");
    w.open("for (int s = 0; s < kStages - 1; ++s)");
    w.line("if (s < k_tiles_) load_tile(s, int64_t(s) * kBK);");
    w.line("ksol_cp_commit();");
    w.close();
    w.open("for (int64_t kt = 0; kt < k_tiles_; ++kt)");
    w.line("ksol_cp_wait<kStages - 2>();");
    w.line("__syncthreads();");
    w.line("const int64_t nt = kt + kStages - 1;");
    w.line("if (nt < k_tiles_) load_tile(int(nt % kStages), nt * kBK);");
    w.line("ksol_cp_commit();");
    w.line("compute(int(kt % kStages));");
    w.close();
    w.line("ksol_cp_wait<0>();");
    w.comment("Lane (g, t) holds D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1] of each m16 x n8 tile.");
    w.line("#pragma unroll");
    w.open("for (int mi = 0; mi < kMI; ++mi)");
    w.line("#pragma unroll");
    w.open("for (int ni = 0; ni < kNI; ++ni)");
    w.line("#pragma unroll");
    w.open("for (int e = 0; e < 4; ++e)");
    w.line("const int64_t row = tile_m + wm0 + mi * 16 + g + (e >> 1) * 8, col = tile_n + wn0 + ni * 8 + 2 * t + (e & 1);");
    w.line("if (row >= " + M + " || col >= " + N + ") continue;");
    w.line("const float v = acc[mi][ni][e];");
    w.line(Cb + "[row * " + N + " + col] = " + epi + ";");
    w.close();
    w.close();
    w.close();
    w.close();
    w.line();
    const std::string nb = open_launcher(w, "ksol_run_mma", along_m);
    w.line(std::string("const dim3 grid{unsigned(") + (along_m ? "tiles_m" : "tiles_n") + "), unsigned(" +
           (along_m ? "tiles_n" : "tiles_m") + "), " + (batched ? "unsigned(" + nb + ")" : "1u") + "};");
    w.line("const bool vec = " + K + " % 4 == 0 && " + (a_.b_trans ? "" : N + " % 4 == 0 && ") + "reinterpret_cast<uintptr_t>(" +
           A + ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + B + ") % 16 == 0;");
    w.comment("The shared-memory opt-in once a process (ksol's worker runs one GPU).");
    w.line("static bool smem_set = false;");
    w.open("if (kSmemBytes > 48 * 1024 && !smem_set)");
    w.line("if (cudaFuncSetAttribute(ksol_gemm_mma<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) return 4;");
    w.line("if (cudaFuncSetAttribute(ksol_gemm_mma<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) return 4;");
    w.line("smem_set = true;");
    w.close();
    w.line("if (vec) ksol_gemm_mma<true><<<grid, kThreads, kSmemBytes, stream>>>(" + simt_args() + ");");
    w.line("else ksol_gemm_mma<false><<<grid, kThreads, kSmemBytes, stream>>>(" + simt_args() + ");");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
    w.line();
  }

  void cutlass_kernel(Writer& w, const std::string& act) {
    const std::string ta = cutlass_type(a_.in_type), td = cutlass_type(p_.outputs[0].type);
    const bool coop = s_.mainloop == "cooperative";
    const bool nosmem = s_.epilogue == "default";
    if (!a_.fu.identity) cutlass_activation_fn(w, act);
    // CUTLASS's view: with swap_ab it computes C^T = B^T A^T, so its M, N, clusters and subtile
    // are the program's N, M, ... swapped.
    const bool sw = s_.swap_ab != 0;
    const int64_t wm = sw ? s_.tn : s_.tm, wn = sw ? s_.tm : s_.tn, wcm = sw ? s_.cn : s_.cm, wcn = sw ? s_.cm : s_.cn;
    const int64_t wem = sw ? s_.en : s_.em, wen = sw ? s_.em : s_.en;
    if (sw)
      w.comment("swap_ab = 1: CUTLASS computes C^T[N, M] = B^T A^T. Its tile M runs along C's N (cooperative's two "
                "warpgroups split the tile's columns), its A is B and its B is A, and C^T is column-major.");
    w.line("using TileShape = cute::Shape<cute::_" + std::to_string(wm) + ", cute::_" + std::to_string(wn) +
           ", cute::_" + std::to_string(s_.tk) + ">;");
    w.line("using ClusterShape = cute::Shape<cute::_" + std::to_string(wcm) + ", cute::_" + std::to_string(wcn) + ", cute::_1>;");
    if (!sw)
      w.comment(std::string("Row-major A[M, K] is K-major (RowMajor); ") +
                (a_.b_trans ? "B[N, K] is K-major, which CUTLASS's B tag (B as K x N) calls ColumnMajor; "
                            : "row-major B[K, N] is N-major, which CUTLASS's B tag (B as K x N) calls RowMajor; ") +
                "C[M, N] is RowMajor. Alignments are 16 bytes (TMA rows) in elements." +
                std::string(a_.tf32 ? " f32 A and B go to TF32 WGMMAs (the builder's tfloat32_t), both K-major." : ""));
    else
      w.comment(std::string("CUTLASS's A is ") +
                (a_.b_trans ? "B[N, K], K-major (RowMajor); " : "B[K, N] read as N x K, N-major (ColumnMajor); ") +
                "its B is A[M, K] read as K x M, K-major (ColumnMajor); C^T[N, M] is ColumnMajor. Alignments are 16 bytes "
                "(TMA rows) in elements." +
                std::string(a_.tf32 ? " f32 operands go to TF32 WGMMAs (the builder's tfloat32_t), both K-major." : ""));
    const std::string epi_sched = nosmem ? "cutlass::epilogue::NoSmemWarpSpecialized"
                                  : coop ? "cutlass::epilogue::TmaWarpSpecializedCooperative"
                                         : "cutlass::epilogue::TmaWarpSpecialized";
    const std::string elem_c = nosmem ? td : "void";
    const std::string epi_tile = wem ? "cute::Shape<cute::_" + std::to_string(wem) + ", cute::_" + std::to_string(wen) + ">"
                                     : "cutlass::epilogue::collective::EpilogueTileAuto";
    std::string fusion = cutlass_fusion_op(a_.fu, td, elem_c, sw);
    if (s_.bias_prefetch) {
      // The same subtile and load stages the builder derives (its EpilogueDescriptor), asserted below.
      const std::string ns = "cutlass::epilogue::fusion::", rn = "cutlass::FloatRoundStyle::round_to_nearest";
      w.comment("bias_prefetch = 1: the epilogue's function of acc + bias[n] as a visitor tree whose bias leaf is "
                "loaded into shared memory by the epilogue's producer warp during the tile's mainloop "
                "(ksol/cutlass_row_bias.hpp); acc + bias is exact where the fusion's 1 * acc + bias was.");
      w.line("using EpilogueDescriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape, " + epi_tile +
             ", void, " + td + ", " + epi_sched + ">;");
      w.line("using BiasLoad = ksol::cutlass_ext::Sm90RowBiasPrefetch<EpilogueDescriptor::StagesC, typename "
             "EpilogueDescriptor::EpilogueTile, " + cutlass_type(a_.fu.bias->type) + ", float>;");
      const std::string sum = ns + "Sm90EVT<" + ns + "Sm90Compute<cutlass::plus, " + (a_.fu.identity ? td : "float") +
                              ", float, " + rn + ">, " + ns + "Sm90AccFetch, BiasLoad>";
      w.line("using FusionCallbacks = " +
             (a_.fu.identity ? sum : ns + "Sm90EVT<" + ns + "Sm90Compute<KsolEpilogueFn, " + td + ", float, " + rn + ">, " + sum + ">") +
             ";");
      fusion = "FusionCallbacks";
    }
    const std::string c_tag = sw ? "cutlass::layout::ColumnMajor" : "cutlass::layout::RowMajor";
    w.line("using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<");
    w.line(std::string("    ") + "cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,");
    w.line("    " + epi_tile + ", float, float,");
    const std::string align_out = std::to_string(16 / type_bytes(p_.outputs[0].type));
    w.line("    " + elem_c + ", " + c_tag + ", " + align_out + ", " + td + ", " + c_tag + ", " + align_out + ",");
    w.line("    " + epi_sched + ", " + fusion);
    w.line(">::CollectiveOp;");
    if (s_.bias_prefetch) {
      w.line("static_assert(CollectiveEpilogue::DispatchPolicy::StagesC == EpilogueDescriptor::StagesC &&");
      w.line("              cute::is_same_v<typename CollectiveEpilogue::EpilogueTile, typename EpilogueDescriptor::EpilogueTile>,");
      w.line("              \"the bias prefetch's stages and subtile are the epilogue's\");");
    }
    const std::string stages =
        s_.stages ? "cutlass::gemm::collective::StageCount<" + std::to_string(s_.stages) + ">"
                  : "cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>";
    w.line("using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<");
    w.line(std::string("    ") + "cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,");
    const std::string align_in = std::to_string(16 / type_bytes(a_.in_type));
    // B[n, k] (N rows of K) is K-major: CUTLASS's B tag (B as K x N) calls it ColumnMajor. Swapped,
    // CUTLASS's A is B (B[n, k] K-major: RowMajor; B[k, n] N-major: ColumnMajor) and its B is A
    // (K-major: ColumnMajor).
    const std::string b_tag = a_.b_trans ? "cutlass::layout::ColumnMajor" : "cutlass::layout::RowMajor";
    const std::string wa_tag = sw ? (a_.b_trans ? "cutlass::layout::RowMajor" : "cutlass::layout::ColumnMajor") : "cutlass::layout::RowMajor";
    const std::string wb_tag = sw ? "cutlass::layout::ColumnMajor" : b_tag;
    w.line("    " + ta + ", " + wa_tag + ", " + align_in + ", " + ta + ", " + wb_tag + ", " + align_in + ", float,");
    w.line(std::string("    ") + "TileShape, ClusterShape, " + stages + ",");
    w.line(std::string("    ") + (coop ? "cutlass::gemm::KernelTmaWarpSpecializedCooperative" : "cutlass::gemm::KernelTmaWarpSpecializedPingpong"));
    w.line(">::CollectiveOp;");
    const bool streamk = s_.split_k > 1 || s_.stream_k;
    w.line("using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop, "
           "CollectiveEpilogue, " + std::string(streamk ? "cutlass::gemm::StreamKScheduler" : "cutlass::gemm::PersistentScheduler") + ">;");
    w.line("using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;");
    w.line();
    w.line("static void* g_workspace = nullptr;");
    w.line("static size_t g_workspace_bytes = 0;");
    w.line();
    const std::string A = id(a_.a->name), B = id(a_.b->name), C = id(p_.outputs[0].name);
    const std::string M = id(a_.m_dim), N = id(a_.n_dim), K = id(a_.k_dim);
    w.comment("Returns -1 when CUTLASS cannot take the shape (the caller runs the SIMT kernel), else 0 or an error.");
    std::string params = "const " + std::string(cuda_type(a_.in_type)) + "* " + A + ", const " + cuda_type(a_.in_type) + "* " + B + ", ";
    if (a_.fu.bias) params += std::string("const ") + cuda_type(a_.fu.bias->type) + "* " + id(a_.fu.bias->name) + ", ";
    const std::string L = a_.batch_dim.empty() ? "" : id(a_.batch_dim);
    params += std::string(cuda_type(p_.outputs[0].type)) + "* " + C + ", int64_t " + M + ", int64_t " + N + ", int64_t " + K +
              (L.empty() ? "" : ", int64_t " + L) + ", cudaStream_t stream";
    w.open("static int ksol_run_tma(" + params + ")");
    w.line("if (" + M + " > INT32_MAX || " + N + " > INT32_MAX || " + K + " > INT32_MAX" + (L.empty() ? "" : " || " + L + " > INT32_MAX") + ") return -1;");
    w.line("const int M_ = int(" + M + "), N_ = int(" + N + "), K_ = int(" + K + "), L_ = " + (L.empty() ? "1" : "int(" + L + ")") + ";");
    w.line("using StrideA = typename Gemm::GemmKernel::StrideA;");
    w.line("using StrideB = typename Gemm::GemmKernel::StrideB;");
    w.line("using StrideC = typename Gemm::GemmKernel::StrideC;");
    w.line("using StrideD = typename Gemm::GemmKernel::StrideD;");
    w.comment(std::string("(m, k, l) of A at l * M * K + m * K + k; (n, k, l) of B at ") +
              (a_.b_trans ? "l * N * K + n * K + k" : "l * K * N + k * N + n") +
              "; (m, n, l) of C and D at l * M * N + m * N + n (l = 0 without a batch).");
    w.line("using RowStride = cute::Stride<int64_t, cute::Int<1>, int64_t>;");
    w.line("using ColStride = cute::Stride<cute::Int<1>, int64_t, int64_t>;");
    // The B operand's strides (n, k, l), CUTLASS's A's when swapped: (m', k, l) with m' = n.
    const std::string b_stride = a_.b_trans ? "{int64_t(K_), cute::Int<1>{}, int64_t(N_) * K_}" : "{cute::Int<1>{}, int64_t(N_), int64_t(K_) * N_}";
    const std::string b_type = a_.b_trans ? "RowStride" : "ColStride";
    if (!sw) {
      w.line("static_assert(cute::is_same_v<StrideA, RowStride> && cute::is_same_v<StrideB, " + b_type + "> &&");
      w.line("              cute::is_same_v<StrideC, RowStride> && cute::is_same_v<StrideD, RowStride>, \"unexpected stride types\");");
      w.line("const StrideA stride_a{int64_t(K_), cute::Int<1>{}, int64_t(M_) * K_};");
      w.line("const StrideB stride_b" + b_stride + ";");
      w.line("const StrideC stride_c{int64_t(N_), cute::Int<1>{}, int64_t(M_) * N_};");
      w.line("const StrideD stride_d{int64_t(N_), cute::Int<1>{}, int64_t(M_) * N_};");
    } else {
      w.comment("Swapped: CUTLASS's A (m', k, l) is B's (n, k, l); its B (n', k, l) is A's (m, k, l); its D (m', n', l) "
                "is C[l][n'][m'] (column-major: m' = n contiguous).");
      w.line("static_assert(cute::is_same_v<StrideA, " + b_type + "> && cute::is_same_v<StrideB, RowStride> &&");
      w.line("              cute::is_same_v<StrideC, ColStride> && cute::is_same_v<StrideD, ColStride>, \"unexpected stride types\");");
      w.line("const StrideA stride_a" + b_stride + ";");
      w.line("const StrideB stride_b{int64_t(K_), cute::Int<1>{}, int64_t(M_) * K_};");
      w.line("const StrideC stride_c{cute::Int<1>{}, int64_t(N_), int64_t(M_) * N_};");
      w.line("const StrideD stride_d{cute::Int<1>{}, int64_t(N_), int64_t(M_) * N_};");
    }
    w.line("int device = 0;");
    w.line("if (cudaGetDevice(&device) != cudaSuccess) return 4;");
    w.line("cutlass::KernelHardwareInfo hw;");
    w.line("hw.device_id = device;");
    w.line("hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);");
    if (s_.cm * s_.cn > 1) {
      w.comment("The persistent grid: as many clusters as can be resident at once, which the occupancy API counts "
                "with the kernel's shared memory (without it CUTLASS guesses from 18 SMs per GPC, and a cluster "
                "launched beyond those resident waits for one to finish all its tiles). Once per device.");
      w.line("using Kernel = typename Gemm::GemmKernel;");
      w.line("static int clusters_device = -1, max_clusters = 0;");
      w.open("if (device != clusters_device)");
      w.line("const int smem = int(Kernel::SharedStorageSize);");
      w.line("if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return 4;");
      w.line("cudaLaunchAttribute attr{};");
      w.line("attr.id = cudaLaunchAttributeClusterDimension;");
      w.line("attr.val.clusterDim.x = " + std::to_string(wcm) + ";");
      w.line("attr.val.clusterDim.y = " + std::to_string(wcn) + ";");
      w.line("attr.val.clusterDim.z = 1;");
      w.line("cudaLaunchConfig_t config{};");
      w.line("config.gridDim = dim3(" + std::to_string(wcm) + ", " + std::to_string(wcn) + ", 1);");
      w.line("config.blockDim = dim3(Kernel::MaxThreadsPerBlock, 1, 1);");
      w.line("config.dynamicSmemBytes = size_t(smem);");
      w.line("config.attrs = &attr;");
      w.line("config.numAttrs = 1;");
      w.line("if (cudaOccupancyMaxActiveClusters(&max_clusters, cutlass::device_kernel<Kernel>, &config) != cudaSuccess) return 4;");
      w.line("clusters_device = device;");
      w.close();
      w.line("hw.max_active_clusters = max_clusters;");
    }
    w.line("typename Gemm::Arguments args;");
    w.line("args.mode = cutlass::gemm::GemmUniversalMode::kGemm;");
    w.line(sw ? "args.problem_shape = {N_, M_, K_, L_};" : "args.problem_shape = {M_, N_, K_, L_};");
    w.line("args.mainloop.ptr_A = reinterpret_cast<const " + ta + "*>(" + (sw ? B : A) + ");");
    w.line("args.mainloop.dA = stride_a;");
    w.line("args.mainloop.ptr_B = reinterpret_cast<const " + ta + "*>(" + (sw ? A : B) + ");");
    w.line("args.mainloop.dB = stride_b;");
    const std::string bias_ptr =
        a_.fu.bias ? "reinterpret_cast<const " + cutlass_type(a_.fu.bias->type) + "*>(" + id(a_.fu.bias->name) + ")" : "";
    if (s_.bias_prefetch) {
      // The tree's arguments, children first: ((acc, bias, plus), activation).
      const std::string bias_arg = "{" + bias_ptr + "}";
      w.line("args.epilogue.thread = " + (a_.fu.identity ? "{{}, " + bias_arg + ", {}}" : "{{{}, " + bias_arg + ", {}}, {}}") + ";");
    } else {
      w.line("args.epilogue.thread.alpha = 1.0f;");
      w.line("args.epilogue.thread.beta = 0.0f;");
      if (a_.fu.bias) w.line("args.epilogue.thread.bias_ptr = " + bias_ptr + ";");
    }
    w.line("args.epilogue.ptr_C = nullptr;");
    w.line("args.epilogue.dC = stride_c;");
    w.line("args.epilogue.ptr_D = reinterpret_cast<" + td + "*>(" + C + ");");
    w.line("args.epilogue.dD = stride_d;");
    w.line("args.hw_info = hw;");
    // raster is the program's: along its M is along CUTLASS's N when swapped.
    w.line(std::string("args.scheduler.raster_order = decltype(args.scheduler.raster_order)::") +
           ((s_.raster == "along_m") != sw ? "AlongM" : "AlongN") + ";");
    w.line("args.scheduler.max_swizzle_size = " + std::to_string(s_.swizzle) + ";");
    if (streamk) {
      w.line("args.scheduler.splits = " + std::to_string(s_.split_k) + ";");
      w.line(std::string("args.scheduler.decomposition_mode = decltype(args.scheduler.decomposition_mode)::") +
             (s_.stream_k ? "StreamK" : "SplitK") + ";");
      w.line("args.scheduler.reduction_mode = decltype(args.scheduler.reduction_mode)::Deterministic;");
    }
    w.line("Gemm gemm;");
    w.line("if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;");
    w.line("const size_t ws_bytes = Gemm::get_workspace_size(args);");
    w.open("if (ws_bytes > g_workspace_bytes)");
    w.line("if (g_workspace) cudaFree(g_workspace);");
    w.line("g_workspace = nullptr;");
    w.line("g_workspace_bytes = 0;");
    w.line("if (cudaMalloc(&g_workspace, ws_bytes) != cudaSuccess) return 5;");
    w.line("g_workspace_bytes = ws_bytes;");
    w.close();
    w.line("if (gemm.initialize(args, g_workspace, stream) != cutlass::Status::kSuccess) return 6;");
    w.line("if (gemm.run(stream) != cutlass::Status::kSuccess) return 7;");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 8;");
    w.close();
    w.line();
  }

  // The padded path: the operands (and the bias) copied into zero-padded buffers whose rows are
  // 16-byte aligned (K and N rounded up), the aligned kernel run there, and the output's first N
  // columns copied back. The padding adds zero products to the sums (no 0 * inf: a padded column
  // of A only meets a padded row of B) and columns of C that are dropped.
  void pad_path(Writer& w) {
    const std::string A = id(a_.a->name), B = id(a_.b->name), C = id(p_.outputs[0].name);
    const std::string M = id(a_.m_dim), N = id(a_.n_dim), K = id(a_.k_dim);
    const std::string L = a_.batch_dim.empty() ? "" : id(a_.batch_dim);
    const std::string ti = cuda_type(a_.in_type), to = cuda_type(p_.outputs[0].type);
    const int align_in = 16 / type_bytes(a_.in_type);
    const int align_n = std::max(align_in, 16 / type_bytes(p_.outputs[0].type));
    w.comment("One padded copy: src holds L x rows x cols elements of esize bytes, dst L x prows x pcols (zeros outside).");
    w.line("struct KsolPadSeg { const void* src; void* dst; int64_t rows, cols, prows, pcols, total; int esize; };");
    w.line("struct KsolPadSegs { KsolPadSeg seg[3]; int nseg; int64_t L; };");
    w.open("__global__ void ksol_pad_in(KsolPadSegs segs)");
    w.line("int64_t base = 0;");
    w.open("for (int s = 0; s < segs.nseg; ++s)");
    w.line("const KsolPadSeg seg = segs.seg[s];");
    w.line("const int64_t total = seg.total;");
    w.open("for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)");
    w.line("const int64_t c = i % seg.pcols, rr = (i / seg.pcols) % seg.prows, l = i / (seg.pcols * seg.prows);");
    w.line("const bool in = rr < seg.rows && c < seg.cols;");
    w.line("const int64_t from = (l * seg.rows + rr) * seg.cols + c;");
    w.line("if (seg.esize == 2) static_cast<uint16_t*>(seg.dst)[i] = in ? static_cast<const uint16_t*>(seg.src)[from] : uint16_t(0);");
    w.line("else static_cast<uint32_t*>(seg.dst)[i] = in ? static_cast<const uint32_t*>(seg.src)[from] : 0u;");
    w.close();
    w.line("base += total;");
    w.close();
    w.close();
    w.open("__global__ void ksol_unpad_out(const " + to + "* src, " + to + "* dst, int64_t rows, int64_t cols, int64_t pcols, int64_t total)");
    w.open("for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)");
    w.line("const int64_t c = i % cols, r = i / cols;");
    w.line("dst[i] = src[r * pcols + c];");
    w.close();
    w.close();
    w.line("static void* g_pad = nullptr;");
    w.line("static size_t g_pad_bytes = 0;");
    std::string params = "const " + ti + "* " + A + ", const " + ti + "* " + B + ", ";
    if (a_.fu.bias) params += std::string("const ") + cuda_type(a_.fu.bias->type) + "* " + id(a_.fu.bias->name) + ", ";
    params += to + "* " + C + ", int64_t " + M + ", int64_t " + N + ", int64_t " + K + (L.empty() ? "" : ", int64_t " + L) + ", cudaStream_t stream";
    w.comment("Returns -1 when the aligned kernel cannot take the padded shape either (the caller runs the SIMT kernel).");
    w.open("static int ksol_run_pad(" + params + ")");
    const std::string LL = L.empty() ? "int64_t(1)" : L;
    w.line("const int64_t Kp_ = (" + K + " + " + std::to_string(align_in - 1) + ") / " + std::to_string(align_in) + " * " + std::to_string(align_in) + ";");
    w.line("const int64_t Np_ = (" + N + " + " + std::to_string(align_n - 1) + ") / " + std::to_string(align_n) + " * " + std::to_string(align_n) + ";");
    w.line("auto up = [](size_t b) { return (b + 255) / 256 * 256; };");
    w.line("const size_t a_bytes = up(size_t(" + LL + " * " + M + " * Kp_) * sizeof(" + ti + "));");
    w.line("const size_t b_bytes = up(size_t(" + LL + " * Kp_ * Np_) * sizeof(" + ti + "));");
    w.line("const size_t c_bytes = up(size_t(" + LL + " * " + M + " * Np_) * sizeof(" + to + "));");
    if (a_.fu.bias) w.line("const size_t bias_bytes = up(size_t(Np_) * sizeof(" + std::string(cuda_type(a_.fu.bias->type)) + "));");
    w.line("const size_t pad_bytes = a_bytes + b_bytes + c_bytes" + std::string(a_.fu.bias ? " + bias_bytes" : "") + ";");
    w.open("if (pad_bytes > g_pad_bytes)");
    w.line("if (g_pad) cudaFree(g_pad);");
    w.line("g_pad = nullptr;");
    w.line("g_pad_bytes = 0;");
    w.line("if (cudaMalloc(&g_pad, pad_bytes) != cudaSuccess) return 5;");
    w.line("g_pad_bytes = pad_bytes;");
    w.close();
    w.line(ti + "* Ap_ = reinterpret_cast<" + ti + "*>(g_pad);");
    w.line(ti + "* Bp_ = reinterpret_cast<" + ti + "*>(static_cast<char*>(g_pad) + a_bytes);");
    w.line(to + "* Cp_ = reinterpret_cast<" + to + "*>(static_cast<char*>(g_pad) + a_bytes + b_bytes);");
    w.line("KsolPadSegs segs{};");
    w.line("segs.L = " + LL + ";");
    w.line("segs.seg[0] = KsolPadSeg{" + A + ", Ap_, " + M + ", " + K + ", " + M + ", Kp_, " + LL + " * " + M + " * Kp_, int(sizeof(" + ti + "))};");
    if (a_.b_trans)
      w.line("segs.seg[1] = KsolPadSeg{" + B + ", Bp_, " + N + ", " + K + ", Np_, Kp_, " + LL + " * Np_ * Kp_, int(sizeof(" + ti + "))};");
    else
      w.line("segs.seg[1] = KsolPadSeg{" + B + ", Bp_, " + K + ", " + N + ", Kp_, Np_, " + LL + " * Kp_ * Np_, int(sizeof(" + ti + "))};");
    w.line("segs.nseg = 2;");
    std::string bias_arg;
    if (a_.fu.bias) {
      const std::string bt = cuda_type(a_.fu.bias->type);
      w.line(bt + "* biasp_ = reinterpret_cast<" + bt + "*>(static_cast<char*>(g_pad) + a_bytes + b_bytes + c_bytes);");
      w.line("segs.seg[2] = KsolPadSeg{" + id(a_.fu.bias->name) + ", biasp_, 1, " + N + ", 1, Np_, Np_, int(sizeof(" + bt + "))};");
      w.line("segs.nseg = 3;");
      bias_arg = "biasp_, ";
    }
    w.line("const int64_t most = segs.seg[0].total > segs.seg[1].total ? segs.seg[0].total : segs.seg[1].total;");
    w.line("ksol_pad_in<<<int((most + 255) / 256 < 4096 ? (most + 255) / 256 : 4096), 256, 0, stream>>>(segs);");
    w.line("if (cudaGetLastError() != cudaSuccess) return 9;");
    w.line("const int r = ksol_run_tma(Ap_, Bp_, " + bias_arg + "Cp_, " + M + ", Np_, Kp_" + (L.empty() ? "" : ", " + L) + ", stream);");
    w.line("if (r != 0) return r;");
    w.line("const int64_t total = " + LL + " * " + M + " * " + N + ";");
    w.line("ksol_unpad_out<<<int((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096), 256, 0, stream>>>(Cp_, " + C + ", " + LL + " * " + M + ", " + N + ", Np_, total);");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 9;");
    w.close();
    w.line();
  }

  void ksol_run(Writer& w, bool tma) {
    open_ksol_run(w, p_, abi_, names_);
    if (tma) {
      const std::string A = id(a_.a->name), B = id(a_.b->name), C = id(p_.outputs[0].name);
      const std::string N = id(a_.n_dim), K = id(a_.k_dim), M = id(a_.m_dim);
      std::string aligned = "reinterpret_cast<uintptr_t>(" + A + ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + B +
                            ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + C + ") % 16 == 0";
      if (a_.fu.bias) aligned += " && reinterpret_cast<uintptr_t>(" + id(a_.fu.bias->name) + ") % 16 == 0";
      const int align_in = 16 / type_bytes(a_.in_type);
      const int align_n = std::max(align_in, 16 / type_bytes(p_.outputs[0].type));
      w.comment("TMA needs 16-byte aligned rows: K and N multiples of " + std::to_string(align_in) +
                (align_n != align_in ? " and " + std::to_string(align_n) : std::string()) + " elements, and aligned bases.");
      const std::string L = a_.batch_dim.empty() ? "" : id(a_.batch_dim);
      w.open("if (" + M + " > 0 && " + N + " > 0 && " + K + " > 0 && " + (L.empty() ? "" : L + " > 0 && ") + K + " % " +
             std::to_string(align_in) + " == 0 && " + N + " % " + std::to_string(align_n) + " == 0 && " + aligned + ")");
      std::string args = A + ", " + B + ", ";
      if (a_.fu.bias) args += id(a_.fu.bias->name) + ", ";
      args += C + ", " + M + ", " + N + ", " + K + (L.empty() ? "" : ", " + L) + ", stream";
      w.line("const int r = ksol_run_tma(" + args + ");");
      w.line("if (r != -1) return r;");
      if (s_.unaligned == "pad") {
        w.close();
        w.open("else if (" + M + " > 0 && " + N + " > 0 && " + K + " > 0" + (L.empty() ? "" : " && " + L + " > 0") + ")");
        w.line("const int r = ksol_run_pad(" + args + ");");
        w.line("if (r != -1) return r;");
      }
      w.close();
    }
    w.line(std::string("return ") + (s_.mainloop == "mma" ? "ksol_run_mma(" : "ksol_run_simt(") + simt_args() + ", stream);");
    w.close();
  }

  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  GemmKnobs s_;
  Names names_;
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

const FamilyGenerator& family() {
  static const FamilyGenerator f{
      "gemm",
      {
          {"tile", "[128, 128, 64]",
           {"[64, 64, 64]", "[64, 128, 64]", "[64, 256, 64]", "[128, 64, 64]", "[128, 128, 64]", "[128, 192, 64]",
            "[128, 256, 64]", "[256, 64, 64]", "[256, 128, 64]", "[64, 64, 16]", "[128, 128, 32]", "[128, 256, 32]", "[256, 128, 32]", "[128, 128, 8]"}},
          {"cluster", "[1, 1]", {"[1, 1]", "[2, 1]", "[1, 2]", "[2, 2]"}},
          {"stages", "auto", {"auto", "1", "3", "4", "6"}},
          {"mainloop", "cooperative", {"cooperative", "pingpong", "simt", "mma"}},
          // Right after mainloop: other mainloops refuse a warp_tile as soon as both are read.
          {"warp_tile", "auto", {"auto", "[32, 64]"}},
          {"epilogue", "auto", {"auto", "default"}},
          {"raster", "along_n", {"along_n", "along_m"}},
          {"swizzle", "1", {"1", "2", "8"}},
          {"split_k", "1", {"1", "2"}},
          {"stream_k", "0", {"0", "1"}},
          {"swap_ab", "0", {"0"}},
          {"bias_prefetch", "auto", {"auto"}},
          {"math", "precise", {"precise", "fast"}},
          {"epilogue_tile", "auto", {"auto", "[128, 64]", "[64, 64]"}},
          {"unaligned", "auto", {"auto", "pad"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace

const FamilyGenerator& gemm_family() { return family(); }

}  // namespace ksol::codegen::detail
