// The conv family: a 2-D convolution (cross-correlation, as the frameworks compute it), zero
// outside the image, in one of two layouts:
//   NCHW:  Y[n, k, p, q] = sum(X[n, c, p+r+a, q+s+b] * F[k, c, r, s]) over c, r, s
//   NHWC:  Y[n, p, q, k] = sum(X[n, p+r+a, q+s+b, c] * F[k, r, s, c]) over c, r, s
// (a, b constant offsets: -1 for a 3x3 filter with padding 1; p*2+r-1 reads at stride 2,
// p+r*2-2 at dilation 2); f32 data with f32 products, f32 data rounded to TF32
// (tf32(X[...]) * tf32(F[...])), or bf16 / f16 data converted to f32 (f32(X[...]) * f32(F[...]));
// sums in f32; optionally the sum into an intermediate and one output definition after it, the
// epilogue: elementwise (Y[n, k, p, q] = relu(acc[n, k, p, q] + b[k])), applied to the
// accumulators in registers before the store, or a sum, max, min or mean over the filters of such
// an expression (Y[n, p, q] = min(acc[n, k, p, q] + b[k]) over k), combined across the block's
// threads, which then store one value a pixel (a block then holds every filter: K <= its tile's).
//
// Three code paths (the `mainloop` knob; `auto` takes the tensor cores where they apply: tma,
// else mma, else simt):
//  - simt: an implicit GEMM on CUDA cores. GEMM rows are the output pixels (n, p, q) flattened,
//    columns the filters k, and the reduction runs over the filter's own order (c, r, s for KCRS,
//    r, s, c for KRSC), so a filter row is contiguous. A block computes a tile of pixels x
//    filters; the reduction advances a slice at a time through shared memory, the image slice
//    gathered (im2col) while it is loaded, taps outside the image loaded as 0; each thread
//    accumulates a thread_tile of outputs with one fmaf per product.
//  - mma (16-bit data or TF32, either layout): the same implicit GEMM, its slices staged in
//    shared memory the same way (any channel count, padding, stride or dilation), multiplied by
//    warp-level tensor-core instructions (mma.h's WMMA: 16 x 16 x 8 TF32 or 16 x 16 x 16 bf16/f16
//    fragments, f32 accumulators); each warp computes thread_tile = [FM, FN] fragments of 16 x 16
//    outputs, and its accumulators go through a 16 x 16 staging tile in shared memory to the
//    epilogue. The way to the tensor cores for NCHW data, which CUTLASS's conv does not take.
//  - tma (NHWC, 16-bit data or TF32): CUTLASS 3.x's sm90 implicit-GEMM conv (TMA im2col loads of
//    the image, TMA loads of the filter, WGMMA, one producer and one consumer warpgroup), the
//    epilogue as a CUTLASS fusion when it is out(act(acc [+ bias[k]])). Shapes it cannot take
//    (C or K not a multiple of 16 bytes, paddings TMA's im2col mode cannot express, unaligned
//    bases) run the simt kernel emitted into the same source: the kernel's name ends in _fbsimt.
#include <algorithm>
#include <map>

#include "codegen/common.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::Type;

// Static shared memory without the opt-in attribute (the kernel uses static arrays).
constexpr int64_t kStaticSharedBytes = 48 * 1024;

const std::vector<std::string> kInternal = {
    "kBM", "kBN", "kBK", "kTM", "kTN", "kTX", "kTY", "kThreads", "kLA", "kLB", "As", "Bs", "tid", "tx", "ty",
    "taps_r", "taps_s", "taps", "pixels", "plane", "depth", "tile_m", "tile_n", "img", "base_h", "base_w", "live",
    "ra", "rb", "acc", "a_frag", "b_frag", "k0", "kk", "e", "l", "i", "j", "pix", "img_n", "rest", "ch", "rs",
    "tap_r", "tap_s", "hi", "wi", "v", "filt", "out", "tiles_m", "tiles_n", "grid", "oh", "ow", "chans", "r",
    "narrow", "ksol_decode", "ksol_dplane", "ksol_dq", "KsolDiv", "KsolDivs", "ksol_div", "ksol_mod", "ksol_divider",
    "dv", "kFM", "kFN", "kWM", "kWN", "kKS", "kPA", "kPB", "Cs", "warp", "lane", "wm0", "wn0",
    "a_frag", "b_frag", "c_frag", "wmma", "nvcuda", "fr", "fc", "t", "image",
    "ksol_run_tma", "ksol_conv_simt", "TileShape", "ClusterShape", "CollectiveEpilogue", "CollectiveMainloop",
    "ProblemShape", "ConvKernel", "Conv", "KsolEpilogueFn", "cutlass", "cute", "kStages", "slices", "stage", "ahead",
    "into", "s", "src", "ok", "img_h", "img_w", "kPX", "img_p", "img_o", "tap_ok", "tap_bit", "kq", "deep", "tap_off",
    "m", "h0", "w0", "img0", "f0", "f_left", "f_rows", "f_p", "f_step", "kFlat", "flat", "f_at", "f_o", "ksol_red",
    "part", "sl", "red_t"};

