// The sparse family: y[m] = sum(f(A[m, j], x[j], ...)) over j with A a CSR matrix (SpMV), and
// Y[m, n] = sum(f(A[m, j], X[j, n], ...)) over j with X dense row-major (SpMM).
//
// Binding. A sparse parameter A is several ABI tensors, by its format:
//   csr  A_row_ptr (i32, M + 1 entries, zero-based), A_col_idx (i32, one per stored entry), A_values;
//   coo  A_row, A_col (i32, one per stored entry, sorted by row), A_values (the task's NNZ dim counts them);
//   ell  A_col_idx (i32 [M, W], row-major, each row's columns then -1 in its padding slots), A_values
//        ([M, W]; padding values are ignored); W is the task's dim of that name.
// A task may name them A_row_ptr / ..., or, when the program has exactly one sparse parameter,
// plainly row_ptr / col_idx / values (as tasks/sparse/spmv_csr_f32 does). Dense parameters bind
// by name. Row r's stored entries are [begin(r), begin(r + 1)): row_ptr[r] (csr), r * W (ell, to
// its first -1), the first entry of row r or later by a binary search of A_row (coo).
//
// Strategies (schedule key `strategy`):
//   row_per_thread  one thread per row, nonzeros in order (vector must be 1);
//   vector_per_row  `vector` lanes (2..32) per row, lane k takes nonzeros k, k + vector, ...;
//                   the lanes' partial sums meet in a warp-shuffle butterfly;
//   nnz_split       the nonzeros are cut into chunks of `vector` consecutive entries, one per
//                   thread, whatever the rows (balanced for power-law rows). A thread sums the
//                   part of a row its chunk holds; a row cut by chunk boundaries is written by the
//                   chunk holding its first entry, and the later chunks' partial sums go to a
//                   carry buffer that a second kernel adds in chunk order (deterministic, no
//                   atomics). It needs the task's NNZ dim; the carry buffer is kept across calls
//                   and grown when needed.
// cache_x: none (plain loads), readonly (__ldg) or shared (the whole of x in shared memory when
// it fits in 48 KB, else the readonly path; chosen at run time).
//
// SpMM (a second output index n, the dense matrix's columns):
//   row_per_thread  each thread computes `vector` (1..8) consecutive columns of one row, loading
//                   each stored entry once for all of them; a warp's threads cover consecutive
//                   column groups, so its reads of X's row col are contiguous;
//   vector_per_row  `vector` lanes per row, lane l computing columns l, l + vector, ...: the
//                   row's entries are read by every lane (from cache), X's rows coalesced.
//   nnz_split and cache_x = shared are SpMV's only (refused with the reason).
#include <algorithm>
#include <map>

#include "codegen/sparse_stencil.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::Type;

const std::vector<std::string> kInternal = {"kThreads", "kVector", "kRowsPerBlock", "kChunk", "kMaxBlocks",
                                            "kMaxSharedX", "kSharedX", "load_ro", "lane", "row", "row0", "p",
                                            "end", "stop", "acc", "col", "chunk", "chunks", "first", "lo", "hi",
                                            "mid", "blocks", "carry_value", "carry_row", "carries", "sum", "u",
                                            "b0", "e0", "min64", "x_shared", "shared_x", "k", "total", "NNZ", "kCols",
                                            "groups", "g", "n0", "n", "coo_begin", "base", "j", "o", "mine", "my_row", "head", "last",
                                            "ell_width", "r", "q", "before", "carried", "u0", "in"};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

struct Analysis {
  const Param* csr = nullptr;  // the sparse matrix, whatever its format
  const Definition* def = nullptr;
  std::string row_var, col_var;
  std::string dense_var;                  // SpMM: the output's second index (n); empty for SpMV
  std::vector<const Param*> col_vectors;  // dense inputs read at [j]
  std::vector<const Param*> row_vectors;  // dense inputs read at [m]
  std::vector<const Param*> col_matrices;   // SpMM: dense inputs read at [j, n]
  std::vector<const Param*> dense_vectors;  // SpMM: dense inputs read at [n]
  bool spmm() const { return !dense_var.empty(); }
};

