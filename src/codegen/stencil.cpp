// The stencil family: one definition V[i, j] (or V[z, i, j]) = f(U[i + a, j + b], ...) of
// constant-offset reads, computed once per output cell (one sweep).
//
// Boundary convention. The DSL has no way to say what a cell whose offset reads fall outside
// the grid is. ksol's convention: a cell is computed by the definition where every read is in
// range (for each axis k, lo_k <= index < extent_k - hi_k, lo/hi the largest negative/positive
// offset on that axis over all reads); every other cell is copied from the centre value (offset
// 0) of the first input the definition reads, converted to the output's type. For the 5-point
// Jacobi sweep this is exactly the task's "boundary cells are copied from U".
//
// Schedule: `tile` [Y, X] (or [Z, Y, X]) outputs per block, X along the fastest axis;
// `register_block` R: each thread computes R consecutive outputs along the slowest axis (so a
// block has prod(tile) / R threads), reusing the loads the neighbouring outputs share; `halo`
// shared: the block stages its tile plus the halo of every input in shared memory, then
// computes from there; registers: each thread loads every column of reads it needs (an input at
// one offset on the faster axes, over the rows its R outputs and the halo span) from global
// memory once, into registers, so neighbouring outputs share the loads (5-point, R = 4: 14 loads
// for 4 outputs instead of 20). `vector` V (halo = registers only): each thread also computes V
// consecutive outputs along the fastest axis, loading each row of its reads as one V-wide vector
// (16 bytes for f32 and V = 4) plus scalar loads for the cells the offsets reach beyond it, and
// storing its V outputs as one vector; the launcher takes this kernel when the fastest extent is
// a multiple of V and every tensor's base is aligned to its vector, and otherwise a scalar kernel
// of the same tile (V = 1). `temporal` > 1 (several sweeps per launch) is refused: a program is one sweep.
#include <algorithm>
#include <functional>
#include <cstdlib>
#include <map>
#include <sstream>

#include "codegen/sparse_stencil.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::Type;

const std::vector<std::string> kInternal = {"kThreads", "kRegisterBlock", "kMaxBlocks", "tile", "tiles", "tid",
                                            "e", "k", "blocks", "o0", "o1", "o2", "l0", "l1", "l2", "g0", "g1",
                                            "g2", "s0", "s1", "s2", "n0", "n1", "n2", "rest", "inside", "staged", "r0", "q", "ksol_clamp", "ksol_vec", "ksol_store", "kVector", "kVectorThreads", "ov"};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

struct Analysis {
  const Definition* def = nullptr;
  int rank = 0;
  std::vector<int64_t> lo, hi;           // halo per axis
  std::vector<const Param*> inputs;      // inputs read, in first-read order
  const Param* centre = nullptr;         // boundary cells copy this input
};

Analysis analyse(const dsl::Program& p) {
  Analysis a;
  if (p.defs.size() != 1 || p.outputs.size() != 1)
    throw Refused("the stencil family generates one output defined by one statement; this program has " +
                  std::to_string(p.defs.size()) + " definitions");
  const Definition& d = p.defs.front();
  a.def = &d;
  a.rank = static_cast<int>(d.indices.size());
  if (a.rank != 2 && a.rank != 3)
    throw Refused("'" + d.name + "' has " + std::to_string(a.rank) + " indices; the stencil family generates 2-D and 3-D stencils");
  a.lo.assign(a.rank, 0);
  a.hi.assign(a.rank, 0);
  for (const Expr* r : reads_in(d.body)) {
    const Param* prm = p.param(r->name);
    if (!prm || p.def(r->name)) throw Refused("'" + r->name + "' is not an input");
    if (static_cast<int>(r->indices.size()) != a.rank || prm->extents != d.extents)
      throw Refused("'" + format_expr(*r) + "' does not range over the output's grid [" + join(d.extents) +
                    "]; every stencil input has the output's shape");
    for (int k = 0; k < a.rank; ++k) {
      const dsl::IndexExpr& ix = r->indices[k];
      if (ix.var != d.indices[k])
        throw Refused("'" + format_expr(*r) + "' reads index '" + ix.var + "' at position " + std::to_string(k + 1) +
                      " where the output has '" + d.indices[k] + "'; a stencil reads each index at its own position");
      a.lo[k] = std::max<int64_t>(a.lo[k], -ix.offset);
      a.hi[k] = std::max<int64_t>(a.hi[k], ix.offset);
    }
    if (std::find(a.inputs.begin(), a.inputs.end(), prm) == a.inputs.end()) a.inputs.push_back(prm);
  }
  if (a.inputs.empty()) throw Refused("'" + d.name + "' reads no input");
  a.centre = a.inputs.front();
  check_emittable(d.body);
  return a;
}

