// The direct family: one reduction (sum, max, min, mean over one or several indices, argmax over
// one) of input reads at any indices, then at most one elementwise output definition (family.cpp
// says which programs are direct). Each thread computes whole output elements: it decodes its
// element's indices, loops over the reduced indices (the first outermost) reading every tensor
// where the body says, and applies the epilogue before the one store. Reads outside a tensor (a
// padded image, a pool's padding, a transposed convolution's taps between input pixels) give the
// tensor's `outside` value and load nothing.
//
// It is the simple form of a 3-D, 1-D, grouped or transposed convolution and of a pool: no tiling
// of the reduction, no shared memory but order = staged's tile of outputs, no reuse of a read
// between threads but what the caches give; a transposed
// convolution of stride s visits s^d taps per useful one. What it buys is that every such
// reduction the front end meets has a kernel of its own that is correct. What keeps its
// instructions few: 32-bit index arithmetic where the shape allows, and no bounds checks where
// every read stays inside its tensor (both chosen by the host per call).
//
// A contraction among them (a sum of the products of two input reads, f32 data in tf32(...) on
// both or bf16/f16 data in f32(...) on both, one read, the filter, at plain indices) also has a
// tensor-core kernel (mainloop = mma; auto takes it): an implicit GEMM whose rows are the output
// indices the filter does not take (n, d, h, w), columns those only the filter takes (k), a grid
// layer per index both take (a group g), and the reduction the reduced indices in the filter's
// order. The image is gathered through its index expressions (offsets, strides, dilations, a
// transposed convolution's divisors, zero outside) into shared memory a slice at a time (a divided
// index is split into its phases, each block reducing over the taps its phase reads), the
// filter staged beside it, the slices multiplied as the conv family's mma kernel does (TF32 by
// mma.sync from registers, 16-bit data by WMMA fragments through a per-warp staging tile) and the
// epilogue applied to each output. Shapes
// with fewer than 16 columns or reduction positions, or more than 65535 grid layers, run the
// thread-per-output kernel, emitted into the same source.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "codegen/common.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::IndexExpr;
using dsl::Param;
using dsl::ReduceOp;
using dsl::Type;

const std::vector<std::string> kInternal = {
    "kThreads", "kMaxBlocks", "flat", "total", "rest", "acc", "best", "best_at", "value", "ok", "at", "blocks",
    "kBM", "kBN", "kBK", "kFM", "kFN", "kWM", "kWN", "kKS", "kPA", "kPB", "kLA", "kLB", "As", "Bs", "Cs", "tid", "warp",
    "lane", "wm0", "wn0", "c_frag", "a_frag", "b_frag", "ra", "rb", "k0", "kk", "l", "e", "fr", "fc", "t", "i", "j",
    "tile_m", "tile_n", "rows_total", "cols_total", "depth", "live", "nvcuda", "ksol_loop", "ksol_mma", "row", "col",
    "layer", "v", "tf32_round", "num", "grid", "layers", "depth_all", "ksol_phase", "ksol_tap0", "ksol_taps", "kStages",
    "slices", "stage", "ahead", "into", "s", "src", "kItems", "ksol_item", "ksol_row", "ksol_chunk", "Idx", "kChecked", "inside", "groups",
    "dv", "KsolDiv", "KsolDivs", "ksol_div", "ksol_mod", "ksol_divider", "ksol_tile_f", "ksol_tile_l", "ksol_lo_f",
    "ksol_lo_l", "ksol_stage", "ksol_lane", "ksol_warp", "ksol_k", "ksol_t", "kRows", "kSteps", "tiles"};

struct Shape {
  const Definition* reduce = nullptr;  // the reduction
  const Definition* out = nullptr;     // the output definition (the reduction itself without an epilogue)
  std::vector<std::string> over, over_extents;  // every reduced index, outermost first
};

Shape analyse(const dsl::Program& p) {
  Shape s;
  for (const Definition& d : p.defs)
    if (d.reduce != ReduceOp::none && !s.reduce) s.reduce = &d;
  if (!s.reduce) throw Refused("the direct family computes one reduction; the program has none");
  if (s.reduce->reduce == ReduceOp::scan) throw Refused("'" + s.reduce->name + "' is a scan; the direct family reduces");
  if (p.outputs.size() != 1) throw Refused("the direct family writes one output");
  s.out = p.def(p.outputs.front().name);
  s.over.push_back(s.reduce->over);
  s.over_extents.push_back(s.reduce->over_extent);
  for (size_t j = 0; j < s.reduce->over_rest.size(); ++j) {
    s.over.push_back(s.reduce->over_rest[j]);
    s.over_extents.push_back(s.reduce->over_rest_extents[j]);
  }
  for (const Definition& d : p.defs) check_emittable(d.body);
  return s;
}

// A contraction: sum(X[...] * F[...]) with F at plain indices (see the top of the file).
// A divided image index (b * o + a * t + p) / s of a transposed convolution, o a row index and t
// a reduced one: with o = s * o' + phase, the taps it reads are t = t0 + step * j (the t where the
// numerator is a multiple of s), so each phase is a GEMM of its own without the taps between input
// pixels.
struct Phase {
  size_t row = 0;        // o's position in the reduction's output indices
  std::string tap;       // t
  int64_t a = 1, b = 1, p = 0, s = 1;
  int64_t step = 1;      // s / gcd(|a|, s)
};

struct Contraction {
  const Expr* image = nullptr;   // the gathered read: the GEMM's A
  const Expr* filter = nullptr;  // the plain read: the GEMM's B
  Type in_type = Type::f32;
  bool tf32 = false;
  std::vector<size_t> rows, cols, layers;        // positions in the reduction's output indices
  std::vector<std::string> red, red_extents;     // the reduced indices in the filter's order
  std::vector<Phase> phases;                      // the divided image indices
  const Phase* phase_of_row(size_t pos) const {
    for (const Phase& ph : phases)
      if (ph.row == pos) return &ph;
    return nullptr;
  }
  const Phase* phase_of_tap(const std::string& t) const {
    for (const Phase& ph : phases)
      if (ph.tap == t) return &ph;
    return nullptr;
  }
};

int64_t gcd(int64_t x, int64_t y) {
  x = x < 0 ? -x : x, y = y < 0 ? -y : y;
  while (y) std::swap(x %= y, y);
  return x;
}

// The phases of the contraction's divided image indices: each whose two variables are a row index
// and a reduced one that no other image index reads.
void find_phases(const Definition& d, Contraction& c) {
  auto count = [&](const std::string& v) {
    int n = 0;
    for (const IndexExpr& ix : c.image->indices) n += (ix.var == v) + (ix.plus == v);
    return n;
  };
  auto row_pos = [&](const std::string& v) -> int {
    for (size_t k : c.rows)
      if (d.indices[k] == v) return static_cast<int>(k);
    return -1;
  };
  for (const IndexExpr& ix : c.image->indices) {
    if (ix.divisor <= 1 || ix.plus.empty()) continue;
    Phase ph;
    int pos = row_pos(ix.var);
    std::string tap = ix.plus;
    ph.b = ix.scale, ph.a = ix.plus_scale;
    if (pos < 0) {
      pos = row_pos(ix.plus);
      tap = ix.var;
      ph.b = ix.plus_scale, ph.a = ix.scale;
    }
    if (pos < 0 || std::find(c.red.begin(), c.red.end(), tap) == c.red.end()) continue;
    if (count(d.indices[pos]) != 1 || count(tap) != 1 || c.phase_of_row(pos) || c.phase_of_tap(tap)) continue;
    ph.row = static_cast<size_t>(pos);
    ph.tap = tap;
    ph.p = ix.offset;
    ph.s = ix.divisor;
    ph.step = ix.divisor / gcd(ph.a, ix.divisor);
    c.phases.push_back(ph);
  }
}

std::set<std::string> vars_of(const Expr& r) {
  std::set<std::string> v;
  for (const IndexExpr& ix : r.indices) {
    v.insert(ix.var);
    if (!ix.plus.empty()) v.insert(ix.plus);
  }
  return v;
}

