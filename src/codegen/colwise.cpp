// Column reductions, generated for the rowwise family: Y[c] = OP(f(X[r, c], v[c], w[r], ...)) over r
// with OP sum, mean, max or min, reading matrices at [r, c] (row-major, C columns), column
// vectors at [c] and row vectors at [r]; or batched, Y[b, c] = OP(f(X[b, r, c], m[b, c], ...)) over r, each
// batch's [R, C] matrix reduced the same way (grid z walks the batch, which multiplies the
// columns' blocks: a reduction over the middle dim of a 3-D tensor). The reduction may be followed
// by one elementwise definition at its own index that reads nothing but the reduction's value there
// (Z[c] = g(Y[c]): an epilogue, applied as each column is written; Y is then no output). The rowwise family's check, generator and naming hand
// such a program here (is_column_reduction); its knobs keep their names with a column meaning:
//   threads           threads per block; thread t of the grid owns `vector` consecutive columns
//                     (a warp reads 32 * vector consecutive elements of a row: coalesced);
//   vector            columns per thread (1, 2, 4, 8; at most 16 bytes of the widest type);
//   items_per_thread  rows loaded per step of a thread's loop, for more loads in flight;
//   unroll            steps of the row loop unrolled;
//   reduction         block: each thread sums all the rows of its columns (one kernel);
//                     two_pass: the rows are cut into chunks over grid y, each chunk's partial
//                     results go to a workspace, and a second kernel combines them in chunk
//                     order (deterministic) and finishes; the chunk count is chosen at run time
//                     to fill the GPU (about 4 blocks per SM, the device's count) with at least 32
//                     rows each;
//                     warp is refused (a column has no warp of its own);
//   rows_per_block    must be 1, cache_row none (each element is read once).
#include <algorithm>
#include <map>
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

const std::vector<std::string> kInternal = {"kThreads", "kVector", "kItems", "kUnroll", "kMaxChunks", "acc", "c0", "r", "b",
                                            "batches",
                                            "r0", "r1", "row", "col", "j", "i", "chunk", "chunks", "rows_per_chunk",
                                            "partial", "workspace", "workspace_bytes", "blocks", "need", "value",
                                            "device", "sms", "red"};

struct Column {
  const Definition* def = nullptr;
  const Definition* epi = nullptr;  // the elementwise definition after the reduction, or none
  std::string batch_var, batch;  // b and its extent's dim; empty unless batched
  std::string row_var, col_var;  // r (reduced, first) and c (kept)
  std::string rows, cols;        // their extents' dims
  int widest = 1;                // bytes of the widest type read or written
};

// The program's column-reduction shape, or why it is not one (empty `why` when it is).
Column analyse(const dsl::Program& p, std::string* why) {
  Column a;
  auto no = [&](const std::string& w) {
    *why = w;
    return a;
  };
  if (p.defs.empty() || p.defs.size() > 2 || p.outputs.size() != 1)
    return no("a column reduction is one output defined by one reduction, and at most an elementwise definition after it");
  const Definition& d = p.defs.front();
  if (p.defs.size() == 2) {
    // The epilogue: the output, at the reduction's own index, reading only the reduction's value there.
    const Definition& e = p.defs.back();
    if (e.reduce != ReduceOp::none || e.indices != d.indices || e.extents != d.extents || d.is_output)
      return no("the definition after a column reduction must be elementwise at its own index, the output");
    bool reads_it = false;
    for (const Expr* r : reads_in(e.body)) {
      bool same = r->name == d.name && r->indices.size() == d.indices.size();
      for (size_t i = 0; same && i < r->indices.size(); ++i)
        same = r->indices[i].var == d.indices[i] && r->indices[i].offset == 0 && r->indices[i].plus.empty();
      if (!same) return no("the definition after a column reduction reads '" + format_expr(*r) + "': only the reduction's value at its own index");
      reads_it = true;
    }
    if (!reads_it) return no("the definition after a column reduction does not read it");
    a.epi = &e;
  }
  if (d.reduce != ReduceOp::sum && d.reduce != ReduceOp::mean && d.reduce != ReduceOp::max && d.reduce != ReduceOp::min)
    return no("a column reduction is a sum, mean, max or min");
  if (d.indices.size() != 1 && d.indices.size() != 2) return no("a column reduction keeps one index, or a batch index and one");
  a.def = &d;
  a.row_var = d.over;
  a.col_var = d.indices.back();
  a.cols = d.extents.back();
  a.rows = d.over_extent;
  if (d.indices.size() == 2) {
    a.batch_var = d.indices[0];
    a.batch = d.extents[0];
  }
  const bool batched = !a.batch_var.empty();
  a.widest = type_bytes(d.type);
  bool first = false;
  for (const Expr* r : reads_in(d.body)) {
    const Param* prm = p.param(r->name);
    if (!prm || prm->format != "dense") return no("'" + r->name + "' is not a dense input");
    for (const dsl::IndexExpr& ix : r->indices)
      if (ix.offset != 0 || !ix.plus.empty()) return no("'" + format_expr(*r) + "' is read at an offset");
    const auto& ix = r->indices;
    const bool matrix = batched ? ix.size() == 3 && ix[0].var == a.batch_var && ix[1].var == a.row_var && ix[2].var == a.col_var
                                : ix.size() == 2 && ix[0].var == a.row_var && ix[1].var == a.col_var;
    const bool at_bc = batched && ix.size() == 2 && ix[0].var == a.batch_var && ix[1].var == a.col_var;
    bool ok = matrix || at_bc || (ix.size() == 1 && (ix[0].var == a.row_var || ix[0].var == a.col_var));
    const std::string at = batched ? a.batch_var + ", " + a.row_var + ", " + a.col_var : a.row_var + ", " + a.col_var;
    if (!ok)
      return no("'" + format_expr(*r) + "' is read at neither [" + at + "], " +
                (batched ? "[" + a.batch_var + ", " + a.col_var + "], " : std::string()) + "[" + a.col_var + "] nor [" +
                a.row_var + "]");
    first = first || matrix;
    a.widest = std::max(a.widest, type_bytes(prm->type));
  }
  if (!first)
    return no("no matrix is read at [" + (batched ? a.batch_var + ", " : std::string()) + a.row_var + ", " + a.col_var + "]");
  return a;
}