Analysis analyse(const dsl::Program& p) {
  Analysis a;
  for (const Param& prm : p.inputs)
    if (prm.format != "dense") {
      if (a.csr)
        throw Refused("the sparse family reads one sparse matrix; '" + a.csr->name + "' and '" + prm.name + "' are both sparse");
      a.csr = &prm;
    }
  if (!a.csr) throw Refused("the program has no sparse input");
  if (p.defs.size() != 1 || p.outputs.size() != 1)
    throw Refused("the sparse family generates SpMV and SpMM: one output defined by one sum over the csr matrix's "
                  "columns; this program has " + std::to_string(p.defs.size()) + " definitions");
  const Definition& d = p.defs.front();
  a.def = &d;
  if (d.reduce != dsl::ReduceOp::sum) throw Refused("'" + d.name + "' must be a sum over the csr matrix's columns");
  if (d.indices.size() != 1 && d.indices.size() != 2)
    throw Refused("'" + d.name + "' has " + std::to_string(d.indices.size()) +
                  " indices; the sparse family generates SpMV (one output index, the csr row) and SpMM (two: the row "
                  "and the dense matrix's column)");
  if (is_half(d.type) || d.type == Type::boolean)
    throw Refused("'" + d.name + "' accumulates " + dsl::type_name(d.type) +
                  " values; accumulate in f32 instead, e.g. sum(f32(...))");
  a.row_var = d.indices[0];
  if (d.indices.size() == 2) a.dense_var = d.indices[1];
  a.col_var = d.over;
  for (const Expr* r : reads_in(d.body)) {
    const Param* prm = p.param(r->name);
    if (prm == a.csr) continue;  // the recogniser checked A[m, j]
    for (const dsl::IndexExpr& ix : r->indices)
      if (ix.offset != 0) throw Refused("'" + r->name + "' is read at an offset; the sparse family reads no offsets");
    std::vector<const Param*>* list = nullptr;
    const auto& ix = r->indices;
    if (ix.size() == 1 && ix[0].var == a.col_var) list = &a.col_vectors;
    if (ix.size() == 1 && ix[0].var == a.row_var) list = &a.row_vectors;
    if (a.spmm() && ix.size() == 1 && ix[0].var == a.dense_var) list = &a.dense_vectors;
    if (a.spmm() && ix.size() == 2 && ix[0].var == a.col_var && ix[1].var == a.dense_var) list = &a.col_matrices;
    if (!list)
      throw Refused("'" + format_expr(*r) + "' is neither a vector read at the column index '" + a.col_var +
                    "' nor at the row index '" + a.row_var + "'" +
                    (a.spmm() ? ", nor at the dense column '" + a.dense_var + "', nor a matrix read at ['" + a.col_var +
                                    "', '" + a.dense_var + "']"
                              : std::string()) +
                    "; the sparse family reads only those");
    if (std::find(list->begin(), list->end(), prm) == list->end()) list->push_back(prm);
  }
  check_emittable(d.body);
  return a;
}

// The ABI tensors a parameter is: a sparse matrix is two or three.
struct Piece {
  const Param* param;
  std::string part;  // "" for a dense tensor, else row_ptr | col_idx | row | col | values
};

std::vector<const char*> parts_of(const std::string& format) {
  if (format == "coo") return {"row", "col", "values"};
  if (format == "ell") return {"col_idx", "values"};
  return {"row_ptr", "col_idx", "values"};
}

bool index_part(const std::string& part) { return part == "row_ptr" || part == "col_idx" || part == "row" || part == "col"; }

// Task tensor name -> piece; refused unless every piece is bound exactly once.
std::vector<Piece> bind_pieces(const dsl::Program& p, const Binding& b, std::vector<std::string>& order) {
  std::vector<std::pair<std::string, Piece>> own;
  int csr_count = 0;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const Param& prm : *list) {
      if (prm.format != "dense") {
        ++csr_count;
        for (const char* part : parts_of(prm.format)) own.push_back({prm.name + "_" + part, {&prm, part}});
      } else {
        own.push_back({prm.name, {&prm, ""}});
      }
    }
  order = b.tensor_order;
  if (order.empty())
    for (const auto& [n, piece] : own) order.push_back(n);
  std::vector<Piece> out;
  std::vector<bool> bound(own.size(), false);
  std::vector<std::string> own_names;
  for (const auto& [n, piece] : own) own_names.push_back(n);
  for (const std::string& t : order) {
    int hit = -1;
    for (size_t i = 0; i < own.size(); ++i) {
      const Piece& pc = own[i].second;
      bool plain = csr_count == 1 && !pc.part.empty() && t == pc.part && !p.param(t);
      if (own[i].first == t || plain) hit = static_cast<int>(i);
    }
    if (hit < 0)
      throw Refused("task tensor '" + t + "' is not a parameter of the program (its tensors: " + join(own_names) + ")");
    if (bound[hit]) throw Refused("task tensor '" + t + "' binds '" + own[hit].first + "' a second time");
    bound[hit] = true;
    out.push_back(own[hit].second);
  }
  for (size_t i = 0; i < own.size(); ++i)
    if (!bound[i])
      throw Refused("parameter '" + own[i].first + "' is not a tensor of the task (its tensors: " + join(order) + ")");
  return out;
}

struct Sched {
  std::string strategy;
  int vector = 1, threads = 256;
  std::string cache_x;
};

