// The rowwise family: reductions (sum, max, min, mean, argmax) and scans over the last index,
// with elementwise definitions before and after them, fused into one kernel (two_pass: one
// kernel per pass). Rows are all leading indices flattened; the row is the last index.
//
// The program becomes passes over each row. A reduction's level is one more than the deepest
// reduction it depends on; pass k accumulates the reductions of level k, and per-row values
// (row definitions, finished reductions) are computed between passes. A final write pass
// computes the outputs that range over the whole row, and the scans, in tile order.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "codegen/colwise.h"
#include "codegen/common.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::ReduceOp;
using dsl::Type;

// Registers a thread may spend on the cached row (cache_row = registers), in bytes: 64 registers,
// and never more than half of what a thread of a full block has (64K per SM, 32K for the row).
int register_budget_bytes(int threads) { return 4 * std::min(64, 32768 / threads); }

const std::vector<std::string> kInternal = {
    "kThreads", "kRowsPerBlock", "kThreadsPerRow", "kWarpsPerRow", "kVector", "kItems", "kUnroll", "kTile",
    "kCacheValues", "kCacheTiles", "kMaxRow", "kMaxCacheBytes", "kMaxSplits", "kMaxBlocks", "slot", "lane", "row",
    "rows", "row_base", "active", "tile", "t", "item", "c0", "j", "in_row", "work", "split", "splits", "chunk",
    "c_begin", "c_end", "k", "w", "launch", "launch_tiles", "kTiles", "kMost", "steps", "packs_ok", "pack_aligned", "blocks", "row_cache", "cache_base",
    "cache_bytes", "cache_region_bytes", "load_pack_keep", "load_pack_last", "load_pack_hinted", "store_pack_kept", "policy", "kExact", "g_workspace", "g_workspace_bytes", "ws", "region", "device", "sms",
    "wanted", "most", "chunk_blocks", "row_blocks", "warp_sum", "warp_max", "warp_min", "warp_argmax", "warp_exclusive_scan", "row_sum", "row_max",
    "merge_max_sum", "warp_max_sum", "row_max_sum",
    "row_min", "row_argmax", "row_exclusive_scan", "argmax_beats", "argmax_take", "ksol_long_rows"};

enum class Shape { row, element };  // [rows...] or [rows..., c]

// preload: which packs of the tensors only one pass reads (a norm's weight) load into registers
// ahead of their pass: none; all of them, with the cached rows before the first pass; or those of
// the write pass, all of its steps at once before its first store.
enum class Preload { none, all, write };

struct RowKnobs {
  int threads = 256, rows_per_block = 1, vector = 1, items = 1, unroll = 1;
  std::string reduction = "block", cache = "none";
  bool fast_math = false;  // math = fast (ExprEmitter::fast_math)
  bool keep = false;       // keep = registers: Analysis::cached_defs computed once per row
  int online_pass = 0;     // online = 1: this max pass and the sum of exp(u - max) after it are one pass
  int blocks_per_sm = 0;   // __launch_bounds__'s minimum blocks per SM (0: auto, none asked)
  bool exact = false;      // tail = exact: rows of exactly kCacheTiles steps run without bounds checks
  bool fixed = false;      // tail = fixed: exact, and that instantiation's row length a compile-time constant
  bool store_last = false; // store_hint = evict_last: output packs stored with an L2 evict_last policy
  Preload preload = Preload::none;
  bool grid_rows = false;  // grid = rows: one block per kRowsPerBlock rows, no grid-stride loop
  int threads_per_row = 256;
  int cache_values = 0;  // registers: elements of each cached tensor per thread
};

struct Node {
  const Definition* def = nullptr;
  Shape shape = Shape::row;
  int level = 0;             // reductions: the pass that accumulates them; others: the pass after which they are known
  bool after_scan = false;   // element values that depend on a scan
  std::vector<const Definition*> deps;
};

// A parameter as the program reads it.
struct ParamUse {
  const Param* param = nullptr;
  std::vector<int> axes;   // the space axis of each index
  bool element = false;    // read with the row's index (last): a pack per step; else one value per row
  std::set<int> passes;    // element reads: the passes reading it (passes + 1 is the write pass)
  bool cached = false;
  bool write_only = false; // element reads: the write pass is the only pass reading it
};

struct Analysis {
  int rank = 0;                         // axes 0..rank-2 are the rows, rank-1 the row's index
  std::vector<std::string> axis_dims;
  std::vector<std::string> axis_vars;
  std::map<std::string, Node> nodes;
  int passes = 0;                       // reduction passes
  bool write_pass = false;              // some output ranges over whole rows
  std::vector<ParamUse> params;         // in the order first read
  bool has_scan = false;
  int widest_access = 0;                // bytes of the widest packed element
  int cached_bytes = 0;                 // bytes per element of the tensors a row cache would hold
  int single_bytes = 0;                 // bytes per element of the packed tensors one pass reads
  int write_single_bytes = 0;           // those of them that only the write pass reads
  // Element definitions the reduction passes and the write pass read more than once: the passes
  // computing each (passes + 1 is the write pass).
  std::map<std::string, std::set<int>> def_passes;
  // keep = registers keeps these: element definitions that call an SFU function (exp, log, tanh,
  // sigmoid, ...) and that several passes read, computed once in the first of them (softmax's
  // e = exp(x - m) in the sum's pass and the write pass) instead of once per pass.
  std::vector<const Definition*> cached_defs;
  int cached_def_bytes = 0;             // bytes per element of those
};

std::string list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