// The program read as a convolution: which parameter plays which part, and the extents' names.
struct Analysis {
  const Definition* def = nullptr;  // the sum
  const Definition* epi = nullptr;  // the output's definition after the sum (or the reduction), or nullptr
  const Definition* post = nullptr;  // after a reduction over the filters: the output's definition of it
  const Param* image = nullptr;     // X[N, C, H, W] or X[N, H, W, C]
  const Param* filter = nullptr;    // F[K, C, R, S] or F[K, R, S, C]
  const Param* out = nullptr;       // Y[N, K, P, Q] or Y[N, P, Q, K]
  bool nhwc = false;                // channels last (NHWC image and output, KRSC filter)
  Type in_type = Type::f32;         // the image's and the filter's type
  bool tf32 = false;                // f32 data whose products are tf32(X) * tf32(F)
  int64_t off_h = 0, off_w = 0;   // the constant offsets of the image's spatial reads
  int64_t stride_h = 1, stride_w = 1;  // the output index's coefficients there (h*2+r-1)
  int64_t dil_h = 1, dil_w = 1;        // the filter index's (h+r*2-2)
  CutlassFusion fu;                 // the epilogue as a CUTLASS fusion (the tma path)
  // The epilogue's reduction over the filters (Y[n, h, w] = min(acc[n, k, h, w] + b[k]) over k),
  // none for an elementwise epilogue.
  dsl::ReduceOp reduce = dsl::ReduceOp::none;
  // The indices the epilogue's expression ranges over: the output's, or a reduction's as it reads
  // the sum (the filter index among them).
  std::vector<std::string> space;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool reads_param(const Expr& e, const std::string& name) {
  if (e.kind == Expr::Kind::read && e.name == name) return true;
  for (const Expr& a : e.args)
    if (reads_param(a, name)) return true;
  return false;
}

// The epilogue reads the sum at the indices of its space (the output's, or a reduction's with the
// filter index) and dense inputs at those indices or some of them in order (b[k], Z[n, k, h, w]),
// never the image or the filter; the DSL's recogniser has checked the same, this states what the
// generator relies on.
void epilogue_reads(const dsl::Program& p, const Analysis& a) {
  const Definition& e = *a.epi;
  for (const Expr* r : reads_in(e.body)) {
    if (r->name == a.def->name) {
      for (size_t i = 0; i < r->indices.size(); ++i)
        if (r->indices[i].var != a.space[i] || !r->indices[i].plus.empty() || r->indices[i].offset != 0)
          throw Refused("the epilogue must read the sum as " + a.def->name + "[" + join(a.space) + "], not " +
                        format_expr(*r));
      continue;
    }
    const Param* prm = p.param(r->name);
    if (!prm || prm == a.image || prm == a.filter || prm == a.out)
      throw Refused("the epilogue reads '" + r->name + "'; it may read the sum and inputs other than the image and filter");
    if (prm->format != "dense") throw Refused("the epilogue reads '" + r->name + "', which is " + prm->format);
    size_t next = 0;
    for (const dsl::IndexExpr& ix : r->indices) {
      while (next < a.space.size() && a.space[next] != ix.var) ++next;
      if (next == a.space.size() || !ix.plus.empty() || ix.offset != 0)
        throw Refused("the epilogue reads " + format_expr(*r) + "; an epilogue input is read at the indices [" +
                      join(a.space) + "] or some of them in that order");
      ++next;
    }
  }
  check_emittable(e.body);
}

bool is_tf32(const Expr& e) { return e.kind == Expr::Kind::call && e.name == "tf32"; }

// The reads' exact layout; the DSL's family recogniser has checked the program's shape already.
Analysis analyse(const dsl::Program& p) {
  Analysis a;
  const char* form = "Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s (NCHW) or "
                     "Y[n, h, w, k] = sum(X[n, h+r-1, w+s-1, c] * F[k, r, s, c]) over c, r, s (NHWC)";
  if (p.defs.empty() || p.defs.size() > 3 || (p.defs.size() == 3 && p.defs[1].reduce == dsl::ReduceOp::none) ||
      p.outputs.size() != 1)
    throw Refused(std::string("the conv family generates one output from a sum, ") + form +
                  ", and at most one definition after it (elementwise, or a reduction over the filters, which one "
                  "elementwise output definition may follow)");
  const Definition& d = p.defs.front();
  a.def = &d;
  a.out = &p.outputs.front();
  if (p.defs.size() >= 2) {
    a.epi = &p.defs[1];
    a.reduce = a.epi->reduce;
    const bool reduces = a.reduce == dsl::ReduceOp::sum || a.reduce == dsl::ReduceOp::max ||
                         a.reduce == dsl::ReduceOp::min || a.reduce == dsl::ReduceOp::mean;
    if (p.defs.size() == 3) a.post = &p.defs[2];
    if (a.epi->is_output == (a.post != nullptr) || !(a.reduce == dsl::ReduceOp::none || (reduces && a.epi->over_rest.empty())))
      throw Refused("the definition after the sum, '" + a.epi->name + "', must be the output's definition: elementwise, "
                    "or a sum, max, min or mean over the filters (then the output's, or an intermediate the output's "
                    "definition reads)");
    if (a.post) {
      if (!a.post->is_output || a.post->reduce != dsl::ReduceOp::none || a.post->indices != a.epi->indices)
        throw Refused("'" + a.post->name + "' must be the output's elementwise definition over the reduction's indices");
      for (const Expr* r : reads_in(a.post->body))
        if (r->name != a.epi->name)
          throw Refused("'" + a.post->name + "' reads '" + r->name + "'; after the reduction over the filters the output's "
                        "definition reads the reduction alone");
    }
  } else if (!d.is_output) {
    throw Refused("the sum '" + d.name + "' is not the output and no definition follows it");
  }
  if (d.reduce != dsl::ReduceOp::sum || d.over_rest.size() != 2 || d.indices.size() != 4)
    throw Refused("the conv family generates a 2-D convolution with a batch: " + std::string(form));
  // The factors: the reads themselves (f32 products), tf32(read) both (TF32 products) or
  // f32(read) both (16-bit data).
  auto factor = [&](const Expr& e) -> const Expr* {
    const Expr* x = &e;
    if (is_tf32(*x) || (x->kind == Expr::Kind::cast && x->type == Type::f32)) x = &x->args[0];
    return x->kind == Expr::Kind::read ? x : nullptr;
  };
  const Expr* x = d.body.kind == Expr::Kind::binary && d.body.op == "*" ? factor(d.body.args[0]) : nullptr;
  const Expr* f = d.body.kind == Expr::Kind::binary && d.body.op == "*" ? factor(d.body.args[1]) : nullptr;
  if (!x || !f)
    throw Refused("the sum of '" + d.name + "' must be a product of two reads, each as it is, in tf32(...) or in "
                  "f32(...); it is " + format_expr(d.body));
  auto adds = [](const Expr& r) {
    for (const dsl::IndexExpr& ix : r.indices)
      if (!ix.plus.empty()) return true;
    return false;
  };
  const Expr* fx = &d.body.args[0];  // the image's factor as written
  const Expr* ff = &d.body.args[1];
  if (!adds(*x)) {
    std::swap(x, f);
    std::swap(fx, ff);
  }
  a.image = p.param(x->name);
  a.filter = p.param(f->name);
  // Types: both inputs one type; f32 data either as they are or both in tf32(...); 16-bit data
  // both in f32(...). With an epilogue the output may have any type its expression converts to.
  if (a.image->type != a.filter->type)
    throw Refused("'" + a.image->name + "' is " + type_name(a.image->type) + " and '" + a.filter->name + "' is " +
                  type_name(a.filter->type) + "; the conv family needs an image and a filter of one type");
  a.in_type = a.image->type;
  if (a.in_type != Type::f32 && !is_half(a.in_type))
    throw Refused("'" + a.image->name + "' is " + type_name(a.in_type) + "; the conv family takes f32, bf16 or f16 data");
  if (is_half(a.in_type)) {
    for (const Expr* e : {fx, ff})
      if (e->kind != Expr::Kind::cast)
        throw Refused("the factors of the sum must convert the " + std::string(type_name(a.in_type)) +
                      " data to f32, as f32(X[...]) * f32(F[...]); " + format_expr(*e) + " does not");
  } else {
    for (const Expr* e : {fx, ff})
      if (e->kind == Expr::Kind::cast)
        throw Refused("the factors of the sum read f32 data; " + format_expr(*e) + " casts it (drop the cast)");
    if (is_tf32(*fx) != is_tf32(*ff))
      throw Refused("one factor of the sum is rounded to TF32 and the other is not; write tf32(...) around both reads "
                    "(TF32 products) or neither (f32 products)");
    a.tf32 = is_tf32(*fx);
  }
  if (!a.epi && a.out->type != Type::f32)
    throw Refused("'" + a.out->name + "' is " + type_name(a.out->type) + " and the sum is f32; convert it in an "
                  "output definition after the sum (Y[...] = " + type_name(a.out->type) + "(acc[...]))");
  if (x->indices.size() != 4 || f->indices.size() != 4)
    throw Refused("'" + format_expr(*x) + "' and '" + format_expr(*f) + "' must both have 4 indices (NCHW and KCRS, "
                  "or NHWC and KRSC)");
  // The layout: channels last when the image's last index is plain and its second is not.
  a.nhwc = x->indices[3].plus.empty() && !x->indices[1].plus.empty();
  const int ci = a.nhwc ? 3 : 1, hi = a.nhwc ? 1 : 2, wi = a.nhwc ? 2 : 3;  // the image's c, h, w positions
  const int ki = a.nhwc ? 3 : 1, pi = a.nhwc ? 1 : 2, qi = a.nhwc ? 2 : 3;  // the output's k, p, q positions
  const std::string &n = d.indices[0], &k = d.indices[ki], &h = d.indices[pi], &w = d.indices[qi];
  const std::string& c = x->indices[ci].var;
  // Spatial position i of the image: the output index times the stride plus a reduced index times
  // the dilation plus a constant.
  auto spatial = [&](int i, const std::string& out_index, std::string& tap, int64_t& offset, int64_t& stride,
                     int64_t& dilation) {
    const dsl::IndexExpr& ix = x->indices[i];
    if (ix.plus.empty()) return false;
    if (ix.var == out_index) {
      tap = ix.plus;
      stride = ix.scale;
      dilation = ix.plus_scale;
    } else if (ix.plus == out_index) {
      tap = ix.var;
      stride = ix.plus_scale;
      dilation = ix.scale;
    } else {
      return false;
    }
    offset = ix.offset;
    return true;
  };
  std::string r, s;
  const bool image_ok = x->indices[0].var == n && x->indices[0].plus.empty() && x->indices[0].offset == 0 &&
                        x->indices[ci].plus.empty() && x->indices[ci].offset == 0 &&
                        spatial(hi, h, r, a.off_h, a.stride_h, a.dil_h) && spatial(wi, w, s, a.off_w, a.stride_w, a.dil_w);
  if (!image_ok)
    throw Refused("'" + format_expr(*x) + "' must read the image as " + x->name + "[n, c, h*u+r*d+a, w*v+s*e+b] for " +
                  a.out->name + "[n, k, h, w] (NCHW) or " + x->name + "[n, h*u+r*d+a, w*v+s*e+b, c] for " + a.out->name +
                  "[n, h, w, k] (NHWC) (strides u, v, dilations d, e, offsets a, b integers)");
  // The kernel counts image rows and columns in 32 bits: position = output * stride + tap *
  // dilation + offset, with outputs and taps bounded on the host (ksol_run), the rest here.
  for (int64_t v : {a.off_h, a.off_w})
    if (v < -100000000 || v > 100000000)
      throw Refused("'" + format_expr(*x) + "': an offset of " + std::to_string(v) +
                    " is beyond 10^8, and the kernel counts image rows and columns in 32 bits");
  for (int64_t v : {a.stride_h, a.stride_w, a.dil_h, a.dil_w})
    if (v > 1000000)
      throw Refused("'" + format_expr(*x) + "': a stride or dilation of " + std::to_string(v) + " is beyond 10^6");
  for (int i : {a.nhwc ? 1 : 2, a.nhwc ? 2 : 3})
    if (const std::string& e = a.filter->extents[i]; dsl::extent_is_number(e) && (e.size() > 9 || std::stoll(e) > 100000000))
      throw Refused("the filter's extent " + e + " is beyond 10^8, and the kernel counts image rows and columns in 32 bits");
  const std::vector<std::string> reduced = {d.over, d.over_rest[0], d.over_rest[1]};
  for (const std::string& v : {c, r, s})
    if (std::count(reduced.begin(), reduced.end(), v) != 1)
      throw Refused("'" + format_expr(*x) + "' must read the reduced indices c, r, s (one each) at the channel and "
                    "the two spatial positions");
  if (c == r || c == s || r == s)
    throw Refused("'" + format_expr(*x) + "' must read three different reduced indices");
  auto plain = [&](const Expr& e, const std::vector<std::string>& vars) {
    for (size_t i = 0; i < vars.size(); ++i)
      if (e.indices[i].var != vars[i] || !e.indices[i].plus.empty() || e.indices[i].offset != 0) return false;
    return true;
  };
  const std::vector<std::string> filter_order = a.nhwc ? std::vector<std::string>{k, r, s, c}
                                                       : std::vector<std::string>{k, c, r, s};
  if (!plain(*f, filter_order))
    throw Refused("'" + format_expr(*f) + "' must read the " + (a.nhwc ? "KRSC" : "KCRS") + " filter as " + f->name + "[" +
                  join(filter_order) + "]");
  if (a.filter->zero_outside) throw Refused("'" + a.filter->name + "' is read inside its extents only; drop 'outside 0'");
  if (!a.image->zero_outside)
    throw Refused("'" + a.image->name + "' is read outside its extents; declare it 'outside 0' (zero padding)");
  if (d.type != Type::f32) throw Refused("the sum '" + d.name + "' must be f32");
  if (a.epi && a.reduce == dsl::ReduceOp::none) {
    a.space = a.epi->indices;
  } else if (a.epi) {
    for (const Expr* r : reads_in(a.epi->body))
      if (r->name == d.name) {
        for (const dsl::IndexExpr& ix : r->indices) a.space.push_back(ix.var);
        break;
      }
    if (a.space.size() != 4 || a.space[ki] != a.epi->over)
      throw Refused("'" + a.epi->name + "' reduces over '" + a.epi->over + "'; after a conv the reduction is over the filters, "
                    "as " + a.out->name + "[n, h, w] = min(" + d.name + (a.nhwc ? "[n, h, w, k]" : "[n, k, h, w]") +
                    " + b[k]) over k");
    if ((a.post ? a.epi->type : a.out->type) != Type::f32)
      throw Refused("'" + (a.post ? a.epi->name : a.out->name) + "' is " +
                    type_name(a.post ? a.epi->type : a.out->type) + "; a reduction over the filters gives f32");
  }
  if (a.epi) {
    epilogue_reads(p, a);
    if (a.reduce == dsl::ReduceOp::none) {
      a.fu = cutlass_fusion(p, *a.epi, d.name);
    } else {
      a.fu.fusable = false;
      a.fu.not_fusable = "a reduction over the filters";
    }
  } else {
    a.fu.fusable = true;
  }
  for (const Param& prm : p.inputs)
    if (&prm != a.image && &prm != a.filter && !(a.epi && reads_param(a.epi->body, prm.name)))
      throw Refused("input '" + prm.name + "' is not read by the conv or its epilogue");
  return a;
}

// Shared memory one block may use on sm_90 (227 KB, with the opt-in attribute).

struct Sched {
  bool tma = false;
  bool mma = false;  // warp-level tensor cores on the staged slices
  int64_t fm = 4, fn = 2;  // mma: 16 x 16 fragments per warp (pixels x filters)
  int64_t mma_stages = 1;  // mma: 1 slice staged through registers, or 2-4 shared buffers filled by cp.async
  // The simt kernel's (on the tma path these defaults make its fallback).
  int64_t bm = 64, bn = 64, bk = 16;  // tile: pixels x filters x reduction slice
  int64_t tm = 4, tn = 4;             // thread_tile: pixels x filters per thread
  int64_t threads = 256;
  int64_t shared_bytes = 0;
  // The CUDA-core and mma kernels' image gather: tap masks (each thread one reduction position of
  // kLA pixels, the position decoded once a slice) or a decode of each element's position.
  bool taps = false;
  // mma (TF32): every k-step's fragments of a slice loaded right after its barrier (fragments = slice).
  bool slice_fragments = false;
  // The tma path's: the tile [pixels, filters, channels per stage], the cluster, the stages (0: auto).
  int64_t tile_m = 128, tile_n = 128, tile_k = 64;
  int64_t cm = 1, cn = 1, stages = 0;
};

std::vector<int64_t> list_knob(const Knobs& k, const std::string& key, size_t n, const char* shape) {
  const dsl::ScheduleValue& v = k.value(key);
  if (v.kind != dsl::ScheduleValue::Kind::list || v.list.size() != n) {
    std::string text = v.kind == dsl::ScheduleValue::Kind::list ? list_text(v.list)
                       : v.kind == dsl::ScheduleValue::Kind::integer ? std::to_string(v.integer) : v.ident;
    throw Refused(key + " = " + text + " must be a list " + shape);
  }
  return v.list;
}

const FamilyGenerator& family();

// Why CUTLASS's conv cannot run this program (empty when it can).
std::string why_not_tma(const Analysis& a) {
  if (!a.nhwc) return "the image is NCHW; CUTLASS's conv takes channels-last data (an NHWC image and a KRSC filter)";
  if (a.in_type == Type::f32 && !a.tf32)
    return "the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write "
           "tf32(X[...]) * tf32(F[...]) for TF32)";
  if (!a.fu.fusable)
    return "the epilogue has no exact CUTLASS fusion (" + a.fu.not_fusable + "); it must be out(f(acc)) or "
           "out(f(acc + bias[k]))";
  if (a.stride_h > 8 || a.stride_w > 8) return "a stride above 8 is beyond the element strides of TMA's im2col loads";
  if (a.off_h > 0 || a.off_w > 0)
    return "an image offset above 0 is a negative padding, which TMA's im2col loads cannot express";
  if (a.off_h < -128 || a.off_w < -128) return "a padding above 128 is beyond the corners of TMA's im2col loads";
  return "";
}

// Why the warp-level tensor-core kernel cannot run this program (empty when it can).
std::string why_not_mma(const Analysis& a) {
  if (a.in_type == Type::f32 && !a.tf32)
    return "the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write "
           "tf32(X[...]) * tf32(F[...]) for TF32)";
  if (a.reduce != dsl::ReduceOp::none && !a.tf32)
    return "a reduction over the filters is the TF32 mma.sync kernel's and the CUDA cores'; the WMMA kernel of " +
           std::string(dsl::type_name(a.in_type)) + " data has none";
  return "";
}

// The bytes of the reduction's partials a block keeps (ksol_red[kBM][slots + 1]: each pixel's
// partial of each thread (simt) or warp (mma) along the filters), 0 without a reduction.
int64_t reduce_bytes(const Analysis& a, int64_t pixels, int64_t slots) {
  return a.reduce == dsl::ReduceOp::none ? 0 : 4 * pixels * (slots + 1);
}

// The mma kernel's reduction step: 8 for TF32 fragments, 16 for bf16/f16.
int64_t mma_k_step(const Analysis& a) { return a.tf32 ? 8 : 16; }

Sched read_tiles(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, family());
  Sched s;
  const std::string mainloop = k.one_of("mainloop", std::vector<std::string>{"auto", "simt", "tma", "mma"});
  std::vector<int64_t> tile = list_knob(k, "tile", 3, "[PIXELS, FILTERS, SLICE]");
  std::vector<int64_t> tt = list_knob(k, "thread_tile", 2, "[PIXELS, FILTERS]");
  std::vector<int64_t> cluster = list_knob(k, "cluster", 2, "[PIXELS, FILTERS]");
  const dsl::ScheduleValue& st = k.value("stages");
  if (st.kind == dsl::ScheduleValue::Kind::integer) s.stages = st.integer;
  else if (!(st.kind == dsl::ScheduleValue::Kind::ident && st.ident == "auto"))
    throw Refused("stages = " + value_text(st) + " must be an integer or auto");
  const std::string why = why_not_tma(a);
  if (mainloop == "tma" && !why.empty()) throw Refused("mainloop = tma: " + why + "; use mainloop = simt");
  const std::string why_mma = why_not_mma(a);
  if (mainloop == "mma" && !why_mma.empty()) throw Refused("mainloop = mma: " + why_mma + "; use mainloop = simt");
  s.tma = mainloop == "tma" || (mainloop == "auto" && why.empty());
  s.mma = mainloop == "mma" || (mainloop == "auto" && !s.tma && why_mma.empty());
  const std::string tile_text = "tile = " + list_text(tile), tt_text = "thread_tile = " + list_text(tt);
  const std::string cluster_text = "cluster = " + list_text(cluster);
  const bool slice_fragments = k.one_of("fragments", std::vector<std::string>{"auto", "slice"}) == "slice";
  if (!s.mma && slice_fragments)
    throw Refused(std::string("fragments = slice: the mma kernel's; mainloop = ") + (s.tma ? "tma" : "simt") +
                  " has no fragments to load (fragments = auto)");
  if (s.tma) {
    // A schedule `auto` sent here says so when it is refused: the user may not have asked for tma.
    try {
      // The family's default tile is the simt kernel's; the tma path's is 128 x 128 x one 128-byte
      // swizzle row of channels.
      const int elem = type_bytes(a.in_type);
      if (!p.knob("tile")) tile = {128, 128, 128 / elem};
      s.tile_m = tile[0], s.tile_n = tile[1], s.tile_k = tile[2];
      const std::string mode = "mainloop = tma";
      if (!(s.tile_m == 64 || s.tile_m == 128))
        throw Refused(tile_text + ": " + mode + " takes 64 or 128 pixels per tile (one consumer warpgroup of WGMMAs)");
      if (!(s.tile_n == 64 || s.tile_n == 128 || s.tile_n == 256))
        throw Refused(tile_text + ": " + mode + " takes 64, 128 or 256 filters per tile");
      if (s.tile_m * s.tile_n / 128 > 128)
        throw Refused(tile_text + " holds " + std::to_string(s.tile_m * s.tile_n / 128) +
                      " f32 accumulators per thread of its one consumer warpgroup; at most 128 fit in the registers");
      const int64_t kbytes = s.tile_k * elem;
      if (!(kbytes == 64 || kbytes == 128 || kbytes == 256))
        throw Refused(tile_text + ": " + mode + " stages 64, 128 or 256 bytes of channels (" +
                      (elem == 2 ? "32, 64 or 128 for 16-bit data" : "16, 32 or 64 for TF32") + ")");
      if (tt != std::vector<int64_t>{4, 4})
        throw Refused(tt_text + " is the simt kernel's; " + mode + " takes none (leave it [4, 4])");
      const bool cluster_ok = cluster == std::vector<int64_t>{1, 1} || cluster == std::vector<int64_t>{2, 1} ||
                              cluster == std::vector<int64_t>{1, 2};
      if (!cluster_ok) throw Refused(cluster_text + ": " + mode + " takes cluster [1, 1], [2, 1] or [1, 2]");
      s.cm = cluster[0], s.cn = cluster[1];
      // The epilogue's staging (two subtiles of at most 64 x 32 outputs), a bias row and barriers.
      const int64_t epi = 2 * 64 * 32 * type_bytes(a.out->type) + (a.fu.bias ? s.tile_n * 8 : 0) + 1024;
      const int64_t per_stage = (s.tile_m + s.tile_n) * s.tile_k * elem + 16;
      if (s.stages == 0) {
        if ((kSharedLimitBytes - epi) / per_stage < 2) throw Refused(tile_text + ": not even two stages fit in 227 KB of shared memory");
      } else {
        if (s.stages < 2 || s.stages > 8) throw Refused("stages = " + std::to_string(s.stages) + " must be between 2 and 8, or auto");
        if (s.stages * per_stage + epi > kSharedLimitBytes)
          throw Refused("stages = " + std::to_string(s.stages) + " of " + tile_text + " take " +
                        std::to_string(s.stages * per_stage) + " bytes of shared memory, plus about " + std::to_string(epi) +
                        " for the epilogue: over the 232448 bytes (227 KB) of an sm_90 block");
      }
    } catch (const Refused& r) {
      if (mainloop == "tma") throw;
      throw Refused(std::string(r.what()) + " (mainloop = auto takes tma for this program; mainloop = simt runs it "
                    "on CUDA cores)");
    }
    return s;
  }
  const std::string cuda_mode = s.mma ? "mainloop = mma" : "mainloop = simt";
  if (cluster != std::vector<int64_t>{1, 1})
    throw Refused(cluster_text + ": clusters are the tma path's; " + cuda_mode + " runs one block per tile (cluster = [1, 1])");
  if (!s.mma && s.stages != 0)
    throw Refused("stages = " + std::to_string(s.stages) + ": the tma and mma paths'; " + cuda_mode + " stages one slice in "
                  "registers (stages = auto)");
  if (s.mma) {
    try {
      // The family's defaults are the simt kernel's; the mma kernel's are 128 x 128 x 16 with
      // warps of 4 x 2 fragments (64 pixels x 32 filters, eight warps): a slice of 32 made ptxas
      // spill at this tile (sm_90, TF32, 228 bytes), 16 does not.
      if (!p.knob("tile")) tile = {128, 128, 16};
      if (!p.knob("thread_tile")) tt = {4, 2};
      s.bm = tile[0], s.bn = tile[1], s.bk = tile[2];
      s.fm = tt[0], s.fn = tt[1];
      s.mma_stages = check_mma_stages(s.stages, a.in_type);
      // A staged image element keeps its pixel's image pointer (2 registers), top row and column
      // and liveness beside its value.
      s.slice_fragments = slice_fragments;
      if (s.slice_fragments && !a.tf32)
        throw Refused("fragments = slice: the TF32 mma.sync kernel's; WMMA's " + std::string(dsl::type_name(a.in_type)) +
                      " fragments load a k-step at a time (fragments = auto)");
      const int64_t warps_n = tt[1] > 0 ? tile[1] / (16 * tt[1]) : 0;
      s.threads = 32 * check_mma_tile(tile, tt, a.tf32, a.in_type, "pixels", "filters", 5, s.mma_stages, s.slice_fragments,
                                      reduce_bytes(a, tile[0], warps_n));
    } catch (const Refused& r) {
      if (mainloop == "mma") throw;
      throw Refused(std::string(r.what()) + " (mainloop = auto takes mma for this program; mainloop = simt runs it "
                    "on CUDA cores)");
    }
    return s;
  }
  s.bm = tile[0], s.bn = tile[1], s.bk = tile[2];
  s.tm = tt[0], s.tn = tt[1];
  for (int64_t t : tile)
    if (t < 1 || t > 512) throw Refused(tile_text + " must have entries between 1 and 512");
  for (int64_t t : tt)
    if (!(t == 1 || t == 2 || t == 4 || t == 8)) throw Refused(tt_text + " must have entries 1, 2, 4 or 8");
  if (s.bm % s.tm != 0)
    throw Refused(tile_text + " has " + std::to_string(s.bm) + " pixels, not a multiple of " + tt_text + "'s " +
                  std::to_string(s.tm));
  if (s.bn % s.tn != 0)
    throw Refused(tile_text + " has " + std::to_string(s.bn) + " filters, not a multiple of " + tt_text + "'s " +
                  std::to_string(s.tn));
  s.threads = (s.bm / s.tm) * (s.bn / s.tn);
  if (s.threads < 32 || s.threads > 1024 || s.threads % 32 != 0)
    throw Refused(tile_text + " with " + tt_text + " makes " + std::to_string(s.threads) +
                  " threads per block; a block has 32 to 1024 threads, whole warps");
  // The image slice [SLICE][PIXELS (+ 1 for NHWC)] and the filter slice [SLICE][FILTERS + 1]
  // (padded so that their transposing stores fall in different banks).
  s.shared_bytes = 4 * s.bk * (s.bm + s.bn + 1 + (a.nhwc ? 1 : 0)) + reduce_bytes(a, s.bm, s.bn / s.tn);
  if (s.shared_bytes > kStaticSharedBytes)
    throw Refused(tile_text + " stages " + std::to_string(s.shared_bytes) +
                  " bytes of shared memory per block; static shared memory is at most 49152 (no opt-in)");
  return s;
}

