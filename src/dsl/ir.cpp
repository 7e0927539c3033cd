// The small pieces of ir.h that are not a stage: names of enums, look-ups, the error type.
#include "dsl/ir.h"

#include <sstream>

namespace ksol::dsl {

const char* type_name(Type t) {
  switch (t) {
    case Type::f32: return "f32";
    case Type::f64: return "f64";
    case Type::bf16: return "bf16";
    case Type::f16: return "f16";
    case Type::i32: return "i32";
    case Type::i64: return "i64";
    case Type::boolean: return "bool";
  }
  return "?";
}

bool type_is_float(Type t) {
  return t == Type::f32 || t == Type::f64 || t == Type::bf16 || t == Type::f16;
}

const char* reduce_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::none: return "none";
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::mean: return "mean";
    case ReduceOp::argmax: return "argmax";
    case ReduceOp::scan: return "scan";
  }
  return "?";
}

const char* reduce_word(const Definition& d) {
  return d.reduce == ReduceOp::scan && d.scan_product ? "prodscan" : reduce_name(d.reduce);
}

std::string index_text(const IndexExpr& ix) {
  std::string s = ix.var + (ix.scale != 1 ? "*" + std::to_string(ix.scale) : "");
  if (!ix.plus.empty()) {
    const int64_t c = ix.plus_scale < 0 ? -ix.plus_scale : ix.plus_scale;
    s += (ix.plus_scale < 0 ? "-" : "+") + ix.plus + (c != 1 ? "*" + std::to_string(c) : "");
  }
  if (ix.offset != 0) s += (ix.offset > 0 ? "+" : "-") + std::to_string(ix.offset > 0 ? ix.offset : -ix.offset);
  return ix.divisor != 1 ? "(" + s + ")/" + std::to_string(ix.divisor) : s;
}

bool extent_is_number(const std::string& extent) {
  return !extent.empty() && extent.find_first_not_of("0123456789") == std::string::npos;
}

const ScheduleValue* Program::knob(const std::string& key) const {
  for (const auto& [k, v] : schedule)
    if (k == key) return &v;
  return nullptr;
}

const Param* Program::param(const std::string& n) const {
  for (const auto* list : {&inputs, &outputs})
    for (const Param& p : *list)
      if (p.name == n) return &p;
  return nullptr;
}

const Definition* Program::def(const std::string& n) const {
  for (const Definition& d : defs)
    if (d.name == n) return &d;
  return nullptr;
}

DslError::DslError(const std::string& f, Loc loc, const std::string& message, const std::string& source_line)
    : std::runtime_error([&] {
        std::ostringstream o;
        o << f << ":" << loc.line << ":" << loc.col << ": error: " << message;
        if (!source_line.empty())
          o << "\n  " << source_line << "\n  " << std::string(loc.col > 0 ? loc.col - 1 : 0, ' ') << "^";
        return o.str();
      }()),
      file(f),
      at(loc) {}

std::string guard_text(const std::vector<GuardTerm>& when) {
  std::string s;
  for (const GuardTerm& g : when) {
    if (!s.empty()) s += " and ";
    for (size_t i = 0; i < g.dims.size(); ++i) s += (i ? " * " : "") + g.dims[i];
    if (g.mod > 0) s += " % " + std::to_string(g.mod);
    s += " " + g.op + " " + std::to_string(g.value);
  }
  return s;
}

bool guard_holds(const std::vector<GuardTerm>& when, const std::map<std::string, int64_t>& dims) {
  for (const GuardTerm& g : when) {
    __int128 v = 1;
    for (const std::string& d : g.dims) {
      auto it = dims.find(d);
      if (it == dims.end()) throw std::runtime_error("the guard '" + guard_text(when) + "' names " + d + ", which has no value here");
      v *= it->second;
    }
    if (g.mod > 0) v %= g.mod;
    const __int128 x = g.value;
    bool ok = g.op == "<" ? v < x : g.op == "<=" ? v <= x : g.op == ">" ? v > x : g.op == ">=" ? v >= x : g.op == "==" ? v == x : v != x;
    if (!ok) return false;
  }
  return true;
}

Program variant(const Program& p, size_t i) {
  Program q = p;
  q.guarded.clear();
  if (i < p.guarded.size()) {
    q.schedule = p.guarded[i].schedule;
    q.schedule_keys = p.guarded[i].schedule_keys;
  }
  return q;
}

Program variant_at(const Program& p, const std::map<std::string, int64_t>& dims) {
  for (size_t i = 0; i < p.guarded.size(); ++i)
    if (guard_holds(p.guarded[i].when, dims)) return variant(p, i);
  return variant(p, p.guarded.size());
}

}  // namespace ksol::dsl
