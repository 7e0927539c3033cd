// The two text forms of a checked program: the typed IR (print_program, what golden tests
// compare) and DSL source (print_source, what parse_program reads back).
#include <charconv>
#include <sstream>

#include "dsl/front.h"

namespace ksol::dsl {
namespace detail {

std::string format_number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // to_chars writes 1e-06 and 1e+20; the DSL's own spelling is 1e-6 and 1e20.
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
  std::string sign = exponent[0] == '-' ? "-" : "";
  size_t digits = exponent.find_first_not_of("+-0");
  return mantissa + "e" + sign + (digits == std::string::npos ? "0" : exponent.substr(digits));
}

namespace {

// Binding strength, for printing the fewest parentheses: comparisons bind loosest.
int precedence(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::compare: return 1;
    case Expr::Kind::binary: return (e.op == "+" || e.op == "-") ? 2 : 3;
    case Expr::Kind::unary: return 4;
    case Expr::Kind::number: return e.number < 0 ? 4 : 5;
    default: return 5;
  }
}

std::string wrap(const Expr& e, bool parens) {
  std::string s = format_expr(e);
  return parens ? "(" + s + ")" : s;
}

std::string join_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::string param_text(const Param& p) {
  return p.name + ": " + (p.format == "dense" ? "" : p.format + " ") + type_name(p.type) + "[" + join_list(p.extents) + "]" +
         (p.zero_outside ? " outside 0" : "") + (p.lowest_outside ? " outside -inf" : "");
}

std::string schedule_text(const ScheduleValue& v) {
  switch (v.kind) {
    case ScheduleValue::Kind::integer: return std::to_string(v.integer);
    case ScheduleValue::Kind::ident: return v.ident;
    case ScheduleValue::Kind::list: {
      std::vector<std::string> items;
      for (int64_t x : v.list) items.push_back(std::to_string(x));
      std::string s = "[";
      s += join_list(items);
      s += "]";
      return s;
    }
  }
  return "?";
}

}  // namespace

std::string format_expr(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::number: return format_number(e.number);
    case Expr::Kind::dim:
    case Expr::Kind::index: return e.name;
    case Expr::Kind::read: {
      std::vector<std::string> idx;
      for (const IndexExpr& ix : e.indices) {
        idx.push_back(index_text(ix));
      }
      return e.name + "[" + join_list(idx) + "]";
    }
    case Expr::Kind::unary: return e.op + wrap(e.args[0], precedence(e.args[0]) < 4);
    case Expr::Kind::binary:
    case Expr::Kind::compare: {
      int p = precedence(e);
      return wrap(e.args[0], precedence(e.args[0]) < p) + " " + e.op + " " + wrap(e.args[1], precedence(e.args[1]) <= p);
    }
    case Expr::Kind::call:
    case Expr::Kind::cast: {
      std::vector<std::string> args;
      for (const Expr& a : e.args) args.push_back(format_expr(a));
      return e.name + "(" + join_list(args) + ")";
    }
  }
  return "?";
}

}  // namespace detail

std::string print_program(const Program& p) {
  std::ostringstream o;
  o << "kernel " << p.name << " family " << p.family << "\n";
  for (const Param& prm : p.inputs) o << "  input  " << detail::param_text(prm) << "\n";
  for (const Param& prm : p.outputs) o << "  output " << detail::param_text(prm) << "\n";
  o << "  dims " << detail::join_list(p.dims) << "\n";
  for (const Definition& d : p.defs) {
    std::vector<std::string> lhs;
    for (size_t i = 0; i < d.indices.size(); ++i)
      lhs.push_back(d.indices[i] + ":" + (i < d.extents.size() ? d.extents[i] : "?"));
    o << "  " << (d.is_output ? "out " : "let ") << d.name << "[" << detail::join_list(lhs) << "] : " << type_name(d.type)
      << " = ";
    if (d.reduce == ReduceOp::none)
      o << detail::format_expr(d.body);
    else
    {
      o << reduce_word(d) << " over " << d.over << ":" << d.over_extent;
      for (size_t j = 0; j < d.over_rest.size(); ++j) o << ", " << d.over_rest[j] << ":" << d.over_rest_extents[j];
      o << " (" << detail::format_expr(d.body) << ")";
    }
    o << "\n";
  }
  for (const GuardedSchedule& g : p.guarded) {
    o << "schedule when " << guard_text(g.when) << "\n";
    for (const auto& [key, value] : g.schedule) o << "  " << key << " = " << detail::schedule_text(value) << "\n";
  }
  if (!p.schedule.empty() || !p.guarded.empty()) {
    o << "schedule\n";
    for (const auto& [key, value] : p.schedule) o << "  " << key << " = " << detail::schedule_text(value) << "\n";
  }
  return o.str();
}

std::string print_source(const Program& p) {
  auto params = [](const std::vector<Param>& list) {
    std::vector<std::string> v;
    for (const Param& prm : list) v.push_back(detail::param_text(prm));
    return detail::join_list(v);
  };
  std::ostringstream o;
  o << "kernel " << p.name << "(" << params(p.inputs) << ") -> (" << params(p.outputs) << ") {\n";
  for (const Definition& d : p.defs) {
    o << "  " << d.name << "[" << detail::join_list(d.indices) << "] = ";
    if (d.reduce == ReduceOp::none)
      o << detail::format_expr(d.body);
    else
    {
      auto written = [&](size_t j) { return j < d.over_written.size() && !d.over_written[j].empty() ? ":" + d.over_written[j] : ""; };
      o << reduce_word(d) << "(" << detail::format_expr(d.body) << ") over " << d.over << written(0);
      for (size_t j = 0; j < d.over_rest.size(); ++j) o << ", " << d.over_rest[j] << written(j + 1);
    }
    o << "\n";
  }
  o << "}\n";
  for (const GuardedSchedule& g : p.guarded) {
    o << "schedule when " << guard_text(g.when) << " {\n";
    for (const auto& [key, value] : g.schedule) o << "  " << key << " = " << detail::schedule_text(value) << "\n";
    o << "}\n";
  }
  if (!p.schedule.empty() || !p.guarded.empty()) {
    o << "schedule {\n";
    for (const auto& [key, value] : p.schedule) o << "  " << key << " = " << detail::schedule_text(value) << "\n";
    o << "}\n";
  }
  return o.str();
}

}  // namespace ksol::dsl
