// The elementwise family: definitions without reductions over one index space (the outputs'),
// inputs of lower rank broadcast along the missing indices. The space is walked as one flat
// range; a thread takes `items_per_thread` groups of `vector` consecutive elements per step of a
// grid-stride loop (the grid covers the space in one step up to the grid's x limit: a capped grid
// that loops streams slower), with one aligned access per tensor and group where the layout
// allows, and a scalar loop for what is left.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/common.h"

namespace ksol::codegen::detail {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::Param;
using dsl::Type;

const std::vector<std::string> kInternal = {"kThreads", "kVector", "kItems", "kUnroll", "kMaxBlocks", "e0", "j", "rows", "grid",
                                            "group", "flat", "item", "base", "step", "groups", "total",
                                            "vector_end", "packs_ok", "pack_aligned", "blocks", "work", "dv", "kFast",
                                            "KsolDiv", "KsolDivs", "ksol_div", "ksol_mod", "ksol_divider", "kTA", "kTI",
                                            "kR", "kP", "I", "q", "fits", "ta", "ti", "tile_rows", "kIntMax"};

struct Knobs4 {
  int threads = 256, vector = 1, items = 1, unroll = 1;
  bool transpose = false;  // the permuted read through tiles in shared memory
};

// One distinct read of a parameter: where its indices sit in the space, and how a group of
// kVec consecutive elements (which differ only in the innermost index) reads it.
struct Load {
  const Param* param = nullptr;
  std::vector<int> axes;  // the space axis of each of the parameter's indices
  enum class Kind {
    pack,       // the innermost index is the parameter's last: kVec consecutive values
    broadcast,  // no innermost index: one value for the whole group
    gather,     // the innermost index elsewhere: kVec strided values
  } kind = Kind::pack;
  std::string local;  // the pack or value loaded before the per-element loop
};

struct Analysis {
  std::vector<std::string> axis_dims;  // extent of each axis, outermost first
  std::vector<std::string> axis_vars;  // the first output's index names
  std::map<std::string, std::vector<int>> def_axes;
  std::vector<const Definition*> live;  // definitions the outputs need, in source order
  std::vector<Load> loads;
  std::set<std::string> read_defs;  // definitions some other definition reads
  bool all_flat = true;             // every read walks the space in its own layout
  int widest_access = 0;            // bytes of one element of the widest packed tensor
  // The one read of the whole space through a permutation whose contiguous index is not the
  // innermost (a channels-last tensor read in [N, C, H, W] order): its load and the space axis
  // its contiguous index takes; -1 where there is none (or more than one).
  int transpose_load = -1, transpose_axis = -1;
};

int find_load(const Analysis& a, const Param* prm, const std::vector<int>& axes) {
  for (size_t i = 0; i < a.loads.size(); ++i)
    if (a.loads[i].param == prm && a.loads[i].axes == axes) return static_cast<int>(i);
  return -1;
}

std::vector<int> identity(size_t n) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i);
  return v;
}

class Analyser {
 public:
  explicit Analyser(const dsl::Program& p) : p_(p) {}

  Analysis run() {
    if (p_.outputs.empty()) throw Refused("the program has no outputs");
    const Param& first = p_.outputs.front();
    a_.axis_dims = first.extents;
    for (const Param& out : p_.outputs)
      if (out.extents != first.extents)
        throw Refused("output '" + out.name + "' ranges over " + list(out.extents) + ", not over the index space " +
                      list(first.extents) + " of '" + first.name + "'; elementwise outputs share one index space");
    for (const Definition& d : p_.defs)
      if (d.reduce != dsl::ReduceOp::none)
        throw Refused("'" + d.name + "' is a " + dsl::reduce_name(d.reduce) + "; the elementwise family has no reductions");
    const Definition* first_def = p_.def(first.name);
    a_.axis_vars = first_def->indices;
    for (const Definition& d : p_.defs)
      if (d.is_output) visit(d, identity(a_.axis_dims.size()));
    for (const Definition& d : p_.defs)
      if (a_.def_axes.count(d.name)) a_.live.push_back(&d);
    const int inner = static_cast<int>(a_.axis_dims.size()) - 1;
    for (Load& l : a_.loads) {
      int uses = static_cast<int>(std::count(l.axes.begin(), l.axes.end(), inner));
      if (uses == 0)
        l.kind = Load::Kind::broadcast;
      else if (uses == 1 && l.axes.back() == inner)
        l.kind = Load::Kind::pack;
      else
        l.kind = Load::Kind::gather;
      if (l.axes != identity(a_.axis_dims.size())) a_.all_flat = false;
      if (l.kind == Load::Kind::pack) a_.widest_access = std::max(a_.widest_access, type_bytes(l.param->type));
    }
    for (const Param& out : p_.outputs) a_.widest_access = std::max(a_.widest_access, type_bytes(out.type));
    int transposed = 0;
    for (size_t i = 0; i < a_.loads.size(); ++i) {
      const Load& l = a_.loads[i];
      std::vector<int> sorted = l.axes;
      std::sort(sorted.begin(), sorted.end());
      if (l.kind != Load::Kind::gather || sorted != identity(a_.axis_dims.size()) || l.axes.back() == inner) continue;
      ++transposed;
      a_.transpose_load = static_cast<int>(i);
      a_.transpose_axis = l.axes.back();
    }
    if (transposed != 1) a_.transpose_load = a_.transpose_axis = -1;
    for (const Definition* d : a_.live) check_emittable(d->body);
    return a_;
  }