std::vector<int> identity(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

bool is_reduction(const Definition& d) { return d.reduce != ReduceOp::none && d.reduce != ReduceOp::scan; }

// Whether `e` calls a function the special-function unit evaluates per element (the ones worth
// keeping rather than recomputing).
bool calls_sfu(const Expr& e) {
  static const std::set<std::string> kSfu = {"exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"};
  if (e.kind == Expr::Kind::call && kSfu.count(e.name)) return true;
  for (const Expr& a : e.args)
    if (calls_sfu(a)) return true;
  return false;
}

class Analyser {
 public:
  explicit Analyser(const dsl::Program& p) : p_(p) {}

  Analysis run() {
    if (p_.outputs.empty()) throw Refused("the program has no outputs");
    const Definition* first = nullptr;
    for (const Definition& d : p_.defs)
      if (d.reduce != ReduceOp::none && !first) first = &d;
    if (!first) throw Refused("the program has no reduction or scan over a last index; it is elementwise");
    std::vector<std::string> rows = first->extents;
    std::vector<std::string> vars = first->indices;
    if (first->reduce == ReduceOp::scan) {
      rows.pop_back();
      vars.pop_back();
    }
    a_.rank = static_cast<int>(rows.size()) + 1;
    a_.axis_dims = rows;
    a_.axis_dims.push_back(first->over_extent);
    a_.axis_vars = vars;
    a_.axis_vars.push_back(first->over);
    for (const Definition& d : p_.defs) classify(d);
    for (const Definition& d : p_.defs) walk(d);
    for (const Definition& d : p_.defs) level(d);
    for (const Definition& d : p_.defs) {
      const Node& n = a_.nodes.at(d.name);
      if (n.shape == Shape::element && d.is_output) a_.write_pass = true;
      if (is_reduction(d)) a_.passes = std::max(a_.passes, n.level);
    }
    for (const Definition& d : p_.defs) {
      if (is_reduction(d)) mark_params(d, a_.nodes.at(d.name).level);
      if (d.is_output && a_.nodes.at(d.name).shape == Shape::element) mark_params(d, a_.passes + 1);
    }
    for (ParamUse& u : a_.params) {
      if (!u.element) continue;
      a_.widest_access = std::max(a_.widest_access, type_bytes(u.param->type));
      if (u.passes.size() > 1) {
        u.cached = true;
        a_.cached_bytes += type_bytes(u.param->type);
      } else {
        a_.single_bytes += type_bytes(u.param->type);
        u.write_only = u.passes.size() == 1 && *u.passes.begin() == a_.passes + 1;
        if (u.write_only) a_.write_single_bytes += type_bytes(u.param->type);
      }
    }
    for (const Definition& d : p_.defs)
      if (d.is_output && a_.nodes.at(d.name).shape == Shape::element)
        a_.widest_access = std::max(a_.widest_access, type_bytes(d.type));
    for (const Definition& d : p_.defs) {
      auto it = a_.def_passes.find(d.name);
      if (it == a_.def_passes.end() || it->second.size() < 2 || d.is_output || !calls_sfu(d.body)) continue;
      a_.cached_defs.push_back(&d);
      a_.cached_def_bytes += type_bytes(d.type);
    }
    return a_;
  }

 private:
  const dsl::Program& p_;
  Analysis a_;

  void classify(const Definition& d) {
    std::vector<std::string> rows(a_.axis_dims.begin(), a_.axis_dims.end() - 1);
    Node n;
    n.def = &d;
    if (d.reduce == ReduceOp::none) {
      if (d.extents == rows)
        n.shape = Shape::row;
      else if (d.extents == a_.axis_dims)
        n.shape = Shape::element;
      else
        throw Refused("'" + d.name + "' ranges over " + list(d.extents) + ", neither the rows " + list(rows) +
                      " nor the rows and their index " + list(a_.axis_dims));
    } else {
      std::vector<std::string> kept = d.extents;
      if (d.reduce == ReduceOp::scan) kept.pop_back();
      if (kept != rows || d.over_extent != a_.axis_dims.back())
        throw Refused("'" + d.name + "' reduces rows " + list(kept) + " over " + d.over_extent + ", but the rows are " +
                      list(rows) + " over " + a_.axis_dims.back());
      n.shape = d.reduce == ReduceOp::scan ? Shape::element : Shape::row;
      a_.has_scan = a_.has_scan || d.reduce == ReduceOp::scan;
      bool sums = d.reduce == ReduceOp::sum || d.reduce == ReduceOp::mean || d.reduce == ReduceOp::scan;
      if (sums && is_half(d.type))
        throw Refused("'" + d.name + "' accumulates " + dsl::type_name(d.type) + " values; accumulate in f32 instead, " +
                      "e.g. " + dsl::reduce_word(d) + "(f32(...))");
      if (d.reduce == ReduceOp::scan && d.scan_product && (d.type == Type::i32 || d.type == Type::i64))
        throw Refused("'" + d.name + "' multiplies " + dsl::type_name(d.type) + " values, whose products overflow within a few "
                      "steps (the kernel's integers wrap where the interpreter saturates); take it in f32 or f64: "
                      "prodscan(f64(...))");
    }
    check_emittable(d.body);
    a_.nodes[d.name] = n;
  }

  // The space axis of each index variable of d's body.
  std::map<std::string, int> env_of(const Definition& d) const {
    std::map<std::string, int> env;
    for (size_t k = 0; k < d.indices.size(); ++k) env[d.indices[k]] = static_cast<int>(k);
    if (d.reduce != ReduceOp::none) env[d.over] = a_.rank - 1;
    return env;
  }

  void walk(const Definition& d) {
    std::map<std::string, int> env = env_of(d);
    Node& n = a_.nodes.at(d.name);
    for (const Expr* r : reads_in(d.body)) {
      std::vector<int> axes;
      for (const dsl::IndexExpr& ix : r->indices) {
        if (ix.offset != 0)
          throw Refused("'" + r->name + "' is read at an offset index (a stencil); the rowwise family reads no offsets");
        axes.push_back(env.at(ix.var));
      }
      if (const Definition* t = p_.def(r->name)) {
        const Node& tn = a_.nodes.at(t->name);
        int want = tn.shape == Shape::element ? a_.rank : a_.rank - 1;
        if (axes != identity(want))
          throw Refused("'" + t->name + "' is read at other indices than its own " + list(t->indices) +
                        "; rowwise reads definitions where they are defined");
        if (std::find(n.deps.begin(), n.deps.end(), t) == n.deps.end()) n.deps.push_back(t);
        continue;
      }
      const Param* prm = p_.param(r->name);
      int col = a_.rank - 1;
      int uses = static_cast<int>(std::count(axes.begin(), axes.end(), col));
      if (uses > 1 || (uses == 1 && axes.back() != col))
        throw Refused("'" + r->name + "' is read with the row's index '" + a_.axis_vars.back() +
                      "' other than as its last index; rowwise reads rows contiguously");
      ParamUse* use = nullptr;
      for (ParamUse& u : a_.params)
        if (u.param == prm) use = &u;
      if (use && use->axes != axes)
        throw Refused("'" + r->name + "' is read at two different index patterns; rowwise reads each tensor one way");
      if (!use) a_.params.push_back({prm, axes, uses == 1, {}, false});
    }
  }

  void level(const Definition& d) {
    Node& n = a_.nodes.at(d.name);
    int deepest = 0;
    for (const Definition* t : n.deps) {
      const Node& tn = a_.nodes.at(t->name);
      deepest = std::max(deepest, tn.level);
      if (tn.shape == Shape::element && (tn.after_scan || t->reduce == ReduceOp::scan)) n.after_scan = true;
    }
    n.level = is_reduction(d) ? deepest + 1 : deepest;
    if (n.after_scan && is_reduction(d))
      throw Refused("'" + d.name + "' reduces values that depend on a scan; rowwise computes scans in the last pass only");
    if (n.after_scan && d.reduce == ReduceOp::scan)
      throw Refused("the scan '" + d.name + "' reads another scan; rowwise computes one level of scans");
  }

  // Records that the element values d needs are read in pass `pass`.
  void mark_params(const Definition& d, int pass) {
    std::map<std::string, int> env = env_of(d);
    for (const Expr* r : reads_in(d.body)) {
      if (const Definition* t = p_.def(r->name)) {
        if (a_.nodes.at(t->name).shape == Shape::element && !is_reduction(*t)) {
          if (t->reduce == ReduceOp::none) a_.def_passes[t->name].insert(pass);
          mark_params(*t, pass);
        }
        continue;
      }
      for (ParamUse& u : a_.params)
        if (u.param->name == r->name && u.element) u.passes.insert(pass);
    }
  }
};

// The pass p whose one reduction is m[r] = max(u) over c and whose next pass's one reduction is
// s[r] = sum(exp(u - m[r])) over c (directly, or through one element definition e[r, c] =
// exp(u - m[r])), with u the same expression: online = 1 fuses the two. 0 and `why` otherwise.
int online_pair(const dsl::Program& p, const Analysis& a, std::string& why) {
  for (int pass = 1; pass < a.passes; ++pass) {
    std::vector<const Definition*> here, next;
    for (const Definition& d : p.defs) {
      if (d.reduce == ReduceOp::none || d.reduce == ReduceOp::scan) continue;
      const int level = a.nodes.at(d.name).level;
      if (level == pass) here.push_back(&d);
      if (level == pass + 1) next.push_back(&d);
    }
    if (here.size() != 1 || next.size() != 1 || here[0]->reduce != ReduceOp::max || next[0]->reduce != ReduceOp::sum)
      continue;
    const Definition& m = *here[0];
    const Definition& s = *next[0];
    if (m.type != Type::f32 || s.type != Type::f32 || m.body.type != Type::f32 || s.body.type != Type::f32) continue;
    const Expr* body = &s.body;
    if (body->kind == Expr::Kind::read) {
      const Definition* e = p.def(body->name);
      if (!e || e->reduce != ReduceOp::none || a.nodes.at(e->name).shape != Shape::element) continue;
      body = &e->body;
    }
    const bool exp_of_difference = body->kind == Expr::Kind::call && body->name == "exp" && body->args.size() == 1 &&
                                   body->args[0].kind == Expr::Kind::binary && body->args[0].op == "-";
    if (!exp_of_difference) continue;
    const Expr& u = body->args[0].args[0];
    const Expr& max_read = body->args[0].args[1];
    if (max_read.kind != Expr::Kind::read || max_read.name != m.name || format_expr(u) != format_expr(m.body)) continue;
    return pass;
  }
  why = "this program has no pass m[r] = max(u) over c followed by a pass s[r] = sum(exp(u - m[r])) over c of the "
        "same u, each its pass's only reduction";
  return 0;
}

RowKnobs read_knobs(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, rowwise_family());
  RowKnobs s;
  const int64_t threads = k.threads();
  s.threads = static_cast<int>(threads);
  int64_t rpb = k.integer("rows_per_block");
  if (rpb < 1) throw Refused("rows_per_block = " + std::to_string(rpb) + " must be at least 1");
  s.rows_per_block = static_cast<int>(std::min<int64_t>(rpb, 1024));
  s.vector = static_cast<int>(k.one_of("vector", {1, 2, 4, 8}));
  s.items = static_cast<int>(k.one_of("items_per_thread", {1, 2, 4, 8}));
  s.unroll = static_cast<int>(k.one_of("unroll", {1, 2, 4, 8}));
  s.reduction = k.one_of("reduction", std::vector<std::string>{"warp", "block", "two_pass"});
  s.cache = k.one_of("cache_row", std::vector<std::string>{"none", "registers", "shared", "l2"});
  s.fast_math = k.one_of("math", std::vector<std::string>{"precise", "fast"}) == "fast";
  if (s.fast_math) check_fast_math(p);
  s.keep = k.one_of("keep", std::vector<std::string>{"none", "registers"}) == "registers";
  if (s.keep && a.cached_defs.empty())
    throw Refused("keep = registers keeps element definitions that call exp, log, tanh, sigmoid, silu or gelu and "
                  "that several passes read; this program has none");
  if (s.keep && s.cache != "registers")
    throw Refused("keep = registers holds values in the register cache's unrolled steps, so cache_row must be "
                  "registers, not " + s.cache);
  {
    const dsl::ScheduleValue& v = k.value("blocks_per_sm");
    if (v.kind == dsl::ScheduleValue::Kind::integer) {
      if (v.integer < 1 || v.integer > 32)
        throw Refused("blocks_per_sm = " + std::to_string(v.integer) + " must be between 1 and 32, or auto");
      if (v.integer * threads > 2048)
        throw Refused("blocks_per_sm = " + std::to_string(v.integer) + " of threads = " + std::to_string(threads) +
                      " asks for " + std::to_string(v.integer * threads) + " threads per SM; an SM holds 2048");
      s.blocks_per_sm = static_cast<int>(v.integer);
    } else if (!(v.kind == dsl::ScheduleValue::Kind::ident && v.ident == "auto")) {
      throw Refused("blocks_per_sm = " + value_text(v) + " must be an integer or auto");
    }
  }
  if (k.one_of("online", {0, 1}) == 1) {
    std::string why;
    s.online_pass = online_pair(p, a, why);
    if (!s.online_pass) throw Refused("online = 1 fuses a max pass with the sum of exp(u - max) after it; " + why);
    if (s.reduction == "two_pass")
      throw Refused("online = 1 merges each thread's pair within one kernel; reduction = two_pass splits a row over "
                    "blocks, so reduction must be block or warp");
    if (s.cache != "registers")
      throw Refused("online = 1 takes each thread's maximum and then its sum over the row it holds, so cache_row must "
                    "be registers, not " + s.cache);
    if (s.keep)
      throw Refused("online = 1 sums exp(u - m) with each thread's own maximum, which the write pass cannot reuse, so "
                    "keep must be none");
  }
  if (s.vector * a.widest_access > 16)
    throw Refused("vector = " + std::to_string(s.vector) + " moves " + std::to_string(s.vector * a.widest_access) +
                  " bytes per access of a " + std::to_string(a.widest_access) +
                  "-byte type; one access is at most 16 bytes (a 128-bit load)");
  const std::string rpb_text = "rows_per_block = " + std::to_string(rpb);
  if (s.reduction == "warp") {
    if (rpb != threads / 32)
      throw Refused("reduction = warp serves each row with one warp, so rows_per_block must be threads / 32 = " +
                    std::to_string(threads / 32) + ", not " + std::to_string(rpb));
    s.threads_per_row = 32;
  } else if (s.reduction == "block") {
    if (threads % rpb != 0 || (threads / rpb) % 32 != 0)
      throw Refused(rpb_text + " does not split threads = " + std::to_string(threads) + " into groups of whole warps");
    s.threads_per_row = static_cast<int>(threads / rpb);
    if (s.threads_per_row == 32)
      throw Refused("threads = " + std::to_string(threads) + " over " + rpb_text +
                    " leaves 32 threads per row, which is reduction = warp; reduction = block needs 64 or more");
  } else {
    if (rpb != 1) throw Refused("reduction = two_pass splits each row over blocks, so rows_per_block must be 1, not " +
                                std::to_string(rpb));
    if (s.cache == "l2")
      throw Refused("cache_row = l2 hints the loads of one kernel's passes; reduction = two_pass runs each pass as its "
                    "own kernel, so cache_row must be none");
    if (s.cache != "none")
      throw Refused("reduction = two_pass runs each pass as its own kernel, so no row cache survives between passes; "
                    "cache_row must be none");
    if (a.has_scan) throw Refused("reduction = two_pass cannot split a scan over blocks");
    s.threads_per_row = s.threads;
  }
  s.grid_rows = k.one_of("grid", std::vector<std::string>{"stride", "rows"}) == "rows";
  if (s.grid_rows && s.reduction == "two_pass")
    throw Refused("grid = rows launches one block per rows_per_block rows of the fused kernel; reduction = two_pass "
                  "launches blocks per chunk of a row, so grid must be stride");
  if (s.cache != "none" && a.cached_bytes == 0)
    throw Refused("cache_row = " + s.cache + " keeps rows that more than one pass reads, and this program reads each "
                  "row once");
  const std::string tail = k.one_of("tail", std::vector<std::string>{"checked", "exact", "fixed"});
  s.exact = tail != "checked";
  s.fixed = tail == "fixed";
  if (s.exact && s.cache != "registers")
    throw Refused("tail = " + tail + " instantiates the register cache's kernel for rows of exactly its cached "
                  "steps, so cache_row must be registers, not " + s.cache);
  s.store_last = k.one_of("store_hint", std::vector<std::string>{"none", "evict_last"}) == "evict_last";
  if (s.store_last && !a.write_pass)
    throw Refused("store_hint = evict_last hints the stores of output rows, and this program writes one value per "
                  "row");
  const std::string preload = k.one_of("preload", std::vector<std::string>{"none", "all", "write"});
  s.preload = preload == "all" ? Preload::all : preload == "write" ? Preload::write : Preload::none;
  if (s.preload == Preload::all && s.cache != "registers")
    throw Refused("preload = all loads the packs that one pass reads with the register cache's, before the first "
                  "pass, so cache_row must be registers, not " + s.cache);
  if (s.preload == Preload::all && a.single_bytes == 0)
    throw Refused("preload = all loads the packs that one pass reads (such as a weight) with the cached rows; every "
                  "tensor this program reads along the row is cached already");
  if (s.preload == Preload::write && s.cache != "registers")
    throw Refused("preload = write loads the write pass's packs of every step into registers before its first store, "
                  "which needs the register cache's fully unrolled steps, so cache_row must be registers, not " +
                  s.cache);
  if (s.preload == Preload::write && !a.write_pass)
    throw Refused("preload = write loads the packs the write pass reads before its first store, and this program "
                  "writes one value per row");
  if (s.preload == Preload::write && a.write_single_bytes == 0)
    throw Refused("preload = write loads the packs that only the write pass reads (such as a weight) before its "
                  "first store; every tensor the write pass reads along the row is cached already");
  if (s.cache == "registers") {
    if (s.unroll != 1)
      throw Refused("cache_row = registers unrolls the row loop fully, so unroll must be 1, not " +
                    std::to_string(s.unroll));
    // the rows, the kept values and the preloaded packs
    const int preload_bytes = s.preload == Preload::all     ? a.single_bytes
                              : s.preload == Preload::write ? a.write_single_bytes
                                                            : 0;
    const int element_bytes = a.cached_bytes + (s.keep ? a.cached_def_bytes : 0) + preload_bytes;
    const int tile_bytes = s.vector * s.items * element_bytes;
    const int budget = register_budget_bytes(s.threads);
    if (tile_bytes > budget)
      throw Refused("cache_row = registers needs vector * items_per_thread * " + std::to_string(element_bytes) +
                    " = " + std::to_string(tile_bytes) + " bytes of registers per thread for one step of the row; " +
                    "the budget at threads = " + std::to_string(s.threads) + " is " + std::to_string(budget));
    const int per_tile = s.vector * s.items;
    s.cache_values = budget / element_bytes / per_tile * per_tile;
  }
  return s;
}

std::string name_of(const RowKnobs& s, const dsl::Program& p) {
  std::string n = name_stem(p, "rowwise") + "_t" + std::to_string(s.threads) + "_v" + std::to_string(s.vector) + "_r" +
                  std::to_string(s.rows_per_block) + "_" + s.reduction;
  if (s.items > 1) n += "_i" + std::to_string(s.items);
  if (s.unroll > 1) n += "_u" + std::to_string(s.unroll);
  if (s.cache == "registers") n += "_regs";
  if (s.cache == "shared") n += "_smem";
  if (s.cache == "l2") n += "_l2";
  if (s.keep) n += "_keep";
  if (s.online_pass) n += "_online";
  if (s.blocks_per_sm) n += "_b" + std::to_string(s.blocks_per_sm);
  if (s.exact) n += s.fixed ? "_fixed" : "_exact";
  if (s.store_last) n += "_stlast";
  if (s.preload == Preload::all) n += "_pre";
  if (s.preload == Preload::write) n += "_prew";
  if (s.grid_rows) n += "_rowgrid";
  if (s.fast_math) n += "_fast";
  return n;
}

void check(const dsl::Program& p, const Binding& b) {
  if (is_column_reduction(p)) return column_check(p, b);
  resolve_binding(p, b);
  Analysis a = Analyser(p).run();
  read_knobs(p, a);
}

std::string kernel_name_of(const dsl::Program& p) {
  if (is_column_reduction(p)) return column_kernel_name(p);
  Analysis a = Analyser(p).run();
  return name_of(read_knobs(p, a), p);
}