struct ColKnobs {
  int threads = 256, vector = 1, items = 1, unroll = 1;
  bool two_pass = false;
  bool fast_math = false;  // math = fast (ExprEmitter::fast_math)
};

ColKnobs read_knobs(const dsl::Program& p, const Column& a) {
  Knobs k(p, rowwise_family());
  ColKnobs s;
  const int64_t threads = k.threads();
  s.threads = static_cast<int>(threads);
  s.vector = static_cast<int>(k.one_of("vector", {1, 2, 4, 8}));
  s.items = static_cast<int>(k.one_of("items_per_thread", {1, 2, 4, 8}));
  s.unroll = static_cast<int>(k.one_of("unroll", {1, 2, 4, 8}));
  const std::string red = k.one_of("reduction", std::vector<std::string>{"warp", "block", "two_pass"});
  const std::string cache = k.one_of("cache_row", std::vector<std::string>{"none", "registers", "shared", "l2"});
  int64_t rpb = k.integer("rows_per_block");
  s.fast_math = k.one_of("math", std::vector<std::string>{"precise", "fast"}) == "fast";
  if (s.fast_math) check_fast_math(p);
  if (s.vector * a.widest > 16)
    throw Refused("vector = " + std::to_string(s.vector) + " columns of a " + std::to_string(a.widest) +
                  "-byte type are " + std::to_string(s.vector * a.widest) + " bytes per thread and row; at most 16");
  if (red == "warp")
    throw Refused("reduction = warp serves a row with a warp; a column reduction gives each thread its columns: "
                  "reduction is block (one pass) or two_pass (the rows split over blocks)");
  if (rpb != 1)
    throw Refused("rows_per_block = " + std::to_string(rpb) + ": a column reduction's threads own columns over all "
                  "their rows, so rows_per_block must be 1");
  if (cache != "none")
    throw Refused("cache_row = " + cache + ": a column reduction reads each element once, so cache_row must be none");
  if (k.value("keep").kind != dsl::ScheduleValue::Kind::ident || k.value("keep").ident != "none")
    throw Refused("keep: a column reduction computes each element once, so keep must be none");
  if (k.integer("online") != 0)
    throw Refused("online: a column reduction has no max pass to fuse, so online must be 0");
  if (k.value("blocks_per_sm").kind != dsl::ScheduleValue::Kind::ident || k.value("blocks_per_sm").ident != "auto")
    throw Refused("blocks_per_sm: the column reduction's kernels take no occupancy hint, so blocks_per_sm must be auto");
  if (k.one_of("tail", std::vector<std::string>{"checked", "exact", "fixed"}) != "checked")
    throw Refused("tail: a column reduction has no register cache of whole rows, so tail must be checked");
  if (k.one_of("store_hint", std::vector<std::string>{"none", "evict_last"}) != "none")
    throw Refused("store_hint: a column reduction writes one value per column, so store_hint must be none");
  if (k.one_of("preload", std::vector<std::string>{"none", "all", "write"}) != "none")
    throw Refused("preload: a column reduction has no register cache of whole rows, so preload must be none");
  if (k.one_of("grid", std::vector<std::string>{"stride", "rows"}) != "stride")
    throw Refused("grid: a column reduction's blocks own columns over all rows, so grid must be stride");
  s.two_pass = red == "two_pass";
  return s;
}