Sched read_sched(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, sparse_family());
  Sched s;
  s.strategy = k.one_of("strategy", std::vector<std::string>{"row_per_thread", "vector_per_row", "nnz_split"});
  s.vector = static_cast<int>(k.one_of("vector", {1, 2, 4, 8, 16, 32}));
  const int64_t threads = k.threads();
  s.threads = static_cast<int>(threads);
  s.cache_x = k.one_of("cache_x", std::vector<std::string>{"none", "readonly", "shared"});
  if (a.spmm()) {
    if (s.strategy == "nnz_split")
      throw Refused("strategy = nnz_split is SpMV's; SpMM takes row_per_thread (vector = 1 to 8 columns of a row per "
                    "thread) or vector_per_row (vector lanes per row)");
    if (s.strategy == "row_per_thread" && s.vector > 8)
      throw Refused("strategy = row_per_thread gives each thread vector columns of a row, at most 8 (their sums stay "
                    "in registers), not " + std::to_string(s.vector));
    if (s.cache_x == "shared")
      throw Refused("cache_x = shared holds one vector read at the column index; SpMM reads a matrix there");
  } else if (s.strategy == "row_per_thread" && s.vector != 1) {
    throw Refused("strategy = row_per_thread gives each row one thread, so vector must be 1, not " +
                  std::to_string(s.vector));
  }
  if (s.strategy == "vector_per_row" && s.vector == 1)
    throw Refused("strategy = vector_per_row needs vector = 2 to 32 lanes per row; vector = 1 is row_per_thread");
  if (s.strategy == "nnz_split" && a.csr->format == "ell")
    throw Refused("strategy = nnz_split splits stored entries, and an ell matrix's padding slots are none; it takes "
                  "row_per_thread or vector_per_row");
  if (s.cache_x != "none" && a.col_vectors.empty() && a.col_matrices.empty())
    throw Refused("cache_x = " + s.cache_x + " caches the vector read at the column index, and the program reads none");
  if (s.cache_x == "shared" && a.col_vectors.size() > 1)
    throw Refused("cache_x = shared holds one vector read at the column index; the program reads " +
                  std::to_string(a.col_vectors.size()));
  return s;
}

bool has_dim(const std::vector<std::string>& dims, const char* d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); }
bool has_nnz(const std::vector<std::string>& dims) { return has_dim(dims, "NNZ"); }

void check(const dsl::Program& p, const Binding& b) {
  Analysis a = analyse(p);
  std::vector<std::string> order;
  bind_pieces(p, b, order);
  std::vector<std::string> dims = b.dim_order.empty() ? p.dims : b.dim_order;
  for (const std::string& d : p.dims)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      throw Refused("dim '" + d + "' is not a dim of the task (its dims: " + join(dims) + ")");
  Sched s = read_sched(p, a);
  if (a.csr->format == "coo" && !has_nnz(dims))
    throw Refused("a coo matrix's entries are counted by the task's dim NNZ, and the task has none (its dims: " +
                  join(dims) + ")");
  if (a.csr->format == "ell" && !has_dim(dims, "W"))
    throw Refused("an ell matrix's rows have W slots, the task's dim W, and the task has none (its dims: " + join(dims) + ")");
  if (s.strategy == "nnz_split" && !has_nnz(dims))
    throw Refused("strategy = nnz_split sizes its grid by the number of stored entries, and the task has no dim "
                  "NNZ (its dims: " + join(dims) + ")");
}

std::string name_of(const dsl::Program& p, const Analysis& a, const Sched& s) {
  std::string n = name_stem(p, "sparse");
  if (a.csr->format != "csr") n += "_" + a.csr->format;
  if (s.strategy == "row_per_thread") n += a.spmm() ? "_row_c" + std::to_string(s.vector) : "_row";
  if (s.strategy == "vector_per_row") n += "_vec" + std::to_string(s.vector);
  if (s.strategy == "nnz_split") n += "_nnz" + std::to_string(s.vector);
  n += "_t" + std::to_string(s.threads);
  if (s.cache_x == "readonly") n += "_ldg";
  if (s.cache_x == "shared") n += "_smemx";
  return n;
}