 private:
  const dsl::Program& p_;
  Analysis a_;

  static std::string list(const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s + "]";
  }

  // Gives definition d the space axes `axes` (those of its first read) and walks its body.
  void visit(const Definition& d, const std::vector<int>& axes) {
    if (auto it = a_.def_axes.find(d.name); it != a_.def_axes.end()) {
      if (it->second != axes)
        throw Refused("'" + d.name + "' is read at two different positions of the index space; elementwise " +
                      "computes each definition at one position per element");
      return;
    }
    a_.def_axes[d.name] = axes;
    std::map<std::string, int> env;
    for (size_t k = 0; k < d.indices.size(); ++k) env[d.indices[k]] = axes[k];
    for (const Expr* r : reads_in(d.body)) {
      std::vector<int> read_axes;
      for (const dsl::IndexExpr& ix : r->indices) {
        if (ix.offset != 0)
          throw Refused("'" + r->name + "' is read at an offset index (a stencil); the elementwise family reads no offsets");
        read_axes.push_back(env.at(ix.var));
      }
      if (const Definition* t = p_.def(r->name)) {
        a_.read_defs.insert(t->name);
        visit(*t, read_axes);
        continue;
      }
      const Param* prm = p_.param(r->name);
      if (find_load(a_, prm, read_axes) < 0) a_.loads.push_back({prm, read_axes, Load::Kind::pack, ""});
    }
  }
};

Knobs4 read_knobs(const dsl::Program& p, const Analysis& a) {
  Knobs k(p, elementwise_family());
  Knobs4 s;
  const int64_t threads = k.threads();
  s.threads = static_cast<int>(threads);
  s.vector = static_cast<int>(k.one_of("vector", {1, 2, 4, 8}));
  s.items = static_cast<int>(k.one_of("items_per_thread", {1, 2, 4, 8}));
  s.unroll = static_cast<int>(k.one_of("unroll", {1, 2, 4, 8}));
  if (s.vector * a.widest_access > 16)
    throw Refused("vector = " + std::to_string(s.vector) + " moves " + std::to_string(s.vector * a.widest_access) +
                  " bytes per access of a " + std::to_string(a.widest_access) +
                  "-byte type; one access is at most 16 bytes (a 128-bit load)");
  // transpose: a read of the whole space through a permutation (input[n, h, w, c] in an [N, C, H, W]
  // space) goes through tiles in shared memory (32 or 8 wide along its two tiled axes), read along
  // its contiguous index and the outputs written along theirs; 256 threads, one element per thread
  // and step (auto: where such a read exists and the other knobs are at 1).
  const std::string tr = k.one_of("transpose", std::vector<std::string>{"auto", "off", "on"});
  const bool plain = s.vector == 1 && s.items == 1 && s.unroll == 1 && s.threads == 256;
  if (tr == "on" && a.transpose_load < 0)
    throw Refused("transpose = on: no read of the whole index space through a permutation whose contiguous index is not "
                  "the innermost");
  if (tr == "on" && !plain)
    throw Refused("transpose = on: its tiles take 256 threads and one element per thread and step (leave threads 256, "
                  "vector, items_per_thread and unroll 1)");
  s.transpose = a.transpose_load >= 0 && (tr == "on" || (tr == "auto" && plain));
  return s;
}

void check(const dsl::Program& p, const Binding& b) {
  resolve_binding(p, b);
  Analysis a = Analyser(p).run();
  read_knobs(p, a);
}

std::string name_of(const Knobs4& s, const dsl::Program& p) {
  std::string n = name_stem(p, "elementwise") + "_t" + std::to_string(s.threads) + "_v" + std::to_string(s.vector) +
                  "_i" + std::to_string(s.items);
  if (s.unroll > 1) n += "_u" + std::to_string(s.unroll);
  if (s.transpose) n += "_tt";
  return n;
}

std::string kernel_name_of(const dsl::Program& p) {
  Analysis a = Analyser(p).run();
  return name_of(read_knobs(p, a), p);
}