struct Sched {
  std::vector<int64_t> tile;
  std::string halo;
  int register_block = 1;
  int vector = 1;   // outputs per thread along the fastest axis (vector loads and stores)
  int threads = 0;  // of the scalar kernel; the vector kernel has threads / vector
  int64_t shared_bytes = 0;
};

std::vector<int64_t> parse_list(const std::string& text) {
  std::string t = text;
  for (char& c : t)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(t);
  std::vector<int64_t> v;
  std::string word;
  while (in >> word) {
    if (word.find_first_not_of("0123456789") != std::string::npos) throw Refused("tile = " + text + " must be a list of integers");
    v.push_back(std::stoll(word));
  }
  return v;
}

Sched read_sched(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, stencil_family());
  Sched s;
  const dsl::ScheduleValue* tv = p.knob("tile") ? &k.value("tile") : nullptr;
  if (!tv)
    s.tile = a.rank == 2 ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{4, 8, 32};
  else if (tv->kind == dsl::ScheduleValue::Kind::list)
    s.tile = tv->list;
  else if (tv->kind == dsl::ScheduleValue::Kind::ident)
    s.tile = parse_list(tv->ident);
  else
    throw Refused("tile = " + std::to_string(tv->integer) + " must be a list [Y, X] or [Z, Y, X]");
  std::string tile_text;
  for (size_t i = 0; i < s.tile.size(); ++i) tile_text += (i ? ", " : "") + std::to_string(s.tile[i]);
  tile_text = "[" + tile_text + "]";
  if (static_cast<int>(s.tile.size()) != a.rank)
    throw Refused("tile = " + tile_text + " has " + std::to_string(s.tile.size()) + " entries; a " +
                  std::to_string(a.rank) + "-D stencil takes " + (a.rank == 2 ? "[Y, X]" : "[Z, Y, X]"));
  for (int64_t t : s.tile)
    if (t < 1) throw Refused("tile = " + tile_text + " must have positive entries");
  s.halo = k.one_of("halo", std::vector<std::string>{"shared", "registers"});
  s.register_block = static_cast<int>(k.one_of("register_block", {1, 2, 4, 8}));
  s.vector = static_cast<int>(k.one_of("vector", {1, 2, 4}));
  int64_t temporal = k.integer("temporal");
  if (temporal < 1) throw Refused("temporal = " + std::to_string(temporal) + " must be at least 1");
  if (temporal > 1)
    throw Refused("temporal = " + std::to_string(temporal) + " fuses " + std::to_string(temporal) +
                  " sweeps, but the program is one sweep ('" + a.def->name + "' is computed from its inputs once) and "
                  "the DSL cannot say that an output feeds the next sweep; temporal must be 1");
  if (s.tile[0] % s.register_block != 0)
    throw Refused("register_block = " + std::to_string(s.register_block) + " does not divide the tile's slowest extent " +
                  std::to_string(s.tile[0]));
  int64_t threads = 1;
  for (int64_t t : s.tile) threads *= t;
  threads /= s.register_block;
  if (threads < 32 || threads > 1024)
    throw Refused("tile = " + tile_text + " with register_block = " + std::to_string(s.register_block) + " makes " +
                  std::to_string(threads) + " threads per block; a block has 32 to 1024");
  s.threads = static_cast<int>(threads);
  if (s.vector > 1) {
    const std::string v = "vector = " + std::to_string(s.vector);
    if (s.halo != "registers") throw Refused(v + " needs halo = registers (the shared-memory halo is staged cell by cell)");
    if (s.tile.back() % s.vector != 0)
      throw Refused(v + " does not divide the tile's fastest extent " + std::to_string(s.tile.back()));
    if (threads / s.vector < 32)
      throw Refused("tile = " + tile_text + " with register_block = " + std::to_string(s.register_block) + " and " + v +
                    " makes " + std::to_string(threads / s.vector) + " threads per block; a block has 32 to 1024");
    std::vector<const dsl::Param*> tensors = a.inputs;
    tensors.push_back(&p.outputs.front());
    for (const dsl::Param* prm : tensors)
      if (type_bytes(prm->type) * s.vector > 16)
        throw Refused(v + " of " + std::string(dsl::type_name(prm->type)) + " is " + std::to_string(type_bytes(prm->type) * s.vector) +
                      " bytes; a vector load is at most 16");
  }
  if (s.halo == "shared") {
    int64_t cells = 1;
    for (int kx = 0; kx < a.rank; ++kx) cells *= s.tile[kx] + a.lo[kx] + a.hi[kx];
    for (const Param* in : a.inputs) s.shared_bytes += cells * type_bytes(in->type);
    if (s.shared_bytes > 48 * 1024)
      throw Refused("halo = shared stages " + std::to_string(s.shared_bytes) + " bytes per block (tile " + tile_text +
                    " plus its halo); static shared memory is at most 49152");
  }
  return s;
}