// The program as a contraction the tensor cores can take, or why not.
std::string contraction_of(const dsl::Program& p, const Shape& s, Contraction* c) {
  const Definition& d = *s.reduce;
  if (d.reduce != ReduceOp::sum) return "the reduction is not a sum";
  if (d.type != Type::f32) return "the sum is not f32";
  if (d.body.kind != Expr::Kind::binary || d.body.op != "*") return "the sum is not of a product of two reads";
  const Expr* f[2];
  bool rounded[2], cast[2];
  for (int i = 0; i < 2; ++i) {
    const Expr* x = &d.body.args[i];
    rounded[i] = x->kind == Expr::Kind::call && x->name == "tf32";
    cast[i] = x->kind == Expr::Kind::cast && x->type == Type::f32;
    if (rounded[i] || cast[i]) x = &x->args[0];
    if (x->kind != Expr::Kind::read || !p.param(x->name) || p.def(x->name)) return "the sum is not of a product of two input reads";
    f[i] = x;
  }
  const Param* pa = p.param(f[0]->name);
  const Param* pb = p.param(f[1]->name);
  if (pa->type != pb->type) return "the two factors' tensors have different types";
  c->in_type = pa->type;
  if (c->in_type == Type::f32) {
    if (!rounded[0] || !rounded[1])
      return "the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write tf32(...) around both reads)";
    c->tf32 = true;
  } else if (is_half(c->in_type)) {
    if (!cast[0] || !cast[1]) return "the 16-bit factors are not both converted to f32";
  } else {
    return std::string("the factors are ") + type_name(c->in_type) + "; the tensor cores take f32 (as TF32), bf16 or f16";
  }
  const std::set<std::string> out(d.indices.begin(), d.indices.end());
  std::set<std::string> reduced;
  for (const std::string& v : s.over) reduced.insert(v);
  std::string why = "no factor is a filter read at plain indices of output and reduced indices, with an output index of its own";
  for (int fi : {1, 0}) {
    const Expr& x = *f[1 - fi];
    const Expr& w = *f[fi];
    bool plain = w.indices.size() == p.param(w.name)->extents.size();
    std::vector<std::string> wvars;
    for (const IndexExpr& ix : w.indices) {
      plain = plain && !dsl::index_is_compound(ix) && ix.offset == 0;
      wvars.push_back(ix.var);
    }
    if (!plain) continue;
    const std::set<std::string> wv(wvars.begin(), wvars.end()), xv = vars_of(x);
    if (wv.size() != wvars.size()) continue;  // an index twice
    bool ok = true;
    for (const std::string& v : wv) ok = ok && (out.count(v) || reduced.count(v));
    for (const std::string& v : xv) ok = ok && (out.count(v) || reduced.count(v));
    for (const std::string& v : reduced) ok = ok && wv.count(v);
    if (!ok) continue;
    if (p.param(x.name)->lowest_outside) {
      why = "the image '" + x.name + "' reads -inf outside it, which a product carries into the sum";
      continue;
    }
    Contraction t = *c;
    t.image = &x;
    t.filter = &w;
    for (size_t k = 0; k < d.indices.size(); ++k) {
      const std::string& v = d.indices[k];
      if (wv.count(v) && xv.count(v)) t.layers.push_back(k);
      else if (wv.count(v)) t.cols.push_back(k);
      else if (xv.count(v)) t.rows.push_back(k);
      else ok = false;
    }
    // A layer index is read plainly by the image too (a group g).
    for (const IndexExpr& ix : x.indices)
      for (size_t k : t.layers)
        if ((ix.var == d.indices[k] || ix.plus == d.indices[k]) && (dsl::index_is_compound(ix) || ix.offset != 0)) ok = false;
    if (!ok || t.rows.empty() || t.cols.empty()) continue;
    for (const std::string& v : wvars)
      if (reduced.count(v)) {
        t.red.push_back(v);
        t.red_extents.push_back(s.over_extents[std::find(s.over.begin(), s.over.end(), v) - s.over.begin()]);
      }
    find_phases(d, t);
    *c = t;
    return "";
  }
  return why;
}

struct Sched {
  bool mma = false;
  int64_t threads = 256;              // the thread-per-output kernel's
  int64_t items = 1;                  // the thread-per-output kernel's consecutive outputs per thread
  int64_t bm = 128, bn = 128, bk = 32;  // mma: rows x columns x reduction slice
  int64_t fm = 4, fn = 2;             // mma: fragments per warp
  int64_t stages = 1;                 // mma: 1 slice staged in registers, or 2-4 shared buffers filled by cp.async
  bool slice_fragments = false;       // mma (TF32): a slice's operands loaded after its barrier (fragments = slice)
  int fastest = -1;                   // loop: the output index decoded fastest (its position), -1 for the last
  bool tiles = false;                 // loop, order = tiles: `fastest` and the last index in 8 x 4 tiles
  bool staged = false;                // loop, order = staged: 32 x 32 tiles of both, the outputs through shared memory
};

// ceil(e / n) as C++ text, ((e + n - 1) / n), for the kernels and the host alike.
std::string ceil_text(const std::string& e, int64_t n) {
  return "((" + e + " + " + std::to_string(n - 1) + ") / " + std::to_string(n) + ")";
}

// order = tiles: a warp's 32 outputs are 8 consecutive values of the image's contiguous index
// (its reads 32-byte runs) times 4 of the output's last index (its stores 16-byte runs).
constexpr int kTileFast = 8, kTileLast = 4;
// order = staged: a block computes a kStage x kStage tile of the two indices with the image's
// contiguous index along the lanes (its reads 128-byte runs), keeps the outputs in shared memory,
// then stores them with the last index along the lanes (128-byte runs).
constexpr int kStage = 32;

