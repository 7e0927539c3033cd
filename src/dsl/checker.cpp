// Names, extents and types of a parsed program (docs/DSL.md, "The algorithm"). After this pass
// every expression has a type, every index an extent, and every read names a parameter or an
// earlier definition.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "dsl/front.h"

namespace ksol::dsl::detail {
namespace {

std::string at_text(Loc l) { return std::to_string(l.line) + ":" + std::to_string(l.col); }

std::string count_of(size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

std::string declared(const std::string& name, const std::vector<std::string>& extents, const std::string& type) {
  std::string s = name + ": " + type + "[";
  for (size_t i = 0; i < extents.size(); ++i) s += (i ? ", " : "") + extents[i];
  return s + "]";
}

enum class FnKind {
  float_map,    // float -> same float
  numeric_map,  // any number -> same type
  same,         // n arguments of one type -> that type
  select,       // (boolean, T, T) -> T
  f32_only,     // f32 -> f32
};

struct Function {
  const char* name;
  int arity;
  const char* args;
  FnKind kind;
};

constexpr Function kFunctions[] = {
    {"exp", 1, "x", FnKind::float_map},       {"log", 1, "x", FnKind::float_map},
    {"sqrt", 1, "x", FnKind::float_map},      {"rsqrt", 1, "x", FnKind::float_map},
    {"abs", 1, "x", FnKind::numeric_map},     {"tanh", 1, "x", FnKind::float_map},
    {"sigmoid", 1, "x", FnKind::float_map},   {"relu", 1, "x", FnKind::numeric_map},
    {"gelu", 1, "x", FnKind::float_map},      {"gelu_tanh", 1, "x", FnKind::float_map},
    {"silu", 1, "x", FnKind::float_map},      {"min", 2, "a, b", FnKind::same},
    {"max", 2, "a, b", FnKind::same},         {"clamp", 3, "x, lo, hi", FnKind::same},
    {"select", 3, "cond, a, b", FnKind::select},
    // tf32(x): x rounded to TF32 (10 mantissa bits, f32's exponent; to nearest, ties to even), the
    // precision the tensor cores multiply in (which may truncate instead: docs/DSL.md).
    {"tf32", 1, "x", FnKind::f32_only},
};

const Function* find_function(const std::string& name) {
  for (const Function& f : kFunctions)
    if (name == f.name) return &f;
  return nullptr;
}

bool all_integral(const Expr& e) {
  if (e.kind == Expr::Kind::number && e.number != std::floor(e.number)) return false;
  for (const Expr& a : e.args)
    if (!all_integral(a)) return false;
  return true;
}

// Where an index got its extent, for the message when another read disagrees.
struct Binding {
  std::string extent;
  Loc loc;
  std::string where;
};

// Numbers and dim values have no type of their own: an expression built only from them is
// "adaptable" and takes the type of whatever typed operand it meets (docs/DSL.md, "Types").
class Checker {
 public:
  Checker(const Source& src, Parsed& parsed) : src_(src), p_(parsed.program), stmts_(parsed.stmts) {}

  void run() {
    std::map<std::string, Loc> seen;
    for (const auto* list : {&p_.inputs, &p_.outputs}) {
      for (const Param& prm : *list) {
        if (auto it = seen.find(prm.name); it != seen.end())
          src_.fail(prm.loc, "parameter '" + prm.name + "' is declared twice (first at " + at_text(it->second) + ")");
        seen[prm.name] = prm.loc;
        const bool sparse = prm.format != "dense";
        if (sparse && prm.extents.size() != 2)
          src_.fail(prm.loc, std::string(prm.format == "ell" ? "an " : "a ") + prm.format + " matrix has two extents, [ROWS, COLS]");
        if (sparse && list == &p_.outputs)
          src_.fail(prm.loc, "an output cannot be " + prm.format + "; only inputs may be sparse");
        if ((prm.zero_outside || prm.lowest_outside) && list == &p_.outputs)
          src_.fail(prm.loc, std::string("an output cannot be 'outside ") + (prm.zero_outside ? "0" : "-inf") +
                                 "'; only inputs are read outside their extents");
        if (prm.lowest_outside && sparse)
          src_.fail(prm.loc, "a sparse matrix cannot be 'outside -inf'");
        if (prm.zero_outside && sparse)
          src_.fail(prm.loc, std::string(prm.format == "ell" ? "an " : "a ") + prm.format + " matrix cannot be 'outside 0'; its missing entries are zero already");
        for (const std::string& ext : prm.extents)
          if (!extent_is_number(ext) && dims_.insert(ext).second) p_.dims.push_back(ext);
      }
    }
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const Param& prm : *list)
        if (dims_.count(prm.name)) src_.fail(prm.loc, "'" + prm.name + "' names both a tensor and a dim");
    for (size_t i = 0; i < p_.defs.size(); ++i) first_def_.emplace(p_.defs[i].name, i);
    for (size_t i = 0; i < p_.defs.size(); ++i) definition(i);
    for (const Param& out : p_.outputs)
      if (!defined_.count(out.name)) src_.fail(out.loc, "output '" + out.name + "' is never defined");
    for (const GuardedSchedule& g : p_.guarded)
      for (const GuardTerm& t : g.when)
        for (const std::string& d : t.dims)
          if (!dims_.count(d)) {
            std::string list;
            for (const std::string& x : p_.dims) list += (list.empty() ? "" : ", ") + x;
            src_.fail(t.loc, "'" + d + "' in the guard is not a dim of the kernel (its dims: " + list + ")");
          }
  }

 private:
  const Source& src_;
  Program& p_;
  const std::vector<StmtLocs>& stmts_;
  std::set<std::string> dims_;
  std::map<std::string, size_t> first_def_;  // every defined name, for "defined later"
  std::map<std::string, size_t> defined_;    // names defined before the current statement
  // The current statement.
  std::string current_;
  std::set<std::string> vars_;
  std::map<std::string, Binding> scope_;
  std::set<std::string> added_;  // indices read in a sum of two (h+r), for the extent message
  std::set<std::string> reduced_;  // the definition's reduced indices, for the same

  const Param* input(const std::string& name) const {
    for (const Param& prm : p_.inputs)
      if (prm.name == name) return &prm;
    return nullptr;
  }
  const Param* output(const std::string& name) const {
    for (const Param& prm : p_.outputs)
      if (prm.name == name) return &prm;
    return nullptr;
  }

  void definition(size_t i) {
    Definition& d = p_.defs[i];
    const StmtLocs& locs = stmts_[i];
    if (input(d.name)) src_.fail(d.loc, "'" + d.name + "' is an input and cannot be defined");
    if (dims_.count(d.name)) src_.fail(d.loc, "'" + d.name + "' is a dim and cannot be defined");
    if (auto it = defined_.find(d.name); it != defined_.end())
      src_.fail(d.loc, "'" + d.name + "' is defined twice (first at " + at_text(p_.defs[it->second].loc) + ")");
    const Param* out = output(d.name);
    d.is_output = out != nullptr;
    current_ = d.name;
    vars_.clear();
    scope_.clear();
    added_.clear();
    reduced_.clear();
    if (d.reduce != ReduceOp::none) reduced_.insert(d.over);
    reduced_.insert(d.over_rest.begin(), d.over_rest.end());

    for (size_t j = 0; j < d.indices.size(); ++j)
      if (!vars_.insert(d.indices[j]).second)
        src_.fail(locs.indices[j], "index '" + d.indices[j] + "' appears twice on the left-hand side");
    if (d.reduce != ReduceOp::none) {
      bool on_left = vars_.count(d.over) > 0;
      if (d.reduce == ReduceOp::scan && !on_left)
        src_.fail(locs.over, "a scan keeps its index: '" + d.over + "' must also appear on the left-hand side");
      if (d.reduce != ReduceOp::scan && on_left)
        src_.fail(locs.over, "'" + d.over + "' is reduced, so it cannot also appear on the left-hand side");
      vars_.insert(d.over);
      for (size_t j = 0; j < d.over_rest.size(); ++j) {
        const std::string& v = d.over_rest[j];
        if (d.reduce != ReduceOp::sum && d.reduce != ReduceOp::max && d.reduce != ReduceOp::min && d.reduce != ReduceOp::mean)
          src_.fail(locs.over_rest[j], std::string("only sum, max, min and mean reduce over several indices; this ") +
                                           reduce_word(d) + " reduces over '" + d.over + "' and '" + v + "'");
        if (std::find(d.indices.begin(), d.indices.end(), v) != d.indices.end())
          src_.fail(locs.over_rest[j], "'" + v + "' is reduced, so it cannot also appear on the left-hand side");
        if (!vars_.insert(v).second) src_.fail(locs.over_rest[j], "'" + v + "' is reduced over twice");
      }
    }
    // Extents written after the reduced indices (over r:3): a number, or a dim a parameter declares.
    for (size_t j = 0; j < d.over_written.size(); ++j) {
      const std::string& e = d.over_written[j];
      if (e.empty()) continue;
      const Loc at = j == 0 ? locs.over : locs.over_rest[j - 1];
      if (!extent_is_number(e) && !dims_.count(e))
        src_.fail(at, "'" + e + "' is not a dim of the program's parameters; a reduced index's extent is one of them or a "
                      "positive integer");
      bind(j == 0 ? d.over : d.over_rest[j - 1], e, at, "as written after it");
    }
    if (out) {
      if (d.indices.size() != out->extents.size())
        src_.fail(d.loc, "'" + d.name + "' is declared with " + count_of(out->extents.size(), "extent", "extents") +
                             " (" + declared(out->name, out->extents, type_name(out->type)) + ") but defined with " +
                             count_of(d.indices.size(), "index", "indices"));
      for (size_t j = 0; j < d.indices.size(); ++j)
        bind(d.indices[j], out->extents[j], locs.indices[j], "position " + std::to_string(j + 1) + " of " + d.name);
    }

    bool adaptable = operand(d.body);
    if (adaptable) adapt(d.body, out ? out->type : Type::f32);

    for (size_t j = 0; j < d.indices.size(); ++j) {
      if (!scope_.count(d.indices[j]) && added_.count(d.indices[j])) extent_from_output(i, j, locs.indices[j]);
      d.extents.push_back(extent_of(d.indices[j], locs.indices[j]));
    }
    if (d.reduce != ReduceOp::none) d.over_extent = extent_of(d.over, locs.over);
    for (size_t j = 0; j < d.over_rest.size(); ++j) d.over_rest_extents.push_back(extent_of(d.over_rest[j], locs.over_rest[j]));

    Type t = d.body.type;
    d.type = t;
    if (d.reduce == ReduceOp::mean && !type_is_float(t))
      src_.fail(locs.body, std::string("mean needs a float operand but is given ") + type_name(t) +
                               "; convert it first, e.g. f32(...)");
    // Indices are i32, as in the tasks' index tensors.
    if (d.reduce == ReduceOp::argmax) d.type = Type::i32;
    if (out && d.type != out->type) {
      std::string head = "output '" + d.name + "' is declared " + type_name(out->type) + " but ";
      if (d.reduce != ReduceOp::none)
        src_.fail(locs.body, head + "this " + reduce_word(d) + " gives " + type_name(d.type) +
                                 "; reduce into an intermediate and convert that in a following definition");
      src_.fail(locs.body, head + "its value is " + type_name(d.type) + "; convert it explicitly: " +
                               type_name(out->type) + "(...)");
    }
    defined_[d.name] = i;
  }

  // A conv's sum into an intermediate (acc[n, k, h, w] = sum(X[n, c, h+r-1, ...] ...)) reads h only
  // in sums, so its extent comes from the output whose definition reads acc at a plain h: the
  // epilogue's Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k]) gives position 3 of acc Y's third extent.
  // Through intermediates too: m[n, h, w] = min(acc[n, k, h, w]) over k, then Y[n, h, w] =
  // tanh(m[n, h, w]) gives acc's h Y's second extent.
  void extent_from_output(size_t def, size_t pos, Loc at) {
    std::string extent, where;
    if (output_extent(def, pos, extent, where)) bind(p_.defs[def].indices[pos], extent, at, where);
  }

  // The extent of position `pos` of definition `def` from a later definition that reads it there
  // at a plain index: an output's extent, or (an intermediate's) that later definition's own.
  bool output_extent(size_t def, size_t pos, std::string& extent, std::string& where) const {
    const Definition& d = p_.defs[def];
    for (size_t l = def + 1; l < p_.defs.size(); ++l) {
      const Definition& later = p_.defs[l];
      const Param* out = output(later.name);
      if (out && out->extents.size() != later.indices.size()) continue;
      for (const Expr* r : reads_in(later.body)) {
        if (r->name != d.name || r->indices.size() != d.indices.size()) continue;
        const IndexExpr& ix = r->indices[pos];
        if (!ix.plus.empty() || ix.offset != 0) continue;
        auto m = std::find(later.indices.begin(), later.indices.end(), ix.var);
        if (m == later.indices.end()) continue;
        const size_t k = static_cast<size_t>(m - later.indices.begin());
        if (!out) {
          if (output_extent(l, k, extent, where)) return true;
          continue;
        }
        extent = out->extents[k];
        where = "position " + std::to_string(k + 1) + " of " + later.name + ", which reads " + d.name + " at line " +
                std::to_string(r->loc.line);
        return true;
      }
    }
    return false;
  }

  static void collect_reads(const Expr& e, std::vector<const Expr*>& out) {
    if (e.kind == Expr::Kind::read) out.push_back(&e);
    for (const Expr& a : e.args) collect_reads(a, out);
  }
  static std::vector<const Expr*> reads_in(const Expr& e) {
    std::vector<const Expr*> out;
    collect_reads(e, out);
    return out;
  }

  std::string extent_of(const std::string& var, Loc at) const {
    auto it = scope_.find(var);
    if (it == scope_.end() && added_.count(var) && reduced_.count(var))
      src_.fail(at, "cannot infer the extent of the reduced index '" + var + "': it is read only in sums of two indices "
                    "(h+r), which give neither index an extent; write it after the index, as a pool's window: over " + var + ":3");
    if (it == scope_.end() && added_.count(var))
      src_.fail(at, "cannot infer the extent of index '" + var + "': it is read only in sums of two indices (h+r), which "
                    "give neither index an extent, and no output's definition reads '" + current_ + "' with it alone; "
                    "write the conv's output as Y[n, k, h, w], or read " + current_ + "[n, k, h, w] in the output's definition");
    if (it == scope_.end())
      src_.fail(at, "cannot infer the extent of index '" + var + "': no tensor is read with it");
    return it->second.extent;
  }

  void bind(const std::string& var, const std::string& extent, Loc at, const std::string& where) {
    auto [it, fresh] = scope_.try_emplace(var, Binding{extent, at, where});
    if (fresh || it->second.extent == extent) return;
    src_.fail(at, "index '" + var + "' ranges over " + extent + " here (" + where + ") but over " + it->second.extent +
                      " at " + at_text(it->second.loc) + " (" + it->second.where + ")");
  }

  // Types e where a boolean is not allowed; returns whether e is adaptable.
  bool operand(Expr& e) {
    bool adaptable = type(e);
    if (e.type == Type::boolean)
      src_.fail(e.loc, "a comparison gives a boolean, which is allowed only as select's first argument");
    return adaptable;
  }

  bool type(Expr& e) {
    switch (e.kind) {
      case Expr::Kind::number:
        e.type = Type::f32;
        return true;
      case Expr::Kind::dim:
      case Expr::Kind::index:
        dim_value(e);
        // A dim adapts to the expression's type; an index stays i64 (a mask compares positions
        // exactly: n <= m + 1 in integers), so f32(m) converts one where a float is wanted.
        return e.kind == Expr::Kind::dim;
      case Expr::Kind::read:
        read(e);
        return false;
      case Expr::Kind::unary: {
        bool adaptable = operand(e.args[0]);
        e.type = e.args[0].type;
        return adaptable;
      }
      case Expr::Kind::binary: {
        bool a = operand(e.args[0]), b = operand(e.args[1]);
        auto [adaptable, t] = unify({&e.args[0], &e.args[1]}, {a, b}, e.loc, "'" + e.op + "'");
        e.type = t;
        return adaptable;
      }
      case Expr::Kind::compare: {
        bool a = operand(e.args[0]), b = operand(e.args[1]);
        auto [adaptable, t] = unify({&e.args[0], &e.args[1]}, {a, b}, e.loc, "'" + e.op + "'");
        if (adaptable) {
          adapt(e.args[0], t);
          adapt(e.args[1], t);
        }
        e.type = Type::boolean;
        return false;
      }
      case Expr::Kind::cast: {
        if (e.args.size() != 1) src_.fail(e.loc, "a cast takes one argument: " + e.name + "(x)");
        Type to = type_from_name(e.name);
        if (operand(e.args[0])) adapt(e.args[0], type_is_float(to) || all_integral(e.args[0]) ? to : Type::f32);
        e.type = to;
        return false;
      }
      case Expr::Kind::call:
        return call(e);
    }
    return false;
  }

  void dim_value(Expr& e) {
    const std::string& n = e.name;
    if (dims_.count(n) && vars_.count(n))
      src_.fail(e.loc, "'" + n + "' is both a dim and an index here, so as a value it is ambiguous; rename the index");
    if (!dims_.count(n)) {
      if (vars_.count(n)) {
        // An index as a value: the position of the element computed (tril's m >= n).
        e.kind = Expr::Kind::index;
        e.type = Type::i64;
        return;
      }
      if (p_.param(n) || first_def_.count(n)) src_.fail(e.loc, "'" + n + "' is a tensor; read it with indices: " + n + "[...]");
      src_.fail(e.loc, "unknown name '" + n + "'");
    }
    e.type = Type::i64;
  }

  void read(Expr& e) {
    const std::string& n = e.name;
    if (n == current_)
      src_.fail(e.loc, "'" + n + "' reads itself; a definition may read only parameters and earlier definitions");
    std::vector<std::string> extents;
    std::string shape;
    if (auto it = defined_.find(n); it != defined_.end()) {
      const Definition& d = p_.defs[it->second];
      extents = d.extents;
      e.type = d.type;
      shape = n + "[";
      for (size_t k = 0; k < d.indices.size(); ++k) shape += (k ? ", " : "") + d.indices[k];
      shape += "]";
    } else if (const Param* prm = input(n)) {
      extents = prm->extents;
      e.type = prm->type;
      shape = declared(n, prm->extents, (prm->format != "dense" ? prm->format + " " : std::string()) + std::string(type_name(prm->type)));
    } else if (auto later = first_def_.find(n); later != first_def_.end()) {
      src_.fail(e.loc, "'" + n + "' is defined later, at line " + std::to_string(p_.defs[later->second].loc.line) +
                           "; a definition may read only parameters and earlier definitions");
    } else if (output(n)) {
      src_.fail(e.loc, "output '" + n + "' is read but never defined");
    } else if (dims_.count(n)) {
      src_.fail(e.loc, "'" + n + "' is a dim, not a tensor");
    } else {
      src_.fail(e.loc, "unknown tensor '" + n + "'");
    }
    if (e.indices.size() != extents.size())
      src_.fail(e.loc, "'" + n + "' has " + count_of(extents.size(), "index", "indices") + " (" + shape +
                           ") but is read with " + std::to_string(e.indices.size()));
    for (size_t k = 0; k < e.indices.size(); ++k) {
      const IndexExpr& ix = e.indices[k];
      if (!vars_.count(ix.var))
        src_.fail(ix.loc, "index '" + ix.var + "' is not bound: use it on the left-hand side or reduce over it");
      if (!ix.plus.empty() && !vars_.count(ix.plus))
        src_.fail(ix.loc, "index '" + ix.plus + "' is not bound: use it on the left-hand side or reduce over it");
      // h + r ranges over neither h's extent nor r's, so such a position gives neither index
      // its extent: other reads (the output's, the filter's) must.
      if (!index_is_compound(ix)) bind(ix.var, extents[k], ix.loc, "position " + std::to_string(k + 1) + " of " + n);
      if (!ix.plus.empty()) added_.insert({ix.var, ix.plus});
    }
  }

  bool call(Expr& e) {
    const Function* fn = find_function(e.name);
    if (!fn)
      src_.fail(e.loc, "unknown function '" + e.name +
                           "'; the functions are exp, log, sqrt, rsqrt, abs, tanh, sigmoid, relu, gelu, gelu_tanh, "
                           "silu, min, max, clamp, select, tf32 and the casts f32, f64, bf16, f16, i32, i64");
    if (static_cast<int>(e.args.size()) != fn->arity)
      src_.fail(e.loc, "'" + e.name + "' takes " + std::to_string(fn->arity) + " argument" + (fn->arity > 1 ? "s" : "") +
                           " (" + fn->args + ") but is given " + std::to_string(e.args.size()));
    switch (fn->kind) {
      case FnKind::float_map: {
        bool adaptable = operand(e.args[0]);
        if (!adaptable && !type_is_float(e.args[0].type))
          src_.fail(e.loc, "'" + e.name + "' needs a float argument but is given " + type_name(e.args[0].type) +
                               "; convert it first, e.g. f32(...)");
        e.type = e.args[0].type;
        return adaptable;
      }
      case FnKind::f32_only: {
        bool adaptable = operand(e.args[0]);
        if (!adaptable && e.args[0].type != Type::f32)
          src_.fail(e.loc, "'" + e.name + "' rounds an f32 value but is given " + type_name(e.args[0].type) +
                               "; convert it first, e.g. " + e.name + "(f32(...))");
        if (adaptable) adapt(e.args[0], Type::f32);
        e.type = Type::f32;
        return false;
      }
      case FnKind::numeric_map: {
        bool adaptable = operand(e.args[0]);
        e.type = e.args[0].type;
        return adaptable;
      }
      case FnKind::same: {
        std::vector<Expr*> xs;
        std::vector<bool> ad;
        for (Expr& a : e.args) {
          ad.push_back(operand(a));
          xs.push_back(&a);
        }
        auto [adaptable, t] = unify(xs, ad, e.loc, "'" + e.name + "'");
        e.type = t;
        return adaptable;
      }
      case FnKind::select: {
        type(e.args[0]);
        if (e.args[0].type != Type::boolean)
          src_.fail(e.args[0].loc, "select's first argument must be a comparison such as x > 0");
        bool a = operand(e.args[1]), b = operand(e.args[2]);
        auto [adaptable, t] = unify({&e.args[1], &e.args[2]}, {a, b}, e.loc, "'select'");
        e.type = t;
        return adaptable;
      }
    }
    return false;
  }

  // Gives the operands one type: typed operands must agree, and adaptable ones take their type.
  std::pair<bool, Type> unify(const std::vector<Expr*>& xs, const std::vector<bool>& adaptable, Loc at,
                              const std::string& what) {
    const Expr* typed = nullptr;
    for (size_t k = 0; k < xs.size(); ++k) {
      if (adaptable[k]) continue;
      if (!typed) {
        typed = xs[k];
        continue;
      }
      if (xs[k]->type != typed->type)
        src_.fail(at, what + " mixes " + type_name(typed->type) + " and " + type_name(xs[k]->type) +
                          "; convert one side explicitly, e.g. " + type_name(typed->type) + "(...)");
    }
    if (!typed) return {true, Type::f32};
    for (size_t k = 0; k < xs.size(); ++k)
      if (adaptable[k]) adapt(*xs[k], typed->type);
    return {false, typed->type};
  }

  // Settles the type of an adaptable expression (numbers, dims and arithmetic on them).
  void adapt(Expr& e, Type t) {
    switch (e.kind) {
      case Expr::Kind::number:
        if (!type_is_float(t) && e.number != std::floor(e.number))
          src_.fail(e.loc, "the number " + format_number(e.number) + " is used as " + type_name(t) +
                               ", which holds only integers");
        e.type = t;
        return;
      case Expr::Kind::dim:
      case Expr::Kind::index:
        e.type = t;
        return;
      case Expr::Kind::call: {
        const Function* fn = find_function(e.name);
        if (fn->kind == FnKind::float_map && !type_is_float(t))
          src_.fail(e.loc, "'" + e.name + "' gives a float but is used as " + type_name(t));
        e.type = t;
        for (size_t k = fn->kind == FnKind::select ? 1 : 0; k < e.args.size(); ++k) adapt(e.args[k], t);
        return;
      }
      case Expr::Kind::unary:
      case Expr::Kind::binary:
        e.type = t;
        for (Expr& a : e.args) adapt(a, t);
        return;
      case Expr::Kind::read:
      case Expr::Kind::compare:
      case Expr::Kind::cast:
        return;  // typed already; never part of an adaptable expression
    }
  }
};

}  // namespace

void check(const Source& src, Parsed& parsed) { Checker(src, parsed).run(); }

}  // namespace ksol::dsl::detail