std::string kernel_name_of(const dsl::Program& p) {
  Analysis a = analyse(p);
  return name_of(p, a, read_sched(p, a));
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b) : p_(p), a_(analyse(p)), s_(read_sched(p, a_)), names_(kInternal) {
    pieces_ = bind_pieces(p, b, order_);
    dims_ = b.dim_order.empty() ? p.dims : b.dim_order;
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Piece& pc : pieces_)
      piece_name_.push_back(pc.part.empty() ? names_[pc.param->name] : names_.derived(pc.param->name, pc.part));
    value_ = names_.fresh(names_[a_.csr->name] + "_value");
    name_ = name_of(p_, a_, s_);
    acc_t_ = cuda_type(a_.def->type);
  }

  std::string run() {
    Writer body;
    if (split()) {
      split_kernel(body);
      fixup_kernel(body);
    } else if (a_.spmm()) {
      spmm_kernel(body);
    } else {
      row_kernel(body);
    }
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (sparse family).");
    w.line("//   " + format_definition(*a_.def));
    w.comment(description());
    w.raw(includes(p_));
    w.line();
    w.line("namespace {");
    w.line("constexpr int kThreads = " + std::to_string(s_.threads) + ";  // threads per block");
    if (s_.strategy == "vector_per_row") {
      w.line("constexpr int kVector = " + std::to_string(s_.vector) + ";  // lanes per row");
      w.line("constexpr int kRowsPerBlock = kThreads / kVector;");
    }
    if (a_.spmm() && s_.strategy == "row_per_thread")
      w.line("constexpr int kCols = " + std::to_string(s_.vector) + ";  // consecutive columns of a row per thread");
    if (split()) w.line("constexpr int64_t kChunk = " + std::to_string(s_.vector) + ";  // stored entries per thread");
    w.line("constexpr int64_t kMaxBlocks = 65536;  // more work loops (grid-stride)");
    if (s_.cache_x == "shared")
      w.line("constexpr int64_t kMaxSharedX = 48 * 1024;  // bytes of x a block may keep in shared memory");
    w.line();
    if (s_.cache_x != "none") {
      w.comment("A load through the read-only data cache.");
      w.line("template <typename T>");
      w.open("__device__ __forceinline__ T load_ro(const T* p)");
      w.line("#if defined(__CUDA_ARCH__)");
      w.line("return __ldg(p);");
      w.line("#else");
      w.line("return *p;");
      w.line("#endif");
      w.close();
    }
    if (split()) w.line("__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }");
    if (format() == "coo") {
      w.comment("Row r's first stored entry in a coo matrix sorted by row: the first p with rows[p] >= r (nnz when none).");
      w.open("__device__ __forceinline__ int64_t coo_begin(const int32_t* __restrict__ rows, int64_t nnz, int64_t r)");
      w.line("int64_t lo = 0, hi = nnz;");
      w.open("while (lo < hi)");
      w.line("const int64_t mid = lo + (hi - lo) / 2;");
      w.line("if (rows[mid] < r) lo = mid + 1; else hi = mid;");
      w.close();
      w.line("return lo;");
      w.close();
    }
    return finish_source(w, helpers_, body.text(), [&](Writer& h) { host(h); });
  }

 private:
  const dsl::Program& p_;
  Analysis a_;
  Sched s_;
  Names names_;
  Helpers helpers_;
  std::vector<Piece> pieces_;
  std::vector<std::string> order_, dims_, piece_name_;
  std::string name_, value_, acc_t_;

  bool is_input(const Param* prm) const {
    for (const Param& x : p_.inputs)
      if (x.name == prm->name) return true;
    return false;
  }
  bool split() const { return s_.strategy == "nnz_split"; }
  const std::string& format() const { return a_.csr->format; }
  bool needs_nnz() const { return split() || format() == "coo"; }
  // The first stored entry of row `r` (an expression of r; row r's entries end at begin(r + 1)).
  std::string begin(const std::string& r) {
    if (format() == "ell") return "(" + r + ") * ell_width";
    if (format() == "coo") return "coo_begin(" + part("row") + ", NNZ, " + r + ")";
    return "(int64_t)" + part("row_ptr") + "[" + r + "]";
  }
  std::string col_part() { return part(format() == "coo" ? "col" : "col_idx"); }
  bool shared_x() const { return s_.cache_x == "shared"; }
  std::string part(const std::string& which) { return names_.derived(a_.csr->name, which); }
  const std::string& out() const { return names_[a_.def->name]; }

  std::string description() const {
    std::string d;
    if (a_.spmm()) {
      d = s_.strategy == "row_per_thread"
              ? "SpMM. Each thread computes " + std::to_string(s_.vector) +
                    " consecutive columns of one row of the output, loading each stored entry of the row once for all "
                    "of them"
              : "SpMM. " + std::to_string(s_.vector) + " lanes per row; lane l computes the row's columns l, l + " +
                    std::to_string(s_.vector) + ", ..., each summing the row's stored entries in order";
      d += ". " + std::to_string(s_.threads) + " threads per block.";
      if (s_.cache_x == "readonly") d += " The dense inputs read at the column index go through the read-only data cache (__ldg).";
      return d;
    }
    if (s_.strategy == "row_per_thread") d = "One thread per row sums the row's stored entries in order";
    if (s_.strategy == "vector_per_row")
      d = std::to_string(s_.vector) + " lanes per row take every " + std::to_string(s_.vector) +
          "th stored entry; their partial sums meet in a warp-shuffle butterfly";
    if (split())
      d = "Each thread sums a chunk of " + std::to_string(s_.vector) +
          " consecutive stored entries; a row cut by chunk boundaries is written by the chunk holding its first "
          "entry, and the later chunks' partial sums are added by a second kernel, in chunk order";
    d += ". " + std::to_string(s_.threads) + " threads per block.";
    if (s_.cache_x == "readonly") d += " x is read through the read-only data cache (__ldg).";
    if (shared_x())
      d += " Each block keeps x in shared memory when it fits in kMaxSharedX bytes (else reads it through __ldg).";
    return d;
  }

  std::string params_decl() {
    std::string s;
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& pc = pieces_[i];
      bool input = is_input(pc.param);
      std::string t = index_part(pc.part) ? "int32_t" : cuda_type(pc.param->type);
      s += std::string(input ? "const " : "") + t + "* __restrict__ " + piece_name_[i] + ", ";
    }
    for (const std::string& d : p_.dims) s += "int64_t " + names_[d] + ", ";
    if (needs_nnz()) s += "int64_t NNZ, ";
    if (format() == "ell") s += "int64_t ell_width, ";
    return s;
  }
  std::string params_pass() {
    std::string s;
    for (const std::string& n : piece_name_) s += n + ", ";
    for (const std::string& d : p_.dims) s += names_[d] + ", ";
    if (needs_nnz()) s += "NNZ, ";
    if (format() == "ell") s += "ell_width, ";
    return s;
  }

  // The summand at stored entry `p` of row `row`.
  std::string summand(bool smem) {
    ExprEmitter em;
    em.helpers = &helpers_;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = [&](const Expr& r) -> std::string {
      const Param* prm = p_.param(r.name);
      if (prm == a_.csr) return value_;
      const std::string& n = names_[prm->name];
      if (r.indices[0].var == a_.row_var) return n + "[row]";
      if (a_.spmm() && r.indices.size() == 1 && r.indices[0].var == a_.dense_var) return n + "[n]";
      // SpMM's matrix read at [j, n]: row col of a row-major matrix whose rows have its second extent.
      const std::string at = r.indices.size() == 2 ? "col * " + names_[prm->extents[1]] + " + n" : "col";
      if (smem) return "x_shared[col]";
      if (s_.cache_x != "none") return "load_ro(" + n + " + " + at + ")";
      return n + "[" + at + "]";
    };
    return em(a_.def->body);
  }

  // The loop over stored entries [from, to) by `step`, adding into `acc`.
  void entry_loop(Writer& w, const std::string& from, const std::string& to, const std::string& step, bool smem) {
    w.open("for (int64_t p = " + from + ", stop = " + to + "; p < stop; p += " + step + ")");
    w.line("const int64_t col = " + col_part() + "[p];");
    if (format() == "ell") w.line("if (col < 0) break;  // the row's padding slots: -1 to its end");
    w.line("const " + std::string(cuda_type(a_.csr->type)) + " " + value_ + " = " + part("values") + "[p];");
    w.line("acc += " + summand(smem) + ";");
    w.close();
  }

  void shared_prologue(Writer& w) {
    const Param* x = a_.col_vectors.front();
    w.line("extern __shared__ " + std::string(cuda_type(x->type)) + " x_shared[];");
    w.open("if (kSharedX)");
    w.line("for (int64_t k = threadIdx.x; k < " + names_[x->extents[0]] + "; k += kThreads) x_shared[k] = " +
           names_[x->name] + "[k];");
    w.line("__syncthreads();");
    w.close();
  }

  void loop_entries(Writer& w, const std::string& from, const std::string& to, const std::string& step) {
    if (!shared_x()) {
      entry_loop(w, from, to, step, false);
      return;
    }
    w.open("if (kSharedX)");
    entry_loop(w, from, to, step, true);
    w.close();
    w.open("else");
    entry_loop(w, from, to, step, false);
    w.close();
  }

  void open_kernel(Writer& w, const std::string& name, const std::string& extra) {
    if (shared_x()) w.line("template <bool kSharedX>");
    std::string decl = params_decl();
    if (extra.empty()) decl.resize(decl.size() - 2);
    decl += extra;
    w.open("__global__ void __launch_bounds__(kThreads) " + name + "(" + decl + ")");
    if (shared_x()) shared_prologue(w);
  }

  void row_kernel(Writer& w) {
    const std::string M = names_[a_.def->extents[0]];
    if (s_.strategy == "row_per_thread") {
      open_kernel(w, name_, "");
      w.line("for (int64_t row = (int64_t)blockIdx.x * kThreads + threadIdx.x; row < " + M + ";");
      w.open("     row += (int64_t)gridDim.x * kThreads)");
      w.line(acc_t_ + " acc = 0;");
      loop_entries(w, begin("row"), begin("row + 1"), "1");
      w.line(out() + "[row] = acc;");
      w.close();
      w.close();
      w.line();
      return;
    }
    open_kernel(w, name_, "");
    w.line("const int lane = threadIdx.x % kVector;");
    w.comment("row0 is the block's first row, the same for all its threads: every lane of a warp reaches the "
              "shuffles.");
    w.line("for (int64_t row0 = (int64_t)blockIdx.x * kRowsPerBlock; row0 < " + M + ";");
    w.open("     row0 += (int64_t)gridDim.x * kRowsPerBlock)");
    w.line("const int64_t row = row0 + threadIdx.x / kVector;");
    w.line(acc_t_ + " acc = 0;");
    w.open("if (row < " + M + ")");
    loop_entries(w, begin("row") + " + lane", begin("row + 1"), "kVector");
    w.close();
    w.line("#pragma unroll");
    w.line("for (int k = kVector / 2; k > 0; k /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, k, kVector);");
    w.line("if (row < " + M + " && lane == 0) " + out() + "[row] = acc;");
    w.close();
    w.close();
    w.line();
  }

  // SpMM: Y[row, n] for the row's columns n; the output is row-major with N columns.
  void spmm_kernel(Writer& w) {
    const std::string M = names_[a_.def->extents[0]], N = names_[a_.def->extents[1]];
    open_kernel(w, name_, "");
    if (s_.strategy == "row_per_thread") {
      w.line("const int64_t groups = (" + N + " + kCols - 1) / kCols;  // column groups per row");
      w.line("for (int64_t g = (int64_t)blockIdx.x * kThreads + threadIdx.x; g < " + M + " * groups;");
      w.open("     g += (int64_t)gridDim.x * kThreads)");
      w.line("const int64_t row = g / groups;");
      w.line("const int64_t n0 = (g - row * groups) * kCols;");
      w.line(acc_t_ + " acc[kCols];");
      w.line("#pragma unroll");
      w.line("for (int k = 0; k < kCols; ++k) acc[k] = 0;");
      w.open("for (int64_t p = " + begin("row") + ", stop = " + begin("row + 1") + "; p < stop; ++p)");
      w.line("const int64_t col = " + col_part() + "[p];");
      if (format() == "ell") w.line("if (col < 0) break;  // the row's padding slots: -1 to its end");
      w.line("const " + std::string(cuda_type(a_.csr->type)) + " " + value_ + " = " + part("values") + "[p];");
      w.line("#pragma unroll");
      w.open("for (int k = 0; k < kCols; ++k)");
      w.line("const int64_t n = n0 + k;");
      w.line("if (n < " + N + ") acc[k] += " + summand(false) + ";");
      w.close();
      w.close();
      w.line("#pragma unroll");
      w.line("for (int k = 0; k < kCols; ++k)");
      w.line("  if (n0 + k < " + N + ") " + out() + "[row * " + N + " + n0 + k] = acc[k];");
      w.close();
      w.close();
      w.line();
      return;
    }
    w.line("const int lane = threadIdx.x % kVector;");
    w.line("for (int64_t row0 = (int64_t)blockIdx.x * kRowsPerBlock; row0 < " + M + ";");
    w.open("     row0 += (int64_t)gridDim.x * kRowsPerBlock)");
    w.line("const int64_t row = row0 + threadIdx.x / kVector;");
    w.line("if (row >= " + M + ") continue;  // no shuffles below: a lane may leave");
    w.open("for (int64_t n = lane; n < " + N + "; n += kVector)");
    w.line(acc_t_ + " acc = 0;");
    entry_loop(w, begin("row"), begin("row + 1"), "1", false);
    w.line(out() + "[row * " + N + " + n] = acc;");
    w.close();
    w.close();
    w.close();
    w.line();
  }

  // coo: a chunk reads its entries' rows from the row array itself (no search): it walks its
  // entries in order, writing a row when the next entry's row differs, and the rows no entry holds
  // (between two entries' rows, before the first, after the last) as 0.
  void coo_chunk_body(Writer& w, bool smem) {
    const std::string M = names_[a_.def->extents[0]], rows = part("row");
    w.line("int64_t row = " + rows + "[b0];");
    w.line("const int64_t before = b0 > 0 ? (int64_t)" + rows + "[b0 - 1] : -1;  // the previous entry's row");
    w.line("for (int64_t r = before + 1; r < row; ++r) " + out() + "[r] = 0;  // rows without entries");
    w.line("bool carried = before == row;  // row begun by an earlier chunk");
    w.line(acc_t_ + " acc = 0;");
    w.open("for (int64_t p = b0; p < e0; ++p)");
    w.line("const int64_t r = " + rows + "[p];");
    w.open("if (r != row)");
    w.line("if (carried) carry_value[chunk] = acc, carry_row[chunk] = row, carried = false;");
    w.line("else " + out() + "[row] = acc;");
    w.line("for (int64_t q = row + 1; q < r; ++q) " + out() + "[q] = 0;  // rows without entries");
    w.line("row = r;");
    w.line("acc = 0;");
    w.close();
    w.line("const int64_t col = " + col_part() + "[p];");
    w.line("const " + std::string(cuda_type(a_.csr->type)) + " " + value_ + " = " + part("values") + "[p];");
    w.line("acc += " + summand(smem) + ";");
    w.close();
    w.line("if (carried) carry_value[chunk] = acc, carry_row[chunk] = row;");
    w.line("else " + out() + "[row] = acc;");
    w.line("if (e0 == NNZ)");
    w.line("  for (int64_t q = row + 1; q < " + M + "; ++q) " + out() + "[q] = 0;  // rows after the last entry's");
  }

  void coo_split_kernel(Writer& w) {
    const std::string M = names_[a_.def->extents[0]];
    w.comment("Chunk t holds stored entries [t * kChunk, min((t + 1) * kChunk, NNZ)). It writes the rows whose first "
              "entry it holds, and the sum of its entries of a row begun by an earlier chunk into carry_value[t] "
              "(carry_row[t] = that row, else -1); entries' rows come from the sorted row array.");
    open_kernel(w, name_ + "_chunks", "int64_t chunks, " + acc_t_ + "* __restrict__ carry_value, " +
                                         "int64_t* __restrict__ carry_row");
    w.line("for (int64_t chunk = (int64_t)blockIdx.x * kThreads + threadIdx.x; chunk < chunks;");
    w.open("     chunk += (int64_t)gridDim.x * kThreads)");
    w.line("carry_row[chunk] = -1;");
    w.open("if (NNZ == 0)");
    w.line("for (int64_t r = 0; r < " + M + "; ++r) " + out() + "[r] = 0;");
    w.line("continue;");
    w.close();
    w.line("const int64_t b0 = chunk * kChunk, e0 = min64(b0 + kChunk, NNZ);");
    if (!shared_x()) {
      coo_chunk_body(w, false);
    } else {
      w.open("if (kSharedX)");
      coo_chunk_body(w, true);
      w.close();
      w.open("else");
      coo_chunk_body(w, false);
      w.close();
    }
    w.close();
    w.close();
    w.line();
  }

  void split_kernel(Writer& w) {
    if (format() == "coo") return coo_split_kernel(w);
    const std::string M = names_[a_.def->extents[0]];
    w.comment("Chunk t holds stored entries [t * kChunk, min((t + 1) * kChunk, NNZ)). It writes the rows whose first "
              "entry it holds (the last chunk also the empty rows at the end), summed up to its end, and the sum of "
              "its entries of a row begun by an earlier chunk into carry_value[t] (carry_row[t] = that row, else -1).");
    open_kernel(w, name_ + "_chunks", "int64_t chunks, " + acc_t_ + "* __restrict__ carry_value, " +
                                         "int64_t* __restrict__ carry_row");
    w.line("for (int64_t chunk = (int64_t)blockIdx.x * kThreads + threadIdx.x; chunk < chunks;");
    w.open("     chunk += (int64_t)gridDim.x * kThreads)");
    w.line("const int64_t b0 = chunk * kChunk, e0 = min64(b0 + kChunk, NNZ);");
    w.comment("The first row whose first entry is at b0 or later (M when none).");
    w.line("int64_t lo = 0, hi = " + M + ";");
    w.open("while (lo < hi)");
    w.line("const int64_t mid = lo + (hi - lo) / 2;");
    w.line("if (" + begin("mid") + " < b0) lo = mid + 1; else hi = mid;");
    w.close();
    w.line("int64_t row = lo;");
    w.line(acc_t_ + " acc = 0;");
    w.open("if (row == " + M + " || " + begin("row") + " > b0)");
    w.comment("b0 lies inside row - 1, begun by an earlier chunk.");
    loop_entries(w, "b0", "min64(e0, " + begin("row") + ")", "1");
    w.line("carry_value[chunk] = acc;");
    w.line("carry_row[chunk] = row - 1;");
    w.close("} else {");
    w.line("  carry_row[chunk] = -1;");
    w.line("}");
    w.open("for (; row < " + M + " && (" + begin("row") + " < e0 || e0 == NNZ); ++row)");
    w.line("acc = 0;");
    loop_entries(w, begin("row"), "min64(e0, " + begin("row + 1") + ")", "1");
    w.line(out() + "[row] = acc;");
    w.close();
    w.close();
    w.close();
    w.line();
  }

  void fixup_kernel(Writer& w) {
    w.comment("Adds the carries of each row cut by chunk boundaries. A run of carries of one row starts at the chunk "
              "after the one holding the row's first entry and ends at the chunk holding its last, "
              "(begin(row + 1) - 1) / kChunk, so its length is known without reading it (coo: the run is read until "
              "its carry rows change). A warp takes 32 consecutive "
              "chunks, each lane finds whether its chunk starts a run, and for each run the warp's lanes sum its carries "
              "lane-strided (independent loads) and meet in a butterfly: a fixed order, deterministic; a power-law row's "
              "run costs its length / 32 loads per lane, in flight together.");
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "_carries(" + params_decl() + "int64_t chunks, const " +
           acc_t_ + "* __restrict__ carry_value, const int64_t* __restrict__ carry_row)");
    w.line("const int lane = threadIdx.x % 32;");
    w.line("for (int64_t base = ((int64_t)blockIdx.x * (kThreads / 32) + threadIdx.x / 32) * 32; base < chunks;");
    w.open("     base += (int64_t)gridDim.x * kThreads)");
    w.line("const int64_t mine = base + lane;");
    w.line("const int64_t my_row = mine < chunks ? carry_row[mine] : -1;");
    w.line("const bool head = my_row >= 0 && (mine == 0 || carry_row[mine - 1] != my_row);");
    w.comment("Every lane takes the same j and the same shuffled values: the branches below are uniform.");
    w.open("for (int j = 0; j < 32; ++j)");
    w.line("if (!__shfl_sync(0xffffffffu, head, j)) continue;");
    w.line("const int64_t row = __shfl_sync(0xffffffffu, my_row, j), chunk = base + j;");
    w.line(acc_t_ + " sum = 0;");
    if (format() == "coo") {
      w.comment("coo: the run is the next chunks whose carry row is this row (rows are sorted), read 32 at a "
                "time until the last lane's chunk is past it; no search of the row array.");
      w.open("for (int64_t u0 = chunk + 1;; u0 += 32)");
      w.line("const int64_t u = u0 + lane;");
      w.line("const bool in = u < chunks && carry_row[u] == row;");
      w.line("if (in) sum += carry_value[u];");
      w.line("if (!__shfl_sync(0xffffffffu, in, 31)) break;");
      w.close();
    } else {
      w.line("const int64_t last = (" + begin("row + 1") + " - 1) / kChunk;");
      w.line("#pragma unroll 4");
      w.line("for (int64_t u = chunk + 1 + lane; u <= last; u += 32) sum += carry_value[u];");
    }
    w.line("for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);");
    w.line("if (lane == 0) " + out() + "[row] = " + out() + "[row] + (carry_value[chunk] + sum);");
    w.close();
    w.close();
    w.close();
    w.line();
  }

  void host(Writer& w) {
    const std::string M = names_[a_.def->extents[0]];
    if (split()) {
      w.line("namespace {");
      w.comment("The carry buffer of nnz_split, kept across calls and grown when a call needs more.");
      w.line("void* carries = nullptr;");
      w.line("size_t carries_bytes = 0;");
      w.line("}  // namespace");
      w.line();
    }
    w.open("extern \"C\" int ksol_run(const ksol_call* call)");
    w.line("if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != " +
           std::to_string(order_.size()) + " || call->num_dims != " + std::to_string(dims_.size()) + ")");
    w.line("  return 1;");
    std::string neg;
    for (size_t i = 0; i < dims_.size(); ++i) {
      bool used = std::find(p_.dims.begin(), p_.dims.end(), dims_[i]) != p_.dims.end();
      const bool nnz = needs_nnz() && dims_[i] == "NNZ", width = format() == "ell" && dims_[i] == "W";
      if (!used && !nnz && !width) continue;
      std::string n = used ? names_[dims_[i]] : nnz ? "NNZ" : "ell_width";
      w.line("const int64_t " + n + " = call->dims[" + std::to_string(i) + "];");
      if (used && nnz) w.line("const int64_t NNZ = " + n + ";");
      if (used && width) w.line("const int64_t ell_width = " + n + ";");
      neg += (neg.empty() ? "" : " || ") + n + " < 0";
    }
    w.line("if (" + neg + ") return 2;");
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& pc = pieces_[i];
      bool input = is_input(pc.param);
      std::string t = std::string(input ? "const " : "") +
                      (index_part(pc.part) ? "int32_t" : cuda_type(pc.param->type)) + "*";
      w.line(t + " " + piece_name_[i] + " = static_cast<" + t + ">(call->tensors[" + std::to_string(i) + "]);");
    }
    w.line("const cudaStream_t stream = static_cast<cudaStream_t>(call->stream);");
    w.line("if (" + M + " == 0" + (a_.spmm() ? " || " + names_[a_.def->extents[1]] + " == 0" : std::string()) + ") return 0;");
    std::string pass = params_pass();
    std::string tmpl;
    if (shared_x()) {
      const Param* x = a_.col_vectors.front();
      w.line("const size_t shared_x = (size_t)" + names_[x->extents[0]] + " * sizeof(" + cuda_type(x->type) + ");");
      w.line("const bool use_shared = shared_x <= (size_t)kMaxSharedX;");
    }
    auto launch = [&](const std::string& kernel, const std::string& blocks, const std::string& args) {
      if (!shared_x()) {
        w.line(kernel + "<<<(unsigned)" + blocks + ", kThreads, 0, stream>>>(" + args + ");");
        return;
      }
      w.line("if (use_shared)");
      w.line("  " + kernel + "<true><<<(unsigned)" + blocks + ", kThreads, shared_x, stream>>>(" + args + ");");
      w.line("else");
      w.line("  " + kernel + "<false><<<(unsigned)" + blocks + ", kThreads, 0, stream>>>(" + args + ");");
    };
    if (a_.spmm() && s_.strategy == "row_per_thread") {
      w.line("const int64_t work = " + M + " * ((" + names_[a_.def->extents[1]] + " + kCols - 1) / kCols);");
      w.line("const int64_t blocks = std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks);");
      pass.resize(pass.size() - 2);
      launch(name_, "blocks", pass);
    } else if (s_.strategy == "row_per_thread") {
      w.line("const int64_t blocks = std::min<int64_t>((" + M + " + kThreads - 1) / kThreads, kMaxBlocks);");
      pass.resize(pass.size() - 2);
      launch(name_, "blocks", pass);
    } else if (s_.strategy == "vector_per_row") {
      w.line("const int64_t blocks = std::min<int64_t>((" + M + " + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks);");
      pass.resize(pass.size() - 2);
      launch(name_, "blocks", pass);
    } else {
      w.line("const int64_t chunks = NNZ > 0 ? (NNZ + kChunk - 1) / kChunk : 1;");
      w.line("const size_t need = (size_t)chunks * (sizeof(int64_t) + sizeof(" + acc_t_ + "));");
      w.open("if (need > carries_bytes)");
      w.line("if (carries) cudaFree(carries);");
      w.line("carries = nullptr;");
      w.line("carries_bytes = 0;");
      w.line("if (cudaMalloc(&carries, need) != cudaSuccess) return 4;");
      w.line("carries_bytes = need;");
      w.close();
      w.line("int64_t* carry_row = static_cast<int64_t*>(carries);");
      w.line(acc_t_ + "* carry_value = reinterpret_cast<" + acc_t_ + "*>(carry_row + chunks);");
      w.line("const int64_t blocks = std::min<int64_t>((chunks + kThreads - 1) / kThreads, kMaxBlocks);");
      launch(name_ + "_chunks", "blocks", pass + "chunks, carry_value, carry_row");
      w.line("if (cudaGetLastError() != cudaSuccess) return 4;");
      w.line(name_ + "_carries<<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + "chunks, carry_value, carry_row);");
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

}  // namespace

const FamilyGenerator& sparse_family() {
  static const FamilyGenerator f{
      "sparse",
      {
          {"strategy", "row_per_thread", {"row_per_thread", "vector_per_row", "nnz_split"}},
          {"vector", "1", {"1", "2", "4", "8", "16", "32"}},
          {"threads", "256", {"64", "128", "256", "512"}},
          {"cache_x", "none", {"none", "readonly", "shared"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace ksol::codegen::detail