// The position of the output index the image's contiguous (last) index reads, where that is an
// output index read as it is (a channels-last image's c: input[n, h*2+r, w*2+s, c]); -1 where
// there is none. The image is the reduction's first read that uses a reduced index.
int image_fastest(const Shape& sh) {
  const Definition& d = *sh.reduce;
  for (const Expr* r : reads_in(d.body)) {
    bool windowed = false;
    for (const IndexExpr& ix : r->indices)
      for (const std::string& o : sh.over)
        if (ix.var == o || ix.plus == o) windowed = true;
    if (!windowed || r->indices.empty()) continue;
    const IndexExpr& last = r->indices.back();
    if (!last.plus.empty() || last.scale != 1 || last.offset != 0) return -1;
    for (size_t k = 0; k < d.indices.size(); ++k)
      if (d.indices[k] == last.var) return static_cast<int>(k);
    return -1;
  }
  return -1;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<int64_t> list_of(const Knobs& k, const std::string& key, size_t n, const char* shape) {
  const dsl::ScheduleValue& v = k.value(key);
  if (v.kind != dsl::ScheduleValue::Kind::list || v.list.size() != n) throw Refused(key + " = " + value_text(v) + " must be a list " + shape);
  return v.list;
}

Sched read_sched(const dsl::Program& p, const Shape& sh, Contraction* c) {
  Knobs k(p, direct_family());
  Sched s;
  s.threads = k.threads();  // the thread-per-output kernel's (mma's fallback too)
  const std::string mainloop = k.one_of("mainloop", std::vector<std::string>{"auto", "loop", "mma"});
  Contraction local;
  const std::string why = contraction_of(p, sh, c ? c : &local);
  if (mainloop == "mma" && !why.empty()) throw Refused("mainloop = mma: " + why + "; use mainloop = loop");
  s.mma = mainloop == "mma" || (mainloop == "auto" && why.empty());
  std::vector<int64_t> tile = list_of(k, "tile", 3, "[ROWS, COLUMNS, SLICE]");
  std::vector<int64_t> tt = list_of(k, "thread_tile", 2, "[FM, FN]");
  const std::string tile_text = "tile = " + list_text(tile), tt_text = "thread_tile = " + list_text(tt);
  const dsl::ScheduleValue& st = k.value("stages");
  int64_t stages = 0;  // auto
  if (st.kind == dsl::ScheduleValue::Kind::integer) stages = st.integer;
  else if (!(st.kind == dsl::ScheduleValue::Kind::ident && st.ident == "auto"))
    throw Refused("stages = " + value_text(st) + " must be an integer or auto");
  const bool slice = k.one_of("fragments", std::vector<std::string>{"auto", "slice"}) == "slice";
  if (!s.mma) {
    if (slice) throw Refused("fragments = slice: the mma kernel's; mainloop = loop has no fragments to load (fragments = auto)");
    if (stages != 0)
      throw Refused("stages = " + std::to_string(stages) + ": the mma kernel's; mainloop = loop runs a thread per output "
                    "(leave stages auto)");
    // The mma kernel's knobs at other than their defaults (a schedule names every knob).
    if (tile != std::vector<int64_t>{128, 128, 16} || tt != std::vector<int64_t>{4, 2})
      throw Refused((tile != std::vector<int64_t>{128, 128, 16} ? tile_text : tt_text) +
                    ": the mma kernel's; mainloop = loop runs a thread per output (leave tile [128, 128, 16] and thread_tile [4, 2])");
    s.items = k.one_of("items", std::vector<int64_t>{1, 2, 4, 8});
    // order: which output index consecutive threads take. last: the output's own order (its
    // stores coalesced); image: the index the image's contiguous index reads (a channels-last
    // image's channel: its window reads coalesced, its stores strided), for one output a thread;
    // tiles: both, in tiles of kTileFast of that index times kTileLast of the last; staged: both,
    // through a kStage x kStage tile of outputs in shared memory.
    const std::string order = k.one_of("order", std::vector<std::string>{"auto", "last", "image", "tiles", "staged"});
    const int pos = image_fastest(sh);
    const int last = static_cast<int>(sh.reduce->indices.size()) - 1;
    const bool tiled = order == "tiles" || order == "staged";
    if ((order == "image" || tiled) && (pos < 0 || pos == last))
      throw Refused("order = " + order + ": the image's contiguous index does not read an output index other than the last " +
                    (order == "image" ? std::string("(order = last is the same kernel)")
                                      : std::string("(order = last reads and stores along the last already)")));
    if ((order == "image" || tiled) && s.items > 1)
      throw Refused("order = " + order + ": one output a thread (items 1); items > 1 takes consecutive outputs along the last index");
    if (order == "staged" && 32 % (s.threads / 32) != 0)
      throw Refused("order = staged: its 32 x 32 tile takes 32, 64, 128, 256, 512 or 1024 threads (threads = " +
                    std::to_string(s.threads) + " does not divide it into whole rows)");
    if (order == "image" || tiled || (order == "auto" && pos >= 0 && pos != last && s.items == 1)) s.fastest = pos;
    s.tiles = order == "tiles";
    s.staged = order == "staged";
    return s;
  }
  if (k.one_of("order", std::vector<std::string>{"auto", "last", "image", "tiles", "staged"}) != "auto")
    throw Refused("order = " + k.value("order").ident + ": the loop kernel's; the mma kernel tiles its outputs (leave order auto)");
  const Contraction& ct = c ? *c : local;
  try {
    // Its fallback runs at the default thread count: other counts would only repeat mma kernels.
    if (s.threads != 256)
      throw Refused("threads = " + std::to_string(s.threads) + ": the loop kernel's; mainloop = mma falls back to it at 256 "
                    "threads (leave threads 256)");
    s.bm = tile[0], s.bn = tile[1], s.bk = tile[2];
    s.fm = tt[0], s.fn = tt[1];
    s.stages = check_mma_stages(stages, ct.in_type);
    if (slice && !ct.tf32)
      throw Refused("fragments = slice: the TF32 mma.sync kernel's; WMMA's " + std::string(dsl::type_name(ct.in_type)) +
                    " fragments load a k-step at a time (fragments = auto)");
    s.slice_fragments = slice;
    if (k.one_of("items", std::vector<int64_t>{1, 2, 4, 8}) != 1)
      throw Refused("items = " + std::to_string(k.integer("items")) + ": the loop kernel's; mainloop = mma falls back to it "
                    "with one output per thread (leave items 1)");
    // A staged image element keeps its row's decoded indices and liveness beside its value.
    check_mma_tile(tile, tt, ct.tf32, ct.in_type, "rows", "columns", static_cast<int64_t>(ct.rows.size()) + 1, s.stages, slice);
  } catch (const Refused& r) {
    if (mainloop == "mma") throw;
    throw Refused(std::string(r.what()) + " (mainloop = auto takes mma for this program; mainloop = loop runs a thread per output)");
  }
  return s;
}

void check(const dsl::Program& p, const Binding& b) {
  resolve_binding(p, b);
  read_sched(p, analyse(p), nullptr);
}

std::string kernel_name_of(const dsl::Program& p) {
  const Sched s = read_sched(p, analyse(p), nullptr);
  const std::string stem = name_stem(p, "direct");
  if (!s.mma)
    return stem + "_t" + std::to_string(s.threads) + (s.items > 1 ? "_i" + std::to_string(s.items) : "") +
           (s.fastest >= 0 ? (s.tiles ? "_ot" : s.staged ? "_os" : "_o") + std::to_string(s.fastest) : "");
  // Shapes the mma kernel does not take run the thread-per-output kernel (`threads` a block).
  return stem + "_mma_" + std::to_string(s.bm) + "x" + std::to_string(s.bn) + "x" + std::to_string(s.bk) + "_w" +
         std::to_string(s.fm) + "x" + std::to_string(s.fn) + (s.stages >= 2 ? "_s" + std::to_string(s.stages) : "") +
         (s.slice_fragments ? "_fs" : "") + "_fbt" +
         std::to_string(s.threads);
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), s_(analyse(p)), names_(kInternal) {
    sched_ = read_sched(p_, s_, &c_);
    threads_ = sched_.threads;
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Definition& d : p_.defs) names_.add(d.name);
    for (const std::string& v : s_.reduce->indices) names_.add(v);
    for (const std::string& v : s_.over) names_.add(v);
    name_ = kernel_name_of(p_);
    loop_name_ = sched_.mma ? "ksol_loop" : name_;
    // Each phase's locals (its phase, first tap and tap count), named apart from the program's.
    for (const Phase& ph : c_.phases)
      phase_names_[ph.tap] = {names_.fresh("ksol_phase_" + names_[ph.tap]), names_.fresh("ksol_tap0_" + names_[ph.tap]),
                              names_.fresh("ksol_taps_" + names_[ph.tap])};
  }

  std::string run() {
    Writer body;
    kernel(body);
    if (sched_.mma) mma_kernel(body);
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (direct family).");
    for (const Definition& d : p_.defs) w.line("//   " + format_definition(d));
    if (sched_.mma)
      w.comment("An implicit GEMM on the tensor cores (ksol_mma::" + name_ + ") for shapes it takes; for the others, ksol_loop: ");
    if (sched_.staged)
      w.comment("A block per 32 x 32 tile of outputs (a grid-stride loop over the tiles, " + std::to_string(threads_) +
                " threads per block), each thread looping over the reduced indices for its outputs, which go through "
                "shared memory to coalesced stores; reads outside a tensor give its `outside` value.");
    else
      w.comment("One thread per output element (a grid-stride loop over them, " + std::to_string(threads_) +
                " threads per block) loops over the reduced indices; reads outside a tensor give its `outside` value.");
    w.raw(includes(p_));
    w.line("#include <math.h>");
    if (sched_.mma) w.line("#include <mma.h>");
    w.line();
    w.line("namespace {");
    w.line("constexpr int kThreads = " + std::to_string(threads_) + ";  // threads per block");
    w.line("constexpr int64_t kMaxBlocks = 2147483647;  // the grid's x limit: one output per thread below it");
    w.line("#ifndef KSOL_DIRECT_INDEX32_MAX");
    w.line("#define KSOL_DIRECT_INDEX32_MAX 2147483647LL  // the largest value the loop kernel's 32-bit indices take");
    w.line("#endif");
    w.line();
    if (!divisors_.empty()) index_divider_source(w, divisors_.list().size());
    return finish_source(w, helpers_, body.text(), [&](Writer& h) { host(h); });
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Shape s_;
  Contraction c_;
  Sched sched_;
  int64_t threads_ = 256;
  Names names_;
  Helpers helpers_;
  std::string name_, loop_name_;
  std::map<size_t, std::string> row_arrays_;  // the mma kernel's decoded rows per staged element
  std::map<std::string, std::array<std::string, 3>> phase_names_;  // per phase's tap: phase, tap0, taps
  // The type of the index arithmetic being emitted: the thread-per-output kernel's template
  // parameter Idx while it is written (32-bit where the host finds every value fits), else int64_t.
  std::string ix_ = "int64_t";
  // The loop kernel's divisors: the extents an output's flat index is decoded by, and with items > 1
  // the groups per row.
  IndexDivisors divisors_;

  std::string extent(const std::string& e) const { return dsl::extent_is_number(e) ? e : names_[e]; }

  // The loop kernel's `n / d` and `n % d` in Idx, by d's divider: a multiply-high and a shift in the
  // 32-bit instantiation (n and d under 2^31 there), the plain division in the 64-bit one.
  std::string idx_div(const std::string& n, const std::string& d) { return "Idx(" + divisors_.div(n, d, "sizeof(Idx) == 4") + ")"; }
  std::string idx_mod(const std::string& n, const std::string& d) { return "Idx(" + divisors_.mod(n, d, "sizeof(Idx) == 4") + ")"; }
  // The groups per row of the last index with items > 1, as the host computes it.
  std::string chunks_on_host() const {
    const std::string last_n = extent(s_.reduce->extents.back());
    return ceil_text(last_n, sched_.items);
  }

  // The code of one index of a read, as an expression of the index variables in ix_.
  std::string index_code(const IndexExpr& ix) const {
    auto term = [&](const std::string& v, int64_t c) {
      return c == 1 ? names_[v] : "(" + ix_ + ")" + std::to_string(c) + " * " + names_[v];
    };
    std::string s = term(ix.var, ix.scale);
    if (!ix.plus.empty()) s += (ix.plus_scale < 0 ? " - " : " + ") + term(ix.plus, ix.plus_scale < 0 ? -ix.plus_scale : ix.plus_scale);
    if (ix.offset != 0) s += (ix.offset < 0 ? " - " : " + ") + std::to_string(ix.offset < 0 ? -ix.offset : ix.offset);
    return s;
  }

  // Emits the loads of every input read in `e` into locals (each read's value, or the tensor's
  // `outside` value where its indices leave it) and returns the emitter's read map.
  std::map<const Expr*, std::string> loads(Writer& w, const Expr& e, const std::function<bool(const Expr&)>& which = {}) {
    std::map<const Expr*, std::string> value;
    for (const Expr* r : reads_in(e)) {
      if (which && !which(*r)) continue;
      const Param* prm = p_.param(r->name);
      if (!prm || p_.def(r->name)) continue;
      bool is_input = false;
      for (const Param& in : p_.inputs) is_input = is_input || in.name == prm->name;
      if (!is_input) continue;
      value[r] = load_read(w, *r, *prm);
    }
    return value;
  }

  // One read of input `prm` into a fresh local, its `outside` value where its indices leave the
  // tensor (the index variables in scope by their names); returns the local's name.
  // Whether a read has an index other than a plain variable (which needs a bounds check).
  static bool compound(const Expr& r) {
    for (const IndexExpr& ix : r.indices)
      if (dsl::index_is_compound(ix) || ix.offset != 0) return true;
    return false;
  }

  // The flat offset of a read at plain indices (always inside the tensor).
  std::string plain_offset(const Expr& r, const Param& prm) const {
    std::string off;
    for (size_t k = 0; k < r.indices.size(); ++k)
      off = k == 0 ? "(" + ix_ + ")" + names_[r.indices[k].var] : "(" + off + ") * " + extent(prm.extents[k]) + " + " + names_[r.indices[k].var];
    return off.empty() ? "0" : off;
  }

  // The positions of a read with compound indices, each checked against the tensor's extent (and
  // its divisor), as locals: the condition that every one is inside, and the flat offset.
  std::pair<std::string, std::string> positions(Writer& w, const Expr& r, const Param& prm) {
    std::string ok, off;
    for (size_t k = 0; k < r.indices.size(); ++k) {
      const IndexExpr& ix = r.indices[k];
      const std::string at = names_.fresh("at");
      const std::string n = extent(prm.extents[k]);
      if (ix.divisor != 1) {
        const std::string num = names_.fresh("num");
        const std::string d = std::to_string(ix.divisor);
        w.line("const " + ix_ + " " + num + " = " + index_code(ix) + ";");
        w.line("const " + ix_ + " " + at + " = " + num + " >= 0 && " + num + " % " + d + " == 0 ? " + num + " / " + d + " : -1;");
      } else {
        w.line("const " + ix_ + " " + at + " = " + index_code(ix) + ";");
      }
      ok += (ok.empty() ? "" : " && ") + at + " >= 0 && " + at + " < " + n;
      off = k == 0 ? at : "(" + off + ") * " + n + " + " + at;
    }
    return {ok, off};
  }

  // The address of a read for a cp.async copy: sets `src` to it and `ok` to whether it is inside
  // the tensor (else `src` stays, and the copy zero-fills).
  void read_address(Writer& w, const Expr& r, const Param& prm) {
    if (!compound(r)) {
      w.line("src = " + names_[prm.name] + " + " + plain_offset(r, prm) + ";");
      w.line("ok = true;");
      return;
    }
    const auto [inside, off] = positions(w, r, prm);
    w.line("ok = " + inside + ";");
    w.line("if (ok) src = " + names_[prm.name] + " + " + off + ";");
  }

  std::string load_read(Writer& w, const Expr& read, const Param& param) {
    const Expr* r = &read;
    const Param* prm = &param;
    {
      const std::string v = names_.fresh(names_[prm->name] + "_at");
      const std::string t = cuda_type(prm->type);
      if (!compound(*r)) {
        w.line("const " + t + " " + v + " = " + names_[prm->name] + "[" + plain_offset(*r, *prm) + "];");
        return v;
      }
      // Each position's index, checked against the tensor's extent (and its divisor).
      w.line(t + " " + v + ";");
      w.open("");  // a block of its own: the position locals are per read
      const auto [ok, off] = positions(w, *r, *prm);
      const std::string fill = prm->lowest_outside ? "-INFINITY" : literal(0, prm->type);
      w.line(v + " = (" + (ix_ == "Idx" ? "!kChecked || " : "") + ok + ") ? " + names_[prm->name] + "[" + off + "] : " + (prm->lowest_outside ? "(" + t + ")" : "") + fill + ";");
      w.close();
      return v;
    }
  }

  ExprEmitter emitter(const std::map<const Expr*, std::string>& value, const std::string& acc_name) {
    ExprEmitter em;
    em.helpers = &helpers_;
    // A dim used as a value is int64_t, whatever type the loop kernel's indices have.
    em.dim = [&](const std::string& d) { return ix_ == "int64_t" ? names_[d] : "((int64_t)" + names_[d] + ")"; };
    em.read = [value, acc_name, this](const Expr& r) -> std::string {
      if (r.name == s_.reduce->name) return acc_name;
      return value.at(&r);
    };
    return em;
  }

  // The thread-per-output kernel, a template over its index type Idx and over kChecked. The host
  // launches it with Idx = int where every index, offset and the grid-stride loop fit 32 bits
  // (index32_fits), which spares each output element's decode and each read's offset the 64-bit
  // divisions and multiplications, and with int64_t otherwise; with kChecked false where every
  // read stays inside its tensor at every output and reduced index (inside_everywhere: no
  // padding, no taps past the image), which drops the per-read bounds checks.
  // The reduction's step: folds `value` into the accumulator `a` (argmax: best value `b`, its
  // index `ba`).
  void fold(Writer& w, const std::string& a, const std::string& b, const std::string& ba) {
    const Definition& d = *s_.reduce;
    switch (d.reduce) {
      case ReduceOp::max: w.line("if (value != value || value > " + a + ") " + a + " = (" + a + " != " + a + ") ? " + a + " : value;"); break;
      case ReduceOp::min: w.line("if (value != value || value < " + a + ") " + a + " = (" + a + " != " + a + ") ? " + a + " : value;"); break;
      case ReduceOp::argmax:
        w.comment("The first maximum; a NaN counts as the maximum (PyTorch's argmax).");
        w.line("const bool nan_best = " + b + " != " + b + ";");
        w.open("if (" + ba + " < 0 || (value != value && !nan_best) || (!nan_best && value > " + b + "))");
        w.line(b + " = value;");
        w.line(ba + " = (int)" + names_[d.over] + ";");
        w.close();
        break;
      default: w.line(a + " += value;"); break;
    }
  }

  // The loop kernel's opening: the template over Idx and kChecked, the grid-stride loop over
  // `total` units (elements, or groups with items > 1) and `rest` = the unit's index.
  void open_loop_kernel(Writer& w) {
    // The divisors of the decode below, in its order: the groups per row (items > 1), then the
    // extents of every output index but the first.
    const Definition& d = *s_.reduce;
    if (sched_.items > 1) divisors_.index_of(chunks_on_host());
    for (size_t k = sched_.items > 1 ? d.indices.size() - 1 : d.indices.size(); k-- > 1;) divisors_.index_of(extent(d.extents[k]));
    if (sched_.fastest == 0) divisors_.index_of(extent(d.extents[0]));
    w.line("template <typename Idx, bool kChecked>");
    w.open("__global__ void __launch_bounds__(kThreads) " + loop_name_ + "(" + kernel_params_decl(p_, abi_, names_, true, "Idx") +
           (divisors_.empty() ? "" : "const KsolDivs dv, ") + "Idx total)");
    if (sched_.items > 1) w.line("constexpr int kItems = " + std::to_string(sched_.items) + ";");
    w.open("for (Idx flat = (Idx)blockIdx.x * kThreads + (Idx)threadIdx.x; flat < total; flat += (Idx)gridDim.x * kThreads)");
    w.line("Idx rest = flat;");
  }

  // Decodes the reduction's output indices at positions `order` (slowest first) from `rest`.
  void decode_indices(Writer& w, const std::vector<size_t>& order) {
    const Definition& d = *s_.reduce;
    for (size_t j = order.size(); j-- > 0;) {
      const size_t k = order[j];
      if (j == 0) {
        w.line("const Idx " + names_[d.indices[k]] + " = rest;");
      } else {
        w.line("const Idx " + names_[d.indices[k]] + " = " + idx_mod("rest", extent(d.extents[k])) + ";");
        w.line("rest = " + idx_div("rest", extent(d.extents[k])) + ";");
      }
    }
  }

  // Decodes the reduction's first `count` output indices from `rest`, the last fastest.
  void decode_rest(Writer& w, size_t count) {
    std::vector<size_t> order(count);
    for (size_t k = 0; k < count; ++k) order[k] = k;
    decode_indices(w, order);
  }

  // A mean's divisor: the product of the reduced extents, in int64_t whatever the index type.
  std::string mean_count() const {
    std::string count;
    for (const std::string& e : s_.over_extents) count += (count.empty() ? "(int64_t)" : " * ") + extent(e);
    return count;
  }

  // Whether a read's indices use the output's last index.
  bool reads_last(const Expr& r) const {
    const std::string& last = s_.reduce->indices.back();
    for (const IndexExpr& ix : r.indices)
      if (ix.var == last || ix.plus == last) return true;
    return false;
  }

  // The loop kernel with items > 1: each thread computes `items` consecutive outputs along the
  // last index (one decode, the reads that do not use the last index loaded once per reduced
  // step for all of them); a row's last group stops at its end. `total` is the count of groups.
  void kernel_items(Writer& w) {
    const Definition& d = *s_.reduce;
    const Param& out = p_.outputs.front();
    const std::string last = names_[d.indices.back()], last_n = extent(d.extents.back());
    open_loop_kernel(w);
    w.comment("The group's indices, the last fastest: its row (every index but the last) and its first element.");
    w.line("const Idx ksol_chunk = " + idx_mod("rest", chunks_on_host()) + ";");
    w.line("rest = " + idx_div("rest", chunks_on_host()) + ";");
    w.line("const Idx ksol_row = rest;");
    decode_rest(w, d.indices.size() - 1);
    const Type acc_type = d.body.type == Type::f64 ? Type::f64 : Type::f32;
    const std::string at = cuda_type(acc_type);
    const bool arg = d.reduce == ReduceOp::argmax;
    if (arg) {
      w.line(at + " best[kItems];");
      w.line("int best_at[kItems];");
    } else {
      w.line(at + " acc[kItems];");
    }
    std::string init = d.reduce == ReduceOp::max ? "-INFINITY" : d.reduce == ReduceOp::min ? "INFINITY" : "0";
    w.line("#pragma unroll");
    w.open("for (int ksol_item = 0; ksol_item < kItems; ++ksol_item)");
    if (arg) w.line("best[ksol_item] = 0, best_at[ksol_item] = -1;");
    else w.line("acc[ksol_item] = " + init + ";");
    w.close();
    for (size_t j = 0; j < s_.over.size(); ++j)
      w.open("for (Idx " + names_[s_.over[j]] + " = 0; " + names_[s_.over[j]] + " < " + extent(s_.over_extents[j]) +
             "; ++" + names_[s_.over[j]] + ")");
    std::map<const Expr*, std::string> shared = loads(w, d.body, [&](const Expr& r) { return !reads_last(r); });
    w.line("#pragma unroll");
    w.open("for (int ksol_item = 0; ksol_item < kItems; ++ksol_item)");
    w.line("const Idx " + last + " = ksol_chunk * kItems + ksol_item;");
    w.open("if (" + last + " < " + last_n + ")");
    std::map<const Expr*, std::string> value = loads(w, d.body, [&](const Expr& r) { return reads_last(r); });
    value.insert(shared.begin(), shared.end());
    ExprEmitter em = emitter(value, "");
    w.line("const " + at + " value = " + cast_code(em(d.body), d.body.type, acc_type) + ";");
    fold(w, "acc[ksol_item]", "best[ksol_item]", "best_at[ksol_item]");
    w.close();
    w.close();
    for (size_t j = 0; j < s_.over.size(); ++j) w.close();
    w.line("#pragma unroll");
    w.open("for (int ksol_item = 0; ksol_item < kItems; ++ksol_item)");
    w.line("const Idx " + last + " = ksol_chunk * kItems + ksol_item;");
    w.open("if (" + last + " < " + last_n + ")");
    if (d.reduce == ReduceOp::mean) w.line("acc[ksol_item] = acc[ksol_item] / (" + at + ")(" + mean_count() + ");");
    const std::string reduced = arg ? "best_at[ksol_item]" : "acc[ksol_item]";
    const Type reduced_type = arg ? Type::i32 : acc_type;
    w.line(names_[out.name] + "[ksol_row * " + last_n + " + " + last + "] = " + output_value(w, reduced, reduced_type) + ";");
    w.close();
    w.close();
    w.close();
    w.close();
  }

  void kernel(Writer& w) {
    const Definition& d = *s_.reduce;
    const Param& out = p_.outputs.front();
    ix_ = "Idx";
    if (sched_.items > 1) {
      kernel_items(w);
      ix_ = "int64_t";
      return;
    }
    if (sched_.staged) {
      kernel_staged(w);
      ix_ = "int64_t";
      return;
    }
    open_loop_kernel(w);
    if (sched_.tiles) {
      decode_tiles(w);
    } else if (sched_.fastest >= 0) {
      w.comment("The element's indices, " + names_[d.indices[sched_.fastest]] + " fastest (order = image), then the last.");
      decode_order(w);
    } else {
      w.comment("The element's indices, the last fastest.");
      decode_rest(w, d.indices.size());
    }
    w.line(names_[out.name] + "[" + (sched_.fastest >= 0 ? output_offset() : std::string("flat")) + "] = " +
           reduced_output(w) + ";");
    w.close();
    w.close();
    ix_ = "int64_t";
  }

  // One output's reduction over the reduced indices (the output's indices decoded into locals
  // named as them), then its value as the output's type: the expression, after the lines it needs.
  std::string reduced_output(Writer& w) {
    const Definition& d = *s_.reduce;
    const Type acc_type = d.body.type == Type::f64 ? Type::f64 : Type::f32;
    const std::string at = cuda_type(acc_type);
    const bool arg = d.reduce == ReduceOp::argmax;
    if (arg) {
      w.line(std::string(at) + " best = 0;");
      w.line("int best_at = -1;");
    } else {
      std::string init = d.reduce == ReduceOp::max ? "-INFINITY" : d.reduce == ReduceOp::min ? "INFINITY" : "0";
      w.line(at + " acc = " + init + ";");
    }
    for (size_t j = 0; j < s_.over.size(); ++j)
      w.open("for (Idx " + names_[s_.over[j]] + " = 0; " + names_[s_.over[j]] + " < " + extent(s_.over_extents[j]) +
             "; ++" + names_[s_.over[j]] + ")");
    std::map<const Expr*, std::string> value = loads(w, d.body);
    ExprEmitter em = emitter(value, "");
    w.line("const " + at + " value = " + cast_code(em(d.body), d.body.type, acc_type) + ";");
    fold(w, "acc", "best", "best_at");
    for (size_t j = 0; j < s_.over.size(); ++j) w.close();
    if (d.reduce == ReduceOp::mean) w.line("acc = acc / (" + at + ")(" + mean_count() + ");");
    const std::string reduced = arg ? "best_at" : "acc";
    const Type reduced_type = arg ? Type::i32 : acc_type;
    return output_value(w, reduced, reduced_type);
  }

  // order = staged: a block per kStage x kStage tile of the image's contiguous index (f) and the
  // last (l) at one value of the other indices (a grid-stride loop over the tiles, f's tiles
  // fastest, then l's, then the others, the last of them fastest). Each thread computes
  // kStage * kStage / kThreads outputs with f along the lanes (the window's reads coalesced) into
  // shared memory, then stores as many with l along the lanes (the stores coalesced).
  void kernel_staged(Writer& w) {
    const Definition& d = *s_.reduce;
    const Param& out = p_.outputs.front();
    const size_t f = static_cast<size_t>(sched_.fastest), l = d.indices.size() - 1;
    const std::string nf = names_[d.indices[f]], nl = names_[d.indices[l]];
    const std::string ef = extent(d.extents[f]), el = extent(d.extents[l]);
    const std::string ks = std::to_string(kStage);
    w.line("template <typename Idx, bool kChecked>");
    // The parameter list needs the divisors, known only once the body is written: body first.
    Writer b = w.nested(1);
    b.line("constexpr int kRows = kThreads / 32, kSteps = " + ks + " / kRows;  // warps; outputs a thread per phase");
    b.line(std::string("__shared__ ") + cuda_type(out.type) + " ksol_stage[" + ks + "][" + ks + " + 1];  // padded: no bank conflicts either way");
    b.line("const int ksol_lane = threadIdx.x & 31, ksol_warp = threadIdx.x >> 5;");
    b.open("for (Idx ksol_t = (Idx)blockIdx.x; ksol_t < total; ksol_t += (Idx)gridDim.x)");
    b.line("Idx rest = ksol_t;");
    decode_tiles_then_others(b, kStage, kStage);
    b.comment("The tile's outputs, " + nf + " along the lanes, into shared memory.");
    b.line("#pragma unroll");
    b.open("for (int ksol_k = 0; ksol_k < kSteps; ++ksol_k)");
    b.line("const Idx " + nf + " = ksol_tile_f * " + ks + " + ksol_lane;");
    b.line("const Idx " + nl + " = ksol_tile_l * " + ks + " + ksol_warp + ksol_k * kRows;");
    b.open("if (" + nf + " < " + ef + " && " + nl + " < " + el + ")");
    const std::string v = reduced_output(b);
    b.line("ksol_stage[ksol_warp + ksol_k * kRows][ksol_lane] = " + v + ";");
    b.close();
    b.close();
    b.line("__syncthreads();");
    b.comment("Then stored with " + nl + " along the lanes.");
    b.line("#pragma unroll");
    b.open("for (int ksol_k = 0; ksol_k < kSteps; ++ksol_k)");
    b.line("const Idx " + nf + " = ksol_tile_f * " + ks + " + ksol_warp + ksol_k * kRows;");
    b.line("const Idx " + nl + " = ksol_tile_l * " + ks + " + ksol_lane;");
    b.line("if (" + nf + " < " + ef + " && " + nl + " < " + el + ") " + names_[out.name] + "[" + output_offset() +
           "] = ksol_stage[ksol_lane][ksol_warp + ksol_k * kRows];");
    b.close();
    b.line("__syncthreads();");
    b.close();
    w.open("__global__ void __launch_bounds__(kThreads) " + loop_name_ + "(" + kernel_params_decl(p_, abi_, names_, true, "Idx") +
           (divisors_.empty() ? "" : "const KsolDivs dv, ") + "Idx total)");
    w.raw(b.text());
    w.close();
  }

  // order = image: the index at sched_.fastest from `rest` first, then the others, the last fastest.
  void decode_order(Writer& w) {
    std::vector<size_t> order;
    for (size_t k = 0; k < s_.reduce->indices.size(); ++k)
      if (k != static_cast<size_t>(sched_.fastest)) order.push_back(k);
    order.push_back(static_cast<size_t>(sched_.fastest));
    decode_indices(w, order);
  }

  // From `rest`: the tile of the image's contiguous index (f; tiles `wide_f` wide) and of the last
  // (l; `wide_l`) as ksol_tile_f and ksol_tile_l, f's fastest, then the other output indices as
  // locals named as them, the last of them fastest.
  void decode_tiles_then_others(Writer& w, int64_t wide_f, int64_t wide_l) {
    const Definition& d = *s_.reduce;
    const size_t f = static_cast<size_t>(sched_.fastest), l = d.indices.size() - 1;
    const std::string tf = ceil_text(extent(d.extents[f]), wide_f), tl = ceil_text(extent(d.extents[l]), wide_l);
    w.line("const Idx ksol_tile_f = " + idx_mod("rest", tf) + ";");
    w.line("rest = " + idx_div("rest", tf) + ";");
    w.line("const Idx ksol_tile_l = " + idx_mod("rest", tl) + ";");
    w.line("rest = " + idx_div("rest", tl) + ";");
    std::vector<size_t> order;
    for (size_t k = 0; k < d.indices.size(); ++k)
      if (k != f && k != l) order.push_back(k);
    decode_indices(w, order);
  }

  // order = tiles: the image's contiguous index (f) and the last (l) in kTileFast x kTileLast
  // tiles, f fastest inside a tile, then l; then the tiles (f's first), then the other indices,
  // the last of them fastest. The host's total rounds both extents up to whole tiles; the
  // outputs past them are skipped.
  void decode_tiles(Writer& w) {
    const Definition& d = *s_.reduce;
    const size_t f = static_cast<size_t>(sched_.fastest), l = d.indices.size() - 1;
    const std::string nf = names_[d.indices[f]], nl = names_[d.indices[l]];
    const std::string ef = extent(d.extents[f]), el = extent(d.extents[l]);
    w.comment("The element's indices: " + nf + " and " + nl + " in " + std::to_string(kTileFast) + " x " +
              std::to_string(kTileLast) + " tiles (order = tiles), " + nf + " fastest, then the tiles, then the others.");
    w.line("const Idx ksol_lo_f = rest % " + std::to_string(kTileFast) + ";");
    w.line("rest /= " + std::to_string(kTileFast) + ";");
    w.line("const Idx ksol_lo_l = rest % " + std::to_string(kTileLast) + ";");
    w.line("rest /= " + std::to_string(kTileLast) + ";");
    decode_tiles_then_others(w, kTileFast, kTileLast);
    w.line("const Idx " + nf + " = ksol_tile_f * " + std::to_string(kTileFast) + " + ksol_lo_f;");
    w.line("const Idx " + nl + " = ksol_tile_l * " + std::to_string(kTileLast) + " + ksol_lo_l;");
    w.line("if (" + nf + " >= " + ef + " || " + nl + " >= " + el + ") continue;");
  }

  // The output element's offset from its decoded indices (row-major), below `total`.
  std::string output_offset() const {
    const Definition& d = *s_.reduce;
    std::string at = names_[d.indices[0]];
    for (size_t k = 1; k < d.indices.size(); ++k) at = "(" + at + ") * " + extent(d.extents[k]) + " + " + names_[d.indices[k]];
    return at;
  }

  // The host's condition (int64_t arithmetic on the ABI's dims) under which the thread-per-output
  // kernel's indices fit Idx = int: the grid-stride loop's flat + step (at most 2 * total +
  // kThreads), every tensor's element count (an offset is computed only for a position inside its
  // tensor, so it stays below that count), and every compound index's value, bounded by
  // |scale| * extent + |plus_scale| * extent + |offset| over the extents of its variables.
  // KSOL_DIRECT_INDEX32_MAX (2^31 - 1 unless defined before the source) lowers the limit, so that
  // a test can run the 64-bit instantiation on small shapes.
  std::string index32_fits(const std::string& total) const {
    const Definition& d = *s_.reduce;
    std::map<std::string, std::string> ext;  // index variable -> its extent
    for (size_t k = 0; k < d.indices.size(); ++k) ext[d.indices[k]] = extent(d.extents[k]);
    for (size_t j = 0; j < s_.over.size(); ++j) ext[s_.over[j]] = extent(s_.over_extents[j]);
    std::vector<std::string> terms = {"2 * " + total + " + kThreads"};
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) {
        std::string n;
        for (const std::string& e : prm.extents) n += (n.empty() ? "(int64_t)" : " * ") + extent(e);
        if (!n.empty()) terms.push_back(n);
      }
    std::vector<const Expr*> reads = reads_in(d.body);
    if (s_.out != &d)
      for (const Expr* r : reads_in(s_.out->body)) reads.push_back(r);
    for (const Expr* r : reads) {
      for (const IndexExpr& ix : r->indices) {
        if (!dsl::index_is_compound(ix) && ix.offset == 0) continue;
        std::string b;
        for (const auto& [v, c] : {std::pair{ix.var, ix.scale}, std::pair{ix.plus, ix.plus_scale}}) {
          if (v.empty()) continue;
          auto it = ext.find(v);
          if (it == ext.end()) return "false";  // an index variable of unknown extent: 64-bit
          b += (b.empty() ? "" : " + ") + std::to_string(c < 0 ? -c : c) + " * (int64_t)" + it->second;
        }
        b += " + " + std::to_string(ix.offset < 0 ? -ix.offset : ix.offset);
        terms.push_back(b);
      }
    }
    std::string fits;
    for (const std::string& t : terms) fits += (fits.empty() ? "" : " && ") + ("(" + t + ") <= KSOL_DIRECT_INDEX32_MAX");
    return fits;
  }

  // The host's condition under which every read of the thread-per-output kernel is inside its
  // tensor for all values of its index variables: per plain variable, its extent within the
  // tensor's; per other index, its least and greatest value (from the signs of its coefficients and its variables' extents) in
  // [0, extent). "false" where a read has a divided index (a transposed convolution's taps between
  // input pixels must be skipped) or a variable of unknown extent.
  std::string inside_everywhere() const {
    const Definition& d = *s_.reduce;
    std::map<std::string, std::string> ext;  // index variable -> its extent
    for (size_t k = 0; k < d.indices.size(); ++k) ext[d.indices[k]] = extent(d.extents[k]);
    for (size_t j = 0; j < s_.over.size(); ++j) ext[s_.over[j]] = extent(s_.over_extents[j]);
    std::vector<const Expr*> reads = reads_in(d.body);
    if (s_.out != &d)
      for (const Expr* r : reads_in(s_.out->body)) reads.push_back(r);
    std::string all;
    for (const Expr* r : reads) {
      const Param* prm = p_.param(r->name);
      if (!prm || p_.def(r->name) || !compound(*r)) continue;
      for (size_t k = 0; k < r->indices.size(); ++k) {
        const IndexExpr& ix = r->indices[k];
        if (!dsl::index_is_compound(ix) && ix.offset == 0) {  // a plain variable: inside where its extent is
          auto it = ext.find(ix.var);
          if (it == ext.end()) return "false";
          if (it->second != extent(prm->extents[k]))
            all += (all.empty() ? "" : " && ") + ("(int64_t)" + it->second + " <= (int64_t)" + extent(prm->extents[k]));
          continue;
        }
        if (ix.divisor != 1) return "false";
        std::string lo = std::to_string(ix.offset), hi = lo;
        for (const auto& [v, c] : {std::pair{ix.var, ix.scale}, std::pair{ix.plus, ix.plus_scale}}) {
          if (v.empty()) continue;
          auto it = ext.find(v);
          if (it == ext.end()) return "false";
          const std::string span = std::to_string(c) + " * ((int64_t)" + it->second + " - 1)";
          (c < 0 ? lo : hi) += " + " + span;
        }
        all += (all.empty() ? "" : " && ") + ("(" + lo + ") >= 0 && (" + hi + ") < (int64_t)" + extent(prm->extents[k]));
      }
    }
    return all.empty() ? "true" : all;
  }

  // The output's value from the reduction's value `reduced` (of type `type`): converted, or
  // through the epilogue (its reads loaded here, the output's indices in scope).
  std::string output_value(Writer& w, const std::string& reduced, Type type) {
    const Definition& d = *s_.reduce;
    if (s_.out == &d) return cast_code(reduced, type, p_.outputs.front().type);
    const std::string local = names_.fresh(names_[d.name] + "_value");
    w.line("const " + std::string(cuda_type(d.type)) + " " + local + " = " + cast_code(reduced, type, d.type) + ";");
    std::map<const Expr*, std::string> epi = loads(w, s_.out->body);
    ExprEmitter em2 = emitter(epi, local);
    return em2(s_.out->body);
  }

  // `code` (a value below 2^31) decoded into the output indices at `positions` of the reduction,
  // the last fastest, as int locals named as the indices.
  // Returns, for rows with phases, the condition that the decoded indices are inside their
  // extents (a phase's last row may pass its end), else "".
  std::string decode(Writer& w, const std::string& code, const std::vector<size_t>& positions) {
    const Definition& d = *s_.reduce;
    std::string inside;
    const std::string rest = names_.fresh("rest");
    w.line("int " + rest + " = " + code + ";");
    for (size_t k = positions.size(); k-- > 0;) {
      const std::string v = names_[d.indices[positions[k]]];
      const Phase* ph = c_.phase_of_row(positions[k]);
      const std::string n = ph ? row_extent(positions[k]) : "int(" + extent(d.extents[positions[k]]) + ")";
      const std::string value = k == 0 ? rest : rest + " % " + n;
      if (ph) {
        w.line("const int " + v + " = (" + value + ") * " + std::to_string(ph->s) + " + " + phase_var(*ph) + ";");
        inside += (inside.empty() ? "" : " && ") + v + " < int(" + extent(d.extents[positions[k]]) + ")";
      } else {
        w.line("const int " + v + " = " + value + ";");
      }
      if (k > 0) w.line(rest + " /= " + n + ";");
    }
    return inside;
  }

  // A row position's extent in the GEMM: its output extent, or for a phase the rows of its
  // first phase, ceil(extent / s).
  std::string row_extent(size_t pos) const {
    const Phase* ph = c_.phase_of_row(pos);
    const std::string e = "int(" + extent(s_.reduce->extents[pos]) + ")";
    if (!ph) return e;
    return ceil_text(e, ph->s);
  }
  std::string phase_var(const Phase& ph) const { return phase_names_.at(ph.tap)[0]; }
  std::string tap0_var(const Phase& ph) const { return phase_names_.at(ph.tap)[1]; }
  std::string taps_var(const Phase& ph) const { return phase_names_.at(ph.tap)[2]; }

  // The reduction position `code` decoded into the reduced indices (the filter's order, the last
  // fastest), as int locals.
  void decode_reduced(Writer& w, const std::string& code) {
    const std::string rest = names_.fresh("rest");
    w.line("int " + rest + " = " + code + ";");
    for (size_t k = c_.red.size(); k-- > 0;) {
      const std::string v = names_[c_.red[k]];
      const Phase* ph = c_.phase_of_tap(c_.red[k]);
      const std::string n = ph ? taps_var(*ph) : "int(" + extent(c_.red_extents[k]) + ")";
      const std::string value = k == 0 ? rest : rest + " % " + n;
      if (ph)
        w.line("const int " + v + " = " + tap0_var(*ph) + " + " + std::to_string(ph->step) + " * (" + value + ");");
      else
        w.line("const int " + v + " = " + value + ";");
      if (k > 0) w.line(rest + " /= " + n + ";");
    }
  }

  std::string product(const std::vector<std::string>& extents) const {
    std::string s;
    for (const std::string& e : extents) s += (s.empty() ? "" : " * ") + extent(e);
    return s.empty() ? "1" : s;
  }
  std::vector<std::string> extents_at(const std::vector<size_t>& positions) const {  // NOLINT
    std::vector<std::string> v;
    for (size_t k : positions) v.push_back(s_.reduce->extents[k]);
    return v;
  }

  std::string stage_type() const { return c_.tf32 ? "float" : cuda_type(c_.in_type); }
  std::string stage_zero() const {
    if (c_.tf32) return "0.0f";
    return c_.in_type == Type::bf16 ? "__float2bfloat16(0.0f)" : "__float2half(0.0f)";
  }

  // The next slice of A (the image, gathered) and B (the filter) into registers.
  void mma_load(Writer& w, const std::string& kbase) {
    const Definition& d = *s_.reduce;
    const std::string st = stage_type();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int kk = " + kbase + " + (tid + l * kThreads) / kBM;");
    w.line(st + " v = " + stage_zero() + ";");
    w.open("if (live[l] && kk < depth)");
    for (size_t k : c_.rows) w.line("const int " + names_[d.indices[k]] + " = " + row_arrays_.at(k) + "[l];");
    decode_reduced(w, "kk");
    const std::string x = load_read(w, *c_.image, *p_.param(c_.image->name));
    w.line("v = " + x + ";");
    w.close();
    w.line("ra[l] = v;");
    w.close();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("const int col = tile_n + e / kBK, kk = " + kbase + " + e % kBK;");
    w.line(st + " v = " + stage_zero() + ";");
    w.open("if (e < kBK * kBN && col < cols_total && kk < depth)");
    decode(w, "col", c_.cols);
    decode_reduced(w, "kk");
    const std::string f = load_read(w, *c_.filter, *p_.param(c_.filter->name));
    w.line("v = " + f + ";");
    w.close();
    w.line("rb[l] = v;");
    w.close();
  }

  // The cp.async pipeline's copies of the slice at `kbase` into buffer `stage`: A gathered through
  // the image's index expressions (zeros outside or past the reduction), B through the filter's,
  // both as they are (TF32 rounding happens as the fragments load).
  void mma_issue(Writer& w, const std::string& kbase, const std::string& stage) {
    const Definition& d = *s_.reduce;
    bind_stage(w, "float", stage);
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("if (e >= kBK * kBM) break;");
    w.line("const int kk = " + kbase + " + e / kBM;");
    w.line("const float* src = " + names_[c_.image->name] + ";");
    w.line("bool ok = false;");
    w.open("if (live[l] && kk < depth)");
    for (size_t k : c_.rows) w.line("const int " + names_[d.indices[k]] + " = " + row_arrays_.at(k) + "[l];");
    decode_reduced(w, "kk");
    read_address(w, *c_.image, *p_.param(c_.image->name));
    w.close();
    w.line("ksol_cp_async4(&As[ksol_row(e / kBM)][ksol_a_slot(e % kBM, e / kBM)], src, ok);");
    w.close();
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLB; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("if (e >= kBK * kBN) break;");
    w.line("const int col = tile_n + e / kBK, kk = " + kbase + " + e % kBK;");
    w.line("const float* src = " + names_[c_.filter->name] + ";");
    w.line("bool ok = false;");
    w.open("if (col < cols_total && kk < depth)");
    decode(w, "col", c_.cols);
    decode_reduced(w, "kk");
    read_address(w, *c_.filter, *p_.param(c_.filter->name));
    w.close();
    w.line("ksol_cp_async4(&" + std::string(kMmaBAt) + ", src, ok);");
    w.close();
  }

  void mma_kernel(Writer& w) {
    const Definition& d = *s_.reduce;
    const Param& out = p_.outputs.front();
    if (c_.tf32) helpers_.use("tf32_round", Type::f32);
    if (sched_.stages >= 2) helpers_.use("cp_async", Type::f32);
    if (c_.tf32) helpers_.use("mma_tf32", Type::f32);
    const std::string st = stage_type();
    const std::string frag_t = cuda_type(c_.in_type);  // WMMA's (16-bit data; TF32 takes mma.sync)
    std::string rows, cols, layers, red;
    for (size_t k : c_.rows) rows += (rows.empty() ? "" : ", ") + d.indices[k];
    for (size_t k : c_.cols) cols += (cols.empty() ? "" : ", ") + d.indices[k];
    for (size_t k : c_.layers) layers += (layers.empty() ? "" : ", ") + d.indices[k];
    for (const std::string& v : c_.red) red += (red.empty() ? "" : ", ") + v;
    w.line();
    w.line("namespace ksol_mma {");
    w.line("constexpr int kBM = " + std::to_string(sched_.bm) + ", kBN = " + std::to_string(sched_.bn) + ", kBK = " +
           std::to_string(sched_.bk) + ";  // rows x columns x reduction slice");
    wmma_constants(w, WmmaShape{sched_.fm, sched_.fn, c_.tf32 ? 8 : 16, 8, c_.tf32});
    w.line("// Slice elements each thread stages: of A (kLA) and of B (kLB).");
    w.line("constexpr int kLA = (kBK * kBM + kThreads - 1) / kThreads, kLB = (kBK * kBN + kThreads - 1) / kThreads;");
    w.line();
    w.comment("Implicit GEMM on the tensor cores: rows (" + rows + ") x columns (" + cols + ")" +
              (layers.empty() ? "" : ", a grid layer per (" + layers + ")") + ", the reduction over (" + red +
              ") in the filter's order. A block computes kBM x kBN outputs with kWM x kWN warps of kFM x kFN 16 x 16 "
              "fragments; the slices are " +
              (sched_.stages >= 2 ? "copied by cp.async into kStages shared buffers (kStages - 1 slices in flight while one "
                                    "is multiplied), A "
                                  : std::string("staged through registers (the next while the current one is multiplied), A ")) +
              "gathered through " + c_.image->name + "'s index expressions (zero outside), " +
              (c_.tf32 ? (sched_.stages >= 2 ? "both rounded to TF32 as the fragments load" : "both rounded to TF32")
                       : std::string("both as ") + type_name(c_.in_type)) +
              (c_.tf32 ? "; TF32 products by mma.sync.m16n8k8, the accumulators stored from the registers."
                       : "; the accumulators go to the epilogue through each warp's staging tile."));
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "(" + kernel_params_decl(p_, abi_, names_, true) +
           "int rows_total, int cols_total, int depth_all)");
    wmma_declarations(w, st, sched_.stages, !c_.tf32);
    w.line("const int64_t tile_m = int64_t(blockIdx.x) * kBM;");
    w.line("const int tile_n = int(blockIdx.y) * kBN;");
    w.line("int layer = int(blockIdx.z);");
    std::string depth = "depth_all";
    if (!c_.phases.empty()) {
      w.comment("The phases (o = s * o' + phase) of the divided image indices, the fastest part of blockIdx.z; each "
                "reads the taps t = t0 + step * j whose numerator is a multiple of s.");
      depth.clear();
      for (size_t i = c_.phases.size(); i-- > 0;) {
        const Phase& ph = c_.phases[i];
        const std::string sv = std::to_string(ph.s);
        w.line("const int " + phase_var(ph) + " = layer % " + sv + ";");
        w.line("layer /= " + sv + ";");
      }
      for (size_t k = 0; k < c_.red.size(); ++k) {
        const Phase* ph = c_.phase_of_tap(c_.red[k]);
        const std::string e = "int(" + extent(c_.red_extents[k]) + ")";
        if (!ph) {
          depth += (depth.empty() ? "" : " * ") + e;
          continue;
        }
        const std::string sv = std::to_string(ph->s);
        w.line("int " + tap0_var(*ph) + " = -1;");
        w.open("for (int t = 0; t < " + sv + " && " + tap0_var(*ph) + " < 0; ++t)");
        w.line("const int num = " + std::to_string(ph->b) + " * " + phase_var(*ph) + " + " + std::to_string(ph->a) + " * t + " +
               std::to_string(ph->p) + ";");
        w.line("if ((num % " + sv + " + " + sv + ") % " + sv + " == 0) " + tap0_var(*ph) + " = t;");
        w.close();
        w.line("const int " + taps_var(*ph) + " = " + tap0_var(*ph) + " < 0 || " + tap0_var(*ph) + " >= " + e + " ? 0 : (" + e +
               " - " + tap0_var(*ph) + " + " + std::to_string(ph->step - 1) + ") / " + std::to_string(ph->step) + ";");
        depth += (depth.empty() ? "" : " * ") + taps_var(*ph);
      }
    }
    w.line("const int depth = " + depth + ";  // this block's reduction positions");
    if (!c_.layers.empty()) decode(w, "layer", c_.layers);
    w.comment("Each A element this thread stages has the same row in every slice: decode it once.");
    row_arrays_.clear();
    for (size_t k : c_.rows) {
      row_arrays_[k] = names_.fresh(names_[d.indices[k]] + "_row");
      w.line("int " + row_arrays_[k] + "[kLA];");
    }
    w.line("bool live[kLA];");
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < kLA; ++l)");
    w.line("const int e = tid + l * kThreads;");
    w.line("const int64_t row = tile_m + e % kBM;");
    w.line("live[l] = e < kBK * kBM && row < rows_total;");
    {
      w.open("");
      const std::string inside = decode(w, "live[l] ? int(row) : 0", c_.rows);
      if (!inside.empty()) w.line("live[l] = live[l] && " + inside + ";");
      for (size_t k : c_.rows) w.line(row_arrays_[k] + "[l] = " + names_[d.indices[k]] + ";");
      w.close();
    }
    w.close();
    wmma_accumulators(w, c_.tf32);
    MmaLoop loop;
    loop.stages = sched_.stages, loop.slice_fragments = sched_.slice_fragments, loop.tf32 = c_.tf32;
    loop.frag_type = frag_t, loop.stage_type = st, loop.a_at = "As[ksol_row(e / kBM)][ksol_a_slot(e % kBM, e / kBM)]";
    loop.issue = [&](Writer& x, const std::string& k, const std::string& stage) { mma_issue(x, k, stage); };
    loop.load = [&](Writer& x, const std::string& k) { mma_load(x, k); };
    mma_slice_loop(w, loop);
    w.comment(c_.tf32 ? "Each output straight from the accumulators, a lane's row decoded once for each of its rows."
                      : "Each output through the warp's staging tile, lanes 0-15 on consecutive rows (the output's last index).");
    // A lane's row is the same for every column of a fragment row: decoded once per row (the
    // decode of a row past the end is arithmetic only; row_live keeps it from being stored).
    wmma_store_fragments(w, true, [&](Writer& e) {
      e.line("const int col = tile_n + wn0 + j * 16 + fc;");
      e.line("if (!row_live || col >= cols_total) continue;");
      decode(e, "col", c_.cols);
      std::string flat;
      for (size_t k = 0; k < d.indices.size(); ++k)
        flat = k == 0 ? "(int64_t)" + names_[d.indices[k]] : "(" + flat + ") * " + extent(d.extents[k]) + " + " + names_[d.indices[k]];
      e.line("const float acc = frag_v;");
      const std::string value = output_value(e, "acc", Type::f32);
      e.line(names_[out.name] + "[" + flat + "] = " + value + ";");
    }, [&](Writer& r) {
      r.line("const int64_t row = tile_m + wm0 + i * 16 + fr;");
      const std::string inside = decode(r, "int(row)", c_.rows);
      r.line("const bool row_live = row < rows_total" + (inside.empty() ? std::string() : " && (" + inside + ")") + ";");
    }, c_.tf32);
    w.close();
    w.line("}  // namespace ksol_mma");
  }

  void host(Writer& w) {
    open_ksol_run(w, p_, abi_, names_);
    std::string total;
    const size_t last = s_.reduce->extents.size() - 1;
    for (size_t k = 0; k < s_.reduce->extents.size(); ++k) {
      std::string e = extent(s_.reduce->extents[k]);
      // order = tiles: whole tiles along the two tiled extents (the outputs past them are skipped).
      if (sched_.tiles && (k == static_cast<size_t>(sched_.fastest) || k == last))
        e = ceil_text(e, k == last ? kTileLast : kTileFast) + " * " + std::to_string(k == last ? kTileLast : kTileFast);
      // order = staged: whole kStage x kStage tiles, a block each.
      if (sched_.staged && (k == static_cast<size_t>(sched_.fastest) || k == last))
        e = ceil_text(e, kStage) + " * " + std::to_string(kStage);
      total += (total.empty() ? "" : " * ") + e;
    }
    w.line("const int64_t total = " + (total.empty() ? std::string("1") : total) + ";");
    w.line("if (total == 0) return 0;");
    std::string pass;
    for (const std::string& t : abi_.tensors) pass += names_[t] + ", ";
    for (const std::string& d : p_.dims) pass += names_[d] + ", ";
    if (sched_.mma) {
      const Definition& d = *s_.reduce;
      std::string rows_total, phases = "1";
      for (size_t k : c_.rows) {
        const Phase* ph = c_.phase_of_row(k);
        const std::string e = extent(d.extents[k]);
        rows_total += (rows_total.empty() ? "" : " * ") +
                      (ph ? ceil_text(e, ph->s) : e);
      }
      for (const Phase& ph : c_.phases) phases += " * " + std::to_string(ph.s);
      w.line("const int64_t rows_total = " + rows_total + ", cols_total = " + product(extents_at(c_.cols)) +
             ", layers = " + product(extents_at(c_.layers)) + " * " + phases + ", depth = " + product(c_.red_extents) + ";");
      w.comment("The tensor cores where the shape fills their fragments and its indices fit the kernel's 32-bit "
                "arithmetic; the thread-per-output kernel otherwise.");
      std::string fits = "cols_total >= 16 && depth >= 16 && layers <= 65535 && rows_total <= 2147483647 - ksol_mma::kBM && "
                         "cols_total <= 65535LL * ksol_mma::kBN && depth <= 2147483647 - ksol_mma::kBK";
      std::set<std::string> dims;
      for (const auto* list : {&p_.inputs, &p_.outputs})
        for (const Param& prm : *list)
          for (const std::string& e : prm.extents)
            if (!dsl::extent_is_number(e)) dims.insert(e);
      for (const std::string& e : d.extents)
        if (!dsl::extent_is_number(e)) dims.insert(e);
      for (const std::string& e : dims) fits += " && " + extent(e) + " <= 1073741823";
      w.open("if (" + fits + ")");
      w.line("const dim3 grid{unsigned((rows_total + ksol_mma::kBM - 1) / ksol_mma::kBM), unsigned((cols_total + ksol_mma::kBN - 1) / "
             "ksol_mma::kBN), unsigned(layers)};");
      mma_launch(w, "ksol_mma::" + name_, "grid", "ksol_mma::kThreads", pass + "int(rows_total), int(cols_total), int(depth)",
                 sched_.stages, "ksol_mma::");
      w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
      w.close();
    }
    std::string units = "total";
    if (sched_.items > 1) {
      const std::string last_n = extent(s_.reduce->extents.back());
      w.comment("Groups of " + std::to_string(sched_.items) + " consecutive outputs along the last index, a thread each.");
      w.line("const int64_t groups = total / " + last_n + " * ((" + last_n + " + " + std::to_string(sched_.items - 1) + ") / " +
             std::to_string(sched_.items) + ");");
      units = "groups";
    }
    if (sched_.staged) {
      w.comment("order = staged: a block a tile of " + std::to_string(kStage * kStage) + " outputs (the kernel loops past the grid).");
      w.line("const int64_t tiles = total / " + std::to_string(kStage * kStage) + ";");
      units = "tiles";
      w.line("const int64_t blocks = std::min<int64_t>(tiles, kMaxBlocks);");
    } else {
      w.line("const int64_t blocks = std::min<int64_t>((" + units + " + kThreads - 1) / kThreads, kMaxBlocks);");
    }
    const std::string inside = inside_everywhere();
    if (!divisors_.empty()) {
      divisors_.host_dividers(w);
      units = "dv, " + units;
    }
    auto launches = [&](const std::string& idx) {
      if (inside == "false") {
        w.line(loop_name_ + "<" + idx + ", true><<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + units + ");");
        return;
      }
      w.open("if (inside)");
      w.line(loop_name_ + "<" + idx + ", false><<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + units + ");");
      w.close();
      w.open("else");
      w.line(loop_name_ + "<" + idx + ", true><<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + units + ");");
      w.close();
    };
    if (inside != "false") w.line("const bool inside = " + inside + ";");
    w.open("if (" + index32_fits("total") + ")");
    launches("int");
    w.close();
    w.open("else");
    launches("int64_t");
    w.close();
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

}  // namespace

const FamilyGenerator& direct_family() {
  static const FamilyGenerator f{
      "direct",
      {
          {"threads", "256", {"64", "128", "256", "512"}},
          {"mainloop", "auto", {"loop", "mma"}},
          {"tile", "[128, 128, 16]", {"[64, 64, 16]", "[128, 64, 16]", "[64, 128, 16]", "[128, 128, 16]", "[128, 32, 16]", "[128, 16, 16]", "[64, 32, 16]", "[32, 32, 16]", "[128, 64, 32]", "[128, 32, 32]"}},
          {"thread_tile", "[4, 2]", {"[1, 1]", "[2, 1]", "[2, 2]", "[4, 2]", "[4, 4]"}},
          {"stages", "auto", {"auto", "2", "3"}},
          {"fragments", "auto", {"auto", "slice"}},
          {"items", "1", {"1", "2", "4", "8"}},
          {"order", "auto", {"last", "image", "tiles", "staged"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace ksol::codegen::detail