std::string name_of(const dsl::Program& p, const ColKnobs& s) {
  std::string n = name_stem(p, "colwise") + "_t" + std::to_string(s.threads) + "_v" + std::to_string(s.vector);
  if (!p.defs.empty() && p.defs.front().indices.size() == 2) n += "_batched";
  if (s.items > 1) n += "_i" + std::to_string(s.items);
  if (s.unroll > 1) n += "_u" + std::to_string(s.unroll);
  if (s.fast_math) n += "_fast";
  return n + (s.two_pass ? "_two_pass" : "_block");
}

Column analysed(const dsl::Program& p) {
  std::string why;
  Column a = analyse(p, &why);
  if (!why.empty()) throw Refused(why);
  return a;
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), a_(analysed(p)), s_(read_knobs(p, a_)), abi_(resolve_binding(p, b)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    name_ = name_of(p_, s_);
    acc_t_ = is_half(a_.def->type) ? Type::f32 : a_.def->type;
  }

  std::string run() {
    Writer body;
    kernel(body);
    if (s_.two_pass) finish_kernel(body);
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (rowwise family, a column reduction).");
    w.line("//   " + format_definition(*a_.def));
    if (a_.epi) w.line("//   " + format_definition(*a_.epi));
    w.comment("Each thread owns " + std::to_string(s_.vector) + " consecutive column(s) and " +
              (s_.two_pass ? "reduces a chunk of the rows (grid y); a second kernel combines the chunks in order"
                           : "reduces all the rows") +
              "; " + std::to_string(s_.items) + " row(s) per step, " + std::to_string(s_.threads) + " threads per block.");
    w.raw(includes(p_));
    w.line();
    w.line("namespace {");
    w.line("constexpr int kThreads = " + std::to_string(s_.threads) + ";  // threads per block");
    w.line("constexpr int kVector = " + std::to_string(s_.vector) + ";  // consecutive columns per thread");
    w.line("constexpr int kItems = " + std::to_string(s_.items) + ";  // rows per step");
    if (s_.unroll > 1) w.line("constexpr int kUnroll = " + std::to_string(s_.unroll) + ";  // steps unrolled");
    if (s_.two_pass) w.line("constexpr int64_t kMaxChunks = 1024;  // row chunks at most");
    return finish_source(w, helpers_, body.text(), [&](Writer& h) { host(h); });
  }

 private:
  const dsl::Program& p_;
  Column a_;
  ColKnobs s_;
  AbiLayout abi_;
  Names names_;
  Helpers helpers_;
  std::string name_;
  Type acc_t_;

  std::string R() const { return names_[a_.rows]; }
  bool batched() const { return !a_.batch.empty(); }
  std::string B() const { return names_[a_.batch]; }
  std::string C() const { return names_[a_.cols]; }
  const std::string& out() const { return names_[(a_.epi ? a_.epi : a_.def)->name]; }
  Type out_type() const { return (a_.epi ? a_.epi : a_.def)->type; }

  std::string identity() const {
    switch (a_.def->reduce) {
      case ReduceOp::max: return dsl::type_is_float(acc_t_) ? "-INFINITY" : (acc_t_ == Type::i64 ? "INT64_MIN" : "INT32_MIN");
      case ReduceOp::min: return dsl::type_is_float(acc_t_) ? "INFINITY" : (acc_t_ == Type::i64 ? "INT64_MAX" : "INT32_MAX");
      default: return "0";
    }
  }
  std::string combine(const std::string& acc, const std::string& v) {
    if (a_.def->reduce == ReduceOp::max) {
      helpers_.use("max_nan", Type::f32);
      return acc + " = max_nan(" + acc + ", " + v + ");";
    }
    if (a_.def->reduce == ReduceOp::min) {
      helpers_.use("min_nan", Type::f32);
      return acc + " = min_nan(" + acc + ", " + v + ");";
    }
    return acc + " += " + v + ";";
  }
  // The summand at (row, col) in the accumulator's type.
  std::string summand() {
    ExprEmitter em;
    em.helpers = &helpers_;
    em.fast_math = s_.fast_math;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = [&](const Expr& r) -> std::string {
      const std::string& n = names_[r.name];
      if (r.indices.size() == 3) return n + "[(b * " + R() + " + row) * " + C() + " + col]";
      if (batched() && r.indices.size() == 2) return n + "[b * " + C() + " + col]";
      if (r.indices.size() == 2) return n + "[row * " + C() + " + col]";
      return n + (r.indices[0].var == a_.row_var ? "[row]" : "[col]");
    };
    return cast_code(em(a_.def->body), a_.def->body.type, acc_t_);
  }
  // The result of column col from its accumulator.
  std::string finished(const std::string& acc) const {
    std::string v = acc;
    if (a_.def->reduce == ReduceOp::mean) v = v + " / " + cast_code(R(), Type::i64, acc_t_);
    return cast_code(v, acc_t_, a_.def->type);
  }
  // The statement that writes column `at` of the output from its accumulator: the reduction's
  // value, through the epilogue where there is one.
  std::string write(const std::string& at, const std::string& acc) {
    if (!a_.epi) return out() + "[" + at + "] = " + finished(acc) + ";";
    ExprEmitter em;
    em.helpers = &helpers_;
    em.fast_math = s_.fast_math;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = [](const Expr&) -> std::string { return "red"; };
    return "{ const " + std::string(cuda_type(a_.def->type)) + " red = " + finished(acc) + "; " + out() + "[" + at +
           "] = " + cast_code(em(a_.epi->body), a_.epi->body.type, a_.epi->type) + "; }";
  }

  void kernel(Writer& w) {
    std::string decl = kernel_params_decl(p_, abi_, names_, s_.two_pass);
    if (s_.two_pass) decl += "int64_t rows_per_chunk, " + std::string(cuda_type(acc_t_)) + "* __restrict__ partial";
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "(" + decl + ")");
    w.line("const int64_t c0 = ((int64_t)blockIdx.x * kThreads + threadIdx.x) * kVector;");
    w.line("if (c0 >= " + C() + ") return;");
    if (batched()) {
      w.comment("Grid z walks the batch; each batch is an [R, C] matrix of its own.");
      w.open("for (int64_t b = blockIdx.z; b < " + B() + "; b += gridDim.z)");
    }
    if (s_.two_pass) {
      w.line("const int64_t r0 = (int64_t)blockIdx.y * rows_per_chunk;");
      w.line("const int64_t r1 = r0 + rows_per_chunk < " + R() + " ? r0 + rows_per_chunk : " + R() + ";");
    } else {
      w.line("const int64_t r0 = 0, r1 = " + R() + ";");
    }
    const std::string at = cuda_type(acc_t_);
    w.line(at + " acc[kVector];");
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < kVector; ++j) acc[j] = " + identity() + ";");
    if (s_.unroll > 1) w.line("#pragma unroll kUnroll");
    w.open("for (int64_t r = r0; r < r1; r += kItems)");
    w.line("#pragma unroll");
    w.open("for (int i = 0; i < kItems; ++i)");
    w.line("const int64_t row = r + i;");
    w.line("if (row >= r1) break;");
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kVector; ++j)");
    w.line("const int64_t col = c0 + j;");
    w.line("if (col < " + C() + ") " + combine("acc[j]", summand()));
    w.close();
    w.close();
    w.close();
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kVector; ++j)");
    w.line("const int64_t col = c0 + j;");
    w.line("if (col >= " + C() + ") break;");
    // A batched program's output and partial results are [B, C]: column col of batch b is b*C + col.
    const std::string flat = batched() ? "b * " + C() + " + col" : "col";
    const std::string all_cols = batched() ? B() + " * " + C() : C();
    if (s_.two_pass)
      w.line("partial[(int64_t)blockIdx.y * " + all_cols + " + " + flat + "] = acc[j];");
    else
      w.line(write(flat, "acc[j]"));
    w.close();
    if (batched()) w.close();
    w.close();
    w.line();
  }

  void finish_kernel(Writer& w) {
    w.comment("Combines the chunks' partial results of each column in chunk order, then finishes.");
    const std::string at = cuda_type(acc_t_);
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "_finish(" + std::string(cuda_type(out_type())) +
           "* __restrict__ " + out() + ", int64_t " + R() + ", int64_t " + C() + ", int64_t chunks, const " + at +
           "* __restrict__ partial)");
    w.line("const int64_t col = (int64_t)blockIdx.x * kThreads + threadIdx.x;");
    w.line("if (col >= " + C() + ") return;");
    w.line(at + " acc = " + identity() + ";");
    w.line("for (int64_t chunk = 0; chunk < chunks; ++chunk) " + combine("acc", "partial[chunk * " + C() + " + col]"));
    w.line(write("col", "acc"));
    w.close();
    w.line();
  }

  void host(Writer& w) {
    if (s_.two_pass) {
      w.line("namespace {");
      w.comment("The chunks' partial results, kept across calls and grown when a call needs more.");
      w.line("void* workspace = nullptr;");
      w.line("size_t workspace_bytes = 0;");
      w.line("}  // namespace");
      w.line();
    }
    open_ksol_run(w, p_, abi_, names_);
    w.line("if (" + C() + " == 0" + (batched() ? " || " + B() + " == 0" : std::string()) + ") return 0;");
    w.line("const int64_t blocks = (" + C() + " + (int64_t)kThreads * kVector - 1) / ((int64_t)kThreads * kVector);");
    // Grid z: one slice per batch, at most 65535 (the kernel's loop takes the rest).
    const std::string z = batched() ? ", (unsigned)batches" : "";
    if (batched()) w.line("const int64_t batches = std::min<int64_t>(" + B() + ", 65535);");
    const std::string all_cols = batched() ? "(" + B() + " * " + C() + ")" : C();
    std::string pass = kernel_params_pass(p_, abi_, names_, s_.two_pass);
    if (!s_.two_pass) {
      w.line(name_ + "<<<" + (batched() ? "dim3((unsigned)blocks, 1u" + z + ")" : "(unsigned)blocks") + ", kThreads, 0, stream>>>(" +
             pass + ");");
      w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
      w.close();
      return;
    }
    const std::string at = cuda_type(acc_t_);
    w.comment("Enough chunks to fill the GPU (about 4 blocks per SM), each of 32 rows at least.");
    w.line("int device = 0, sms = 0;");
    w.line("if (cudaGetDevice(&device) != cudaSuccess) return 4;");
    w.line("if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 4;");
    const std::string grid = batched() ? "(blocks * batches)" : "blocks";
    w.line("int64_t chunks = std::max<int64_t>(1, std::min<int64_t>((4 * (int64_t)sms + " + grid + " - 1) / " + grid + ", (" + R() +
           " + 31) / 32));");
    w.line("chunks = std::min<int64_t>(chunks, kMaxChunks);");
    w.line("const int64_t rows_per_chunk = std::max<int64_t>(1, (" + R() + " + chunks - 1) / chunks);");
    w.line("chunks = " + R() + " > 0 ? (" + R() + " + rows_per_chunk - 1) / rows_per_chunk : 1;");
    w.line("const size_t need = (size_t)chunks * (size_t)" + all_cols + " * sizeof(" + at + ");");
    w.open("if (need > workspace_bytes)");
    w.line("if (workspace) cudaFree(workspace);");
    w.line("workspace = nullptr;");
    w.line("workspace_bytes = 0;");
    w.line("if (cudaMalloc(&workspace, need) != cudaSuccess) return 5;");
    w.line("workspace_bytes = need;");
    w.close();
    w.line(at + "* partial = static_cast<" + at + "*>(workspace);");
    w.open("if (" + R() + " > 0)");
    w.line(name_ + "<<<dim3((unsigned)blocks, (unsigned)chunks" + z + "), kThreads, 0, stream>>>(" + pass + "rows_per_chunk, partial);");
    w.line("if (cudaGetLastError() != cudaSuccess) return 4;");
    w.close("} else {");
    w.comment("No rows: every column is the reduction's identity (a mean of none divides 0 by 0).");
    w.line("  chunks = 1;");
    w.line("  " + name_ + "<<<dim3((unsigned)blocks, 1u" + z + "), kThreads, 0, stream>>>(" + pass + "1, partial);");
    w.line("}");
    // The finishing kernel sees a batched program's [B, C] results as B*C columns.
    w.line(name_ + "_finish<<<(unsigned)((" + all_cols + " + kThreads - 1) / kThreads), kThreads, 0, stream>>>(" + out() + ", " +
           R() + ", " + all_cols + ", chunks, partial);");
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

}  // namespace

bool is_column_reduction(const dsl::Program& p) {
  std::string why;
  analyse(p, &why);
  return why.empty();
}

void column_check(const dsl::Program& p, const Binding& b) {
  Column a = analysed(p);
  read_knobs(p, a);
  resolve_binding(p, b);
  for (const Expr* r : reads_in(a.def->body)) check_emittable(*r);
  check_emittable(a.def->body);
  if (a.epi) check_emittable(a.epi->body);
}

std::string column_generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

std::string column_kernel_name(const dsl::Program& p) { return name_of(p, read_knobs(p, analysed(p))); }

}  // namespace ksol::codegen::detail