void check(const dsl::Program& p, const Binding& b) {
  resolve_binding(p, b);
  Analysis a = analyse(p);
  read_sched(p, a);
}

std::string name_of(const dsl::Program& p, const Sched& s) {
  std::string n = name_stem(p, "stencil") + "_";
  for (size_t i = 0; i < s.tile.size(); ++i) n += (i ? "x" : "") + std::to_string(s.tile[i]);
  n += s.halo == "shared" ? "_smem" : "_regs";
  if (s.register_block > 1) n += "_rb" + std::to_string(s.register_block);
  if (s.vector > 1) n += "_v" + std::to_string(s.vector);
  return n;
}

std::string kernel_name_of(const dsl::Program& p) {
  Analysis a = analyse(p);
  return name_of(p, read_sched(p, a));
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(analyse(p)), s_(read_sched(p, a_)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Param* in : a_.inputs) staged_[in->name] = names_.derived(in->name, "tile");
    name_ = name_of(p_, s_);
  }

  std::string run() {
    Writer body;
    if (s_.vector > 1) {
      kernel(body, name_ + "_scalar", 1);
      kernel(body, name_, s_.vector);
    } else {
      kernel(body, name_, 1);
    }
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (stencil family).");
    w.line("//   " + format_definition(*a_.def));
    std::string tile;
    for (size_t i = 0; i < s_.tile.size(); ++i) tile += (i ? " x " : "") + std::to_string(s_.tile[i]);
    w.comment("Each block computes a " + tile + " tile of outputs (tiles in a grid-stride loop), each thread " +
              std::to_string(s_.register_block) + " consecutive output(s) along the slowest axis; " +
              (shared() ? "the tile and its halo of every input are staged in shared memory first."
                        : "each column of reads (an input at one offset on the faster axes) is loaded from global "
                          "memory once for the thread's outputs, into registers.") +
              (s_.vector > 1 ? " The " + name_ + " kernel also computes " + std::to_string(s_.vector) +
                                   " consecutive outputs per thread along the fastest axis, each row of its reads one " +
                                   std::to_string(s_.vector) + "-wide vector load (plus scalar loads beyond it) and its "
                                   "outputs one vector store; the launcher takes " + name_ + "_scalar (one output per "
                                   "thread along that axis) where the fastest extent or an alignment does not allow it."
                             : std::string()) +
              " Cells whose reads would leave the grid (the outer " + halo_text() + ") are copied from " +
              a_.centre->name + " (ksol's stencil boundary convention).");
    w.raw(includes(p_));
    if (s_.vector > 1) w.line("#include <cstring>");
    w.line();
    w.line("namespace {");
    w.line("constexpr int kThreads = " + std::to_string(s_.threads) + ";  // threads per block");
    w.line("constexpr int kRegisterBlock = " + std::to_string(s_.register_block) + ";  // outputs per thread");
    if (s_.vector > 1) {
      w.line("constexpr int kVector = " + std::to_string(s_.vector) + ";  // outputs per thread along the fastest axis");
      w.line("constexpr int kVectorThreads = kThreads / kVector;  // threads per block of the vector kernel");
      w.comment("kVector values of one tensor, aligned so that a load or store of one is a single vector access.");
      w.line("template <typename T> struct alignas(sizeof(T) * kVector) ksol_vec { T v[kVector]; };");
      w.comment("One vector store at element e (a multiple of kVector) of base: the value's 32-bit words gathered "
                "into an unsigned vector and stored by vector index. nvcc splits an assignment of the struct, and a "
                "vector store at the address &base[e], into element stores.");
      w.open("template <typename T> __device__ __forceinline__ void ksol_store(T* base, int64_t e, const ksol_vec<T>& x)");
      w.line("const unsigned char* b = reinterpret_cast<const unsigned char*>(&x);");
      w.line("auto word = [&](int i) { unsigned u; memcpy(&u, b + 4 * i, 4); return u; };");
      w.line("if constexpr (sizeof(x) == 16) reinterpret_cast<uint4*>(base)[e / kVector] = make_uint4(word(0), word(1), word(2), word(3));");
      w.line("else if constexpr (sizeof(x) == 8) reinterpret_cast<uint2*>(base)[e / kVector] = make_uint2(word(0), word(1));");
      w.line("else if constexpr (sizeof(x) == 4) reinterpret_cast<unsigned*>(base)[e / kVector] = word(0);");
      w.line("else reinterpret_cast<ksol_vec<T>*>(base)[e / kVector] = x;");
      w.close();
    }
    w.line("constexpr int64_t kMaxBlocks = 65536;  // more tiles loop (grid-stride)");
    if (!shared()) {
      w.comment("An index clamped into [0, hi]: halo loads of boundary threads stay inside the grid.");
      w.line("__device__ __forceinline__ int64_t ksol_clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }");
    }
    return finish_source(w, helpers_, body.text(), [&](Writer& h) { host(h); });
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  Sched s_;
  Names names_;
  Helpers helpers_;
  std::map<std::string, std::string> staged_;
  std::string name_;
  int V_ = 1;  // the kernel being written: outputs per thread along the fastest axis

  bool shared() const { return s_.halo == "shared"; }
  int R() const { return a_.rank; }
  std::string ext(int k) const { return names_[a_.def->extents[k]]; }
  std::string ax(const char* base, int k) const { return std::string(base) + std::to_string(k); }
  // Extent of the staged array along axis k.
  int64_t staged_extent(int k) const { return s_.tile[k] + a_.lo[k] + a_.hi[k]; }

  std::string halo_text() const {
    std::string s;
    for (int k = 0; k < R(); ++k)
      s += (k ? ", " : "") + std::to_string(a_.lo[k]) + "/" + std::to_string(a_.hi[k]);
    return "cells per axis, low/high: " + s;
  }

  // The row-major flat index of global coordinates `g` (+ offsets).
  std::string flat(const std::vector<std::string>& g) const {
    std::string s = g[0];
    for (int k = 1; k < R(); ++k) s = "(" + s + ") * " + ext(k) + " + " + g[k];
    return s;
  }

  std::string params_decl() const { return kernel_params_decl(p_, abi_, names_, false); }
  std::string params_pass() const { return kernel_params_pass(p_, abi_, names_, false); }

  // Block dims along each axis (axis R-1 is threadIdx.x).
  int64_t block_extent(int k) const {
    int64_t e = k == 0 ? s_.tile[0] / s_.register_block : s_.tile[k];
    return k == R() - 1 ? e / V_ : e;
  }
  std::string thread_coord(int k) const {
    const char* c[] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
    return c[R() - 1 - k];
  }

  void kernel(Writer& w, const std::string& kname, int vector) {
    V_ = vector;
    w.open("__global__ void __launch_bounds__(" + std::string(V_ > 1 ? "kVectorThreads" : "kThreads") + ") " + kname + "(" +
           params_decl() + ")");
    if (shared()) {
      for (const Param* in : a_.inputs) {
        std::string dims;
        for (int k = 0; k < R(); ++k) dims += "[" + std::to_string(staged_extent(k)) + "]";
        w.line("__shared__ " + std::string(cuda_type(in->type)) + " " + staged_.at(in->name) + dims + ";");
      }
    }
    // Tiles per axis.
    for (int k = 0; k < R(); ++k)
      w.line("const int64_t " + ax("n", k) + " = (" + ext(k) + " + " + std::to_string(s_.tile[k] - 1) + ") / " +
             std::to_string(s_.tile[k]) + ";");
    std::string tiles = "n0";
    for (int k = 1; k < R(); ++k) tiles += " * " + ax("n", k);
    w.line("const int64_t tiles = " + tiles + ";");
    w.comment("tile is the same for every thread of the block, so all of them reach the barriers.");
    w.open("for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x)");
    // Tile origin per axis (fastest axis from the remainder).
    w.line("int64_t rest = tile;");
    for (int k = R() - 1; k >= 0; --k) {
      w.line("const int64_t " + ax("o", k) + " = (rest % " + ax("n", k) + ") * " + std::to_string(s_.tile[k]) + ";");
      if (k > 0) w.line("rest /= " + ax("n", k) + ";");
    }
    if (!shared()) {
      if (V_ > 1)
        vector_body(w);
      else
        registers_body(w);
      w.close();
      w.close();
      w.line();
      return;
    }
    stage(w);
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < kRegisterBlock; ++k)");
    for (int k = 0; k < R(); ++k) {
      std::string l = k == 0 ? "(int64_t)" + thread_coord(0) + " * kRegisterBlock + k" : "(int64_t)" + thread_coord(k);
      w.line("const int64_t " + ax("l", k) + " = " + l + ";");
      w.line("const int64_t " + ax("g", k) + " = " + ax("o", k) + " + " + ax("l", k) + ";");
    }
    std::string in_grid;
    for (int k = 0; k < R(); ++k) in_grid += (k ? " || " : "") + ax("g", k) + " >= " + ext(k);
    w.line("if (" + in_grid + ") continue;");
    write_cell(w, [&](const Expr& r) {
      std::string s = staged_.at(r.name);
      for (int k = 0; k < R(); ++k) s += "[" + ax("l", k) + " + " + std::to_string(a_.lo[k] + r.indices[k].offset) + "]";
      return s;
    });
    w.close();
    w.line("__syncthreads();  // the staged tile is rewritten for the next tile");
    w.close();
    w.close();
    w.line();
  }

  // The reads of one input at one offset on the axes after the slowest: a column of rows
  // [lo, hi] (offsets on axis 0) that a thread's kRegisterBlock outputs share, loaded once.
  struct Column {
    const Param* input;
    std::vector<int64_t> off;  // offsets on axes 1..R-1
    int64_t lo = 0, hi = 0;    // offsets on axis 0 read at this column
    std::string name;
  };

  std::vector<Column> columns() {
    std::vector<Column> cols;
    for (const Expr* r : reads_in(a_.def->body)) {
      const Param* prm = p_.param(r->name);
      std::vector<int64_t> off;
      for (int k = 1; k < R(); ++k) off.push_back(r->indices[k].offset);
      const int64_t o0 = r->indices[0].offset;
      auto it = std::find_if(cols.begin(), cols.end(), [&](const Column& c) { return c.input == prm && c.off == off; });
      if (it == cols.end()) {
        std::string suffix = "c";
        for (int64_t o : off) suffix += o < 0 ? "m" + std::to_string(-o) : std::to_string(o);
        cols.push_back({prm, off, o0, o0, names_.derived(prm->name, suffix)});
      } else {
        it->lo = std::min(it->lo, o0);
        it->hi = std::max(it->hi, o0);
      }
    }
    return cols;
  }

  // halo = registers: each thread loads, per column of reads, the rows its kRegisterBlock outputs
  // need (kRegisterBlock + the column's axis-0 span) into registers once, clamped into the grid
  // (a clamped value only feeds a boundary cell, which copies the centre instead), then computes
  // its outputs from them.
  // The thread's first cell (g1, g2 on the faster axes; the fastest axis in steps of kVector in the
  // vector kernel) and its first row r0; threads past the grid skip the tile.
  void thread_origin(Writer& w) {
    for (int k = 1; k < R(); ++k) {
      const bool vec = k == R() - 1 && V_ > 1;
      w.line("const int64_t " + ax("g", k) + " = " + ax("o", k) + " + " + (vec ? "(int64_t)" : "") + thread_coord(k) +
             (vec ? " * kVector" : "") + ";");
    }
    std::string off_grid;
    for (int k = 1; k < R(); ++k) off_grid += (k > 1 ? " || " : "") + ax("g", k) + " >= " + ext(k);
    w.line("if (" + off_grid + ") continue;");
    w.line("const int64_t r0 = o0 + (int64_t)" + thread_coord(0) + " * kRegisterBlock;");
    w.line("if (r0 >= " + ext(0) + ") continue;");
  }

  void registers_body(Writer& w) {
    thread_origin(w);
    const std::vector<Column> cols = columns();
    w.comment("Each column of reads loaded once for the thread's kRegisterBlock rows.");
    for (const Column& c : cols) {
      const int64_t n = s_.register_block + c.hi - c.lo;
      std::vector<std::string> idx(R());
      for (int k = 1; k < R(); ++k) {
        const int64_t o = c.off[k - 1];
        idx[k] = o == 0 ? ax("g", k)
                        : "ksol_clamp(" + ax("g", k) + (o < 0 ? " - " : " + ") + std::to_string(o < 0 ? -o : o) + ", " +
                              ext(k) + " - 1)";
      }
      idx[0] = "ksol_clamp(r0 + q" + (c.lo < 0 ? " - " + std::to_string(-c.lo) : c.lo > 0 ? " + " + std::to_string(c.lo) : std::string()) +
               ", " + ext(0) + " - 1)";
      w.line(std::string(cuda_type(c.input->type)) + " " + c.name + "[" + std::to_string(n) + "];");
      w.line("#pragma unroll");
      w.line("for (int q = 0; q < " + std::to_string(n) + "; ++q) " + c.name + "[q] = " + names_[c.input->name] + "[" +
             flat(idx) + "];");
    }
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < kRegisterBlock; ++k)");
    w.line("const int64_t g0 = r0 + k;");
    w.line("if (g0 >= " + ext(0) + ") break;");
    write_cell(w, [&](const Expr& r) -> std::string {
      const Param* prm = p_.param(r.name);
      std::vector<int64_t> off;
      for (int k = 1; k < R(); ++k) off.push_back(r.indices[k].offset);
      for (const Column& c : cols)
        if (c.input == prm && c.off == off) return c.name + "[k + " + std::to_string(r.indices[0].offset - c.lo) + "]";
      throw Refused("internal: no column for '" + format_expr(r) + "'");
    });
    w.close();
  }

  // vector > 1 (the vector kernel, halo = registers): each thread computes kRegisterBlock rows of
  // kVector consecutive cells along the fastest axis. The reads of one input at one offset on the
  // middle axis (3-D) form a plane; per plane and row, the cells [g, g + kVector) are one vector
  // load, and each cell beyond them that an offset reaches a scalar load (clamped into the grid:
  // a clamped value only feeds a boundary cell, which copies the centre instead). The launcher
  // guarantees that the fastest extent is a multiple of kVector and every base is aligned.
  struct Plane {
    const Param* input;
    std::vector<int64_t> mid;           // offsets on axes 1..R-2
    std::vector<std::pair<int64_t, int64_t>> reads;  // (offset on axis 0, offset on the fastest axis)
    bool vec = false;
    int64_t lo = 0, hi = 0;             // rows of the vector part
    std::map<int64_t, std::pair<int64_t, int64_t>> edges;  // cell beyond [0, V) -> its rows
    std::string name;
    std::map<int64_t, std::string> edge_names;
  };

  std::vector<Plane> planes() {
    std::vector<Plane> out;
    const int X = R() - 1;
    for (const Expr* r : reads_in(a_.def->body)) {
      const Param* prm = p_.param(r->name);
      std::vector<int64_t> mid;
      for (int k = 1; k < X; ++k) mid.push_back(r->indices[k].offset);
      auto it = std::find_if(out.begin(), out.end(), [&](const Plane& q) { return q.input == prm && q.mid == mid; });
      if (it == out.end()) {
        std::string suffix = "v";
        for (int64_t o : mid) suffix += o < 0 ? "m" + std::to_string(-o) : std::to_string(o);
        out.push_back({prm, mid, {}, false, 0, 0, {}, names_.derived(prm->name, suffix), {}});
        it = out.end() - 1;
      }
      it->reads.emplace_back(r->indices[0].offset, r->indices[X].offset);
    }
    for (Plane& q : out) {
      auto widen = [](std::pair<int64_t, int64_t>& span, bool& seen, int64_t row) {
        span = seen ? std::make_pair(std::min(span.first, row), std::max(span.second, row)) : std::make_pair(row, row);
        seen = true;
      };
      std::pair<int64_t, int64_t> vspan{0, 0};
      std::map<int64_t, bool> seen;
      for (auto [row, off] : q.reads)
        for (int v = 0; v < V_; ++v) {
          const int64_t x = v + off;
          if (x >= 0 && x < V_) {
            widen(vspan, q.vec, row);
          } else {
            bool& sn = seen[x];
            widen(q.edges[x], sn, row);
          }
        }
      q.lo = vspan.first;
      q.hi = vspan.second;
      std::string mid;
      for (int64_t o : q.mid) mid += o < 0 ? "m" + std::to_string(-o) : std::to_string(o);
      for (const auto& [x, span] : q.edges)
        q.edge_names[x] = names_.derived(q.input->name, "e" + (x < 0 ? "m" + std::to_string(-x) : std::to_string(x)) + mid);
    }
    return out;
  }

  void vector_body(Writer& w) {
    const int X = R() - 1;
    thread_origin(w);
    const std::vector<Plane> ps = planes();
    auto row_index = [&](int64_t lo) {
      return "ksol_clamp(r0 + q" + (lo < 0 ? " - " + std::to_string(-lo) : lo > 0 ? " + " + std::to_string(lo) : std::string()) +
             ", " + ext(0) + " - 1)";
    };
    auto mid_index = [&](const Plane& q, std::vector<std::string>& idx) {
      for (int k = 1; k < X; ++k) {
        const int64_t o = q.mid[k - 1];
        idx[k] = o == 0 ? ax("g", k)
                        : "ksol_clamp(" + ax("g", k) + (o < 0 ? " - " : " + ") + std::to_string(o < 0 ? -o : o) + ", " +
                              ext(k) + " - 1)";
      }
    };
    w.comment("Each plane of reads loaded once for the thread's kRegisterBlock rows: one vector per row, and scalar "
              "loads for the cells the offsets reach beyond it.");
    for (const Plane& q : ps) {
      const std::string t = cuda_type(q.input->type);
      std::vector<std::string> idx(R());
      mid_index(q, idx);
      if (q.vec) {
        const int64_t n = s_.register_block + q.hi - q.lo;
        idx[0] = row_index(q.lo);
        idx[X] = ax("g", X);
        w.line("ksol_vec<" + t + "> " + q.name + "[" + std::to_string(n) + "];");
        w.line("#pragma unroll");
        w.line("for (int q = 0; q < " + std::to_string(n) + "; ++q) " + q.name + "[q] = *reinterpret_cast<const ksol_vec<" + t +
               ">*>(&" + names_[q.input->name] + "[" + flat(idx) + "]);");
      }
      for (const auto& [x, span] : q.edges) {
        const int64_t n = s_.register_block + span.second - span.first;
        idx[0] = row_index(span.first);
        idx[X] = "ksol_clamp(" + ax("g", X) + (x < 0 ? " - " : " + ") + std::to_string(x < 0 ? -x : x) + ", " + ext(X) + " - 1)";
        const std::string& nm = q.edge_names.at(x);
        w.line(t + " " + nm + "[" + std::to_string(n) + "];");
        w.line("#pragma unroll");
        w.line("for (int q = 0; q < " + std::to_string(n) + "; ++q) " + nm + "[q] = " + names_[q.input->name] + "[" + flat(idx) + "];");
      }
    }
    const Param& out = p_.outputs.front();
    const std::string ot = cuda_type(out.type);
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < kRegisterBlock; ++k)");
    w.line("const int64_t g0 = r0 + k;");
    w.line("if (g0 >= " + ext(0) + ") break;");
    std::vector<std::string> g;
    for (int k = 0; k < R(); ++k) g.push_back(ax("g", k));
    w.line("const int64_t e = " + flat(g) + ";");
    w.line("ksol_vec<" + ot + "> ov;");
    for (int v = 0; v < V_; ++v) {
      std::string inside;
      for (int k = 0; k < R(); ++k) {
        std::string c = ax("g", k) + (k == X && v > 0 ? " + " + std::to_string(v) : std::string());
        inside += std::string(k ? " && " : "") + c + " >= " + std::to_string(a_.lo[k]) + " && " + c + " < " + ext(k) + " - " +
                  std::to_string(a_.hi[k]);
      }
      ExprEmitter em;
      em.helpers = &helpers_;
      em.dim = [&](const std::string& d) { return names_[d]; };
      em.read = [&](const Expr& r) -> std::string {
        const Param* prm = p_.param(r.name);
        std::vector<int64_t> mid;
        for (int k = 1; k < X; ++k) mid.push_back(r.indices[k].offset);
        const int64_t row = r.indices[0].offset, x = v + r.indices[X].offset;
        for (const Plane& q : ps) {
          if (q.input != prm || q.mid != mid) continue;
          if (x >= 0 && x < V_) return q.name + "[k + " + std::to_string(row - q.lo) + "].v[" + std::to_string(x) + "]";
          return q.edge_names.at(x) + "[k + " + std::to_string(row - q.edges.at(x).first) + "]";
        }
        throw Refused("internal: no plane for '" + format_expr(r) + "'");
      };
      const std::string code = em(a_.def->body);
      const std::string copy = cast_code(names_[a_.centre->name] + "[e + " + std::to_string(v) + "]", a_.centre->type, out.type);
      w.line("ov.v[" + std::to_string(v) + "] = (" + inside + ") ? " + code + " : " + copy + ";");
    }
    w.line("ksol_store(" + names_[out.name] + ", e, ov);");
    w.close();
  }

  // One output cell at the coordinates g0, g1 (, g2): its flat index e, and the definition where
  // every read is in the grid (`read` gives a read's value), else the centre input's value.
  void write_cell(Writer& w, const std::function<std::string(const Expr&)>& read) {
    std::string inside;
    std::vector<std::string> g;
    for (int k = 0; k < R(); ++k) {
      inside += std::string(k ? " && " : "") + ax("g", k) + " >= " + std::to_string(a_.lo[k]) + " && " + ax("g", k) +
                " < " + ext(k) + " - " + std::to_string(a_.hi[k]);
      g.push_back(ax("g", k));
    }
    w.line("const int64_t e = " + flat(g) + ";");
    w.line("const bool inside = " + inside + ";");
    ExprEmitter em;
    em.helpers = &helpers_;
    em.dim = [&](const std::string& d) { return names_[d]; };
    em.read = read;
    const Param& out = p_.outputs.front();
    const std::string code = em(a_.def->body);
    const std::string copy = cast_code(names_[a_.centre->name] + "[e]", a_.centre->type, out.type);
    w.line(names_[out.name] + "[e] = inside ? " + code + " : " + copy + ";");
  }

  void stage(Writer& w) {
    int64_t cells = 1;
    for (int k = 0; k < R(); ++k) cells *= staged_extent(k);
    std::string tid = thread_coord(R() - 1);
    if (R() >= 2) tid = "(int)(" + thread_coord(R() - 1) + " + " + std::to_string(block_extent(R() - 1)) + " * (" +
                        thread_coord(R() - 2) + (R() == 3 ? " + " + std::to_string(block_extent(1)) + " * " + thread_coord(0) : std::string("")) + "))";
    w.comment("Stage the tile and its halo of every input (cells outside the grid are not loaded: only boundary "
              "cells would read them, and those copy the centre instead).");
    w.open("for (int tid = " + tid + "; tid < " + std::to_string(cells) + "; tid += kThreads)");
    w.line("int rest = tid;");
    for (int k = R() - 1; k >= 0; --k) {
      w.line("const int " + ax("s", k) + " = rest % " + std::to_string(staged_extent(k)) + ";");
      if (k > 0) w.line("rest /= " + std::to_string(staged_extent(k)) + ";");
      w.line("const int64_t " + ax("g", k) + " = " + ax("o", k) + " + " + ax("s", k) + " - " + std::to_string(a_.lo[k]) +
             ";");
    }
    std::string out_of;
    std::vector<std::string> g;
    for (int k = 0; k < R(); ++k) {
      out_of += (k ? " || " : "") + ax("g", k) + " < 0 || " + ax("g", k) + " >= " + ext(k);
      g.push_back(ax("g", k));
    }
    w.line("if (" + out_of + ") continue;");
    for (const Param* in : a_.inputs) {
      std::string s = staged_.at(in->name);
      for (int k = 0; k < R(); ++k) s += "[" + ax("s", k) + "]";
      w.line(s + " = " + names_[in->name] + "[" + flat(g) + "];");
    }
    w.close();
    w.line("__syncthreads();");
  }

  void host(Writer& w) {
    open_ksol_run(w, p_, abi_, names_);
    std::string zero;
    for (int k = 0; k < R(); ++k) zero += (k ? " || " : "") + ext(k) + " == 0";
    w.line("if (" + zero + ") return 0;");
    std::string tiles;
    for (int k = 0; k < R(); ++k)
      tiles += (k ? " * " : "") + std::string("((") + ext(k) + " + " + std::to_string(s_.tile[k] - 1) + ") / " +
               std::to_string(s_.tile[k]) + ")";
    w.line("const int64_t tiles = " + tiles + ";");
    w.line("const int64_t blocks = std::min<int64_t>(tiles, kMaxBlocks);");
    auto launch = [&](const std::string& kname, int vector) {
      V_ = vector;
      std::string block;
      for (int k = R() - 1; k >= 0; --k) block += (k == R() - 1 ? "" : ", ") + std::to_string(block_extent(k));
      w.line(kname + "<<<(unsigned)blocks, dim3(" + block + "), 0, stream>>>(" + params_pass() + ");");
    };
    if (s_.vector > 1) {
      std::vector<const Param*> tensors = a_.inputs;
      tensors.push_back(&p_.outputs.front());
      std::string ok = ext(R() - 1) + " % kVector == 0";
      for (const Param* t : tensors)
        ok += " && reinterpret_cast<uintptr_t>(" + names_[t->name] + ") % sizeof(ksol_vec<" + cuda_type(t->type) + ">) == 0";
      w.comment("Vector loads and stores need whole vectors per row and aligned bases; otherwise the scalar kernel.");
      w.open("if (" + ok + ")");
      launch(name_, s_.vector);
      w.close();
      w.open("else");
      launch(name_ + "_scalar", 1);
      w.close();
    } else {
      launch(name_, 1);
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

}  // namespace

const FamilyGenerator& stencil_family() {
  static const FamilyGenerator f{
      "stencil",
      {
          {"tile", "[16, 64]", {"[8, 32]", "[16, 32]", "[16, 64]", "[32, 32]", "[8, 128]", "[32, 64]", "[16, 256]", "[4, 8, 32]", "[8, 8, 32]"}},
          {"halo", "shared", {"shared", "registers"}},
          {"register_block", "1", {"1", "2", "4", "8"}},
          {"vector", "1", {"1", "2", "4"}},
          {"temporal", "1", {"1", "2"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace ksol::codegen::detail
