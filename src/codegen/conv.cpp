// The conv family: a 2-D convolution (cross-correlation, as the frameworks compute it) of an NCHW
// image by a KCRS filter, zero outside the image,
//   Y[n, k, p, q] = sum(X[n, c, p+r+a, q+s+b] * F[k, c, r, s]) over c, r, s
// (a, b constant offsets: -1 for a 3x3 filter with padding 1; p*2+r-1 reads at stride 2,
// p+r*2-2 at dilation 2), image, filter and sum in f32; optionally the sum into an intermediate
// and one elementwise output definition after it (the epilogue: Y[n, k, p, q] = relu(acc[n, k,
// p, q] + b[k])), applied to the accumulators in registers before the store.
//
// The kernel is an implicit GEMM on CUDA cores: GEMM rows are the output pixels (n, p, q)
// flattened, columns the filters k, and the reduction runs over (c, r, s) flattened in the
// filter's own order, so a filter row is contiguous. A block computes a tile of pixels x filters;
// the reduction advances a slice at a time through shared memory, the image slice gathered
// (im2col) while it is loaded, taps outside the image loaded as 0; each thread accumulates a
// thread_tile of outputs with one fmaf per product. The tensor cores are never used: they take
// f32 only as TF32, which misses the tolerance of an f32 convolution.
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
    "tap_r", "tap_s", "hi", "wi", "v", "filt", "out", "tiles_m", "tiles_n", "grid", "oh", "ow"};