// The filter's taps R x S when both are fixed, else 0.
int64_t fixed_taps(const Analysis& a) {
  const std::string& r = a.filter->extents[a.nhwc ? 1 : 2];
  const std::string& s = a.filter->extents[a.nhwc ? 2 : 3];
  if (!dsl::extent_is_number(r) || !dsl::extent_is_number(s)) return 0;
  return std::stoll(r) * std::stoll(s);
}

// Why the CUDA-core or mma kernel of `s` cannot gather by tap masks ("" when it can): each thread
// takes one reduction position of kLA pixels kPX apart, which needs NCHW data (a pixel's taps
// along the slice), a slice whose elements are a whole multiple of the threads, pixels a multiple
// of kLA, and at most 64 fixed taps (a mask's bits).
std::string why_not_taps(const Analysis& a, const Sched& s) {
  if (a.nhwc) return "channels-last data are gathered along the channels, not the taps";
  const int64_t taps = fixed_taps(a);
  if (taps == 0) return "the filter's extents are not fixed numbers";
  if (taps > 64) return "the filter has " + std::to_string(taps) + " taps; a mask holds 64";
  if ((s.bk * s.bm) % s.threads != 0)
    return "the slice's " + std::to_string(s.bk * s.bm) + " image elements are not a whole multiple of the " +
           std::to_string(s.threads) + " threads";
  const int64_t la = s.bk * s.bm / s.threads;
  if (s.bm % la != 0)
    return "the tile's " + std::to_string(s.bm) + " pixels are not a multiple of the " + std::to_string(la) +
           " a thread gathers";
  return "";
}