// How one pass walks a row: [begin, end) in steps of kTile, kItems packs of kVec per thread.
struct Walk {
  std::string begin = "0", end;
  bool registers = false;  // the step loop is unrolled over the register cache's tiles
};

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(Analyser(p).run()), s_(read_knobs(p, a_)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Definition& d : p_.defs) names_.add(d.name);
    name_ = name_of(s_, p_);
    col_dim_ = names_[a_.axis_dims.back()];
    if (s_.fixed) fixed_arg_ = names_.fresh(col_dim_ + "_arg");
  }

  std::string run() {
    Writer kernels;
    if (two_pass())
      two_pass_kernels(kernels);
    else
      fused_kernel(kernels);
    Writer w;
    header(w);
    w.raw(includes(p_));
    w.line();
    w.line("namespace {");
    constants(w);
    w.line();
    w.raw(pack_source());
    if (s_.cache == "l2") w.raw(hinted_load_source());
    if (s_.store_last) w.raw(hinted_store_source());
    if (!helpers_.empty()) w.raw(helpers_.source());
    w.raw(reduction_helpers());
    w.line();
    w.raw(kernels.text());
    w.line("}  // namespace");
    w.line();
    host(w);
    return w.text();
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  RowKnobs s_;
  Names names_;
  Helpers helpers_;
  std::string name_;
  std::string col_dim_;                 // identifier of the row length
  std::string fixed_arg_;               // tail = fixed: the fused kernel's parameter for the row length
  std::set<ReduceOp> ops_;              // reductions used, for the helpers

  bool two_pass() const { return s_.reduction == "two_pass"; }
  bool warp() const { return s_.reduction == "warp"; }
  const Node& node(const Definition& d) const { return a_.nodes.at(d.name); }

  // --- names -----------------------------------------------------------------------------------

  // The local holding a definition's value (an output's name is its pointer's).
  std::string value_name(const Definition& d) { return d.is_output ? names_.derived(d.name, "value") : names_[d.name]; }
  std::string acc_name(const Definition& d) { return names_.derived(d.name, "acc"); }
  std::string at_name(const Definition& d) { return names_.derived(d.name, "at"); }
  std::string partials_name(const Definition& d) { return names_.derived(d.name, "partials"); }
  std::string partials_at_name(const Definition& d) { return names_.derived(d.name, "partials_at"); }
  std::string ws_name(const Definition& d) { return names_.derived(d.name, "ws"); }
  std::string ws_at_name(const Definition& d) { return names_.derived(d.name, "ws_at"); }

  // --- types of accumulators -------------------------------------------------------------------

  // Reductions accumulate in their own type; max/min/argmax of half values in f32 (exact).
  Type acc_type(const Definition& d) const {
    if (d.reduce == ReduceOp::argmax) return is_half(d.body.type) ? Type::f32 : d.body.type;
    return is_half(d.type) ? Type::f32 : d.type;
  }

  std::string identity_of(const Definition& d) const {
    const Type t = acc_type(d);
    const bool fl = dsl::type_is_float(t);
    const bool wide = t == Type::i64;
    switch (d.reduce) {
      case ReduceOp::max:
      case ReduceOp::argmax: return fl ? "-INFINITY" : (wide ? "INT64_MIN" : "INT32_MIN");
      case ReduceOp::min: return fl ? "INFINITY" : (wide ? "INT64_MAX" : "INT32_MAX");
      default: return literal(0, t);
    }
  }

  // --- the header and constants ----------------------------------------------------------------

  void header(Writer& w) {
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (rowwise family).");
    for (const Definition& d : p_.defs) w.line("//   " + format_definition(d));
    std::string rows = list(std::vector<std::string>(a_.axis_dims.begin(), a_.axis_dims.end() - 1));
    std::string how;
    if (warp())
      how = "one warp per row, " + std::to_string(s_.threads / 32) + " rows per block of " + std::to_string(s_.threads) +
            " threads; reductions are warp shuffles.";
    else if (s_.reduction == "block")
      how = std::to_string(s_.threads_per_row) + " threads per row, " + std::to_string(s_.rows_per_block) +
            " row(s) per block; reductions are warp shuffles, then the warps' results through shared memory.";
    else
      how = "each row split into chunks over several blocks of " + std::to_string(s_.threads) +
            " threads; each pass is its own kernel, and per-chunk partial results meet in a workspace.";
    w.comment("Rows are the indices " + rows + ", flattened; a row is the index " + a_.axis_vars.back() + " over " +
              a_.axis_dims.back() + ". Schedule: " + how + " A thread takes " + std::to_string(s_.items) +
              " pack(s) of " + std::to_string(s_.vector) + " element(s) per step along the row." +
              (s_.cache == "registers" ? " Rows read by several passes stay in registers (at most kMaxRow elements)."
               : s_.cache == "shared" ? " Rows read by several passes are staged in shared memory."
               : s_.cache == "l2" ? " Rows read by several passes are read again from the L2 (and L1), where eviction "
                                    "priorities keep them: evict_last before their last read, evict_first at it."
                                  : "") +
              (s_.keep ? " " + kept_list() + " computed once per row, in the first pass that reads it, and kept in registers." : "") +
              (s_.preload == Preload::all ? " The tensors one pass reads are loaded into registers with the cached rows, "
                                            "before the first pass (preload = all)."
               : s_.preload == Preload::write ? " The tensors only the write pass reads are loaded into registers for all "
                                              "of its steps before its first store (preload = write)."
                                              : ""));
    for (int pass = 1; pass <= a_.passes; ++pass) w.line("//   pass " + std::to_string(pass) + ": " + pass_summary(pass));
    if (a_.write_pass) w.line("//   write pass: " + write_summary());
  }

  std::string kept_list() const {
    std::string s;
    for (const Definition* d : a_.cached_defs) s += (s.empty() ? "" : ", ") + d->name;
    return s;
  }

  std::string pass_summary(int pass) const {
    std::string s;
    for (const Definition& d : p_.defs)
      if (is_reduction(d) && node(d).level == pass) s += (s.empty() ? "" : ", ") + d.name;
    return s;
  }

  std::string write_summary() const {
    std::string s;
    for (const Definition& d : p_.defs)
      if (d.is_output && node(d).shape == Shape::element) s += (s.empty() ? "" : ", ") + d.name;
    return s;
  }

  // The pack sizes the hinted loads and stores take in one PTX access: n registers of the PTX type,
  // as the C++ type reg holds them (its fields, and their asm constraint letter).
  struct HintForm {
    int bytes, n;
    const char* reg;
    const char* type;
    const char* vec;
    const char* fields[4];
    const char* constraint;
  };
  static constexpr HintForm kHintForms[] = {
      {16, 4, "uint4", "u32", ".v4", {"v.x", "v.y", "v.z", "v.w"}, "r"},
      {8, 2, "uint2", "u32", ".v2", {"v.x", "v.y"}, "r"},
      {4, 1, "unsigned", "u32", "", {"v"}, "r"},
      {2, 1, "unsigned short", "u16", "", {"v"}, "h"},
  };
  // A form's registers in the PTX text, numbered from the operand `from`: "%0" or "{%1, %2}".
  static std::string hint_registers(const HintForm& f, int from) {
    std::string s;
    for (int i = 0; i < f.n; ++i) s += (i ? ", %" : "%") + std::to_string(from + i);
    return f.n > 1 ? "{" + s + "}" : s;
  }
  // The asm operands of a form's registers: "=r"(v.x), ... for outputs (prefix "="), "r"(v.x), ... for inputs.
  static std::string hint_operands(const HintForm& f, const std::string& prefix) {
    std::string s;
    for (int i = 0; i < f.n; ++i)
      s += std::string(i ? ", " : "") + "\"" + prefix + f.constraint + "\"(" + f.fields[i] + ")";
    return s;
  }

  // cache_row = l2: loads with an eviction priority for the L1 and, through a createpolicy cache
  // hint, the L2 (sm_80 and later; plain loads before, and for packs of other sizes).
  static std::string hinted_load_source() {
    std::string s =
        "// cache_row = l2: load_pack_keep marks a pack's lines evict_last, so that a row a later pass reads\n"
        "// again is still in the L2 (often the L1); load_pack_last marks a row's last read evict_first.\n"
        "template <bool kKeep, int kVec, typename T>\n"
        "__device__ __forceinline__ Pack<T, kVec> load_pack_hinted(const T* p) {\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
        "  constexpr int kBytes = sizeof(T) * kVec;\n"
        "  Pack<T, kVec> r;\n"
        "  uint64_t policy;\n"
        "  if constexpr (kKeep) asm(\"createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\" : \"=l\"(policy));\n"
        "  else asm(\"createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\" : \"=l\"(policy));\n";
    bool first = true;
    for (const HintForm& f : kHintForms) {
      const int n = f.n;
      const std::string ops = hint_registers(f, 0) + ", [%" + std::to_string(n) + "], %" + std::to_string(n + 1) + ";";
      const std::string ins = std::string(".L2::cache_hint") + f.vec + "." + f.type + " " + ops;
      const std::string outs = hint_operands(f, "=");
      s += std::string(first ? "  if" : "  } else if") + " constexpr (kBytes == " + std::to_string(f.bytes) + ") {\n"
           "    " + f.reg + " v;\n"
           "    if constexpr (kKeep)\n"
           "      asm volatile(\"ld.global.L1::evict_last" + ins + "\" : " + outs + " : \"l\"(p), \"l\"(policy));\n"
           "    else\n"
           "      asm volatile(\"ld.global.L1::evict_first" + ins + "\" : " + outs + " : \"l\"(p), \"l\"(policy));\n"
           "    *reinterpret_cast<" + f.reg + "*>(&r) = v;\n";
      first = false;
    }
    s += "  } else {\n"
         "    r = load_pack<kVec>(p);\n"
         "  }\n"
         "  return r;\n"
         "#else\n"
         "  return load_pack<kVec>(p);\n"
         "#endif\n"
         "}\n"
         "template <int kVec, typename T>\n"
         "__device__ __forceinline__ Pack<T, kVec> load_pack_keep(const T* p) {\n"
         "  return load_pack_hinted<true, kVec>(p);\n"
         "}\n"
         "template <int kVec, typename T>\n"
         "__device__ __forceinline__ Pack<T, kVec> load_pack_last(const T* p) {\n"
         "  return load_pack_hinted<false, kVec>(p);\n"
         "}\n";
    return s;
  }

  // store_hint = evict_last: the output's packs are stored with an L2 evict_last policy, so that its
  // lines stay (dirty) in the L2 rather than the input's lines that the kernel has read for the last
  // time. More of the output is still in the L2 when the kernel ends (and a consumer reads it from
  // there); what the kernel writes to DRAM while it runs is less. sm_80 and later; plain stores before.
  static std::string hinted_store_source() {
    std::string s =
        "// store_hint = evict_last: store_pack_kept stores a pack whose L2 lines are evicted last.\n"
        "template <int kVec, typename T>\n"
        "__device__ __forceinline__ void store_pack_kept(T* p, const Pack<T, kVec>& x) {\n"
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
        "  constexpr int kBytes = sizeof(T) * kVec;\n"
        "  uint64_t policy;\n"
        "  asm(\"createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\" : \"=l\"(policy));\n";
    bool first = true;
    for (const HintForm& f : kHintForms) {
      const std::string ins = std::string("st.global.L2::cache_hint") + f.vec + "." + f.type + " [%0], " +
                              hint_registers(f, 1) + ", %" + std::to_string(f.n + 1) + ";";
      s += std::string(first ? "  if" : "  } else if") + " constexpr (kBytes == " + std::to_string(f.bytes) + ") {\n"
           "    const " + f.reg + " v = *reinterpret_cast<const " + f.reg + "*>(&x);\n"
           "    asm volatile(\"" + ins + "\" :: \"l\"(p), " + hint_operands(f, "") + ", \"l\"(policy) : \"memory\");\n";
      first = false;
    }
    s += "  } else {\n"
         "    store_pack(p, x);\n"
         "  }\n"
         "#else\n"
         "  store_pack(p, x);\n"
         "#endif\n"
         "}\n";
    return s;
  }

  int static_shared_bytes() const {
    if (warp()) return 0;
    int per_warp = 0;
    for (const Definition& d : p_.defs) {
      if (is_reduction(d) || d.reduce == ReduceOp::scan) per_warp += type_bytes(acc_type(d));
      if (d.reduce == ReduceOp::argmax) per_warp += 8;
    }
    return per_warp * s_.rows_per_block * (s_.threads_per_row / 32);
  }

  void constants(Writer& w) {
    w.line("constexpr int kThreads = " + std::to_string(s_.threads) + ";  // threads per block");
    w.line("constexpr int kRowsPerBlock = " + std::to_string(s_.rows_per_block) + ";  // rows a block serves at once");
    w.line("constexpr int kThreadsPerRow = kThreads / kRowsPerBlock;");
    if (!warp()) w.line("constexpr int kWarpsPerRow = kThreadsPerRow / 32;");
    w.line("constexpr int kVector = " + std::to_string(s_.vector) + ";  // elements per pack");
    w.line("constexpr int kItems = " + std::to_string(s_.items) + ";  // packs per thread and step");
    if (s_.unroll > 1) w.line("constexpr int kUnroll = " + std::to_string(s_.unroll) + ";  // steps unrolled");
    if (s_.cache == "registers") {
      w.line("constexpr int kCacheValues = " + std::to_string(s_.cache_values) +
             ";  // elements of each cached row a thread holds");
      w.line("constexpr int64_t kMaxRow = (int64_t)kThreadsPerRow * kCacheValues;  // longer rows are refused");
    }
    if (s_.cache == "shared")
      w.line("constexpr int64_t kMaxCacheBytes = " + std::to_string(kSharedLimitBytes - static_shared_bytes()) +
             ";  // 227 KB less the reductions' shared memory");
    if (two_pass()) w.line("constexpr int64_t kMaxSplits = 64;  // chunks per row at most");
    if (!s_.grid_rows) w.line("constexpr int64_t kMaxBlocks = 65536;  // more rows loop (grid-stride)");
    if (s_.cache == "shared") {
      w.line();
      w.comment("Bytes of one cached tensor's rows in shared memory, rounded up so that the next starts 16-byte "
                "aligned.");
      w.open("__host__ __device__ constexpr int64_t cache_region_bytes(int64_t row_length, int64_t element_bytes)");
      w.line("return (kRowsPerBlock * row_length * element_bytes + 15) / 16 * 16;");
      w.close();
    }
  }

  // --- reduction helpers -----------------------------------------------------------------------

  std::string reduction_helpers() const {
    std::string s;
    const bool block = !warp();
    if (ops_.count(ReduceOp::sum) || ops_.count(ReduceOp::mean)) {
      s += "// Sum over the 32 lanes of a warp by butterfly shuffles; every lane gets the same total.\n"
           "template <typename T>\n"
           "__device__ __forceinline__ T warp_sum(T v) {\n"
           "  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);\n"
           "  return v;\n"
           "}\n";
      if (block)
        s += "// Sum over the kThreadsPerRow threads of one row: shuffles within each warp, then the warps'\n"
             "// sums through shared memory, added in warp order so that every thread gets the same total.\n"
             "template <typename T>\n"
             "__device__ __forceinline__ T row_sum(T v, T* partials, int lane) {\n"
             "  v = warp_sum(v);\n"
             "  if (lane % 32 == 0) partials[lane / 32] = v;\n"
             "  __syncthreads();\n"
             "  T total = partials[0];\n"
             "  for (int w = 1; w < kWarpsPerRow; ++w) total += partials[w];\n"
             "  return total;\n"
             "}\n";
    }
    for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
      if (!ops_.count(op)) continue;
      const std::string o = op == ReduceOp::max ? "max" : "min";
      s += "// NaN-propagating " + o + "imum over the 32 lanes of a warp.\n"
           "template <typename T>\n"
           "__device__ __forceinline__ T warp_" + o + "(T v) {\n"
           "  for (int offset = 16; offset > 0; offset /= 2) v = " + o + "_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));\n"
           "  return v;\n"
           "}\n";
      if (block)
        s += "// NaN-propagating " + o + "imum over the kThreadsPerRow threads of one row.\n"
             "template <typename T>\n"
             "__device__ __forceinline__ T row_" + o + "(T v, T* partials, int lane) {\n"
             "  v = warp_" + o + "(v);\n"
             "  if (lane % 32 == 0) partials[lane / 32] = v;\n"
             "  __syncthreads();\n"
             "  T result = partials[0];\n"
             "  for (int w = 1; w < kWarpsPerRow; ++w) result = " + o + "_nan(result, partials[w]);\n"
             "  return result;\n"
             "}\n";
    }
    if (ops_.count(ReduceOp::argmax)) {
      s += "// Whether (v, at) beats (best, best_at) for argmax: the first maximum wins and a NaN counts as the\n"
           "// maximum (PyTorch's argmax); at < 0 marks \"no element yet\".\n"
           "template <typename T>\n"
           "__device__ __forceinline__ bool argmax_beats(T v, int64_t at, T best, int64_t best_at) {\n"
           "  if (at < 0) return false;\n"
           "  if (best_at < 0) return true;\n"
           "  if (v != v) return best == best || at < best_at;\n"
           "  if (best != best) return false;\n"
           "  return v > best || (v == best && at < best_at);\n"
           "}\n"
           "template <typename T>\n"
           "__device__ __forceinline__ void argmax_take(T& best, int64_t& best_at, T v, int64_t at) {\n"
           "  if (argmax_beats(v, at, best, best_at)) {\n"
           "    best = v;\n"
           "    best_at = at;\n"
           "  }\n"
           "}\n";
      s += "// Argmax over the 32 lanes of a warp; every lane gets the same (value, index).\n"
             "template <typename T>\n"
             "__device__ __forceinline__ void warp_argmax(T& best, int64_t& best_at) {\n"
             "  for (int offset = 16; offset > 0; offset /= 2) {\n"
             "    const T v = __shfl_xor_sync(0xffffffffu, best, offset);\n"
             "    const int64_t at = __shfl_xor_sync(0xffffffffu, best_at, offset);\n"
             "    argmax_take(best, best_at, v, at);\n"
             "  }\n"
             "}\n";
      if (block)
        s += "// Argmax over the kThreadsPerRow threads of one row.\n"
             "template <typename T>\n"
             "__device__ __forceinline__ void row_argmax(T& best, int64_t& best_at, T* partials, int64_t* partials_at,\n"
             "                                           int lane) {\n"
             "  warp_argmax(best, best_at);\n"
             "  if (lane % 32 == 0) {\n"
             "    partials[lane / 32] = best;\n"
             "    partials_at[lane / 32] = best_at;\n"
             "  }\n"
             "  __syncthreads();\n"
             "  best = partials[0];\n"
             "  best_at = partials_at[0];\n"
             "  for (int w = 1; w < kWarpsPerRow; ++w) argmax_take(best, best_at, partials[w], partials_at[w]);\n"
             "}\n";
    }
    if (ops_.count(ReduceOp::scan)) {
      s += "// Exclusive prefix sum (kProd: product) over the lanes of a warp, in lane order; `total` gets the\n"
           "// warp's sum (product).\n"
           "template <bool kProd, typename T>\n"
           "__device__ __forceinline__ T warp_exclusive_scan(T v, T& total) {\n"
           "  const int lane32 = threadIdx.x % 32;\n"
           "  T inclusive = v;\n"
           "  for (int offset = 1; offset < 32; offset *= 2) {\n"
           "    const T up = __shfl_up_sync(0xffffffffu, inclusive, offset);\n"
           "    if (lane32 >= offset) inclusive = kProd ? up * inclusive : up + inclusive;\n"
           "  }\n"
           "  total = __shfl_sync(0xffffffffu, inclusive, 31);\n"
           "  const T before = __shfl_up_sync(0xffffffffu, inclusive, 1);\n"
           "  return lane32 == 0 ? T(kProd ? 1 : 0) : before;\n"
           "}\n";
      if (block)
        s += "// Exclusive prefix sum (kProd: product) over the kThreadsPerRow threads of one row, in thread\n"
             "// order; `total` gets the sum (product) over all of them.\n"
             "template <bool kProd, typename T>\n"
             "__device__ __forceinline__ T row_exclusive_scan(T v, T* partials, int lane, T& total) {\n"
             "  T warp_total;\n"
             "  const T in_warp = warp_exclusive_scan<kProd>(v, warp_total);\n"
             "  if (lane % 32 == 0) partials[lane / 32] = warp_total;\n"
             "  __syncthreads();\n"
             "  T before = T(kProd ? 1 : 0);\n"
             "  total = T(kProd ? 1 : 0);\n"
             "  for (int w = 0; w < kWarpsPerRow; ++w) {\n"
             "    if (w < lane / 32) before = kProd ? before * partials[w] : before + partials[w];\n"
             "    total = kProd ? total * partials[w] : total + partials[w];\n"
             "  }\n"
             "  __syncthreads();  // the partials are rewritten by the next step\n"
             "  return kProd ? before * in_warp : before + in_warp;\n"
             "}\n";
    }
    if (online_) {
      const std::string e = s_.fast_math ? "__expf" : "expf";
      s += "// online = 1: a (maximum, sum of exp(u - maximum)) pair merged with another: the larger\n"
           "// maximum, each sum rescaled to it. A side whose maximum is the merged one keeps its sum as is\n"
           "// (no exp(-inf - (-inf)) when both are -inf).\n"
           "__device__ __forceinline__ void merge_max_sum(float& m, float& s, float mo, float so) {\n"
           "  const float mn = max_nan(m, mo);\n"
           "  const float a = m == mn ? 1.0f : " + e + "(m - mn), b = mo == mn ? 1.0f : " + e + "(mo - mn);\n"
           "#ifdef __CUDA_ARCH__\n"
           "  // Rounded products and sum (no fused multiply-add), so both lanes of a shuffle get the same sum.\n"
           "  s = __fadd_rn(__fmul_rn(s, a), __fmul_rn(so, b));\n"
           "#else\n"
           "  s = s * a + so * b;\n"
           "#endif\n"
           "  m = mn;\n"
           "}\n"
           "// The pair over the 32 lanes of a warp; every lane gets the same pair (each step is symmetric).\n"
           "__device__ __forceinline__ void warp_max_sum(float& m, float& s) {\n"
           "  for (int offset = 16; offset > 0; offset /= 2) {\n"
           "    const float mo = __shfl_xor_sync(0xffffffffu, m, offset), so = __shfl_xor_sync(0xffffffffu, s, offset);\n"
           "    merge_max_sum(m, s, mo, so);\n"
           "  }\n"
           "}\n";
      if (block)
        s += "// The pair over the kThreadsPerRow threads of one row: warps, then the warps' pairs in order.\n"
             "__device__ __forceinline__ void row_max_sum(float& m, float& s, float* m_partials, float* s_partials, int lane) {\n"
             "  warp_max_sum(m, s);\n"
             "  if (lane % 32 == 0) {\n"
             "    m_partials[lane / 32] = m;\n"
             "    s_partials[lane / 32] = s;\n"
             "  }\n"
             "  __syncthreads();\n"
             "  m = m_partials[0];\n"
             "  s = s_partials[0];\n"
             "  for (int w = 1; w < kWarpsPerRow; ++w) merge_max_sum(m, s, m_partials[w], s_partials[w]);\n"
             "}\n";
    }
    return s;
  }

  // --- kernel parameters -----------------------------------------------------------------------

  std::string tensor_params() const {
    std::string s;
    for (const std::string& t : abi_.tensors) {
      const Param* prm = p_.param(t);
      bool input = false;
      for (const Param& in : p_.inputs) input = input || in.name == t;
      s += std::string(input ? "const " : "") + cuda_type(prm->type) + "* __restrict__ " + names_[t] + ", ";
    }
    for (const std::string& d : p_.dims) s += "int64_t " + (names_[d] == col_dim_ && s_.fixed ? fixed_arg_ : names_[d]) + ", ";
    return s;
  }

  std::string tensor_args() const {
    std::string s;
    for (const std::string& t : abi_.tensors) s += names_[t] + ", ";
    for (const std::string& d : p_.dims) s += names_[d] + ", ";
    return s;
  }

  std::string rows_expr() const {
    std::string s;
    for (int i = 0; i + 1 < a_.rank; ++i) s += (i ? " * " : "") + names_[a_.axis_dims[i]];
    return s.empty() ? "1" : s;
  }

  // --- addressing ------------------------------------------------------------------------------

  // The offset of a parameter's row (element reads) or value (row reads) for the current row.
  std::string row_offset(const ParamUse& u, const std::map<int, std::string>& coords) const {
    const std::vector<std::string>& ext = u.param->extents;
    const int leading = static_cast<int>(u.axes.size()) - (u.element ? 1 : 0);
    bool rows_in_order = leading == a_.rank - 1;
    for (int i = 0; i < leading && rows_in_order; ++i) rows_in_order = u.axes[i] == i;
    if (leading == 0) return "0";
    if (rows_in_order) return u.element ? "row * " + col_dim_ : "row";
    std::string s;
    for (int i = 0; i < leading; ++i) {
      std::string term = coords.at(u.axes[i]);
      for (size_t k = i + 1; k < ext.size(); ++k) term += " * " + names_[ext[k]];
      s += (i ? " + " : "") + term;
    }
    return s;
  }

  bool needs_coords(const ParamUse& u) const {
    const int leading = static_cast<int>(u.axes.size()) - (u.element ? 1 : 0);
    if (leading == 0 || leading == a_.rank - 1) {
      bool in_order = true;
      for (int i = 0; i < leading; ++i) in_order = in_order && u.axes[i] == i;
      if (in_order) return false;
    }
    return true;
  }

  // Names the row's index variables (where a read needs them), each element tensor's row pointer
  // and each row read's expression. Nothing is declared until row_declarations(), which emits
  // only what the kernel's body used.
  void row_setup() {
    recips_.clear();
    coords_.clear();
    row_ptr_.clear();
    row_value_.clear();
    ptr_decls_.clear();
    param_axes_.clear();
    used_.clear();
    std::map<int, std::string> ids;
    for (const ParamUse& u : a_.params) {
      if (!needs_coords(u)) continue;
      for (size_t i = 0; i + (u.element ? 1 : 0) < u.axes.size(); ++i) {
        ids[u.axes[i]];
        param_axes_[u.param->name].insert(u.axes[i]);
      }
    }
    for (auto& [axis, id] : ids) {
      std::string v = "row";
      std::string later;
      for (int k = axis + 1; k + 1 < a_.rank; ++k) later += (later.empty() ? "" : " * ") + names_[a_.axis_dims[k]];
      if (!later.empty()) v += " / " + (later.find('*') != std::string::npos ? "(" + later + ")" : later);
      if (axis > 0) v += " % " + names_[a_.axis_dims[axis]];
      id = names_.fresh(a_.axis_vars[axis] + "_at");
      coords_[axis] = "const int64_t " + id + " = " + v + ";";
    }
    for (const ParamUse& u : a_.params) {
      const std::string& pn = names_[u.param->name];
      std::string off = row_offset(u, ids);
      if (!u.element) {
        row_value_[u.param->name] = pn + "[" + off + "]";
        continue;
      }
      if (off == "0") {
        row_ptr_[u.param->name] = pn;
        continue;
      }
      std::string ptr = names_.derived(u.param->name, "row");
      ptr_decls_.emplace_back(u.param->name, "const " + std::string(cuda_type(u.param->type)) + "* " + ptr + " = " +
                                                 pn + " + " + off + ";");
      row_ptr_[u.param->name] = ptr;
    }
    for (const Definition& d : p_.defs) {
      if (!d.is_output || node(d).shape != Shape::element) continue;
      std::string ptr = names_.derived(d.name, "row");
      ptr_decls_.emplace_back(d.name, std::string(cuda_type(d.type)) + "* " + ptr + " = " + names_[d.name] + " + row * " +
                                          col_dim_ + ";");
      row_ptr_[d.name] = ptr;
    }
  }

  void row_declarations(Writer& w) const {
    std::set<int> axes;
    for (const std::string& n : used_)
      if (auto it = param_axes_.find(n); it != param_axes_.end()) axes.insert(it->second.begin(), it->second.end());
    for (int axis : axes) w.line(coords_.at(axis));
    for (const auto& [n, decl] : ptr_decls_)
      if (used_.count(n)) w.line(decl);
  }

  const std::string& row_ptr(const std::string& n) {
    used_.insert(n);
    return row_ptr_.at(n);
  }

  std::map<int, std::string> coords_;                                // axis -> declaration
  std::map<std::string, std::string> row_ptr_;                       // element tensors: the row pointer
  std::map<std::string, std::string> row_value_;                     // row reads of parameters: the expression
  std::vector<std::pair<std::string, std::string>> ptr_decls_;       // row pointers to declare, in order
  std::map<std::string, std::set<int>> param_axes_;                  // the index variables a tensor's address needs
  std::set<std::string> used_;                                       // tensors the kernel's body touched

  // --- expressions -----------------------------------------------------------------------------

  // Emits d's body; element values come from `element` (definition or parameter name -> code).
  std::string body_code(const Definition& d, const std::map<std::string, std::string>& element) {
    index_def_ = &d;
    std::string code = expr_code(d.body, element);
    index_def_ = nullptr;
    return code;
  }
  std::string expr_code(const Expr& e, const std::map<std::string, std::string>& element) {
    ExprEmitter em;
    em.helpers = &helpers_;
    em.fast_math = s_.fast_math;
    em.reciprocal = [&](const Expr& b) -> std::string {
      auto it = recips_.find(format_expr(b));
      return it == recips_.end() ? "" : it->second;
    };
    em.dim = [&](const std::string& n) { return names_[n]; };
    // An index as a value: the row's (row) or the element's column (c0 + j, as argmax records it).
    em.index = [&](const std::string& v) -> std::string {
      const Definition* d = index_def_;
      if (d && !d->indices.empty() && v == d->indices[0]) return "row";
      if (d && v == (d->indices.size() > 1 ? d->indices[1] : d->over)) return "c0 + j";
      throw Refused("the index '" + v + "' used as a value here: rowwise gives a definition's row and column only");
    };
    em.read = [&](const Expr& r) -> std::string {
      if (auto it = element.find(r.name); it != element.end()) return it->second;
      if (auto it = row_value_.find(r.name); it != row_value_.end()) {
        used_.insert(r.name);
        return it->second;
      }
      return row_values_.at(r.name);
    };
    return em(e);
  }
  const Definition* index_def_ = nullptr;          // the definition body_code emits (its indices' values)
  std::map<std::string, std::string> row_values_;  // per-row definitions: the local holding them
  std::map<std::string, std::string> recips_;      // math = fast: divisor (as text) -> its reciprocal's local
  std::string kept_guard_;                         // when set, a kept value is read only where it holds
  bool online_ = false;                            // online = 1: the pair helpers are needed

  // Whether `e` has one value per row: it reads row definitions and row reads of parameters only.
  bool row_uniform(const Expr& e) const {
    if (uses_index(e)) return false;  // a position varies along the row (the row's own too, conservatively)
    for (const Expr* r : reads_in(e)) {
      if (const Definition* d = p_.def(r->name)) {
        if (node(*d).shape != Shape::row) return false;
        continue;
      }
      for (const ParamUse& u : a_.params)
        if (u.param->name == r->name && u.element) return false;
    }
    return true;
  }
  void row_divisors(const Expr& e, std::vector<const Expr*>& out) const {
    if (e.kind == Expr::Kind::binary && e.op == "/" && e.type == Type::f32 && row_uniform(e.args[1]))
      out.push_back(&e.args[1]);
    for (const Expr& a : e.args) row_divisors(a, out);
  }
  // math = fast: before a pass's loop, the reciprocal of each f32 divisor that is the same along
  // the row (softmax's s[r]), once per row instead of once per element.
  void declare_reciprocals(Writer& w, const std::vector<const Definition*>& defs, int pass) {
    if (!s_.fast_math) return;
    for (const Definition* d : defs) {
      if (keeps(*d) && pass > *a_.def_passes.at(d->name).begin()) continue;  // read back, not computed
      std::vector<const Expr*> divisors;
      row_divisors(d->body, divisors);
      for (const Expr* b : divisors) {
        const std::string key = format_expr(*b);
        if (recips_.count(key)) continue;
        const std::string local = names_.fresh(b->kind == Expr::Kind::read ? names_[b->name] + "_rcp" : "rcp");
        w.line("const float " + local + " = __fdividef(1.0f, " + expr_code(*b, {}) + ");  // 1 / " + key +
               ", once per row");
        recips_[key] = local;
      }
    }
  }

  // The element definitions (not scans) that `roots` need, in source order.
  std::vector<const Definition*> element_closure(const std::vector<const Definition*>& roots) const {
    std::set<std::string> need;
    std::vector<const Definition*> stack = roots;
    while (!stack.empty()) {
      const Definition* d = stack.back();
      stack.pop_back();
      for (const Definition* t : node(*d).deps) {
        if (node(*t).shape != Shape::element || t->reduce == ReduceOp::scan || need.count(t->name)) continue;
        need.insert(t->name);
        stack.push_back(t);
      }
    }
    std::vector<const Definition*> out;
    for (const Definition& d : p_.defs)
      if (need.count(d.name)) out.push_back(&d);
    return out;
  }

  std::set<std::string> element_params(const std::vector<const Definition*>& roots) const {
    std::set<std::string> out;
    std::vector<const Definition*> all = element_closure(roots);
    all.insert(all.end(), roots.begin(), roots.end());
    for (const Definition* d : all)
      for (const Expr* r : reads_in(d->body))
        for (const ParamUse& u : a_.params)
          if (u.element && u.param->name == r->name) out.insert(r->name);
    return out;
  }

  // --- one pass along the row ------------------------------------------------------------------

  void open_walk(Writer& w, const Walk& walk) {
    if (walk.registers) {
      w.line("#pragma unroll");
      w.open("for (int t = 0; t < kCacheTiles; ++t)");
      w.line("const int64_t tile = (int64_t)t * kTile;");
      w.line(std::string(s_.exact ? "if (!kExact && tile >= " : "if (tile >= ") + walk.end + ") break;");
    } else {
      if (s_.unroll > 1) w.line("#pragma unroll kUnroll");
      w.open("for (int64_t tile = " + walk.begin + "; tile < " + walk.end + "; tile += kTile)");
    }
    w.line("#pragma unroll");
    w.open("for (int item = 0; item < kItems; ++item)");
    w.line("const int64_t c0 = tile + (int64_t)(item * kThreadsPerRow + lane) * kVec;");
  }

  // Whether the pack at c0 lies in the row: always, in tail = exact's instantiation for rows of
  // exactly kCacheTiles steps (a compile-time true, so the check and its branch go).
  std::string in_row(const Walk& walk) const {
    return (s_.exact && walk.registers ? "kExact || c0 < " : "c0 < ") + walk.end;
  }

  void close_walk(Writer& w) {
    w.close();
    w.close();
  }

  // Loads the packs of `params` at c0 (from global memory, or from the row cache when an earlier
  // pass filled it), filling `element` with their per-element code.
  void load_packs(Writer& w, const std::set<std::string>& params, int pass, std::map<std::string, std::string>& element,
                  bool zero_outside) {
    for (const ParamUse& u : a_.params) {
      if (!u.element || !params.count(u.param->name)) continue;
      const std::string t = cuda_type(u.param->type);
      const std::string pack = names_.derived(u.param->name, "pack");
      const std::string global = "load_pack<kVec>(" + row_ptr(u.param->name) + " + c0)";
      const bool cached = u.cached && s_.cache != "none";
      const bool first = !cached || *u.passes.begin() == pass;
      const std::string cache = names_.derived(u.param->name, "cache");
      std::string source;
      if (in_registers(u)) {
        source = cache + "[t][item]";  // filled before the first pass (prefetch_registers)
      } else if (s_.cache == "shared" && cached) {
        source = first ? global : "load_pack<kVec>(" + cache + " + c0)";
      } else if (s_.cache == "l2") {
        // A row's last read lets its lines go; earlier reads, and tensors every row reads (no row
        // index, such as a weight), keep theirs.
        const bool row_invariant = u.axes.size() == 1;
        const bool last = !row_invariant && pass == *u.passes.rbegin();
        source = std::string(last ? "load_pack_last" : "load_pack_keep") + "<kVec>(" + row_ptr(u.param->name) + " + c0)";
      } else {
        source = global;
      }
      if (zero_outside) {
        w.line("Pack<" + t + ", kVec> " + pack + " = {};  // zeros past the row's end");
        w.line("if (in_row) " + pack + " = " + source + ";");
      } else {
        w.line("const Pack<" + t + ", kVec> " + pack + " = " + source + ";");
      }
      if (s_.cache == "shared" && cached && first) w.line("store_pack(" + cache + " + c0, " + pack + ");");
      element[u.param->name] = pack + ".v[j]";
    }
  }

  // Computes the element definitions `defs` at element j as locals, adding them to `element`. A
  // definition the register cache keeps is computed in its first pass and stored, and read back in
  // the later ones (pass: the one being written, a_.passes + 1 for the write pass).
  void element_locals(Writer& w, const std::vector<const Definition*>& defs, std::map<std::string, std::string>& element,
                      int pass) {
    for (const Definition* d : defs) {
      std::string local = value_name(*d);
      const std::string type = cuda_type(d->type);
      if (keeps(*d)) {
        const std::string slot = names_.derived(d->name, "cache") + "[t][item][j]";
        if (pass > *a_.def_passes.at(d->name).begin()) {
          // Past the row's end (a scan's packs) the slot was never written: read 0 there.
          const std::string kept = kept_guard_.empty() ? slot : kept_guard_ + " ? " + slot + " : " + literal(0, d->type);
          w.line("const " + type + " " + local + " = " + kept + ";  // kept by an earlier pass");
        } else {
          w.line("const " + type + " " + local + " = " + body_code(*d, element) + ";");
          w.line(slot + " = " + local + ";");
        }
      } else {
        w.line("const " + type + " " + local + " = " + body_code(*d, element) + ";");
      }
      element[d->name] = local;
    }
  }

  // The reductions' per-element update.
  std::string update(const Definition& d, const std::string& v) {
    const Type t = d.body.type;
    const std::string vf = is_half(t) ? to_float(v, t) : v;
    switch (d.reduce) {
      case ReduceOp::sum:
      case ReduceOp::mean: return acc_name(d) + " += " + v + ";";
      case ReduceOp::max: return acc_name(d) + " = max_nan(" + acc_name(d) + ", " + vf + ");";
      case ReduceOp::min: return acc_name(d) + " = min_nan(" + acc_name(d) + ", " + vf + ");";
      case ReduceOp::argmax: return "argmax_take(" + acc_name(d) + ", " + at_name(d) + ", " + vf + ", c0 + j);";
      default: return "";
    }
  }

  void declare_acc(Writer& w, const Definition& d) {
    ops_.insert(d.reduce);
    if (d.reduce == ReduceOp::max) helpers_.use("max_nan", Type::f32);
    if (d.reduce == ReduceOp::min) helpers_.use("min_nan", Type::f32);
    w.line(std::string(cuda_type(acc_type(d))) + " " + acc_name(d) + " = " + identity_of(d) + ";");
    if (d.reduce == ReduceOp::argmax) w.line("int64_t " + at_name(d) + " = -1;");
  }

  // A reduction pass: the reductions of level `pass`, accumulated over the walk.
  // The 16-bit element parameter whose widened value is the whole body of max or min reduction d
  // (m[r] = max(f32(X[r, c])) over c), or nullptr.
  const ParamUse* packed_extreme(const Definition& d) const {
    if (d.reduce != ReduceOp::max && d.reduce != ReduceOp::min) return nullptr;
    const Expr& b = d.body;
    if (b.kind != Expr::Kind::cast || b.type != Type::f32 || b.args[0].kind != Expr::Kind::read) return nullptr;
    const Expr& r = b.args[0];
    if (!is_half(r.type)) return nullptr;
    for (const ParamUse& u : a_.params) {
      if (u.param->name != r.name || !u.element) continue;
      for (const dsl::IndexExpr& ix : r.indices)
        if (!ix.plus.empty() || ix.offset != 0) return nullptr;
      return &u;
    }
    return nullptr;
  }

  // The extreme of pairs for a max or min reduction of a widened 16-bit input (packed_extreme):
  // the pairs are compared in the input's own type (__hmax2_nan / __hmin2_nan: exact, as the
  // widening is, and a NaN wins) instead of a conversion and a comparison per element, and the
  // pair is widened into the accumulator once after the walk.
  struct PairForm {
    std::string pair, t2, dup, op, widen;
  };
  PairForm pair_form(const Definition& d, const ParamUse& u) {
    const bool bf = u.param->type == Type::bf16, is_max = d.reduce == ReduceOp::max;
    PairForm f;
    f.pair = names_.derived(d.name, "pair");
    f.t2 = bf ? "__nv_bfloat162" : "__half2";
    f.dup = bf ? "__bfloat162bfloat162" : "__half2half2";
    f.op = is_max ? "__hmax2_nan" : "__hmin2_nan";
    f.widen = std::string(is_max ? "max_nan" : "min_nan") + "(__low2float(" + f.pair + "), __high2float(" + f.pair + "))";
    helpers_.use(is_max ? "max_nan" : "min_nan", Type::f32);
    return f;
  }

  void reduction_pass(Writer& w, int pass, const Walk& walk) {
    std::vector<const Definition*> reds;
    for (const Definition& d : p_.defs)
      if (is_reduction(d) && node(d).level == pass) reds.push_back(&d);
    w.comment("Pass " + std::to_string(pass) + ":");
    for (const Definition* d : reds) w.line("//   " + format_definition(*d));
    std::vector<const Definition*> plain;
    std::vector<std::pair<const ParamUse*, PairForm>> pairs;
    for (const Definition* d : reds) {
      declare_acc(w, *d);
      if (const ParamUse* u = packed_extreme(*d)) {
        PairForm f = pair_form(*d, *u);
        const std::string one = u->param->type == Type::bf16 ? "__float2bfloat16" : "__float2half";
        w.line(f.t2 + " " + f.pair + " = " + f.dup + "(" + one + "(" + (d->reduce == ReduceOp::max ? "-INFINITY" : "INFINITY") +
               "));  // pairs of " + dsl::type_name(u->param->type) + ", compared in that type");
        pairs.emplace_back(u, f);
      } else {
        plain.push_back(d);
      }
    }
    std::vector<const Definition*> computed = element_closure(reds);
    computed.insert(computed.end(), reds.begin(), reds.end());
    declare_reciprocals(w, computed, pass);
    open_walk(w, walk);
    w.open("if (" + in_row(walk) + ")");
    std::map<std::string, std::string> element;
    load_packs(w, element_params(reds), pass, element, false);
    if (!plain.empty()) {
      w.line("#pragma unroll");
      w.open("for (int j = 0; j < kVec; ++j)");
      element_locals(w, element_closure(plain), element, pass);
      for (const Definition* d : plain) w.line(update(*d, body_code(*d, element)));
      w.close();
    }
    for (const auto& [u, f] : pairs) {
      const std::string pack = names_.derived(u->param->name, "pack");
      w.line("#pragma unroll");
      w.line("for (int j = 0; j + 1 < kVec; j += 2) " + f.pair + " = " + f.op + "(" + f.pair + ", " + f.t2 + "(" + pack +
             ".v[j], " + pack + ".v[j + 1]));");
      w.line("if (kVec % 2 == 1) " + f.pair + " = " + f.op + "(" + f.pair + ", " + f.dup + "(" + pack + ".v[kVec - 1]));");
    }
    w.close();
    close_walk(w);
    size_t at = 0;
    for (const Definition* d : reds)
      if (packed_extreme(*d)) w.line(acc_name(*d) + " = " + pairs[at++].second.widen + ";");
  }

  // __launch_bounds__: the block's threads, and with blocks_per_sm the blocks the compiler must fit
  // on an SM (it caps the registers per thread at 65536 / (threads * blocks)).
  std::string launch_bounds() const {
    if (!s_.blocks_per_sm) return "__launch_bounds__(kThreads)";
    return "__launch_bounds__(kThreads, " + std::to_string(s_.blocks_per_sm) + ")";
  }

  // online = 1: the max pass `pass` and the sum pass after it as one (online softmax). Each thread
  // takes the maximum m_t of its part of the row, then its sum of exp(u - m_t); the row's pairs
  // merge as (max(m1, m2), s1 * exp(m1 - m) + s2 * exp(m2 - m)), one group reduction instead of
  // two. Where the program's terms would be exp(-inf - (-inf)) = NaN, the sum is NaN as well: a
  // thread whose values are all -inf holds (-inf, 0), and a row whose maximum is -inf sums to NaN
  // (0 if it is empty).
  void online_passes(Writer& w, int pass, const Walk& walk, const std::string& first_lane) {
    const Definition *m = nullptr, *s = nullptr;
    for (const Definition& d : p_.defs) {
      if (!is_reduction(d)) continue;
      if (node(d).level == pass) m = &d;
      if (node(d).level == pass + 1) s = &d;
    }
    helpers_.use("max_nan", Type::f32);
    online_ = true;
    w.comment("Passes " + std::to_string(pass) + " and " + std::to_string(pass + 1) +
              ", fused (online = 1): this thread's maximum, then its sum with that maximum, merged by rescaling:");
    w.line("//   " + format_definition(*m));
    w.line("//   " + format_definition(*s));
    declare_acc(w, *m);
    declare_acc(w, *s);
    for (const Definition* d : {m, s}) {
      std::vector<const Definition*> computed = element_closure({d});
      computed.push_back(d);
      declare_reciprocals(w, computed, node(*d).level);
      open_walk(w, walk);
      w.open("if (" + in_row(walk) + ")");
      std::map<std::string, std::string> element;
      load_packs(w, element_params({d}), node(*d).level, element, false);
      w.line("#pragma unroll");
      w.open("for (int j = 0; j < kVec; ++j)");
      element_locals(w, element_closure({d}), element, node(*d).level);
      w.line(update(*d, body_code(*d, element)));
      w.close();
      w.close();
      close_walk(w);
      if (d == m) {
        const std::string own = names_.derived(m->name, "own");
        w.line("const float " + own + " = " + acc_name(*m) + ";  // this thread's maximum");
        row_values_[m->name] = own;
      }
    }
    const std::string ma = acc_name(*m), sa = acc_name(*s);
    w.line("if (" + row_values_.at(m->name) + " == -INFINITY) " + sa + " = 0.0f;  // all -inf (or none): no terms");
    if (warp())
      w.line("warp_max_sum(" + ma + ", " + sa + ");");
    else
      w.line("row_max_sum(" + ma + ", " + sa + ", " + partials_name(*m) + "[slot], " + partials_name(*s) + "[slot], lane);");
    w.line("if (" + ma + " == -INFINITY && " + col_dim_ + " > 0) " + sa + " = NAN;  // exp(-inf - (-inf)) terms");
    row_values_.erase(m->name);
    for (const Definition* d : {m, s}) {
      finish_value(w, *d, acc_name(*d));
      row_output(w, *d, first_lane);
    }
    row_definitions(w, pass, first_lane);
    row_definitions(w, pass + 1, first_lane);
  }

  // The group-wide result of reduction d from this thread's accumulator (or chunk's, two_pass).
  std::string combined(const Definition& d) {
    const std::string acc = acc_name(d);
    const std::string o = d.reduce == ReduceOp::mean ? "sum" : dsl::reduce_name(d.reduce);
    if (warp()) return "warp_" + o + "(" + acc + ")";
    return "row_" + o + "(" + acc + ", " + partials_name(d) + "[slot], lane)";
  }

  // Declares d's final value from `value` (of the accumulator's type).
  void finish_value(Writer& w, const Definition& d, const std::string& value) {
    const std::string local = value_name(d);
    std::string v = value;
    if (d.reduce == ReduceOp::mean) v = v + " / " + cast_code(col_dim_, Type::i64, acc_type(d));
    if (d.reduce == ReduceOp::argmax) v = cast_code(at_name(d), Type::i64, d.type);
    else v = cast_code(v, acc_type(d), d.type);
    w.line("const " + std::string(cuda_type(d.type)) + " " + local + " = " + v + ";");
    row_values_[d.name] = local;
  }

  void row_output(Writer& w, const Definition& d, const std::string& when) {
    if (!d.is_output || when.empty()) return;
    w.line("if (" + when + ") " + names_[d.name] + "[row] = " + row_values_.at(d.name) + ";");
  }

  // Row definitions of level `level`, in source order, and the row outputs among them.
  void row_definitions(Writer& w, int level, const std::string& write_when) {
    for (const Definition& d : p_.defs) {
      if (d.reduce != ReduceOp::none || node(d).shape != Shape::row || node(d).level != level) continue;
      const std::string local = value_name(d);
      w.line("const " + std::string(cuda_type(d.type)) + " " + local + " = " + body_code(d, {}) + ";");
      row_values_[d.name] = local;
      row_output(w, d, write_when);
    }
  }

  // The write pass: outputs over whole rows, scans in step order.
  void write_pass(Writer& w, const Walk& walk, const std::string& active) {
    std::vector<const Definition*> outs, scans;
    for (const Definition& d : p_.defs) {
      if (d.is_output && node(d).shape == Shape::element) outs.push_back(&d);
      if (d.reduce == ReduceOp::scan) scans.push_back(&d);
    }
    w.comment("Write pass:");
    for (const Definition& d : p_.defs)
      if (d.is_output && node(d).shape == Shape::element) w.line("//   " + format_definition(d));
    for (const Definition* d : scans) {
      ops_.insert(ReduceOp::scan);
      w.line(std::string(cuda_type(d->type)) + " " + names_.derived(d->name, "carry") + " = " +
             literal(d->scan_product ? 1 : 0, d->type) + (d->scan_product ? ";  // the product of the row's earlier steps" : ";  // the sum of the row's earlier steps"));
    }
    std::vector<const Definition*> roots = outs;
    roots.insert(roots.end(), scans.begin(), scans.end());
    std::vector<const Definition*> computed = element_closure(roots);
    computed.insert(computed.end(), roots.begin(), roots.end());
    declare_reciprocals(w, computed, a_.passes + 1);
    if (s_.preload == Preload::write) preload_write_pass(w);
    open_walk(w, walk);
    std::map<std::string, std::string> element;
    if (!scans.empty()) {
      w.line("const bool in_row = " + in_row(walk) + ";");
      load_packs(w, element_params(roots), a_.passes + 1, element, true);
      for (const Definition* d : scans) {
        const std::string t = cuda_type(d->type);
        w.line(t + " " + names_.derived(d->name, "prefix") + "[kVec];  // this thread's inclusive prefix " +
               (d->scan_product ? "products" : "sums"));
        w.line(t + " " + names_.derived(d->name, "run") + " = " + literal(d->scan_product ? 1 : 0, d->type) + ";");
      }
      w.line("#pragma unroll");
      w.open("for (int j = 0; j < kVec; ++j)");
      std::map<std::string, std::string> inner = element;
      kept_guard_ = "in_row";
      element_locals(w, element_closure(scans), inner, a_.passes + 1);
      kept_guard_.clear();
      for (const Definition* d : scans) {
        const std::string run = names_.derived(d->name, "run");
        if (d->scan_product) w.line(run + " *= in_row ? " + body_code(*d, inner) + " : " + literal(1, d->type) + ";");
        else w.line(run + " += in_row ? " + body_code(*d, inner) + " : " + literal(0, d->type) + ";");
        w.line(names_.derived(d->name, "prefix") + "[j] = " + run + ";");
      }
      w.close();
      for (const Definition* d : scans) {
        const std::string t = cuda_type(d->type);
        const std::string carry = names_.derived(d->name, "carry");
        const std::string total = names_.derived(d->name, "step_total");
        const std::string before = names_.derived(d->name, "before");
        const std::string run = names_.derived(d->name, "run");
        w.line(t + " " + total + ";");
        const std::string prod = d->scan_product ? "true" : "false";
        std::string scan = warp() ? "warp_exclusive_scan<" + prod + ">(" + run + ", " + total + ")"
                                  : "row_exclusive_scan<" + prod + ">(" + run + ", " + partials_name(*d) + "[slot], lane, " + total + ")";
        const std::string op = d->scan_product ? " * " : " + ";
        w.line("const " + t + " " + before + " = " + carry + op + scan + ";");
        w.line(carry + (d->scan_product ? " *= " : " += ") + total + ";");
      }
      w.open("if (in_row)");
    } else {
      w.open("if (" + in_row(walk) + ")");
      load_packs(w, element_params(outs), a_.passes + 1, element, false);
    }
    for (const Definition* d : outs)
      w.line("Pack<" + std::string(cuda_type(d->type)) + ", kVec> " + names_.derived(d->name, "pack") + ";");
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kVec; ++j)");
    for (const Definition* d : scans) {
      std::string local = value_name(*d);
      w.line("const " + std::string(cuda_type(d->type)) + " " + local + " = " + names_.derived(d->name, "before") +
             (d->scan_product ? " * " : " + ") + names_.derived(d->name, "prefix") + "[j];");
      element[d->name] = local;
    }
    std::vector<const Definition*> need = element_closure(outs);
    std::vector<const Definition*> locals;
    for (const Definition* d : need)
      if (!d->is_output) locals.push_back(d);
    for (const Definition& d : p_.defs) {
      bool is_local = std::find(locals.begin(), locals.end(), &d) != locals.end();
      bool is_out = std::find(outs.begin(), outs.end(), &d) != outs.end();
      if (is_local) element_locals(w, {&d}, element, a_.passes + 1);
      if (!is_out) continue;
      const std::string pack = names_.derived(d.name, "pack");
      if (d.reduce == ReduceOp::scan) {
        w.line(pack + ".v[j] = " + element.at(d.name) + ";");
        continue;
      }
      bool read_later = std::find(need.begin(), need.end(), &d) != need.end();
      if (read_later) {
        element_locals(w, {&d}, element, a_.passes + 1);
        w.line(pack + ".v[j] = " + element.at(d.name) + ";");
      } else {
        w.line(pack + ".v[j] = " + body_code(d, element) + ";");
      }
    }
    w.close();
    for (const Definition* d : outs) {
      std::string store = std::string(s_.store_last ? "store_pack_kept" : "store_pack") + "(" + row_ptr(d->name) +
                          " + c0, " + names_.derived(d->name, "pack") + ");";
      w.line(active.empty() ? store : "if (" + active + ") " + store);
    }
    w.close();
    close_walk(w);
  }

  void partials_decl(Writer& w, const std::vector<const Definition*>& defs) {
    if (warp()) return;
    for (const Definition* d : defs) {
      const std::string t = cuda_type(acc_type(*d));
      w.line("__shared__ " + t + " " + partials_name(*d) + "[kRowsPerBlock][kWarpsPerRow];");
      if (d->reduce == ReduceOp::argmax)
        w.line("__shared__ int64_t " + partials_at_name(*d) + "[kRowsPerBlock][kWarpsPerRow];");
    }
  }

  // --- the fused kernel (warp, block) ----------------------------------------------------------

  void fused_kernel(Writer& w) {
    // With the row in registers, the kernel also takes the number of cached steps: the launcher
    // picks the smallest power of two that covers the row, so a short row holds few registers.
    w.line(s_.cache != "registers" ? "template <int kVec>"
           : s_.exact              ? "template <int kVec, int kCacheTiles, bool kExact>"
                                   : "template <int kVec, int kCacheTiles>");
    w.open("__global__ void " + launch_bounds() + " " + name_ + "(" + tensor_params() + "int64_t rows)");
    std::vector<const Definition*> shared_defs;
    for (const Definition& d : p_.defs)
      if (is_reduction(d) || d.reduce == ReduceOp::scan) shared_defs.push_back(&d);
    if (!warp() && !shared_defs.empty()) w.comment("Each warp's partial result per row, for the cross-warp step.");
    partials_decl(w, shared_defs);
    if (s_.cache == "shared") {
      w.line("extern __shared__ uint4 row_cache[];  // kRowsPerBlock rows of each cached tensor");
      w.line("char* cache_base = reinterpret_cast<char*>(row_cache);");
    }
    // grid = rows with one row per block: the slot is the constant 0 and every block's row exists,
    // so the compiler folds the row predicate away (it cannot prove threadIdx.x < kThreads).
    const bool one_row = s_.grid_rows && s_.rows_per_block == 1;
    if (one_row) {
      w.line("constexpr int slot = 0;  // one row per block");
      w.line("const int lane = threadIdx.x;  // its place among the row's threads");
    } else {
      w.line("const int slot = threadIdx.x / kThreadsPerRow;  // which of the block's rows this thread serves");
      w.line("const int lane = threadIdx.x % kThreadsPerRow;  // its place among the row's threads");
    }
    w.line("constexpr int kTile = kThreadsPerRow * kVec * kItems;  // elements one step covers");
    if (s_.fixed) {
      w.comment("tail = fixed: the exact instantiation runs only rows of kCacheTiles steps, so its row length is a "
                "constant (addressing and divisions by it fold).");
      w.line("const int64_t " + col_dim_ + " = kExact ? (int64_t)kCacheTiles * kTile : " + fixed_arg_ + ";");
    }
    if (s_.grid_rows) {
      w.comment("grid = rows: one block per kRowsPerBlock rows, no loop (the launcher checks that the grid holds "
                "them).");
      w.line("const int64_t row_base = (int64_t)blockIdx.x * kRowsPerBlock;");
    } else {
      w.line("for (int64_t row_base = (int64_t)blockIdx.x * kRowsPerBlock; row_base < rows;");
      w.open("     row_base += (int64_t)gridDim.x * kRowsPerBlock)");
    }
    if (one_row) {
      w.line("constexpr bool active = true;  // the launcher starts one block per row");
      w.line("const int64_t row = row_base;");
    } else {
      w.comment("A block's last slots may have no row: they redo the last row and write nothing, so that every "
                "thread reaches every barrier.");
      w.line("const bool active = row_base + slot < rows;");
      w.line("const int64_t row = active ? row_base + slot : rows - 1;");
    }
    if (s_.cache == "registers" || s_.cache == "shared") cache_decl(w);
    row_setup();
    Writer body = w.nested();
    Walk walk;
    walk.end = col_dim_;
    walk.registers = s_.cache == "registers";
    const std::string first_lane = "active && lane == 0";
    if (walk.registers) prefetch_registers(body);
    row_definitions(body, 0, first_lane);
    for (int pass = 1; pass <= a_.passes; ++pass) {
      body.line();
      if (pass == s_.online_pass) {
        online_passes(body, pass, walk, first_lane);
        ++pass;
        continue;
      }
      reduction_pass(body, pass, walk);
      for (const Definition& d : p_.defs) {
        if (!is_reduction(d) || node(d).level != pass) continue;
        if (d.reduce == ReduceOp::argmax) {
          std::string call = warp() ? "warp_argmax(" + acc_name(d) + ", " + at_name(d) + ");"
                                    : "row_argmax(" + acc_name(d) + ", " + at_name(d) + ", " + partials_name(d) +
                                          "[slot], " + partials_at_name(d) + "[slot], lane);";
          body.line(call);
          finish_value(body, d, acc_name(d));
        } else {
          finish_value(body, d, combined(d));
        }
        row_output(body, d, first_lane);
      }
      row_definitions(body, pass, first_lane);
    }
    if (a_.write_pass) {
      body.line();
      write_pass(body, walk, "active");
    }
    row_declarations(w);
    w.raw(body.text());
    if (!s_.grid_rows) {
      if (!warp()) w.line("__syncthreads();  // the shared partials are rewritten for the next rows");
      w.close();
    }
    w.close();
  }

  // Whether the packs of u, a tensor one pass reads, are loaded into registers ahead of that pass:
  // all of them with preload = all, those of the write pass with preload = write.
  bool preloaded(const ParamUse& u) const {
    if (s_.cache != "registers" || !u.element || u.cached) return false;
    return s_.preload == Preload::all || (s_.preload == Preload::write && u.write_only);
  }

  // Whether the packs of u live in registers: rows several passes read (the register cache), and
  // the preloaded ones.
  bool in_registers(const ParamUse& u) const {
    return s_.cache == "registers" && u.element && (u.cached || preloaded(u));
  }

  // The register cache filled in one unrolled loop of loads before any pass reads it, so that all
  // of a thread's loads are in flight at once (one round trip to memory per row, not one per step).
  // With preload = all the packs only one pass reads (a weight the write pass applies) load here too.
  void prefetch_registers(Writer& w) {
    w.comment(s_.preload == Preload::all
                  ? "The cached rows and the preloaded packs, loaded before the first pass: every load in flight at once."
                  : "The cached rows, loaded before the first pass: every load in flight at once.");
    fill_registers(w, [&](const ParamUse& u) { return u.cached || s_.preload == Preload::all; });
  }

  // With preload = write, the packs only the write pass reads, for all of its steps, loaded after
  // the row's last reduction and before the write pass's first store: the stores then wait on no
  // load (the compiler keeps a load after a store it cannot prove apart).
  void preload_write_pass(Writer& w) {
    w.comment("The packs only the write pass reads, every step's, loaded before its first store (preload = write).");
    fill_registers(w, [&](const ParamUse& u) { return !u.cached; });
  }

  // One unrolled loop over the cached steps loading, of the tensors held in registers
  // (in_registers), those `which` selects into their arrays.
  template <typename Which>
  void fill_registers(Writer& w, const Which& which) {
    w.line("#pragma unroll");
    w.open("for (int t = 0; t < kCacheTiles; ++t)");
    w.line("#pragma unroll");
    w.open("for (int item = 0; item < kItems; ++item)");
    w.line("const int64_t c0 = (int64_t)t * kTile + (int64_t)(item * kThreadsPerRow + lane) * kVec;");
    Walk row_walk;
    row_walk.end = col_dim_;
    row_walk.registers = true;
    for (const ParamUse& u : a_.params) {
      if (!in_registers(u) || !which(u)) continue;
      const std::string cache = names_.derived(u.param->name, "cache");
      w.line("if (" + in_row(row_walk) + ") " + cache + "[t][item] = load_pack<kVec>(" + row_ptr(u.param->name) + " + c0);");
    }
    w.close();
    w.close();
  }

  void cache_decl(Writer& w) {
    std::string offset;
    for (const ParamUse& u : a_.params) {
      const std::string t = cuda_type(u.param->type);
      const std::string cache = names_.derived(u.param->name, "cache");
      if (s_.cache == "registers") {
        if (in_registers(u))
          w.line("Pack<" + t + ", kVec> " + cache + "[kCacheTiles][kItems];  // " +
                 (u.cached ? "the row, as this thread reads it" : "preloaded: its packs the one pass reads"));
        continue;
      }
      if (!u.cached) continue;
      std::string base = offset.empty() ? "cache_base" : "cache_base + " + offset;
      w.line(t + "* " + cache + " = reinterpret_cast<" + t + "*>(" + base + ") + slot * " + col_dim_ + ";");
      offset += (offset.empty() ? "" : " + ") + ("cache_region_bytes(" + col_dim_ + ", sizeof(" + t + "))");
    }
    if (!s_.keep) return;
    for (const Definition* d : a_.cached_defs)
      w.line(std::string(cuda_type(d->type)) + " " + names_.derived(d->name, "cache") +
             "[kCacheTiles][kItems][kVec];  // '" + d->name + "' as its first pass computes it");
  }

  // Whether keep = registers keeps element definition d (computed once, in its first pass).
  bool keeps(const Definition& d) const {
    return s_.keep &&
           std::find(a_.cached_defs.begin(), a_.cached_defs.end(), &d) != a_.cached_defs.end();
  }

  // --- two_pass: one kernel per pass -----------------------------------------------------------

  std::string ws_params(int upto_level, int written_level) {
    std::string s;
    for (const Definition& d : p_.defs) {
      if (!is_reduction(d) || node(d).level > std::max(upto_level, written_level)) continue;
      const bool written = node(d).level == written_level;
      const std::string c = written ? "" : "const ";
      s += c + cuda_type(acc_type(d)) + "* __restrict__ " + ws_name(d) + ", ";
      if (d.reduce == ReduceOp::argmax) s += c + "int64_t* __restrict__ " + ws_at_name(d) + ", ";
    }
    return s;
  }

  std::string ws_args(int upto_level) {
    std::string s;
    for (const Definition& d : p_.defs) {
      if (!is_reduction(d) || node(d).level > upto_level) continue;
      s += ws_name(d) + ", ";
      if (d.reduce == ReduceOp::argmax) s += ws_at_name(d) + ", ";
    }
    return s;
  }

  // Row values of levels below `pass` from the chunks' partial results, in chunk order.
  void combine_partials(Writer& w, int pass, const std::string& write_when) {
    row_definitions(w, 0, write_when);
    for (int level = 1; level < pass; ++level) {
      for (const Definition& d : p_.defs) {
        if (!is_reduction(d) || node(d).level != level) continue;
        w.comment(d.name + ": the chunks' partial results combined.");
        declare_acc(w, d);
        const std::string at = "row * splits + k";
        std::string step;
        switch (d.reduce) {
          case ReduceOp::sum:
          case ReduceOp::mean: step = acc_name(d) + " += " + ws_name(d) + "[" + at + "];"; break;
          case ReduceOp::max: step = acc_name(d) + " = max_nan(" + acc_name(d) + ", " + ws_name(d) + "[" + at + "]);"; break;
          case ReduceOp::min: step = acc_name(d) + " = min_nan(" + acc_name(d) + ", " + ws_name(d) + "[" + at + "]);"; break;
          case ReduceOp::argmax:
            step = "argmax_take(" + acc_name(d) + ", " + at_name(d) + ", " + ws_name(d) + "[" + at + "], " +
                   ws_at_name(d) + "[" + at + "]);";
            break;
          default: break;
        }
        w.line("for (int64_t k = 0; k < splits; ++k) " + step);
        finish_value(w, d, acc_name(d));
        row_output(w, d, write_when);
      }
      row_definitions(w, level, write_when);
    }
  }

  void two_pass_kernels(Writer& w) {
    Walk walk;
    walk.begin = "c_begin";
    walk.end = "c_end";
    for (int pass = 1; pass <= a_.passes + 1; ++pass) {
      const bool finish = pass == a_.passes + 1;
      const bool chunked = !finish || a_.write_pass;
      std::vector<const Definition*> reds;
      for (const Definition& d : p_.defs)
        if (is_reduction(d) && node(d).level == pass) reds.push_back(&d);
      const std::string kname = name_ + (finish ? "_finish" : "_pass" + std::to_string(pass));
      if (finish)
        w.comment("Last kernel: every row value from the partial results, then the outputs" +
                  std::string(chunked ? ", one chunk per block." : "."));
      else
        w.comment("Pass " + std::to_string(pass) + " kernel: per-chunk partial results of " + pass_summary(pass) + ".");
      w.line("template <int kVec>");
      w.open("__global__ void " + launch_bounds() + " " + kname + "(" + tensor_params() +
             ws_params(pass - 1, finish ? -1 : pass) + "int64_t splits, int64_t chunk)");
      partials_decl(w, reds);
      if (!reds.empty()) w.line("const int slot = 0;  // one row per block");
      w.line("const int lane = threadIdx.x;");
      if (chunked) w.line("constexpr int kTile = kThreadsPerRow * kVec * kItems;  // elements one step covers");
      w.line("const int64_t rows = " + rows_expr() + ";");
      if (chunked) {
        w.open("for (int64_t work = blockIdx.x; work < rows * splits; work += gridDim.x)");
        w.line("const int64_t row = work / splits;");
        w.line("const int64_t split = work % splits;");
        w.line("const int64_t c_begin = split * chunk;");
        w.line("const int64_t c_end = c_begin + chunk < " + col_dim_ + " ? c_begin + chunk : " + col_dim_ + ";");
      } else {
        w.open("for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)");
      }
      row_setup();
      Writer body = w.nested();
      // Only the last kernel writes the row outputs, once per row.
      const std::string write_when = !finish ? "" : chunked ? "split == 0 && lane == 0" : "lane == 0";
      combine_partials(body, pass, write_when);
      if (!finish) {
        reduction_pass(body, pass, walk);
        for (const Definition* d : reds) {
          if (d->reduce == ReduceOp::argmax) {
            body.line("row_argmax(" + acc_name(*d) + ", " + at_name(*d) + ", " + partials_name(*d) + "[slot], " +
                   partials_at_name(*d) + "[slot], lane);");
            body.open("if (lane == 0)");
            body.line(ws_name(*d) + "[work] = " + acc_name(*d) + ";");
            body.line(ws_at_name(*d) + "[work] = " + at_name(*d) + ";");
            body.close();
          } else {
            const std::string t = cuda_type(acc_type(*d));
            const std::string chunk_total = names_.derived(d->name, "chunk");
            body.line("const " + t + " " + chunk_total + " = " + combined(*d) + ";");
            body.line("if (lane == 0) " + ws_name(*d) + "[work] = " + chunk_total + ";");
          }
        }
        body.line("__syncthreads();  // the shared partials are rewritten for the next chunk");
      } else if (a_.write_pass) {
        write_pass(body, walk, "");
      }
      row_declarations(w);
      w.raw(body.text());
      w.close();
      w.close();
      w.line();
      row_values_.clear();
    }
  }

  // --- host side -------------------------------------------------------------------------------

  std::vector<std::string> packed_tensors() const {
    std::vector<std::string> out;
    for (const std::string& t : abi_.tensors) {
      bool packed = false;
      for (const ParamUse& u : a_.params) packed = packed || (u.element && u.param->name == t);
      const Definition* d = p_.def(t);
      packed = packed || (d && d->is_output && node(*d).shape == Shape::element);
      if (packed) out.push_back(t);
    }
    return out;
  }

  void host(Writer& w) {
    w.line("namespace {");
    if (s_.vector > 1) {
      w.comment("True when p can be accessed kVector elements at a time.");
      w.line("template <typename T>");
      w.open("bool pack_aligned(const T* p)");
      w.line("return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVector) == 0;");
      w.close();
      w.line();
    }
    if (two_pass()) {
      w.comment("Workspace for the per-chunk partial results, kept between calls and grown when a size needs more.");
      w.line("void* g_workspace = nullptr;");
      w.line("size_t g_workspace_bytes = 0;");
      w.line();
    }
    launcher(w);
    w.line("}  // namespace");
    w.line();
    open_ksol_run(w, p_, abi_, names_);
    w.line("const int64_t rows = " + rows_expr() + ";");
    w.line("if (rows == 0) return 0;");
    if (s_.cache == "registers") w.line("if (" + col_dim_ + " > kMaxRow) return 3;  // longer than the register cache holds");
    if (s_.cache == "shared") {
      std::string bytes;
      for (const ParamUse& u : a_.params)
        if (u.cached)
          bytes += (bytes.empty() ? "" : " + ") +
                   ("cache_region_bytes(" + col_dim_ + ", sizeof(" + cuda_type(u.param->type) + "))");
      w.line("const int64_t cache_bytes = " + bytes + ";");
      w.line("if (cache_bytes > kMaxCacheBytes) return 3;  // the rows do not fit in shared memory");
    }
    std::string args = tensor_args();
    if (two_pass()) {
      w.comment("Chunks per row: enough blocks for about four per SM, each chunk at least one step of the block.");
      w.line("int device = 0, sms = 0;");
      w.line("if (cudaGetDevice(&device) != cudaSuccess) return 4;");
      w.line("if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 4;");
      w.line("const int64_t wanted = (4 * (int64_t)sms + rows - 1) / rows;");
      w.line("const int64_t most = (" + col_dim_ + " + (int64_t)kThreads * kVector * kItems - 1) / ((int64_t)kThreads * kVector * kItems);");
      w.line("int64_t splits = std::max<int64_t>(1, std::min({wanted, most, kMaxSplits}));");
      w.comment("Chunks are whole packs long, so that packs never straddle two chunks.");
      w.line("const int64_t chunk = ((" + col_dim_ + " + splits - 1) / splits + kVector - 1) / kVector * kVector;");
      w.line("if (chunk > 0) splits = (" + col_dim_ + " + chunk - 1) / chunk;");
      int arrays = 0;
      for (const Definition& d : p_.defs)
        if (is_reduction(d)) arrays += d.reduce == ReduceOp::argmax ? 2 : 1;
      w.line("const size_t region = ((size_t)(rows * splits) * 8 + 255) / 256 * 256;  // one partial array");
      w.line("const size_t ws_bytes = " + std::to_string(arrays) + " * region;");
      w.open("if (ws_bytes > g_workspace_bytes)");
      w.line("if (g_workspace) cudaFree(g_workspace);");
      w.line("g_workspace = nullptr;");
      w.line("g_workspace_bytes = 0;");
      w.line("if (cudaMalloc(&g_workspace, ws_bytes) != cudaSuccess) return 5;");
      w.line("g_workspace_bytes = ws_bytes;");
      w.close();
      w.line("char* ws = static_cast<char*>(g_workspace);");
      int k = 0;
      std::string ws_list;
      for (const Definition& d : p_.defs) {
        if (!is_reduction(d)) continue;
        const std::string t = cuda_type(acc_type(d));
        w.line(t + "* " + ws_name(d) + " = reinterpret_cast<" + t + "*>(ws + " + std::to_string(k++) + " * region);");
        ws_list += ws_name(d) + ", ";
        if (d.reduce == ReduceOp::argmax) {
          w.line("int64_t* " + ws_at_name(d) + " = reinterpret_cast<int64_t*>(ws + " + std::to_string(k++) + " * region);");
          ws_list += ws_at_name(d) + ", ";
        }
      }
      args += ws_list + "rows, splits, chunk, ";
    } else {
      if (s_.grid_rows) {
        w.line("const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;  // grid = rows: no loop");
        w.line("if (blocks > 2147483647) return 3;  // more blocks than a grid holds");
      } else {
        w.line("const int64_t blocks = std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks);");
      }
      args += "rows, blocks, ";
      if (s_.cache == "shared") args += "cache_bytes, ";
    }
    args += "stream";
    if (s_.vector > 1) {
      std::string cond = col_dim_ + " % kVector == 0";
      for (const std::string& t : packed_tensors()) cond += " && pack_aligned(" + names_[t] + ")";
      w.comment("Packs need every row to start on a pack boundary; otherwise the kernel runs one element per pack.");
      w.line("const bool packs_ok = " + cond + ";");
      w.line("const cudaError_t err = packs_ok ? launch<kVector>(" + args + ")");
      w.line("                                 : launch<1>(" + args + ");");
    } else {
      w.line("const cudaError_t err = launch<1>(" + args + ");");
    }
    w.line("return err == cudaSuccess ? 0 : 4;");
    w.close();
  }

  void launcher(Writer& w) {
    if (s_.cache == "registers" && !two_pass()) {
      w.comment("The fused kernel with kTiles cached steps per thread: the first power of two that covers steps, "
                "or the most the register budget holds (kCacheValues / (kVec * kItems), not always a power of two).");
      w.line("template <int kVec, int kTiles>");
      w.open("cudaError_t launch_tiles(" + tensor_params_host() + "int64_t rows, int64_t blocks, int64_t steps, cudaStream_t stream)");
      w.line("constexpr int kMost = kCacheValues / (kVec * kItems);");
      w.open("if constexpr (kTiles < kMost)");
      w.line("if (steps > kTiles) return launch_tiles<kVec, (kTiles * 2 < kMost ? kTiles * 2 : kMost)>(" + tensor_args() +
             "rows, blocks, steps, stream);");
      w.close();
      if (s_.exact) {
        w.comment("tail = " + std::string(s_.fixed ? "fixed" : "exact") +
                  ": a row of exactly kTiles steps runs the instantiation without bounds checks.");
        w.open("if (steps == kTiles && " + col_dim_ + " == steps * (kThreadsPerRow * kVec * kItems))");
        w.line(name_ + "<kVec, kTiles, true><<<(unsigned)blocks, kThreads, 0, stream>>>(" + tensor_args() + "rows);");
        w.line("return cudaGetLastError();");
        w.close();
        w.line(name_ + "<kVec, kTiles, false><<<(unsigned)blocks, kThreads, 0, stream>>>(" + tensor_args() + "rows);");
      } else {
        w.line(name_ + "<kVec, kTiles><<<(unsigned)blocks, kThreads, 0, stream>>>(" + tensor_args() + "rows);");
      }
      w.line("return cudaGetLastError();");
      w.close();
      w.line();
    }
    w.comment("Queues the kernel(s) for packs of kVec elements.");
    w.line("template <int kVec>");
    if (!two_pass()) {
      std::string extra = s_.cache == "shared" ? "int64_t cache_bytes, " : "";
      w.open("cudaError_t launch(" + tensor_params_host() + "int64_t rows, int64_t blocks, " + extra +
             "cudaStream_t stream)");
      std::string smem = "0";
      if (s_.cache == "shared") {
        smem = "(size_t)cache_bytes";
        w.open("if (cache_bytes > 48 * 1024)");
        w.line("const cudaError_t err = cudaFuncSetAttribute(" + name_ +
               "<kVec>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cache_bytes);");
        w.line("if (err != cudaSuccess) return err;");
        w.close();
      }
      if (s_.cache == "registers") {
        // launch_tiles<kVec, kTiles> doubles kTiles until it covers the row (C / kTile steps), up to
        // what kCacheValues allows (ksol_run refused longer rows): one instantiation per step.
        w.line("const int64_t steps = (" + col_dim_ + " + kThreadsPerRow * kVec * kItems - 1) / (kThreadsPerRow * kVec * kItems);");
        w.line("return launch_tiles<kVec, 1>(" + tensor_args() + "rows, blocks, steps, stream);");
      } else {
        w.line(name_ + "<kVec><<<(unsigned)blocks, kThreads, " + smem + ", stream>>>(" + tensor_args() + "rows);");
        w.line("return cudaGetLastError();");
      }
      w.close();
      return;
    }
    std::string ws_decl;
    for (const Definition& d : p_.defs) {
      if (!is_reduction(d)) continue;
      ws_decl += std::string(cuda_type(acc_type(d))) + "* " + ws_name(d) + ", ";
      if (d.reduce == ReduceOp::argmax) ws_decl += "int64_t* " + ws_at_name(d) + ", ";
    }
    w.open("cudaError_t launch(" + tensor_params_host() + ws_decl +
           "int64_t rows, int64_t splits, int64_t chunk, cudaStream_t stream)");
    w.line("const unsigned chunk_blocks = (unsigned)std::min<int64_t>(rows * splits, kMaxBlocks);");
    for (int pass = 1; pass <= a_.passes; ++pass)
      w.line(name_ + "_pass" + std::to_string(pass) + "<kVec><<<chunk_blocks, kThreads, 0, stream>>>(" + tensor_args() +
             ws_args(pass) + "splits, chunk);");
    std::string blocks = "chunk_blocks";
    if (!a_.write_pass) {
      w.line("const unsigned row_blocks = (unsigned)std::min<int64_t>(rows, kMaxBlocks);");
      blocks = "row_blocks";
    }
    w.line(name_ + "_finish<kVec><<<" + blocks + ", kThreads, 0, stream>>>(" + tensor_args() + ws_args(a_.passes) +
           "splits, chunk);");
    w.line("return cudaGetLastError();");
    w.close();
  }

  std::string tensor_params_host() const {
    std::string s;
    for (const std::string& t : abi_.tensors) {
      const Param* prm = p_.param(t);
      bool input = false;
      for (const Param& in : p_.inputs) input = input || in.name == t;
      s += std::string(input ? "const " : "") + cuda_type(prm->type) + "* " + names_[t] + ", ";
    }
    for (const std::string& d : p_.dims) s += "int64_t " + names_[d] + ", ";
    return s;
  }
};