// The program read as a convolution: which parameter plays which part, and the extents' names.
struct Analysis {
  const Definition* def = nullptr;  // the sum
  const Definition* epi = nullptr;  // the output's definition after the sum, or nullptr
  const Param* image = nullptr;     // X[N, C, H, W]
  const Param* filter = nullptr;    // F[K, C, R, S]
  const Param* out = nullptr;       // Y[N, K, P, Q]
  int64_t off_h = 0, off_w = 0;   // the constant offsets of the image's spatial reads
  int64_t stride_h = 1, stride_w = 1;  // the output index's coefficients there (h*2+r-1)
  int64_t dil_h = 1, dil_w = 1;        // the filter index's (h+r*2-2)
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

// The epilogue reads the sum at the output's indices and dense inputs at those indices or some of
// them in order (b[k], Z[n, k, h, w]), never the image or the filter; the DSL's recogniser has
// checked the same, this states what the generator relies on.
void epilogue_reads(const dsl::Program& p, const Analysis& a) {
  const Definition& e = *a.epi;
  for (const Expr* r : reads_in(e.body)) {
    if (r->name == a.def->name) {
      for (size_t i = 0; i < r->indices.size(); ++i)
        if (r->indices[i].var != e.indices[i] || !r->indices[i].plus.empty() || r->indices[i].offset != 0)
          throw Refused("the epilogue must read the sum as " + a.def->name + "[" + join(e.indices) + "], not " +
                        format_expr(*r));
      continue;
    }
    const Param* prm = p.param(r->name);
    if (!prm || prm == a.image || prm == a.filter || prm == a.out)
      throw Refused("the epilogue reads '" + r->name + "'; it may read the sum and inputs other than the image and filter");
    if (prm->format != "dense") throw Refused("the epilogue reads '" + r->name + "', which is " + prm->format);
    size_t next = 0;
    for (const dsl::IndexExpr& ix : r->indices) {
      while (next < e.indices.size() && e.indices[next] != ix.var) ++next;
      if (next == e.indices.size() || !ix.plus.empty() || ix.offset != 0)
        throw Refused("the epilogue reads " + format_expr(*r) + "; an epilogue input is read at the output's indices [" +
                      join(e.indices) + "] or some of them in that order");
      ++next;
    }
  }
  check_emittable(e.body);
}

// The reads' exact layout; the DSL's family recogniser has checked the program's shape already.
Analysis analyse(const dsl::Program& p) {
  Analysis a;
  const char* form = "Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s";
  if (p.defs.empty() || p.defs.size() > 2 || p.outputs.size() != 1)
    throw Refused(std::string("the conv family generates one output from a sum, ") + form +
                  ", and at most one elementwise definition after it");
  const Definition& d = p.defs.front();
  a.def = &d;
  a.out = &p.outputs.front();
  if (p.defs.size() == 2) {
    a.epi = &p.defs[1];
    if (!a.epi->is_output || a.epi->reduce != dsl::ReduceOp::none)
      throw Refused("the definition after the sum, '" + a.epi->name + "', must be the output's elementwise definition");
  } else if (!d.is_output) {
    throw Refused("the sum '" + d.name + "' is not the output and no definition follows it");
  }
  if (d.reduce != dsl::ReduceOp::sum || d.over_rest.size() != 2 || d.indices.size() != 4)
    throw Refused("the conv family generates a 2-D convolution with a batch: " + std::string(form));
  if (d.body.kind != Expr::Kind::binary || d.body.op != "*" || d.body.args[0].kind != Expr::Kind::read ||
      d.body.args[1].kind != Expr::Kind::read)
    throw Refused("the sum of '" + d.name + "' must be a product of two reads, without casts; it is " + format_expr(d.body));
  const Expr* x = &d.body.args[0];
  const Expr* f = &d.body.args[1];
  auto adds = [](const Expr& r) {
    for (const dsl::IndexExpr& ix : r.indices)
      if (!ix.plus.empty()) return true;
    return false;
  };
  if (!adds(*x)) std::swap(x, f);
  a.image = p.param(x->name);
  a.filter = p.param(f->name);
  // With an epilogue the output may have any type its expression converts to (bf16(relu(...))).
  for (const Param* prm : {a.image, a.filter, a.epi ? a.image : a.out})
    if (prm->type != Type::f32)
      throw Refused("'" + prm->name + "' is " + type_name(prm->type) +
                    "; the conv family generates f32 convolutions (CUDA cores, no TF32)");
  const std::string &n = d.indices[0], &k = d.indices[1], &h = d.indices[2], &w = d.indices[3];
  // The reduced indices by their part: c is the one the image reads at a plain position.
  if (x->indices.size() != 4 || f->indices.size() != 4)
    throw Refused("'" + format_expr(*x) + "' and '" + format_expr(*f) + "' must both have 4 indices (NCHW and KCRS)");
  const std::string& c = x->indices[1].var;
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
                        x->indices[1].plus.empty() && x->indices[1].offset == 0 &&
                        spatial(2, h, r, a.off_h, a.stride_h, a.dil_h) && spatial(3, w, s, a.off_w, a.stride_w, a.dil_w);
  if (!image_ok)
    throw Refused("'" + format_expr(*x) + "' must read the NCHW image as X[" + n + ", c, " + h + "*u+r*d+a, " + w +
                  "*v+s*e+b] (strides u, v, dilations d, e, offsets a, b integers)");
  // The kernel counts image rows and columns in 32 bits: position = output * stride + tap *
  // dilation + offset, with outputs and taps bounded on the host (ksol_run), the rest here.
  for (int64_t v : {a.off_h, a.off_w})
    if (v < -100000000 || v > 100000000)
      throw Refused("'" + format_expr(*x) + "': an offset of " + std::to_string(v) +
                    " is beyond 10^8, and the kernel counts image rows and columns in 32 bits");
  for (int64_t v : {a.stride_h, a.stride_w, a.dil_h, a.dil_w})
    if (v > 1000000)
      throw Refused("'" + format_expr(*x) + "': a stride or dilation of " + std::to_string(v) + " is beyond 10^6");
  for (int i : {2, 3})
    if (const std::string& e = a.filter->extents[i]; dsl::extent_is_number(e) && (e.size() > 9 || std::stoll(e) > 100000000))
      throw Refused("the filter's extent " + e + " is beyond 10^8, and the kernel counts image rows and columns in 32 bits");
  const std::vector<std::string> reduced = {d.over, d.over_rest[0], d.over_rest[1]};
  for (const std::string& v : {c, r, s})
    if (std::count(reduced.begin(), reduced.end(), v) != 1)
      throw Refused("'" + format_expr(*x) + "' must read the reduced indices c, r, s (one each) at positions 2, 3 and 4");
  if (c == r || c == s || r == s)
    throw Refused("'" + format_expr(*x) + "' must read three different reduced indices");
  auto plain = [&](const Expr& e, const std::vector<std::string>& vars) {
    for (size_t i = 0; i < vars.size(); ++i)
      if (e.indices[i].var != vars[i] || !e.indices[i].plus.empty() || e.indices[i].offset != 0) return false;
    return true;
  };
  if (!plain(*f, {k, c, r, s}))
    throw Refused("'" + format_expr(*f) + "' must read the KCRS filter as " + f->name + "[" + join({k, c, r, s}) + "]");
  if (a.filter->zero_outside) throw Refused("'" + a.filter->name + "' is read inside its extents only; drop 'outside 0'");
  if (!a.image->zero_outside)
    throw Refused("'" + a.image->name + "' is read outside its extents; declare it 'outside 0' (zero padding)");
  if (d.type != Type::f32) throw Refused("the sum '" + d.name + "' must be f32");
  if (a.epi) epilogue_reads(p, a);
  for (const Param& prm : p.inputs)
    if (&prm != a.image && &prm != a.filter && !(a.epi && reads_param(a.epi->body, prm.name)))
      throw Refused("input '" + prm.name + "' is not read by the conv or its epilogue");
  return a;
}

struct Sched {
  int64_t bm = 64, bn = 64, bk = 16;  // tile: pixels x filters x reduction slice
  int64_t tm = 4, tn = 4;             // thread_tile: pixels x filters per thread
  int64_t threads = 256;
  int64_t shared_bytes = 0;
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

Sched read_sched(const dsl::Program& p) {
  Knobs k(p, family());
  Sched s;
  std::vector<int64_t> tile = list_knob(k, "tile", 3, "[PIXELS, FILTERS, SLICE]");
  std::vector<int64_t> tt = list_knob(k, "thread_tile", 2, "[PIXELS, FILTERS]");
  s.bm = tile[0], s.bn = tile[1], s.bk = tile[2];
  s.tm = tt[0], s.tn = tt[1];
  const std::string tile_text = "tile = " + list_text(tile), tt_text = "thread_tile = " + list_text(tt);
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
  // The image slice [SLICE][PIXELS] and the filter slice [SLICE][FILTERS + 1] (padded so that
  // its column-wise stores fall in different banks).
  s.shared_bytes = 4 * s.bk * (s.bm + s.bn + 1);
  if (s.shared_bytes > kStaticSharedBytes)
    throw Refused(tile_text + " stages " + std::to_string(s.shared_bytes) +
                  " bytes of shared memory per block; static shared memory is at most 49152 (no opt-in)");
  return s;
}

void check(const dsl::Program& p, const Binding& b) {
  resolve_binding(p, b);
  analyse(p);
  read_sched(p);
}

std::string name_of(const dsl::Program& p, const Sched& s) {
  return name_stem(p, "conv") + "_" + std::to_string(s.bm) + "x" + std::to_string(s.bn) + "x" + std::to_string(s.bk) +
         "_t" + std::to_string(s.tm) + "x" + std::to_string(s.tn);
}

std::string kernel_name_of(const dsl::Program& p) {
  analyse(p);
  return name_of(p, read_sched(p));
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(analyse(p)), s_(read_sched(p)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    name_ = name_of(p_, s_);
  }

  std::string run() {
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (conv family).");
    for (const Definition& d : p_.defs) w.line("//   " + format_definition(d));
    w.comment("Implicit GEMM on CUDA cores: rows are the output pixels (n, h, w) flattened, columns the filters, "
              "the reduction (c, r, s) flattened in the filter's order. A block computes " + std::to_string(s_.bm) +
              " pixels x " + std::to_string(s_.bn) + " filters with " + std::to_string(s_.threads) +
              " threads, each holding " + std::to_string(s_.tm) + " x " + std::to_string(s_.tn) +
              " f32 accumulators (pixels ty + i * kTY, filters tx + j * kTX, so stores are coalesced); the reduction "
              "advances " + std::to_string(s_.bk) + " at a time through shared memory, the image slice gathered "
              "(im2col) while it is loaded, taps outside the image as 0, the next slice staged in registers while the "
              "current one is multiplied. One fmaf per product; no TF32.");
    w.raw(includes(p_));
    w.line();
    Helpers helpers;
    const std::string value = epilogue(helpers);
    if (!helpers.empty()) w.raw(helpers.source() + "\n");
    w.line("namespace {");
    w.line("constexpr int kBM = " + std::to_string(s_.bm) + ", kBN = " + std::to_string(s_.bn) + ", kBK = " +
           std::to_string(s_.bk) + ";  // pixels x filters x reduction slice");
    w.line("constexpr int kTM = " + std::to_string(s_.tm) + ", kTN = " + std::to_string(s_.tn) + ";  // per thread");
    w.line("constexpr int kTY = kBM / kTM, kTX = kBN / kTN, kThreads = kTX * kTY;");
    w.line("// Slice elements each thread loads: of the image (kLA) and of the filter (kLB).");
    w.line("constexpr int kLA = (kBK * kBM + kThreads - 1) / kThreads, kLB = (kBK * kBN + kThreads - 1) / kThreads;");
    w.line();
    kernel(w, value);
    w.line("}  // namespace");
    w.line();
    host(w);
    return w.text();
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  Sched s_;
  Names names_;
  std::string name_;
  // Whether the epilogue reads an input at h or w apart from the plane's offset (g[h]).
  bool uses_h_ = false, uses_w_ = false;

  // The code of an extent: a dim's identifier or a fixed extent's number.
  std::string ext(const std::string& e) const { return dsl::extent_is_number(e) ? e : names_[e]; }
  std::string X() const { return names_[a_.image->name]; }
  std::string F() const { return names_[a_.filter->name]; }
  std::string Y() const { return names_[a_.out->name]; }
  std::string C() const { return ext(a_.image->extents[1]); }
  std::string H() const { return ext(a_.image->extents[2]); }
  std::string W() const { return ext(a_.image->extents[3]); }
  std::string K() const { return ext(a_.out->extents[1]); }
  std::string P() const { return ext(a_.out->extents[2]); }
  std::string Q() const { return ext(a_.out->extents[3]); }
  std::string batch() const { return ext(a_.out->extents[0]); }

  std::string params_decl() const { return kernel_params_decl(p_, abi_, names_, false); }
  std::string params_pass() const { return kernel_params_pass(p_, abi_, names_, false); }

  // `code` times a stride or dilation: itself when that is 1.
  static std::string times(int64_t k, const std::string& code) { return k == 1 ? code : code + " * " + std::to_string(k); }

  static std::string plus_offset(int64_t o) {
    if (o == 0) return "";
    return (o < 0 ? " - " : " + ") + std::to_string(o < 0 ? -o : o);
  }

  void load(Writer& w, const std::string& kbase) {
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int kk = " + kbase + " + (tid + l * kThreads) / kBM;");
    w.line("float v = 0.0f;");
    w.open("if (live[l] && kk < depth)");
    w.line("const int ch = kk / taps, rs = kk - ch * taps;");
    w.line("const int tap_r = rs / taps_s, tap_s = rs - tap_r * taps_s;");
    w.line("const int hi = base_h[l] + " + times(a_.dil_h, "tap_r") + ", wi = base_w[l] + " + times(a_.dil_w, "tap_s") + ";");
    w.line("if (hi >= 0 && hi < " + H() + " && wi >= 0 && wi < " + W() + ") v = img[l][(ch * " + H() + " + hi) * " + W() +
           " + wi];");
    w.close();
    w.line("ra[l] = v;");
    w.close();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("const int64_t filt = tile_n + e / kBK;");
    w.line("const int kk = " + kbase + " + e % kBK;");
    w.line("rb[l] = (e < kBK * kBN && filt < " + K() + " && kk < depth) ? " + F() + "[filt * depth + kk] : 0.0f;");
    w.close();
  }

  // The row-major offset `off` extended by one index of extent `extent` at `coord`.
  static std::string horner(const std::string& off, const std::string& extent, const std::string& coord) {
    if (off.empty()) return coord;
    const bool simple = off.find(' ') == std::string::npos;
    return (simple ? off : "(" + off + ")") + " * " + extent + " + " + coord;
  }

  // The epilogue's dims of the output pixel and filter, by position in the output's indices:
  // n, k, h, w are img_n, filt, oh, ow.
  static const char* coordinate(size_t pos) {
    static const char* const kCoords[] = {"img_n", "filt", "oh", "ow"};
    return kCoords[pos];
  }

  // The stored value from the accumulator `v`: the epilogue's expression in the output's type,
  // its reads of inputs addressed from the pixel's coordinates (a residual Z[n, k, h, w] at the
  // output's own offset, img_n * K * plane + filt * plane + rest), or `v` without an epilogue.
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
        pos.push_back(static_cast<size_t>(std::find(e.indices.begin(), e.indices.end(), ix.var) - e.indices.begin()));
      std::string off;
      for (size_t i = 0; i < pos.size(); ++i) {
        // h, w last and adjacent, as in Z[n, k, h, w]: one offset within the plane.
        std::string coord = coordinate(pos[i]), extent = ext(prm->extents[i]);
        if (pos[i] == 2 && i + 1 < pos.size() && pos[i + 1] == 3 && i + 2 == pos.size()) {
          off = horner(off, "plane", "rest");
          break;
        }
        if (pos[i] == 2) uses_h_ = true;
        if (pos[i] == 3) uses_w_ = true;
        off = horner(off, extent, coord);
      }
      return names_[prm->name] + "[" + (off.empty() ? "0" : off) + "]";
    };
    return em(e.body);
  }