Sched read_sched(const dsl::Program& p, const Analysis& a) {
  Sched s = read_tiles(p, a);
  // A reduction over the filters is combined within a block: a filter count fixed in the program
  // (F: f32[64, C, 3, 3]) refuses the tiles that hold fewer (ksol_run checks a K of a dim).
  if (const std::string& k = a.filter->extents[0]; a.reduce != dsl::ReduceOp::none && dsl::extent_is_number(k) &&
                                                   (k.size() > 9 || std::stoll(k) > s.bn))
    throw Refused("tile = [" + std::to_string(s.bm) + ", " + std::to_string(s.bn) + ", " + std::to_string(s.bk) +
                  "] holds " + std::to_string(s.bn) + " filters; the reduction over the filters needs all " + k +
                  " in one block");
  Knobs k(p, family());
  const std::string gather = k.one_of("gather", std::vector<std::string>{"auto", "taps", "decode"});
  if (s.tma && gather != "auto")
    throw Refused("gather = " + gather + " chooses how the CUDA-core and mma kernels gather the image; mainloop = tma loads "
                  "it by TMA's im2col mode (gather = auto)");
  const std::string why = why_not_taps(a, s);
  if (gather == "taps" && !why.empty())
    throw Refused("gather = taps: " + why + " (gather = auto decodes each element's position)");
  if (gather == "decode" && !why.empty())
    throw Refused("gather = decode is this kernel's only gather (" + why + "; tap masks do not apply): leave gather = auto");
  s.taps = gather == "taps" || (gather == "auto" && why.empty());
  return s;
}

void check(const dsl::Program& p, const Binding& b) {
  resolve_binding(p, b);
  read_sched(p, analyse(p));
}

std::string name_of(const dsl::Program& p, const Analysis& a, const Sched& s) {
  std::string n = name_stem(p, "conv") + (a.tf32 ? "_tf32" : "");
  // A gather that decodes each element where tap masks would apply says so.
  const std::string dec = !s.taps && why_not_taps(a, s).empty() ? "_gdec" : "";
  if (s.mma)
    return n + "_mma_" + std::to_string(s.bm) + "x" + std::to_string(s.bn) + "x" + std::to_string(s.bk) + "_w" +
           std::to_string(s.fm) + "x" + std::to_string(s.fn) + (s.mma_stages >= 2 ? "_s" + std::to_string(s.mma_stages) : "") +
           (s.slice_fragments ? "_fs" : "") + dec;
  if (!s.tma)
    return n + "_" + std::to_string(s.bm) + "x" + std::to_string(s.bn) + "x" + std::to_string(s.bk) + "_t" +
           std::to_string(s.tm) + "x" + std::to_string(s.tn) + dec;
  n += "_tma_" + std::to_string(s.tile_m) + "x" + std::to_string(s.tile_n) + "x" + std::to_string(s.tile_k) + "_c" +
       std::to_string(s.cm) + "x" + std::to_string(s.cn) + (s.stages ? "_s" + std::to_string(s.stages) : "_sauto");
  if (!a.fu.tag.empty()) n += "_" + a.fu.tag;
  // Shapes CUTLASS cannot take run the simt kernel; the name says so.
  return n + "_fbsimt";
}