// The program without its row cache: cache_row = none, and the knobs that only mean something
// with a cache back at their defaults where the family refuses them otherwise; nullopt when no
// such schedule is legal.
std::optional<dsl::Program> uncached(const dsl::Program& p, const Binding& b) {
  Schedule s;
  for (const Knob& k : rowwise_family().knobs) {
    std::string v = k.default_value;
    for (auto& [key, val] : p.schedule)
      if (key == k.key) v = value_text(val);
    s.emplace_back(k.key, v);
  }
  auto set = [&](const std::string& key, const std::string& v) {
    for (auto& [k, val] : s)
      if (k == key) val = v;
  };
  set("cache_row", "none");
  for (const char* reset : {"", "tail", "keep", "preload", "online"}) {
    if (*reset) set(reset, reset == std::string("tail") ? "checked" : reset == std::string("online") ? "0" : "none");
    dsl::Program q = with_schedule(p, s);
    try {
      check(q, b);
      return q;
    } catch (const Refused&) {
    }
  }
  return std::nullopt;
}

std::string generate(const dsl::Program& p, const Binding& b) {
  if (is_column_reduction(p)) return column_generate(p, b);
  std::string src = Generator(p, b).run();
  // A row longer than the register or shared-memory cache holds runs the same schedule without
  // the cache: its own kernels, in a namespace of their own, behind the same entry point, so a
  // cached schedule serves every row length (the fast one where the row fits).
  const std::string refusals[] = {"return 3;  // longer than the register cache holds", "return 3;  // the rows do not fit in shared memory"};
  bool refuses = false;
  for (const std::string& r : refusals) refuses = refuses || src.find(r) != std::string::npos;
  std::optional<dsl::Program> q = refuses ? uncached(p, b) : std::nullopt;
  if (!q) return src;
  std::string fb = Generator(*q, b).run();
  std::string body, includes;
  size_t at = 0;
  while (at < fb.size()) {
    size_t end = fb.find('\n', at);
    if (end == std::string::npos) end = fb.size();
    std::string line = fb.substr(at, end - at);
    if (line.rfind("#include", 0) == 0) {
      if (src.find(line + "\n") == std::string::npos) includes += line + "\n";
    } else {
      body += line + "\n";
    }
    at = end + 1;
  }
  const std::string entry = "extern \"C\" int ksol_run(const ksol_call* call) {";
  size_t e = body.find(entry);
  if (e == std::string::npos) return src;
  body.replace(e, entry.size(), "int ksol_run(const ksol_call* call) {");
  for (const std::string& r : refusals)
    for (size_t pos; (pos = src.find(r)) != std::string::npos;)
      src.replace(pos, r.size(), "return ksol_long_rows::ksol_run(call);  // longer than the cache holds: the same schedule without it");
  size_t main_entry = src.find(entry);
  if (main_entry == std::string::npos) return src;
  src.insert(main_entry, "// Rows longer than the cache holds: the same schedule with cache_row = none.\nnamespace ksol_long_rows {\n" + body +
                             "}  // namespace ksol_long_rows\n\n");
  if (!includes.empty()) {
    size_t last = src.rfind("#include");
    size_t after = src.find('\n', last) + 1;
    src.insert(after, includes);
  }
  return src;
}

}  // namespace

const FamilyGenerator& rowwise_family() {
  static const FamilyGenerator f{
      "rowwise",
      {
          {"threads", "256", {"32", "64", "128", "256", "512", "1024"}},
          {"rows_per_block", "1", {"1", "2", "4", "8", "16", "32"}},
          {"vector", "1", {"1", "2", "4", "8"}},
          {"items_per_thread", "1", {"1", "2", "4"}},
          {"reduction", "block", {"warp", "block", "two_pass"}},
          {"cache_row", "none", {"none", "registers", "shared", "l2"}},
          {"unroll", "1", {"1", "2", "4"}},
          {"math", "precise", {"precise", "fast"}},
          {"keep", "none", {"none", "registers"}},
          {"online", "0", {"0", "1"}},
          {"blocks_per_sm", "auto", {"auto", "5"}},
          {"tail", "checked", {"checked", "exact", "fixed"}},
          {"store_hint", "none", {"none", "evict_last"}},
          {"preload", "none", {"none", "all", "write"}},
          {"grid", "stride", {"stride", "rows"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace ksol::codegen::detail