  void kernel(Writer& w, const std::string& value) {
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "(" + params_decl() + ")");
    w.line("__shared__ float As[kBK][kBM];      // the image slice, gathered: As[tap][pixel]");
    w.line("__shared__ float Bs[kBK][kBN + 1];  // the filter slice, transposed: Bs[tap][filter]");
    w.comment("ty runs fastest, so a warp's threads hold consecutive pixels: coalesced image loads and output stores.");
    w.line("const int tid = threadIdx.x, ty = tid % kTY, tx = tid / kTY;");
    w.comment("Reduction positions and image coordinates fit in 32 bits (offsets and fixed extents are refused past 10^8, ksol_run checks the rest); addresses are 64-bit.");
    w.line("const int taps_r = int(" + ext(a_.filter->extents[2]) + "), taps_s = int(" + ext(a_.filter->extents[3]) +
           "), taps = taps_r * taps_s;");
    w.line("const int64_t plane = " + P() + " * " + Q() + ", pixels = " + batch() + " * plane;");
    w.line("const int depth = int(" + C() + " * taps);");
    w.line("const int64_t tile_m = int64_t(blockIdx.x) * kBM, tile_n = int64_t(blockIdx.y) * kBN;");
    w.comment("The pixel each image element this thread loads belongs to is the same in every slice: decode it once.");
    w.line("const float* img[kLA];");
    w.line("int base_h[kLA], base_w[kLA];");
    w.line("bool live[kLA];");
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("const int64_t pix = tile_m + e % kBM;");
    w.line("live[l] = e < kBK * kBM && pix < pixels;");
    w.line("const int64_t img_n = live[l] ? pix / plane : 0, rest = live[l] ? pix - img_n * plane : 0;");
    w.line("img[l] = " + X() + " + img_n * " + C() + " * " + H() + " * " + W() + ";");
    w.line("base_h[l] = " + times(a_.stride_h, "int(rest / " + Q() + ")") + plus_offset(a_.off_h) + ";");
    w.line("base_w[l] = " + times(a_.stride_w, "int(rest % " + Q() + ")") + plus_offset(a_.off_w) + ";");
    w.close();
    w.line("float acc[kTM][kTN];");
    w.line("#pragma unroll");
    w.line("for (int i = 0; i < kTM; ++i)");
    w.line("  #pragma unroll");
    w.line("  for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;");
    w.line("float ra[kLA], rb[kLB];");
    load(w, "0");
    w.open("for (int k0 = 0; k0 < depth; k0 += kBK)");
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("if (e < kBK * kBM) As[e / kBM][e % kBM] = ra[l];");
    w.close();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("if (e < kBK * kBN) Bs[e % kBK][e / kBK] = rb[l];");
    w.close();
    w.line("__syncthreads();");
    w.open("if (k0 + kBK < depth)");
    load(w, "(k0 + kBK)");
    w.close();
    simt_slice_fma(w);
    w.line("__syncthreads();  // the slices are rewritten for the next one");
    w.close();
    w.line("#pragma unroll");
    w.open("for (int i = 0; i < kTM; ++i)");
    w.line("const int64_t pix = tile_m + ty + i * kTY;");
    w.line("if (pix >= pixels) continue;");
    w.line("const int64_t img_n = pix / plane, rest = pix - img_n * plane;");
    if (uses_h_) w.line("const int64_t oh = rest / " + Q() + ";");
    if (uses_w_) w.line("const int64_t ow = rest " + (uses_h_ ? "- oh * " + Q() : "% " + Q()) + ";");
    w.line(std::string(cuda_type(a_.out->type)) + "* out = " + Y() + " + img_n * " + K() + " * plane + rest;");
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kTN; ++j)");
    w.line("const int64_t filt = tile_n + tx + j * kTX;");
    if (!a_.epi) {
      w.line("if (filt < " + K() + ") out[filt * plane] = acc[i][j];");
    } else {
      w.line("if (filt >= " + K() + ") continue;");
      w.line("const float v = acc[i][j];");
      w.line("out[filt * plane] = " + value + ";");
    }
    w.close();
    w.close();
    w.close();
    w.line();
  }

  void host(Writer& w) {
    open_ksol_run(w, p_, abi_, names_);
    w.comment("With C = 0 the kernel still runs: its sums are empty and it writes zeros.");
    w.line("const int64_t pixels = " + batch() + " * " + P() + " * " + Q() + ";");
    w.line("if (pixels == 0 || " + K() + " == 0) return 0;");
    w.line("const int64_t tiles_m = (pixels + kBM - 1) / kBM, tiles_n = (" + K() + " + kBN - 1) / kBN;");
    w.line("if (tiles_m > 2147483647 || tiles_n > 65535) return 3;");
    w.comment("The kernel counts reduction positions and image rows and columns in 32 bits.");
    w.line("if (" + C() + " * " + ext(a_.filter->extents[2]) + " * " + ext(a_.filter->extents[3]) + " > 2147483647 - kBK || " +
           H() + " > 1000000000 || " + W() + " > 1000000000 || " + P() + " > 1000000000 || " + Q() + " > 1000000000" + [&] {
             // A filter of dims (R, S at run time) is bounded too; fixed extents are checked in analyse().
             std::string t;
             for (int i : {2, 3})
               if (!dsl::extent_is_number(a_.filter->extents[i])) t += " || " + ext(a_.filter->extents[i]) + " > 100000000";
             return t;
           }() + ") return 3;");
    // Strided and dilated positions (p * stride + r * dilation) stay in 32 bits as well.
    auto reach = [&](int64_t stride, int64_t dil, const std::string& out, const std::string& taps) {
      if (stride == 1 && dil == 1) return;
      w.line("if (" + out + " * " + std::to_string(stride) + " + " + taps + " * " + std::to_string(dil) +
             " > 1900000000) return 3;");
    };
    reach(a_.stride_h, a_.dil_h, P(), ext(a_.filter->extents[2]));
    reach(a_.stride_w, a_.dil_w, Q(), ext(a_.filter->extents[3]));
    w.line("const dim3 grid{unsigned(tiles_m), unsigned(tiles_n), 1u};");
    w.line(name_ + "<<<grid, kThreads, 0, stream>>>(" + params_pass() + ");");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

const FamilyGenerator& family() {
  static const FamilyGenerator f{
      "conv",
      {
          {"tile", "[64, 64, 16]",
           {"[32, 32, 8]", "[64, 32, 8]", "[64, 32, 16]", "[64, 64, 8]", "[64, 64, 16]", "[64, 64, 32]", "[64, 128, 16]",
            "[128, 32, 16]", "[128, 64, 8]", "[128, 64, 16]", "[128, 128, 8]", "[128, 128, 16]", "[128, 128, 32]",
            "[256, 128, 32]"}},
          {"thread_tile", "[4, 4]", {"[4, 4]", "[4, 8]", "[8, 4]", "[8, 8]"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace

const FamilyGenerator& conv_family() { return family(); }

}  // namespace ksol::codegen::detail