std::string kernel_name_of(const dsl::Program& p) {
  const Analysis a = analyse(p);
  return name_of(p, a, read_sched(p, a));
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(analyse(p)), s_(read_sched(p, a_)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    name_ = name_of(p_, a_, s_);
    simt_name_ = s_.tma ? "ksol_conv_simt" : name_;
  }

  std::string run() {
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (conv family).");
    for (const Definition& d : p_.defs) w.line("//   " + format_definition(d));
    if (s_.tma) {
      w.comment("CUTLASS 3.x's sm90 implicit-GEMM conv (TMA im2col loads, WGMMA, one producer and one consumer "
                "warpgroup) for shapes whose channel rows are 16-byte aligned; the CUDA-core kernel below for the rest.");
      w.line("#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1");
      w.comment("Device asserts are calls, and a call inside the mainloop serializes the WGMMA pipeline (ptxas C7510).");
      w.line("#ifndef NDEBUG");
      w.line("#define NDEBUG 1");
      w.line("#endif");
    }
    w.raw(includes(p_));
    if (s_.mma) w.line("#include <mma.h>");
    if (s_.tma) {
      // The conv collectives use cutlass::KernelHardwareInfo without including it: it comes first.
      for (const char* h : {"cutlass/cutlass.h", "cute/tensor.hpp", "cutlass/numeric_types.h",
                            "cutlass/kernel_hardware_info.hpp", "cutlass/conv/device/conv_universal_adapter.hpp",
                            "cutlass/conv/kernel/conv_universal.hpp", "cutlass/conv/convnd_problem_shape.hpp",
                            "cutlass/conv/dispatch_policy.hpp", "cutlass/conv/collective/collective_builder.hpp",
                            "cutlass/epilogue/collective/collective_builder.hpp", "cutlass/epilogue/fusion/operations.hpp"})
        w.line(std::string("#include <") + h + ">");
    }
    w.line();
    Helpers helpers;
    if (a_.tf32) helpers.use("tf32_round", Type::f32);
    if (s_.mma_stages >= 2) helpers.use("cp_async", Type::f32);
    if (s_.mma && a_.tf32) helpers.use("mma_tf32", Type::f32);
    const std::string value = epilogue(helpers);
    post_ = post_value(helpers);
    if (a_.reduce == dsl::ReduceOp::max) helpers.use("max_nan", Type::f32);
    if (a_.reduce == dsl::ReduceOp::min) helpers.use("min_nan", Type::f32);
    std::string act;
    if (s_.tma && !a_.fu.identity) act = cutlass_activation_code(a_.fu, helpers, false);
    if (!helpers.empty()) w.raw(helpers.source() + "\n");
    w.line("namespace {");
    w.comment(s_.tma ? "The CUDA-core kernel, for the shapes CUTLASS cannot take."
                     : s_.mma ? (a_.tf32 ? "The warp-level tensor-core kernel (mma.sync)." : "The warp-level tensor-core kernel (WMMA).")
                              : "The CUDA-core kernel.");
    w.line("constexpr int kBM = " + std::to_string(s_.bm) + ", kBN = " + std::to_string(s_.bn) + ", kBK = " +
           std::to_string(s_.bk) + ";  // pixels x filters x reduction slice");
    if (s_.mma) {
      wmma_constants(w, WmmaShape{s_.fm, s_.fn, mma_k_step(a_), a_.tf32 ? 8 : 16 / stage_bytes(), a_.tf32});
    } else {
      w.line("constexpr int kTM = " + std::to_string(s_.tm) + ", kTN = " + std::to_string(s_.tn) + ";  // per thread");
      w.line("constexpr int kTY = kBM / kTM, kTX = kBN / kTN, kThreads = kTX * kTY;");
    }
    w.line("// Slice elements each thread loads: of the image (kLA) and of the filter (kLB).");
    w.line("constexpr int kLA = (kBK * kBM + kThreads - 1) / kThreads, kLB = (kBK * kBN + kThreads - 1) / kThreads;");
    if (tap_masks())
      w.line("constexpr int kPX = kBM / kLA;  // consecutive pixels per reduction position of a slice (kBK x kPX threads)");
    w.line();
    if (s_.mma)
      mma_kernel(w, value);
    else
      kernel(w, value);
    w.line("}  // namespace");
    w.line();
    if (s_.tma) cutlass_kernel(w, act);
    host(w);
    return w.text();
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  Sched s_;
  Names names_;
  std::string name_, simt_name_;
  // Whether the epilogue reads an input at h or w apart from the plane's offset (g[h]).
  bool uses_h_ = false, uses_w_ = false;
  // The stored value after a reduction over the filters (post_value).
  std::string post_;

  // The code of an extent: a dim's identifier or a fixed extent's number.
  std::string ext(const std::string& e) const { return dsl::extent_is_number(e) ? e : names_[e]; }
  std::string X() const { return names_[a_.image->name]; }
  std::string F() const { return names_[a_.filter->name]; }
  std::string Y() const { return names_[a_.out->name]; }
  std::string C() const { return ext(a_.image->extents[a_.nhwc ? 3 : 1]); }
  std::string H() const { return ext(a_.image->extents[a_.nhwc ? 1 : 2]); }
  std::string W() const { return ext(a_.image->extents[a_.nhwc ? 2 : 3]); }
  std::string R() const { return ext(a_.filter->extents[a_.nhwc ? 1 : 2]); }
  std::string S() const { return ext(a_.filter->extents[a_.nhwc ? 2 : 3]); }
  // A reduction over the filters has the output [N, P, Q]; K is then the filter's first extent.
  bool reduced() const { return a_.reduce != dsl::ReduceOp::none; }
  std::string K() const { return reduced() ? ext(a_.filter->extents[0]) : ext(a_.out->extents[a_.nhwc ? 3 : 1]); }
  std::string P() const { return ext(a_.out->extents[reduced() ? 1 : a_.nhwc ? 1 : 2]); }
  std::string Q() const { return ext(a_.out->extents[reduced() ? 2 : a_.nhwc ? 2 : 3]); }
  std::string batch() const { return ext(a_.out->extents[0]); }

  // Every kernel's parameters: the ABI's tensors and dims, then the dividers of the plane (P * Q) and
  // of Q that ksol_decode divides a pixel by (made by the host).
  std::string params_decl() const {
    return kernel_params_decl(p_, abi_, names_, true) + "const KsolDiv ksol_dplane, const KsolDiv ksol_dq";
  }
  std::string params_pass() const { return kernel_params_pass(p_, abi_, names_, true) + "ksol_dplane, ksol_dq"; }

  // `code` times a stride or dilation: itself when that is 1.
  static std::string times(int64_t k, const std::string& code) { return k == 1 ? code : code + " * " + std::to_string(k); }

  static std::string plus_offset(int64_t o) {
    if (o == 0) return "";
    return (o < 0 ? " - " : " + ") + std::to_string(o < 0 ? -o : o);
  }

  // An element of the image or the filter as the register-staged kernels load it: in f32 (16-bit
  // data as they are for the mma kernel); staged_slice_loop rounds it to TF32 as it is stored when
  // the program says tf32(...).
  std::string operand(const std::string& code) const {
    if (staged_half()) return code;
    return to_float(code, a_.in_type);
  }

  // The mma kernel stages 16-bit data as they are (its fragments take them); every other kernel
  // stages f32.
  bool staged_half() const { return s_.mma && is_half(a_.in_type); }
  std::string stage_type() const { return staged_half() ? cuda_type(a_.in_type) : "float"; }
  int64_t stage_bytes() const { return staged_half() ? 2 : 4; }
  std::string stage_zero() const {
    if (!staged_half()) return "0.0f";
    return a_.in_type == Type::bf16 ? "__float2bfloat16(0.0f)" : "__float2half(0.0f)";
  }

  // The tap of reduction position kk for image element l (in scope): its channel and image row
  // and column hi, wi; returns the element's offset within its image.
  std::string gather_tap(Writer& w) {
    if (a_.nhwc) {
      w.line("const int rs = kk / chans, ch = kk - rs * chans;");
    } else {
      w.line("const int ch = kk / taps, rs = kk - ch * taps;");
    }
    w.line("const int tap_r = rs / taps_s, tap_s = rs - tap_r * taps_s;");
    w.line("const int hi = base_h[l] + " + times(a_.dil_h, "tap_r") + ", wi = base_w[l] + " + times(a_.dil_w, "tap_s") + ";");
    const std::string at = a_.nhwc ? "(hi * img_w + wi) * chans + ch" : "(ch * img_h + hi) * img_w + wi";
    return at;
  }

  // Whether the tap gather_tap() decoded lies inside the image (else it reads 0).
  std::string inside_image() const { return "hi >= 0 && hi < img_h && wi >= 0 && wi < img_w"; }

  // The next slice of the image (gathered) and the filter into registers. The image element l of
  // this thread is pixel e % kBM at reduction position e / kBM (NCHW: consecutive threads read
  // consecutive pixels), or pixel e / kBK at position e % kBK (NHWC: consecutive channels).
  void load(Writer& w, const std::string& kbase) {
    if (tap_masks()) {
      w.open("");
      tap_of_slice(w, kbase);
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("ra[l] = (tap_ok[l] & tap_bit) ? " + operand("img_p[l][img_o[l] + tap_off]") + " : " + stage_zero() + ";");
      w.close();
      w.close();
    } else {
      load_gathered(w, kbase);
    }
    load_filter(w, kbase);
  }

  // The image's part of load() where each element decodes its own tap.
  void load_gathered(Writer& w, const std::string& kbase) {
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int kk = " + kbase + " + (tid + l * kThreads) " + (a_.nhwc ? "% kBK" : "/ kBM") + ";");
    w.line(stage_type() + " v = " + stage_zero() + ";");
    w.open("if (img[l] >= 0 && kk < depth)");
    const std::string at = gather_tap(w);
    w.line("if (" + inside_image() + ") v = " +
           operand(X() + "[int64_t(img[l]) * image + " + at + "]") + ";");
    w.close();
    w.line("ra[l] = v;");
    w.close();
  }

  // The filter's part of load(): element l of this thread is filter e / kBK at position e % kBK.
  void load_filter(Writer& w, const std::string& kbase) {
    if (filter_rows()) {
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLB; ++l)");
      w.line("rb[l] = (l < f_rows && " + kbase + " + tid % kBK < depth) ? " + operand("f_p[" + filter_offset(kbase) + "]") +
             " : " + stage_zero() + ";");
      w.close();
      return;
    }
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("const int64_t filt = tile_n + e / kBK;");
    w.line("const int kk = " + kbase + " + e % kBK;");
    w.line("rb[l] = (e < kBK * kBN && filt < " + K() + " && kk < depth) ? " + operand(F() + "[filt * depth + kk]") +
           " : " + stage_zero() + ";");
    w.close();
  }

  // The cp.async pipeline's copies of the slice at `kbase` into buffer `stage`: each image element
  // this thread gathers (zeros outside the image or past the reduction) and each filter element,
  // as they are (TF32 rounding happens as the fragments load).
  void issue_async(Writer& w, const std::string& kbase, const std::string& stage) {
    bind_stage(w, "float", stage);
    w.open("");
    if (tap_masks()) {
      tap_of_slice(w, kbase);
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("const bool ok = (tap_ok[l] & tap_bit) != 0;");
      w.line("ksol_cp_async4(&" + a_at() + ", ok ? img_p[l] + (img_o[l] + tap_off) : " + X() + ", ok);");
      w.close();
    } else {
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("const int e = tid + l * kThreads;");
      w.line("if (e >= kBK * kBM) break;");
      w.line("const int kk = " + kbase + " + e " + (a_.nhwc ? "% kBK" : "/ kBM") + ";");
      w.line("const float* src = " + X() + ";");
      w.line("bool ok = false;");
      w.open("if (img[l] >= 0 && kk < depth)");
      const std::string at = gather_tap(w);
      w.line("ok = " + inside_image() + ";");
      w.line("if (ok) src += int64_t(img[l]) * image + " + at + ";");
      w.close();
      w.line("ksol_cp_async4(&" + a_at() + ", src, ok);");
      w.close();
    }
    w.close();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    if (filter_rows()) {
      w.line("const bool ok = l < f_rows && " + kbase + " + tid % kBK < depth;");
      w.line("ksol_cp_async4(&" + std::string(kMmaBAt) + ", ok ? f_p + (" + filter_offset(kbase) + ") : " + F() + ", ok);");
      w.close();
      return;
    }
    w.line("if (e >= kBK * kBN) break;");
    w.line("const int64_t filt = tile_n + e / kBK;");
    w.line("const int kk = " + kbase + " + e % kBK;");
    w.line("const bool ok = filt < " + K() + " && kk < depth;");
    w.line("ksol_cp_async4(&" + std::string(kMmaBAt) + ", ok ? " + F() + " + filt * depth + kk : " + F() + ", ok);");
    w.close();
  }

  // The row-major offset `off` extended by one index of extent `extent` at `coord`.
  static std::string horner(const std::string& off, const std::string& extent, const std::string& coord) {
    if (off.empty()) return coord;
    const bool simple = off.find(' ') == std::string::npos;
    return (simple ? off : "(" + off + ")") + " * " + extent + " + " + coord;
  }

  // The epilogue's coordinate of the output pixel and filter, by position in the output's
  // indices: n, k, h, w (NCHW) or n, h, w, k (NHWC) are img_n, filt, oh, ow.
  const char* coordinate(size_t pos) const {
    static const char* const kNchw[] = {"img_n", "filt", "oh", "ow"};
    static const char* const kNhwc[] = {"img_n", "oh", "ow", "filt"};
    return (a_.nhwc ? kNhwc : kNchw)[pos];
  }

  // The stored value from the accumulator `v`: the epilogue's expression in the output's type,
  // its reads of inputs addressed from the pixel's coordinates (a residual Z[n, k, h, w] at the
  // output's own offset, img_n * K * plane + filt * plane + rest; Z[n, h, w, k] at pix * K + filt),
  // or `v` without an epilogue.
  std::string epilogue(Helpers& helpers) {
    if (!a_.epi) return "v";
    const Definition& e = *a_.epi;
    ExprEmitter em;
    em.helpers = &helpers;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = [&](const Expr& r) -> std::string {
      if (r.name == a_.def->name) return "v";
      const Param* prm = p_.param(r.name);
      std::vector<size_t> pos;
      for (const dsl::IndexExpr& ix : r.indices)
        pos.push_back(static_cast<size_t>(std::find(a_.space.begin(), a_.space.end(), ix.var) - a_.space.begin()));
      std::string off;
      size_t i = 0;
      // n, h, w first, as in Z[n, h, w, k]: the pixel's index.
      if (a_.nhwc && pos.size() >= 3 && pos[0] == 0 && pos[1] == 1 && pos[2] == 2) off = "pix", i = 3;
      for (; i < pos.size(); ++i) {
        // h, w last and adjacent, as in Z[n, k, h, w]: one offset within the plane.
        std::string coord = coordinate(pos[i]), extent = ext(prm->extents[i]);
        if (!a_.nhwc && pos[i] == 2 && i + 1 < pos.size() && pos[i + 1] == 3 && i + 2 == pos.size()) {
          off = horner(off, "plane", "rest");
          break;
        }
        if (coord == std::string("oh")) uses_h_ = true;
        if (coord == std::string("ow")) uses_w_ = true;
        off = horner(off, extent, coord);
      }
      return names_[prm->name] + "[" + (off.empty() ? "0" : off) + "]";
    };
    return em(e.body);
  }

  // ksol_decode: an output pixel's image, offset in the plane and row.
  void decode_fn(Writer& w) {
    index_divider_source(w, 0);
    w.comment("Output pixel pix as (image n, offset in the plane, row), by the dividers of the plane and of Q: a "
              "multiply-high and a shift when `narrow` (fewer than 2^31 pixels; the same for every thread), else "
              "64-bit division.");
    w.open("__device__ __forceinline__ void ksol_decode(int64_t pix, const KsolDiv& plane, const KsolDiv& q, bool narrow, "
           "int64_t& n, int64_t& rest, int64_t& oh)");
    w.open("if (narrow)");
    w.line("n = ksol_div<true>(pix, plane);");
    w.line("rest = pix - n * plane.d;");
    w.line("oh = ksol_div<true>(rest, q);");
    w.close();
    w.open("else");
    w.line("n = pix / plane.d;");
    w.line("rest = pix - n * plane.d;");
    w.line("oh = rest / q.d;");
    w.close();
    w.close();
    w.line();
  }

  // The block's extents and tile, and the image element each thread gathers: its pixel's image
  // and top-left tap, decoded once (after `tid`).
  void gather_setup(Writer& w) {
    const std::string in = cuda_type(a_.in_type);
    w.comment("Reduction positions and image coordinates fit in 32 bits (offsets and fixed extents are refused past 10^8, ksol_run checks the rest); addresses are 64-bit.");
    w.line("const int taps_r = int(" + R() + "), taps_s = int(" + S() + "), taps = taps_r * taps_s;");
    if (a_.nhwc) w.line("const int chans = int(" + C() + ");");
    w.line("const int64_t plane = " + P() + " * " + Q() + ", pixels = " + batch() + " * plane;");
    w.comment("Pixels are decoded by the host-made dividers (a multiply-high and a shift) when there are fewer than "
              "2^31 of them (every staged element and every output row decodes its pixel), else by 64-bit division.");
    w.line("const bool narrow = pixels <= 2147483647;");
    w.line("const int depth = int(" + C() + " * taps);");
    w.line("const int64_t tile_m = int64_t(blockIdx.x) * kBM, tile_n = int64_t(blockIdx.y) * kBN;");
    w.line("const int64_t image = int64_t(" + C() + ") * " + H() + " * " + W() + ";  // elements of one image");
    w.comment("An element's offset in its image is 32-bit (ksol_run refuses images of 2^31 elements or more).");
    w.line("const int img_h = int(" + H() + "), img_w = int(" + W() + ");");
    if (filter_rows()) {
      w.comment("The filter elements this thread loads: filters f0 + l * (kThreads / kBK), of which the first f_rows "
                "exist, at position tid % kBK of each slice; f_p points at the first (at the filter's start when none "
                "exists, and always where kFlat, f_o then the first's offset), f_step from one to the next.");
      w.line("const int64_t f0 = tile_n + tid / kBK;");
      w.line("const int64_t f_left = f0 < " + K() + " ? (" + K() + " - f0 + kThreads / kBK - 1) / (kThreads / kBK) : 0;");
      w.line("const int f_rows = int(f_left < kLB ? f_left : kLB);");
      w.line("const int64_t f_at = f_rows > 0 ? f0 * depth + tid % kBK : 0;");
      w.line(std::string("const ") + cuda_type(a_.in_type) + "* f_p = kFlat ? " + F() + " : " + F() + " + f_at;");
      w.line("const int f_o = kFlat ? int(f_at) : 0;  // where kFlat, the first's offset from f_p");
      w.line("const int64_t f_step = int64_t(kThreads / kBK) * depth;");
    }
    if (tap_masks()) {
      const std::string in = cuda_type(a_.in_type), m = tap_mask_type();
      w.comment("This thread gathers reduction position tid / kPX of pixels tid % kPX + l * kPX. Each pixel keeps a "
                "pointer (img_p: its image's first element, or the tensor's where kFlat), the offset of its top-left "
                "tap from there (img_o, negative in the padding) and a mask of the taps inside the image (tap_ok: bit "
                "r * S + s; none past the pixels).");
      w.line("const " + in + "* img_p[kLA];");
      w.line("int img_o[kLA];");
      w.line(m + " tap_ok[kLA];");
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < kLA; ++l)");
      w.line("const int64_t pix = tile_m + tid % kPX + l * kPX;");
      w.line("const bool live = pix < pixels;");
      w.line("int64_t img_n, rest, oh;");
      w.line("ksol_decode(live ? pix : 0, ksol_dplane, ksol_dq, narrow, img_n, rest, oh);");
      w.line("const int h0 = " + times(a_.stride_h, "int(oh)") + plus_offset(a_.off_h) + ";");
      w.line("const int w0 = " + times(a_.stride_w, "int(rest - oh * " + Q() + ")") + plus_offset(a_.off_w) + ";");
      w.line(m + " m = 0;");
      w.line("#pragma unroll");
      w.open("for (int rs = 0; rs < taps; ++rs)");
      w.line("const int hi = h0 + " + times(a_.dil_h, "(rs / taps_s)") + ", wi = w0 + " + times(a_.dil_w, "(rs % taps_s)") + ";");
      w.line("if (live && " + inside_image() + ") m |= " + m + "(1) << rs;");
      w.close();
      w.line("tap_ok[l] = m;");
      w.line("img_p[l] = kFlat ? " + X() + " : " + X() + " + img_n * image;");
      w.comment("Only a pixel with a tap inside the image is ever read, and its offset fits in 32 bits.");
      w.line("img_o[l] = m ? (kFlat ? int(img_n * image) : 0) + h0 * img_w + w0 : 0;");
      w.close();
      return;
    }
    w.comment("The pixel each image element this thread loads belongs to is the same in every slice: decode it once, "
              "keeping its image (-1 past the pixels or the slice) and top-left tap in 32 bits (three registers an element).");
    w.line("int img[kLA], base_h[kLA], base_w[kLA];");
    // Pixel `pix` (past the pixels unless `live`) as its image (-1 when not live) and top-left tap,
    // assigned to `img`, `h` and `wv` (declarations or array elements).
    auto decode_pixel = [&](const std::string& pix, const std::string& live, const std::string& img, const std::string& h,
                            const std::string& wv) {
      w.line("const int64_t pix = " + pix + ";");
      w.line("const bool live = " + live + ";");
      w.line("int64_t img_n, rest, oh;");
      w.line("ksol_decode(live ? pix : 0, ksol_dplane, ksol_dq, narrow, img_n, rest, oh);");
      w.line(img + " = live ? int(img_n) : -1;");
      w.line(h + " = " + times(a_.stride_h, "int(oh)") + plus_offset(a_.off_h) + ";");
      w.line(wv + " = " + times(a_.stride_w, "int(rest - oh * " + Q() + ")") + plus_offset(a_.off_w) + ";");
    };
    if (one_pixel()) {
      w.comment("NCHW with the block's threads a multiple of its pixels and a slice's elements a multiple of its "
                "threads: every element this thread loads is pixel tid % kBM, decoded once.");
      w.open("");
      decode_pixel("tile_m + tid % kBM", "pix < pixels", "const int img0", "const int h0", "const int w0");
      w.line("#pragma unroll");
      w.line("for (int l = 0; l < kLA; ++l) img[l] = img0, base_h[l] = h0, base_w[l] = w0;");
      w.close();
      return;
    }
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int e = tid + l * kThreads;");
    decode_pixel(std::string("tile_m + e ") + (a_.nhwc ? "/ kBK" : "% kBM"), "e < kBK * kBM && pix < pixels", "img[l]",
                 "base_h[l]", "base_w[l]");
    w.close();
  }

  // Whether each thread gathers one reduction position of kLA pixels kPX apart (why_not_taps): the
  // position's channel and tap are then decoded once a slice, and each pixel keeps its image's
  // pointer, its top-left tap's offset and a mask of the taps that lie inside the image, so an
  // element costs a bit test, an add and the load.
  bool tap_masks() const { return s_.taps; }
  // Whether each thread loads its filter elements at one position of each slice (the threads a
  // multiple of the slice) and every one inside the slice (the slice's filter elements a whole
  // multiple of the threads): one pointer and a count of existing filters then serve them all.
  bool filter_rows() const { return s_.threads % s_.bk == 0 && (s_.bk * s_.bn) % s_.threads == 0; }
  // Whether the kernel is a template on kFlat: true where the image tensor and the filter each have
  // fewer than 2^31 elements (ksol_run chooses), so that the tap-mask gather and the filter rows
  // offset their elements from the tensors' starts in 32 bits (one register a pixel, one multiply-add
  // an address) instead of keeping a 64-bit pointer a pixel.
  bool flat_template() const { return tap_masks() || filter_rows(); }
  // The launched kernel's cp.async buffers (1 where it stages through registers or runs on CUDA cores).
  int64_t pipelined() const { return s_.mma && !s_.tma ? s_.mma_stages : 1; }
  // The offset of this thread's filter element l at position `kbase` of the slice from f_p: in 32
  // bits where kFlat.
  static std::string filter_offset(const std::string& kbase) {
    return "kFlat ? f_o + l * int(f_step) + " + kbase + " : l * f_step + " + kbase;
  }
  // One word: the functional casts below (T(1)) take no multi-word type name.
  std::string tap_mask_type() const { return fixed_taps(a_) <= 32 ? "uint32_t" : "uint64_t"; }

  // The reduction position this thread gathers in the slice at `kbase`: its tap's offset in the
  // image from a pixel's top-left tap (tap_off) and its bit in the pixels' masks (tap_bit, none
  // past the reduction).
  void tap_of_slice(Writer& w, const std::string& kbase) {
    w.line("const int kq = " + kbase + " + tid / kPX;");
    w.line("const bool deep = kq < depth;");
    w.line("const int kk = deep ? kq : 0, ch = kk / taps, rs = kk - ch * taps;");
    w.line("const int tap_off = (ch * img_h + " + times(a_.dil_h, "(rs / taps_s)") + ") * img_w + " +
           times(a_.dil_w, "(rs % taps_s)") + ";");
    w.line("const " + tap_mask_type() + " tap_bit = deep ? " + tap_mask_type() + "(1) << rs : 0;");
  }

  // Whether every image element a thread gathers is the same pixel: NCHW (element e is pixel
  // e % kBM), threads a multiple of the tile's pixels, and every element of the slice taken
  // (kBK * kBM a multiple of the threads, so no element past the slice).
  bool one_pixel() const {
    return !a_.nhwc && s_.threads % s_.bm == 0 && (s_.bk * s_.bm) % s_.threads == 0;
  }

  // Where a staged image element goes: As[tap][pixel] (NCHW: consecutive threads, consecutive pixels);
  // in the mma kernel's slices at ksol_row and ksol_a_slot, the slot a loop-invariant register plus
  // a constant where a thread's pixels lie whole warps' rows apart (the conditions are compile-time
  // constants).
  std::string a_at() const {
    if (tap_masks())
      return s_.mma ? "As[ksol_row(tid / kPX)][kPX % (16 * kFM) == 0 ? ksol_a_slot(tid % kPX, tid / kPX) + kSW * l * kPX : "
                      "ksol_a_slot(tid % kPX + l * kPX, tid / kPX)]"
                    : "As[tid / kPX][tid % kPX + l * kPX]";
    if (a_.nhwc)
      return s_.mma ? "As[ksol_row(e % kBK)][kThreads % kBK == 0 && kThreads / kBK % (16 * kFM) == 0 ? ksol_a_slot(tid / kBK, "
                      "tid % kBK) + kSW * l * (kThreads / kBK) : ksol_a_slot(e / kBK, e % kBK)]"
                    : "As[e % kBK][e / kBK]";
    return s_.mma ? "As[ksol_row(e / kBM)][ksol_a_slot(e % kBM, e / kBM)]" : "As[e / kBM][e % kBM]";
  }

  // The output pointer of pixel `pix` (in scope, below `pixels`): its image, plane offset and
  // row decoded, the column too where the epilogue reads one.
  void pixel_out(Writer& w) {
    pixel_coords(w);
    const std::string out_type = cuda_type(a_.out->type);
    if (a_.nhwc)
      w.line(out_type + "* out = " + Y() + " + pix * " + K() + ";");
    else
      w.line(out_type + "* out = " + Y() + " + img_n * " + K() + " * plane + rest;");
  }

  // The coordinates of pixel `pix` (in scope) the epilogue reads at: its image, plane offset and
  // row, the column too where the epilogue reads one.
  void pixel_coords(Writer& w) {
    w.line("int64_t img_n, rest, oh;");
    w.line("ksol_decode(pix, ksol_dplane, ksol_dq, narrow, img_n, rest, oh);");
    if (uses_w_) w.line("const int64_t ow = rest - oh * " + Q() + ";");
  }

  // After the reduction over the filters: the output's value from the pixel's reduced value
  // red_t, by the output's definition (red_t itself without one).
  std::string post_value(Helpers& helpers) const {
    if (!a_.post) return "red_t";
    ExprEmitter em;
    em.helpers = &helpers;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = [&](const Expr&) -> std::string { return "red_t"; };  // analyse: it reads the reduction alone
    return em(a_.post->body);
  }

  // The reduction's step, its identity and its partials' combination.
  std::string combine(const std::string& x, const std::string& y) const {
    if (a_.reduce == dsl::ReduceOp::max) return "max_nan(" + x + ", " + y + ")";
    if (a_.reduce == dsl::ReduceOp::min) return "min_nan(" + x + ", " + y + ")";
    return x + " + " + y;
  }
  std::string reduce_identity() const {
    if (a_.reduce == dsl::ReduceOp::max) return "-INFINITY";
    if (a_.reduce == dsl::ReduceOp::min) return "INFINITY";
    return "0.0f";
  }

  // Inside a loop over a pixel's filters: the epilogue's value at filter `filt` (in scope) folded
  // into `part` (a filter past K continues the loop).
  void reduce_filt(Writer& w, const std::string& value, const std::string& acc) {
    w.line("if (filt >= " + K() + ") continue;");
    w.line("const float v = " + acc + ";");
    w.line("part = " + combine("part", value) + ";");
  }

  // After every thread has put its partials in ksol_red[pixel][slot]: one thread a pixel combines
  // the pixel's `slots` partials in slot order and stores the value at the pixel's index (the
  // output [N, P, Q] is laid out as the pixels are numbered).
  void reduce_store(Writer& w, const std::string& slots) {
    w.line("__syncthreads();");
    w.open("for (int r = tid; r < kBM; r += kThreads)");
    w.line("const int64_t pix = tile_m + r;");
    w.line("if (pix >= pixels) break;");
    w.line("float red_t = ksol_red[r][0];");
    w.line("for (int sl = 1; sl < " + slots + "; ++sl) red_t = " + combine("red_t", "ksol_red[r][sl]") + ";");
    if (a_.reduce == dsl::ReduceOp::mean) w.line("red_t = red_t / float(" + K() + ");");
    w.line(Y() + "[pix] = " + post_ + ";");
    w.close();
  }

  // The store of the accumulator `acc` at filter `filt` (in scope) of the pixel pixel_out()
  // decoded, through the epilogue; inside a loop (a filter past K continues it).
  void store_filt(Writer& w, const std::string& value, const std::string& acc) {
    const std::string at = a_.nhwc ? "out[filt]" : "out[filt * plane]";
    if (!a_.epi) {
      w.line("if (filt < " + K() + ") " + at + " = " + acc + ";");
    } else {
      w.line("if (filt >= " + K() + ") continue;");
      w.line("const float v = " + acc + ";");
      w.line(at + " = " + value + ";");
    }
  }

  void kernel(Writer& w, const std::string& value) {
    decode_fn(w);
    w.comment("Implicit GEMM on CUDA cores: rows are the output pixels (n, h, w) flattened, columns the filters, "
              "the reduction (" + std::string(a_.nhwc ? "r, s, c" : "c, r, s") + ") flattened in the filter's order. "
              "A block computes " + std::to_string(s_.bm) + " pixels x " + std::to_string(s_.bn) + " filters with " +
              std::to_string(s_.threads) + " threads, each holding " + std::to_string(s_.tm) + " x " +
              std::to_string(s_.tn) + " f32 accumulators (pixels ty + i * kTY, filters tx + j * kTX; " +
              (a_.nhwc ? "tx runs fastest, so a warp's stores cover consecutive filters" :
                         "ty runs fastest, so a warp's stores cover consecutive pixels") +
              "); the reduction advances " + std::to_string(s_.bk) + " at a time through shared memory, the image slice "
              "gathered (im2col) while it is loaded, taps outside the image as 0, the next slice staged in registers "
              "while the current one is multiplied. One fmaf per product" +
              (a_.tf32 ? ", of operands rounded to TF32 as they are staged." : ".") +
              (is_half(a_.in_type) ? std::string(" The ") + dsl::type_name(a_.in_type) + " data are converted to f32 as they are staged." : ""));
    if (flat_template()) w.line("template <bool kFlat>");
    w.open("__global__ void __launch_bounds__(kThreads) " + simt_name_ + "(" + params_decl() + ")");
    w.line(std::string("__shared__ float As[kBK][kBM") + (a_.nhwc ? " + 1" : "") +
           "];  // the image slice, gathered: As[tap][pixel]");
    w.line("__shared__ float Bs[kBK][kBN + 1];  // the filter slice, transposed: Bs[tap][filter]");
    if (a_.nhwc)
      w.line("const int tid = threadIdx.x, tx = tid % kTX, ty = tid / kTX;");
    else
      w.line("const int tid = threadIdx.x, ty = tid % kTY, tx = tid / kTY;");
    gather_setup(w);
    w.line("float acc[kTM][kTN];");
    w.line("#pragma unroll");
    w.line("for (int i = 0; i < kTM; ++i)");
    w.line("  #pragma unroll");
    w.line("  for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;");
    w.line("float ra[kLA], rb[kLB];");
    load(w, "0");
    staged_slice_loop(w, a_at(), [&](Writer& x, const std::string& k) { load(x, k); }, [](Writer& x) { simt_slice_fma(x); },
                      a_.tf32);
    if (a_.reduce != dsl::ReduceOp::none) {
      w.comment("The reduction over the filters: each thread folds its filters of each of its pixels into one partial, "
                "the block's kTX partials of a pixel meet in shared memory, and one thread a pixel combines and stores "
                "them (the block holds every filter).");
      w.line("__shared__ float ksol_red[kBM][kTX + 1];");
      w.line("#pragma unroll");
      w.open("for (int i = 0; i < kTM; ++i)");
      w.line("const int64_t pix = tile_m + ty + i * kTY;");
      w.line("float part = " + reduce_identity() + ";");
      w.open("if (pix < pixels)");
      pixel_coords(w);
      w.line("#pragma unroll");
      w.open("for (int j = 0; j < kTN; ++j)");
      w.line("const int64_t filt = tile_n + tx + j * kTX;");
      reduce_filt(w, value, "acc[i][j]");
      w.close();
      w.close();
      w.line("ksol_red[ty + i * kTY][tx] = part;");
      w.close();
      reduce_store(w, "kTX");
      w.close();
      w.line();
      return;
    }
    w.line("#pragma unroll");
    w.open("for (int i = 0; i < kTM; ++i)");
    w.line("const int64_t pix = tile_m + ty + i * kTY;");
    w.line("if (pix >= pixels) continue;");
    pixel_out(w);
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kTN; ++j)");
    w.line("const int64_t filt = tile_n + tx + j * kTX;");
    store_filt(w, value, "acc[i][j]");
    w.close();
    w.close();
    w.close();
    w.line();
  }

  // The same implicit GEMM with its slices multiplied by warp-level tensor-core instructions.
  void mma_kernel(Writer& w, const std::string& value) {
    decode_fn(w);
    const std::string frag_t = cuda_type(a_.in_type);  // WMMA's (16-bit data; TF32 takes mma.sync)
    const std::string st = stage_type();
    w.comment("Implicit GEMM on the tensor cores: rows are the output pixels (n, h, w) flattened, columns the filters, "
              "the reduction (" + std::string(a_.nhwc ? "r, s, c" : "c, r, s") + ") flattened in the filter's order. "
              "A block computes " + std::to_string(s_.bm) + " pixels x " + std::to_string(s_.bn) + " filters with " +
              std::to_string(s_.threads / 32) + " warps, each " + std::to_string(s_.fm) + " x " + std::to_string(s_.fn) +
              " fragments of 16 x 16 f32 accumulators (warp w at pixels (w % kWM) * 16 * kFM, filters (w / kWM) * 16 * kFN); "
              "the reduction advances " + std::to_string(s_.bk) + " at a time through shared memory, the image slice "
              "gathered (im2col) while it is loaded, taps outside the image as 0, " +
              (s_.mma_stages >= 2 ? "copied by cp.async into " + std::to_string(s_.mma_stages) + " buffers (the next " +
                                        std::to_string(s_.mma_stages - 1) + " slices in flight while one is multiplied), "
                                  : std::string("the next slice staged in registers while the current one is multiplied, ")) +
              std::to_string(mma_k_step(a_)) + " reduction positions per fragment product (" +
              (a_.tf32 ? (s_.mma_stages >= 2 ? "TF32: operands rounded to TF32 as the fragments load"
                                             : "TF32: operands rounded to TF32 as they are staged")
                       : std::string(dsl::type_name(a_.in_type)) + " data as they are") +
              ", f32 accumulation" + (a_.tf32 ? ", by mma.sync.m16n8k8)." : "). The accumulators reach the epilogue through a 16 x 16 staging tile per warp."));
    if (flat_template()) w.line("template <bool kFlat>");
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "(" + params_decl() + ")");
    wmma_declarations(w, st, s_.mma_stages, !a_.tf32);
    gather_setup(w);
    wmma_accumulators(w, a_.tf32);
    MmaLoop loop;
    loop.stages = s_.mma_stages, loop.slice_fragments = s_.slice_fragments, loop.tf32 = a_.tf32;
    loop.frag_type = frag_t, loop.stage_type = st, loop.a_at = a_at();
    loop.issue = [&](Writer& x, const std::string& k, const std::string& stage) { issue_async(x, k, stage); };
    loop.load = [&](Writer& x, const std::string& k) { load(x, k); };
    mma_slice_loop(w, loop);
    if (a_.reduce != dsl::ReduceOp::none) {
      // why_not_mma: TF32 only, so the accumulators are in the registers.
      w.comment("The reduction over the filters: each lane folds its filters of each of its rows into one partial, the "
                "four lanes of a row combine theirs by shuffles, each warp's partial of a pixel meets the other kWN - 1 "
                "in shared memory, and one thread a pixel combines and stores them (the block holds every filter).");
      w.line("__shared__ float ksol_red[kBM][kWN + 1];");
      wmma_store_fragments(
          w, true,
          [&](Writer& e) {
            e.line("if (pix >= pixels) continue;");
            e.line("const int64_t filt = tile_n + wn0 + j * 16 + fc;");
            reduce_filt(e, value, "frag_v");
          },
          [&](Writer& r) {
            r.line("const int64_t pix = tile_m + wm0 + i * 16 + fr;");
            pixel_coords(r);
            r.line("float part = " + reduce_identity() + ";");
          },
          true,
          [&](Writer& r) {
            r.line("part = " + combine("part", "__shfl_xor_sync(0xffffffffu, part, 1)") + ";");
            r.line("part = " + combine("part", "__shfl_xor_sync(0xffffffffu, part, 2)") + ";");
            r.line("if (lane % 4 == 0) ksol_red[wm0 + i * 16 + fr][warp / kWM] = part;");
          });
      reduce_store(w, "kWN");
      w.close();
      w.line();
      return;
    }
    if (a_.tf32)
      w.comment(std::string("Each accumulator straight from the registers: a warp's store covers 8 consecutive pixels ") +
                (a_.nhwc ? "x 4 filters two apart" : "of 4 filters (a 32-byte sector each)") +
                "; a lane's pixel is decoded once for each of its rows.");
    else
      w.comment(std::string("Each fragment through the warp's staging tile: a lane stores 8 of its 16 x 16 outputs, ") +
                (a_.nhwc ? "lanes 0-15 consecutive filters of one pixel" : "lanes 0-15 consecutive pixels of one filter") +
                ", so a warp's stores cover consecutive addresses.");
    auto store = [&](Writer& e) {
      e.line("if (pix >= pixels) continue;");
      e.line("const int64_t filt = tile_n + wn0 + j * 16 + fc;");
      store_filt(e, value, "frag_v");
    };
    auto row = [&](Writer& r) {
      r.line("const int64_t pix = tile_m + wm0 + i * 16 + fr;");
      pixel_out(r);
    };
    if (a_.nhwc && !a_.tf32) {
      // WMMA with lanes on consecutive filters: each output decodes its pixel.
      wmma_store_fragments(w, false, [&](Writer& e) {
        row(e);
        store(e);
      });
    } else {
      // A lane's pixel is the same for every filter of a fragment row: decoded once per row.
      wmma_store_fragments(w, !a_.nhwc, store, row, a_.tf32);
    }
    w.close();
    w.line();
  }

  // CUTLASS's conv for the tma path, and ksol_run_tma, which runs it or returns -1 for a shape it
  // cannot take.
  void cutlass_kernel(Writer& w, const std::string& act) {
    const std::string ta = cutlass_type(a_.in_type), td = cutlass_type(a_.out->type);
    if (!a_.fu.identity) cutlass_activation_fn(w, act);
    w.comment("The tile's K mode counts channels: a k-iteration is one (r, s) tap of " + std::to_string(s_.tile_k) +
              " channels. Both operands take the TensorNHWC tag: the builder reads the filter as [K, R, S, C].");
    w.line("using TileShape = cute::Shape<cute::_" + std::to_string(s_.tile_m) + ", cute::_" + std::to_string(s_.tile_n) +
           ", cute::Shape<cute::_" + std::to_string(s_.tile_k) + ">>;");
    w.line("using ClusterShape = cute::Shape<cute::_" + std::to_string(s_.cm) + ", cute::_" + std::to_string(s_.cn) + ", cute::_1>;");
    const std::string align_in = std::to_string(16 / type_bytes(a_.in_type));
    const std::string align_out = std::to_string(16 / type_bytes(a_.out->type));
    w.comment("The epilogue: the non-cooperative TMA epilogue of the conv's one consumer warpgroup" +
              std::string(a_.fu.identity && !a_.fu.bias ? "" : ", with the fusion of the program's epilogue") +
              "; no source tensor C.");
    w.line("using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<");
    w.line("    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,");
    w.line("    cutlass::epilogue::collective::EpilogueTileAuto, float, float,");
    w.line("    void, cutlass::layout::TensorNHWC, " + align_out + ", " + td + ", cutlass::layout::TensorNHWC, " + align_out + ",");
    w.line("    cutlass::epilogue::TmaWarpSpecialized, " + cutlass_fusion_op(a_.fu, td, "void"));
    w.line(">::CollectiveOp;");
    const std::string stages =
        s_.stages ? "cutlass::conv::collective::StageCount<" + std::to_string(s_.stages) + ">"
                  : "cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>";
    w.comment(std::string("The mainloop: TMA im2col loads of the image, tiled loads of the filter, ") +
              (a_.tf32 ? "TF32 WGMMAs on the f32 data" : "WGMMAs") + " accumulating in f32.");
    w.line("using CollectiveMainloop = typename cutlass::conv::collective::CollectiveBuilder<");
    w.line("    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,");
    w.line("    " + ta + ", cutlass::layout::TensorNHWC, " + align_in + ", " + ta + ", cutlass::layout::TensorNHWC, " +
           align_in + ", float,");
    w.line("    TileShape, ClusterShape, " + stages + ",");
    w.line("    cutlass::conv::KernelImplicitTmaWarpSpecializedSm90");
    w.line(">::CollectiveOp;");
    w.line("using ProblemShape = cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop, 2>;");
    w.line("using ConvKernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;");
    w.line("using Conv = cutlass::conv::device::ConvUniversalAdapter<ConvKernel>;");
    w.line();
    std::string params = "const " + std::string(cuda_type(a_.in_type)) + "* x, const " + cuda_type(a_.in_type) + "* f, ";
    if (a_.fu.bias) params += std::string("const ") + cuda_type(a_.fu.bias->type) + "* bias, ";
    params += std::string(cuda_type(a_.out->type)) + "* y, int64_t n_, int64_t h_, int64_t w_, int64_t c_, int64_t k_, "
              "int64_t r_, int64_t s_, int64_t p_, int64_t q_, cudaStream_t stream";
    w.comment("Returns -1 when CUTLASS cannot take the shape (the caller runs the CUDA-core kernel), else 0 or an error.");
    w.open("static int ksol_run_tma(" + params + ")");
    w.line("for (int64_t v : {n_, h_, w_, c_, k_, r_, s_, p_, q_})");
    w.line("  if (v < 1 || v > INT32_MAX) return -1;");
    w.line("if (n_ * p_ * q_ > INT32_MAX) return -1;");
    w.comment("The padding: below from the program's offsets; above what makes CUTLASS's output extents P and Q "
              "(the image's zeros past its end).");
    w.line("const int64_t pad_h = " + std::to_string(-a_.off_h) + ", pad_w = " + std::to_string(-a_.off_w) + ";");
    w.line("const int64_t pad_h_hi = (p_ - 1) * " + std::to_string(a_.stride_h) + " + (r_ - 1) * " + std::to_string(a_.dil_h) +
           " + 1 - h_ - pad_h;");
    w.line("const int64_t pad_w_hi = (q_ - 1) * " + std::to_string(a_.stride_w) + " + (s_ - 1) * " + std::to_string(a_.dil_w) +
           " + 1 - w_ - pad_w;");
    w.comment("Below 0, the image's last rows or columns are never read: no padding gives the same extents "
              "(CUTLASS's division drops the remainder), which the shape check below confirms. CUTLASS's "
              "can_implement checks the paddings and the im2col corners.");
    w.line("const int64_t pad_h_up = pad_h_hi < 0 ? 0 : pad_h_hi, pad_w_up = pad_w_hi < 0 ? 0 : pad_w_hi;");
    w.line("if (pad_h_up > 256 || pad_w_up > 256) return -1;");
    w.line("ProblemShape problem(cutlass::conv::Mode::kCrossCorrelation,");
    w.line("                     {int(n_), int(h_), int(w_), int(c_)},  // the image [N, H, W, C]");
    w.line("                     {int(k_), int(r_), int(s_), int(c_)},  // the filter [K, R, S, C]");
    w.line("                     {int(pad_h), int(pad_w)}, {int(pad_h_up), int(pad_w_up)},");
    w.line("                     {" + std::to_string(a_.stride_h) + ", " + std::to_string(a_.stride_w) + "}, {" +
           std::to_string(a_.dil_h) + ", " + std::to_string(a_.dil_w) + "}, 1);");
    w.line("if (problem.shape_C[1] != p_ || problem.shape_C[2] != q_) return -1;");
    w.comment("The output's strides, mode ((q, p, n), k): k contiguous.");
    w.line("typename CollectiveEpilogue::StrideD stride_d{};");
    w.line("cute::get<0, 0>(stride_d) = k_;");
    w.line("cute::get<0, 1>(stride_d) = k_ * q_;");
    w.line("cute::get<0, 2>(stride_d) = k_ * q_ * p_;");
    w.line("typename Conv::Arguments args(problem, {reinterpret_cast<const " + ta + "*>(x), reinterpret_cast<const " + ta +
           "*>(f)},");
    w.line("                              {{}, nullptr, stride_d, reinterpret_cast<" + td + "*>(y), stride_d});");
    w.line("args.epilogue.thread.alpha = 1.0f;");
    w.line("args.epilogue.thread.beta = 0.0f;");
    if (a_.fu.bias)
      w.line("args.epilogue.thread.bias_ptr = reinterpret_cast<const " + cutlass_type(a_.fu.bias->type) + "*>(bias);");
    w.line("if (Conv::can_implement(args) != cutlass::Status::kSuccess) return -1;");
    w.comment("The kernel is not persistent: it takes no workspace.");
    w.line("if (Conv::get_workspace_size(args) != 0) return -1;");
    w.line("Conv conv;");
    w.line("if (conv.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return 6;");
    w.line("if (conv.run(stream) != cutlass::Status::kSuccess) return 7;");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 8;");
    w.close();
    w.line();
  }

  void host(Writer& w) {
    open_ksol_run(w, p_, abi_, names_);
    w.comment("With C = 0 the kernel still runs: its sums are empty and it writes zeros.");
    w.line("const int64_t pixels = " + batch() + " * " + P() + " * " + Q() + ";");
    if (reduced()) {
      w.comment("An empty reduction over the filters (K = 0) is not generated.");
      w.line("if (pixels == 0) return 0;");
      w.line("if (" + K() + " == 0) return 3;");
    } else {
      w.line("if (pixels == 0 || " + K() + " == 0) return 0;");
    }
    if (s_.tma) {
      std::string aligned = "reinterpret_cast<uintptr_t>(" + X() + ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + F() +
                            ") % 16 == 0 && reinterpret_cast<uintptr_t>(" + Y() + ") % 16 == 0";
      if (a_.fu.bias) aligned += " && reinterpret_cast<uintptr_t>(" + names_[a_.fu.bias->name] + ") % 16 == 0";
      const int align_c = 16 / type_bytes(a_.in_type), align_k = std::max(align_c, 16 / type_bytes(a_.out->type));
      w.comment("TMA needs 16-byte aligned rows (C a multiple of " + std::to_string(align_c) + ", K of " +
                std::to_string(align_k) + ") and aligned bases; CUTLASS checks the rest.");
      w.open("if (" + C() + " % " + std::to_string(align_c) + " == 0 && " + K() + " % " + std::to_string(align_k) +
             " == 0 && " + aligned + ")");
      std::string args = X() + ", " + F() + ", ";
      if (a_.fu.bias) args += names_[a_.fu.bias->name] + ", ";
      args += Y() + ", " + batch() + ", " + H() + ", " + W() + ", " + C() + ", " + K() + ", " + R() + ", " + S() + ", " +
              P() + ", " + Q() + ", stream";
      w.line("const int r = ksol_run_tma(" + args + ");");
      w.line("if (r != -1) return r;");
      w.close();
    }
    w.line("const int64_t tiles_m = (pixels + kBM - 1) / kBM, tiles_n = (" + K() + " + kBN - 1) / kBN;");
    if (a_.reduce != dsl::ReduceOp::none) {
      w.comment("The reduction over the filters is combined within a block: every filter in one tile.");
      w.line("if (tiles_n > 1) return 3;");
    }
    w.comment("The kernels keep an element's image index in 32 bits.");
    w.line("if (tiles_m > 2147483647 || tiles_n > 65535 || " + batch() + " > 2147483647) return 3;");
    w.comment("The kernel counts reduction positions, image rows and columns and an element's offset within its image "
              "in 32 bits.");
    w.line("if (" + C() + " * " + R() + " * " + S() + " > 2147483647 - kBK || " + H() + " > 1000000000 || " + W() +
           " > 1000000000 || " + P() + " > 1000000000 || " + Q() + " > 1000000000 || (" + H() + " * " + W() + " > 0 && " +
           C() + " > 2147483647 / (" + H() + " * " + W() + "))" + [&] {
             // A filter of dims (R, S at run time) is bounded too; fixed extents are checked in analyse().
             std::string t;
             for (const std::string& e : {R(), S()})
               if (!dsl::extent_is_number(e)) t += " || " + e + " > 100000000";
             return t;
           }() + ") return 3;");
    // Strided and dilated positions (p * stride + r * dilation) stay in 32 bits as well.
    auto reach = [&](int64_t stride, int64_t dil, const std::string& out, const std::string& taps) {
      if (stride == 1 && dil == 1) return;
      w.line("if (" + out + " * " + std::to_string(stride) + " + " + taps + " * " + std::to_string(dil) +
             " > 1900000000) return 3;");
    };
    reach(a_.stride_h, a_.dil_h, P(), R());
    reach(a_.stride_w, a_.dil_w, Q(), S());
    w.line("const dim3 grid{unsigned(tiles_m), unsigned(tiles_n), 1u};");
    w.line("const KsolDiv ksol_dplane = ksol_divider(" + P() + " * " + Q() + "), ksol_dq = ksol_divider(" + Q() + ");");
    if (flat_template()) {
      w.comment("Element offsets from the tensors' starts in 32 bits where the image tensor and the filter each have "
                "fewer than 2^31 elements.");
      w.line("const bool flat = " + batch() + " * " + C() + " * " + H() + " * " + W() + " <= 2147483647 && " + K() +
             " * " + C() + " * " + R() + " * " + S() + " <= 2147483647;");
      w.open("if (flat)");
      mma_launch(w, simt_name_ + "<true>", "grid", "kThreads", params_pass(), pipelined());
      w.close();
      w.open("else");
      mma_launch(w, simt_name_ + "<false>", "grid", "kThreads", params_pass(), pipelined());
      w.close();
    } else {
      mma_launch(w, simt_name_, "grid", "kThreads", params_pass(), pipelined());
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

const FamilyGenerator& family() {
  static const FamilyGenerator f{
      "conv",
      {
          {"mainloop", "auto", {"simt", "tma", "mma"}},
          {"tile", "[64, 64, 16]",
           {"[32, 32, 8]", "[64, 32, 8]", "[64, 32, 16]", "[64, 64, 8]", "[64, 64, 16]", "[64, 64, 32]", "[64, 128, 16]",
            "[128, 32, 16]", "[128, 64, 8]", "[128, 64, 16]", "[128, 128, 8]", "[128, 128, 16]", "[128, 128, 32]",
            "[256, 128, 16]", "[256, 128, 32]", "[64, 128, 64]", "[64, 256, 64]", "[128, 64, 64]", "[128, 128, 64]", "[128, 128, 128]"}},
          {"thread_tile", "[4, 4]", {"[2, 2]", "[4, 2]", "[2, 4]", "[4, 4]", "[4, 8]", "[8, 4]", "[8, 8]"}},
          {"cluster", "[1, 1]", {"[1, 1]", "[2, 1]", "[1, 2]"}},
          {"stages", "auto", {"auto", "2", "3", "4"}},
          {"gather", "auto", {"auto", "decode"}},
          {"fragments", "auto", {"auto", "slice"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace

const FamilyGenerator& conv_family() { return family(); }

bool conv_uses_tma(const dsl::Program& p) {
  const Analysis a = analyse(p);
  return read_sched(p, a).tma;
}

bool conv_allows_tensor_cores(const dsl::Program& p) {
  try {
    return why_not_mma(analyse(p)).empty();
  } catch (const Refused&) {
    return false;
  }
}

bool conv_uses_tensor_cores(const dsl::Program& p) {
  try {
    const Analysis a = analyse(p);
    const Sched s = read_sched(p, a);
    return s.tma || s.mma;
  } catch (const Refused&) {
    return false;
  }
}

}  // namespace ksol::codegen::detail