class Generator {
 public:
  Generator(const dsl::Program& p, const Binding& b)
      : p_(p), abi_(resolve_binding(p, b)), a_(Analyser(p).run()), s_(read_knobs(p, a_)), names_(kInternal) {
    for (const std::string& d : p_.dims) names_.add(d);
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list) names_.add(prm.name);
    for (const Definition& d : p_.defs) names_.add(d.name);
    name_ = name_of(s_, p_);
  }

  std::string run() {
    Writer body;
    if (s_.transpose) {
      transpose_kernel(body);
    } else {
      device_function(body);
      kernel(body);
    }
    Writer w;
    w.comment(name_ + ": generated by ksol from the DSL program '" + p_.name + "' (elementwise family).");
    for (const Definition* d : a_.live) w.line("//   " + format_definition(*d));
    if (s_.transpose)
      w.comment("The index space " + list(a_.axis_dims) + " is walked in tiles of its axes " +
                a_.axis_vars[a_.transpose_axis] + " and " + a_.axis_vars.back() + " (32 or 8 wide) by rows of the others: each tile of '" +
                a_.loads[a_.transpose_load].param->name + "' is read along its contiguous index into shared memory, " +
                "then the outputs are computed and written along the innermost index, 256 threads a block.");
    else
    w.comment("The index space " + list(a_.axis_dims) + " is walked as one flat range. Each thread takes " +
              std::to_string(s_.items) + " group(s) of " + std::to_string(s_.vector) +
              " consecutive element(s) per step of a grid-stride loop, " + std::to_string(s_.threads) +
              " threads per block" + (s_.vector > 1 ? "; a group moves each tensor in one aligned access, and " +
              std::string("the elements that packs cannot cover go through a scalar loop.") : "."));
    w.raw(includes(p_));
    w.line();
    w.line("namespace {");
    w.line("constexpr int kThreads = " + std::to_string(s_.threads) + ";  // threads per block");
    w.line("constexpr int kVector = " + std::to_string(s_.vector) + ";  // elements per group");
    w.line("constexpr int kItems = " + std::to_string(s_.items) + ";  // groups per thread and step");
    if (s_.unroll > 1) w.line("constexpr int kUnroll = " + std::to_string(s_.unroll) + ";  // steps unrolled");
    w.line("constexpr int64_t kMaxBlocks = 2147483647;  // the grid's x limit: one step per thread below it");
    w.line();
    w.raw(pack_source());
    if (s_.transpose) {
      w.line("#ifndef KSOL_TRANSPOSE_INDEX32_MAX");
      w.line("#define KSOL_TRANSPOSE_INDEX32_MAX (2147483647LL - (1LL << 22))  // the largest space or tensor on 32-bit indices");
      w.line("#endif");
    }
    if (!divisors_.empty()) index_divider_source(w, divisors_.list().size());
    return finish_source(w, helpers_, body.text(), [&](Writer& h) { host(h); });
  }

 private:
  const dsl::Program& p_;
  AbiLayout abi_;
  Analysis a_;
  Knobs4 s_;
  Names names_;
  Helpers helpers_;
  std::string name_;
  // The products of extents that indices are divided by.
  IndexDivisors divisors_;

  // An element's index n divided by, or taken modulo, the product of extents d: through d's divider
  // in dv, so that a space under 2^31 elements (kFast) divides by a multiply and a shift.
  std::string div_by(const std::string& n, const std::string& d) { return divisors_.div(n, d, "kFast"); }
  std::string mod_by(const std::string& n, const std::string& d) { return divisors_.mod(n, d, "kFast"); }


  static std::string list(const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s + "]";
  }

  int rank() const { return static_cast<int>(a_.axis_dims.size()); }
  const std::string& dim(int axis) const { return names_[a_.axis_dims[axis]]; }

  // Product of the extents of axes [from, rank), as C++ ("1" when empty).
  std::string extent_product(const std::vector<std::string>& dims) const {
    if (dims.empty()) return "1";
    std::string s;
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? " * " : "") + names_[dims[i]];
    return dims.size() > 1 ? "(" + s + ")" : s;
  }

  std::string params_decl() const { return kernel_params_decl(p_, abi_, names_, true); }
  std::string params_pass() const { return kernel_params_pass(p_, abi_, names_, true); }

  // Whether a read is a suffix of the space's axes (an input broadcast along leading indices),
  // a prefix (broadcast along trailing indices) or neither (it needs the element's indices).
  enum class Layout { flat, suffix, prefix, general };
  Layout layout_of(const Load& l) const {
    const int n = rank();
    const int k = static_cast<int>(l.axes.size());
    bool suffix = true, prefix = true;
    for (int i = 0; i < k; ++i) {
      suffix = suffix && l.axes[i] == n - k + i;
      prefix = prefix && l.axes[i] == i;
    }
    if (suffix && k == n) return Layout::flat;
    if (suffix) return Layout::suffix;
    if (prefix) return Layout::prefix;
    return Layout::general;
  }

  // The flat offset of a parameter's element at the group's first element e0; `coords` names
  // the index variables of e0 (needed by general reads only).
  std::string offset_of(const Load& l, const std::map<int, std::string>& coords) {
    const std::vector<std::string>& ext = l.param->extents;
    const int k = static_cast<int>(l.axes.size());
    switch (layout_of(l)) {
      case Layout::flat: return "e0";
      case Layout::suffix: return mod_by("e0", extent_product(ext));
      case Layout::prefix:
        return div_by("e0", extent_product(std::vector<std::string>(a_.axis_dims.begin() + k, a_.axis_dims.end())));
      case Layout::general: break;
    }
    std::string s;
    for (int i = 0; i < k; ++i) {
      std::vector<std::string> later(ext.begin() + i + 1, ext.end());
      std::string term = coords.at(l.axes[i]);
      if (!later.empty()) term += " * " + extent_product(later);
      s += (i ? " + " : "") + term;
    }
    return s;
  }

  // The stride between consecutive innermost indices in a gathered parameter.
  std::string inner_stride(const Load& l) const {
    const int inner = rank() - 1;
    std::string s;
    for (size_t i = 0; i < l.axes.size(); ++i) {
      if (l.axes[i] != inner) continue;
      std::vector<std::string> later(l.param->extents.begin() + i + 1, l.param->extents.end());
      s += (s.empty() ? "" : " + ") + extent_product(later);
    }
    return s;
  }

  std::string value_name(const Definition& d) {
    return d.is_output ? names_.derived(d.name, "value") : names_[d.name];
  }

  // Each live definition at its own position (the reads' axes name which load it is), as
  // statements of w: `index` gives a space axis's index value, `load` load i's value, `out` an
  // output's element to assign.
  // `dim`, where given, writes a dim's value (the tile kernel's dims may be 32-bit: it widens them).
  void definitions(Writer& w, const std::function<std::string(int)>& index, const std::function<std::string(int)>& load,
                   const std::function<std::string(const std::string&)>& out,
                   const std::function<std::string(const std::string&)>& dim = {}) {
    std::map<std::string, std::string> def_value;
    ExprEmitter em;
    em.helpers = &helpers_;
    em.dim = dim ? dim : [&](const std::string& d) { return names_[d]; };
    const Definition* current = nullptr;
    em.index = [&](const std::string& v) -> std::string {
      const std::vector<int>& axes = a_.def_axes.at(current->name);
      for (size_t k = 0; k < current->indices.size(); ++k)
        if (current->indices[k] == v) return index(axes[k]);
      throw Refused("the index '" + v + "' used as a value is not one of " + current->name + "'s");
    };
    em.read = [&](const Expr& r) -> std::string {
      if (p_.def(r.name)) return def_value.at(r.name);
      std::map<std::string, int> env;
      const std::vector<int>& axes = a_.def_axes.at(current->name);
      for (size_t k = 0; k < current->indices.size(); ++k) env[current->indices[k]] = axes[k];
      std::vector<int> read_axes;
      for (const dsl::IndexExpr& ix : r.indices) read_axes.push_back(env.at(ix.var));
      return load(find_load(a_, p_.param(r.name), read_axes));
    };
    for (const Definition* d : a_.live) {
      current = d;
      std::string code = em(d->body);
      if (d->is_output && !a_.read_defs.count(d->name)) {
        w.line(out(d->name) + " = " + code + ";");
        continue;
      }
      std::string local = value_name(*d);
      def_value[d->name] = local;
      w.line("const " + std::string(cuda_type(d->type)) + " " + local + " = " + code + ";");
      if (d->is_output) w.line(out(d->name) + " = " + local + ";");
    }
  }

  void device_function(Writer& out) {
    if (a_.all_flat)
      out.comment("Computes the kVec consecutive elements from flat index e0 on (every tensor is read in the "
                  "space's own layout, so they may straddle rows).");
    else
      out.comment("Computes the kVec consecutive elements from flat index e0 on; when kVec > 1 they lie in one "
                  "innermost row, so they share every index but the innermost.");
    // The body first (one level in), since it decides whether indices are divided (the dividers dv).
    Writer w = out.nested(1);
    // The indices of e0, for reads that are neither the space's layout nor a broadcast of it.
    std::map<int, std::string> coords;
    for (const Load& l : a_.loads)
      if (layout_of(l) == Layout::general)
        for (int axis : l.axes) coords[axis];
    if (!coords.empty()) w.comment("Indices of element e0.");
    for (auto& [axis, id] : coords) {
      std::vector<std::string> later(a_.axis_dims.begin() + axis + 1, a_.axis_dims.end());
      std::string v = later.empty() ? "e0" : div_by("e0", extent_product(later));
      if (axis > 0) v = mod_by(v, dim(axis));
      id = names_.fresh(a_.axis_vars[axis] + "_at");
      w.line("const int64_t " + id + " = " + v + ";");
    }
    std::vector<std::string> offsets;
    for (const Load& l : a_.loads) offsets.push_back(offset_of(l, coords));
    std::map<std::string, std::string> value_of_load;  // load index -> expression per element
    for (size_t i = 0; i < a_.loads.size(); ++i) {
      Load& l = a_.loads[i];
      const std::string& pn = names_[l.param->name];
      const std::string t = cuda_type(l.param->type);
      switch (l.kind) {
        case Load::Kind::pack:
          l.local = names_.fresh(pn + "_pack");
          w.line("const Pack<" + t + ", kVec> " + l.local + " = load_pack<kVec>(" + pn + " + " + offsets[i] + ");");
          value_of_load[std::to_string(i)] = l.local + ".v[j]";
          break;
        case Load::Kind::broadcast:
          l.local = names_.fresh(pn + "_value");
          w.line("const " + t + " " + l.local + " = " + pn + "[" + offsets[i] + "];");
          value_of_load[std::to_string(i)] = l.local;
          break;
        case Load::Kind::gather:
          value_of_load[std::to_string(i)] = pn + "[" + offsets[i] + " + j * " + inner_stride(l) + "]";
          break;
      }
    }
    std::map<std::string, std::string> out_pack;
    for (const Param& out : p_.outputs) {
      out_pack[out.name] = names_.fresh(names_[out.name] + "_pack");
      w.line("Pack<" + std::string(cuda_type(out.type)) + ", kVec> " + out_pack[out.name] + ";");
    }
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kVec; ++j)");
    // An index's value at element e0 + j (a pack may straddle rows, so each element has its own).
    definitions(
        w,
        [&](int axis) {
          std::vector<std::string> later(a_.axis_dims.begin() + axis + 1, a_.axis_dims.end());
          std::string code = later.empty() ? "(e0 + j)" : div_by("(e0 + j)", extent_product(later));
          return axis > 0 ? mod_by(code, dim(axis)) : code;
        },
        [&](int load) { return value_of_load.at(std::to_string(load)); },
        [&](const std::string& o) { return out_pack[o] + ".v[j]"; });
    w.close();
    for (const Param& o : p_.outputs) w.line("store_pack(" + names_[o.name] + " + e0, " + out_pack[o.name] + ");");
    const bool divides = !divisors_.empty();
    out.line(divides ? "template <int kVec, bool kFast>" : "template <int kVec>");
    out.open("__device__ __forceinline__ void " + name_ + "_elements(" + params_decl() +
             (divides ? "const KsolDivs& dv, " : "") + "int64_t e0)");
    out.raw(w.text());
    out.close();
    out.line();
  }

  void kernel(Writer& w) {
    const bool divides = !divisors_.empty();
    std::string decl = params_decl() + (divides ? "const KsolDivs dv, " : "");
    std::string pass = params_pass() + (divides ? "dv, " : "");
    const std::string fast = divides ? ", kFast" : "";
    const bool tail = s_.vector > 1;
    if (divides) w.line("template <bool kFast>");
    w.open("__global__ void __launch_bounds__(kThreads) " + name_ + "(" + decl +
           (tail ? "int64_t vector_end, int64_t total)" : "int64_t total)"));
    if (tail) {
      w.comment("Groups of kVector elements cover [0, vector_end); the scalar loop after them covers the rest.");
      w.line("const int64_t groups = vector_end / kVector;");
    } else {
      w.line("const int64_t groups = total;");
    }
    w.line("const int64_t step = (int64_t)gridDim.x * kThreads * kItems;");
    if (s_.unroll > 1) w.line("#pragma unroll kUnroll");
    w.open("for (int64_t base = (int64_t)blockIdx.x * kThreads * kItems; base < groups; base += step)");
    auto items = [&](bool guarded) {
      w.line("#pragma unroll");
      w.open("for (int item = 0; item < kItems; ++item)");
      w.line("const int64_t group = base + item * kThreads + threadIdx.x;");
      w.line(std::string(guarded ? "if (group < groups) " : "") + name_ + "_elements<kVector" + fast + ">(" + pass + "group * kVector);");
      w.close();
    };
    if (s_.items > 1) {
      w.comment("A whole step has no bounds checks, so every item's loads may issue before the first store "
                "(the pointers are __restrict__): more bytes in flight per thread.");
      w.open("if (base + (int64_t)kItems * kThreads <= groups)");
      items(false);
      w.close();
      w.open("else");
      items(true);
      w.close();
    } else {
      items(true);
    }
    w.close();
    if (tail) {
      w.line("for (int64_t flat = vector_end + (int64_t)blockIdx.x * kThreads + threadIdx.x; flat < total;");
      w.open("     flat += (int64_t)gridDim.x * kThreads)");
      w.line(name_ + "_elements<1" + fast + ">(" + pass + "flat);");
      w.close();
    }
    w.close();
  }

  // The offset of a parameter's element from the element's indices (coords: a variable per axis).
  std::string coord_offset(const Load& l, const std::map<int, std::string>& coords) const {
    std::string s;
    for (size_t i = 0; i < l.axes.size(); ++i) {
      std::vector<std::string> later(l.param->extents.begin() + i + 1, l.param->extents.end());
      std::string term = coords.at(l.axes[i]);
      if (!later.empty()) term += " * " + extent_product(later);
      s += (i ? " + " : "") + term;
    }
    return s.empty() ? "0" : s;
  }

  // transpose: tiles of kTA positions of the permuted read's contiguous axis by kTI of the innermost
  // one by kR = 1024 / (kTA * kTI) rows of the other axes (kTA, kTI each 32, or 8 where that axis's
  // extent is at most 8, so that a short axis does not leave most lanes idle). Grid x walks the
  // innermost axis's tiles, y the read's axis's and z the rows (y and z loop, so any extent fits).
  // Per tile: the read's values into shared memory along its contiguous index, then each element
  // computed from the tile and its other reads and written along the innermost index. Indices are
  // of type I (int where every tensor and the space stay under 2^31, with the rows' divisions by
  // multiply and shift, kFast), int64_t otherwise.
  void transpose_kernel(Writer& w) {
    const int n = rank(), inner = n - 1, ax = a_.transpose_axis;
    const Load& t = a_.loads[a_.transpose_load];
    std::vector<int> others;
    for (int i = 0; i < n; ++i)
      if (i != inner && i != ax) others.push_back(i);
    std::map<int, std::string> coords, step_coords;
    for (int i = 0; i < n; ++i) coords[i] = names_.fresh(a_.axis_vars[i] + "_at");
    for (int axis : others) step_coords[axis] = names_.fresh(a_.axis_vars[axis] + "_of");
    const std::string tile = names_.fresh("ksol_tile"), rest = names_.fresh("ksol_rest");
    const std::string s = names_.fresh("ksol_s"), e = names_.fresh("ksol_e"), r = names_.fresh("ksol_r");
    const std::string a = names_.fresh("ksol_a"), i = names_.fresh("ksol_i");
    const std::string a0 = names_.fresh("ksol_a0"), i0 = names_.fresh("ksol_i0"), row0 = names_.fresh("ksol_row0");
    const std::string rows = names_.fresh("ksol_rows");
    const std::string tt = cuda_type(t.param->type);
    // The rows' divisions (the other axes, innermost first): dv.v[k] divides by its extent.
    std::vector<std::string> row_div;
    for (size_t j = others.size(); j-- > 1;) row_div.push_back(div_by(rest, dim(others[j])));
    const bool divides = !divisors_.empty();
    w.line("template <int kTA, int kTI, typename I, bool kFast>");
    w.open("__global__ void __launch_bounds__(256) " + name_ + "(" + kernel_params_decl(p_, abi_, names_, true, "I") +
           (divides ? "const KsolDivs dv, " : "") + "I " + rows + ")");
    w.line("constexpr int kR = 1024 / (kTA * kTI);  // rows a tile spans");
    w.line("constexpr int kP = kTA + 32 / kTI;  // a tile row's stride: few bank conflicts in either phase");
    w.line("__shared__ " + tt + " " + tile + "[kR * kTI * kP];");
    w.open("for (I " + a0 + " = (I)blockIdx.y * kTA; " + a0 + " < " + dim(ax) + "; " + a0 + " += (I)gridDim.y * kTA)");
    w.open("for (I " + row0 + " = (I)blockIdx.z * kR; " + row0 + " < " + rows + "; " + row0 + " += (I)gridDim.z * kR)");
    w.line("const I " + i0 + " = (I)blockIdx.x * kTI;");
    if (!others.empty()) {
      w.comment("The other axes' indices of each step's row (a step's row is the same in both phases).");
      std::string decl;
      for (int axis : others) decl += (decl.empty() ? "" : ", ") + step_coords[axis] + "[4]";
      w.line("I " + decl + ";");
      w.line("#pragma unroll");
      w.open("for (int " + s + " = 0; " + s + " < 4; ++" + s + ")");
      w.line("I " + rest + " = " + row0 + " + (kR == 1 ? 0 : (int)(threadIdx.x + 256 * " + s + ") / (kTA * kTI));");
      size_t k = 0;
      for (size_t j = others.size(); j-- > 0;) {
        const int axis = others[j];
        if (j == 0) {
          w.line(step_coords[axis] + "[" + s + "] = " + rest + ";");
        } else {
          const std::string q = "(I)" + row_div[k++];
          w.line("{ const I q = " + q + "; " + step_coords[axis] + "[" + s + "] = " + rest + " - q * " + dim(axis) + "; " +
                 rest + " = q; }");
        }
      }
      w.close();
    }
    auto bind_step = [&](Writer& x) {
      for (int axis : others) x.line("const I " + coords[axis] + " = " + step_coords[axis] + "[" + s + "];");
    };
    const std::string guard = row0 + " + " + r + " < " + rows + " && " + coords[ax] + " < " + dim(ax) + " && " +
                              coords[inner] + " < " + dim(inner);
    w.comment("The tile of " + names_[t.param->name] + ", its contiguous index along the lanes.");
    w.line("#pragma unroll");
    w.open("for (int " + s + " = 0; " + s + " < 4; ++" + s + ")");
    w.line("const int " + e + " = threadIdx.x + 256 * " + s + ";");
    w.line("const int " + a + " = " + e + " % kTA, " + i + " = " + e + " / kTA % kTI, " + r + " = " + e + " / (kTA * kTI);");
    bind_step(w);
    w.line("const I " + coords[ax] + " = " + a0 + " + " + a + ", " + coords[inner] + " = " + i0 + " + " + i + ";");
    w.line("if (" + guard + ") " + tile + "[(" + r + " * kTI + " + i + ") * kP + " + a + "] = " + names_[t.param->name] +
           "[" + coord_offset(t, coords) + "];");
    w.close();
    w.line("__syncthreads();");
    w.comment("Each element along the lanes by its innermost index: the outputs' stores coalesced.");
    w.line("#pragma unroll");
    w.open("for (int " + s + " = 0; " + s + " < 4; ++" + s + ")");
    w.line("const int " + e + " = threadIdx.x + 256 * " + s + ";");
    w.line("const int " + i + " = " + e + " % kTI, " + a + " = " + e + " / kTI % kTA, " + r + " = " + e + " / (kTA * kTI);");
    bind_step(w);
    w.line("const I " + coords[ax] + " = " + a0 + " + " + a + ", " + coords[inner] + " = " + i0 + " + " + i + ";");
    w.open("if (" + guard + ")");
    std::string e0;
    for (int k = 0; k < n; ++k) e0 = k == 0 ? coords[0] : "(" + e0 + ") * " + dim(k) + " + " + coords[k];
    const std::string at = names_.fresh("ksol_out");
    w.line("const I " + at + " = " + e0 + ";");
    std::map<int, std::string> value_of_load;
    for (size_t k = 0; k < a_.loads.size(); ++k)
      value_of_load[static_cast<int>(k)] = static_cast<int>(k) == a_.transpose_load
                                               ? tile + "[(" + r + " * kTI + " + i + ") * kP + " + a + "]"
                                               : names_[a_.loads[k].param->name] + "[" + coord_offset(a_.loads[k], coords) + "]";
    // An index or a dim used as a value is 64-bit, as the DSL types it (and as the interpreter and the
    // flat kernel compute it), whatever the tile's index type.
    definitions(
        w, [&](int axis) { return "(int64_t)" + coords.at(axis); }, [&](int load) { return value_of_load.at(load); },
        [&](const std::string& out) { return names_[out] + "[" + at + "]"; },
        [&](const std::string& d) { return "(int64_t)" + names_[d]; });
    w.close();
    w.close();
    w.line("__syncthreads();");
    w.close();
    w.close();
    w.close();
    w.line();
  }

  void transpose_host(Writer& w) {
    const int n = rank(), inner = n - 1, ax = a_.transpose_axis;
    open_ksol_run(w, p_, abi_, names_);
    std::string rows = "(int64_t)1";
    for (int k = 0; k < n; ++k)
      if (k != inner && k != ax) rows += " * " + dim(k);
    w.line("const int64_t total = " + rows + " * " + dim(ax) + " * " + dim(inner) + ";");
    w.line("if (total == 0) return 0;");
    w.line("const int64_t rows = " + rows + ";");
    w.comment("32-bit indices where the space and every tensor stay under 2^31 with room for the loops' last "
              "steps past their ends (KSOL_TRANSPOSE_INDEX32_MAX, unless defined before the source).");
    w.line("const int64_t kIntMax = KSOL_TRANSPOSE_INDEX32_MAX;");
    std::string fits = "total <= kIntMax";
    std::set<std::string> counts;  // each tensor's element count, once
    for (const std::string& tn : abi_.tensors) {
      std::string count = "(int64_t)1";
      for (const std::string& d : p_.param(tn)->extents) count += " * " + names_[d];
      if (counts.insert(count).second) fits += " && " + count + " <= kIntMax";
    }
    w.line("const bool fits = " + fits + ";");
    w.comment("Tiles of 8 along an axis of at most 8 (its lanes would idle in a 32-wide tile), else 32.");
    w.line("const int ta = " + dim(ax) + " <= 8 ? 8 : 32, ti = " + dim(inner) + " <= 8 ? 8 : 32;");
    w.line("const int64_t tile_rows = 1024 / (ta * ti);");
    w.comment("x: the innermost axis's tiles; y and z (capped, the kernel loops over the rest): the tiles of the "
              "permuted read's contiguous axis and of the rows.");
    w.line("const dim3 grid((unsigned)((" + dim(inner) + " + ti - 1) / ti), (unsigned)std::min<int64_t>((" + dim(ax) +
           " + ta - 1) / ta, 65535), (unsigned)std::min<int64_t>((rows + tile_rows - 1) / tile_rows, 65535));");
    const bool divides = !divisors_.empty();
    if (divides) divisors_.host_dividers(w);
    const std::string args = params_pass() + (divides ? "dv, " : "") + "rows);";
    bool first = true;
    for (const char* fast : {"true", "false"}) {
      const std::string it = std::string(fast) == "true" ? "int" : "int64_t";
      for (const auto& [ta, ti] : std::vector<std::pair<int, int>>{{32, 32}, {32, 8}, {8, 32}, {8, 8}}) {
        const std::string cond = std::string(fast) == "true" ? "fits && " : "!fits && ";
        const std::string call = name_ + "<" + std::to_string(ta) + ", " + std::to_string(ti) + ", " + it + ", " + fast +
                                 "><<<grid, 256, 0, stream>>>(" + args;
        w.line(std::string(first ? "if (" : "else if (") + cond + "ta == " + std::to_string(ta) + " && ti == " +
               std::to_string(ti) + ") " + call);
        first = false;
      }
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }

  void host(Writer& w) {
    if (s_.transpose) {
      transpose_host(w);
      return;
    }
    const bool tail = s_.vector > 1;
    if (tail) {
      w.line("namespace {");
      w.comment("True when p can be accessed kVector elements at a time.");
      w.line("template <typename T>");
      w.open("bool pack_aligned(const T* p)");
      w.line("return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVector) == 0;");
      w.close();
      w.line("}  // namespace");
      w.line();
    }
    open_ksol_run(w, p_, abi_, names_);
    w.line("const int64_t total = " + [&] {
      std::string s;
      for (int i = 0; i < rank(); ++i) s += (i ? " * " : "") + dim(i);
      return s;
    }() + ";");
    w.line("if (total == 0) return 0;");
    std::string pass;
    for (const std::string& t : abi_.tensors) pass += names_[t] + ", ";
    for (const std::string& d : p_.dims) pass += names_[d] + ", ";
    if (tail) {
      std::string cond;
      if (!a_.all_flat) {
        w.comment("A group may not straddle two innermost rows, since broadcast reads index by row; every "
                  "tensor must be aligned to the pack size.");
        cond = dim(rank() - 1) + " % kVector == 0";
      } else {
        w.comment("Every tensor is read in the space's own layout, so groups may straddle rows; each tensor must "
                  "be aligned to the pack size.");
      }
      for (const std::string& t : abi_.tensors) {
        const Param* prm = p_.param(t);
        bool packed = false;
        for (const Load& l : a_.loads) packed = packed || (l.param == prm && l.kind == Load::Kind::pack);
        for (const Param& out : p_.outputs) packed = packed || out.name == t;
        if (packed) cond += (cond.empty() ? "" : " && ") + ("pack_aligned(" + names_[t] + ")");
      }
      w.line("const bool packs_ok = " + cond + ";");
      w.line("const int64_t vector_end = packs_ok ? total / kVector * kVector : 0;");
      w.line("const int64_t work = std::max((vector_end / kVector + kItems - 1) / kItems, total - vector_end);");
    } else {
      w.line("const int64_t work = (total + kItems - 1) / kItems;");
    }
    if (s_.unroll > 1) {
      // The grid leaves each thread kUnroll steps, so that the unrolled loop has them to overlap.
      w.line("const int64_t blocks = std::min<int64_t>((work + kThreads * kUnroll - 1) / (kThreads * kUnroll), kMaxBlocks);");
    } else {
      w.line("const int64_t blocks = std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks);");
    }
    const std::string args = tail ? "vector_end, total);" : "total);";
    if (divisors_.empty()) {
      w.line(name_ + "<<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + args);
    } else {
      divisors_.host_dividers(w);
      w.comment("Every index (and so every divisor) under 2^31: dividers by multiply and shift.");
      w.open("if (total <= 2147483647)");
      w.line(name_ + "<true><<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + "dv, " + args);
      w.reopen("else");
      w.line(name_ + "<false><<<(unsigned)blocks, kThreads, 0, stream>>>(" + pass + "dv, " + args);
      w.close();
    }
    w.line("return cudaGetLastError() == cudaSuccess ? 0 : 4;");
    w.close();
  }
};

std::string generate(const dsl::Program& p, const Binding& b) { return Generator(p, b).run(); }

}  // namespace

const FamilyGenerator& elementwise_family() {
  static const FamilyGenerator f{
      "elementwise",
      {
          {"threads", "256", {"64", "128", "256", "512", "1024"}},
          {"vector", "1", {"1", "2", "4", "8"}},
          {"items_per_thread", "1", {"1", "2", "4", "8"}},
          {"unroll", "1", {"1", "2", "4"}},
          {"transpose", "auto", {"off", "on"}},
      },
      &check,
      &generate,
      &kernel_name_of,
  };
  return f;
}

}  // namespace ksol::codegen::detail
