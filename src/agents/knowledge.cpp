#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include "agents/knowledge.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/expr.h"
#include "core/util.h"

namespace fs = std::filesystem;

namespace ksol::agents {

// ---------------------------------------------------------------------------------------------
// The two axes of the table, and the DSL's schedule keys

const std::vector<std::string>& bottleneck_classes() {
  static const std::vector<std::string> v = {"compute", "memory_bandwidth", "memory_latency"};
  return v;
}
const std::vector<std::string>& dsl_families() {
  static const std::vector<std::string> v = {"gemm", "conv", "rowwise", "elementwise", "sparse", "stencil"};
  return v;
}

// Mirrors docs/DSL.md, "The schedule". Where the doc leaves a value set open, the comment says
// what is assumed here; change both together.
const std::vector<ScheduleKey>& schedule_keys() {
  using K = ScheduleKey::Kind;
  static const std::vector<ScheduleKey> keys = {
      {"gemm", "tile", K::list, {}, {3}},
      {"gemm", "cluster", K::list, {}, {2}},
      {"gemm", "stages", K::integer, {}, {}},
      {"gemm", "mainloop", K::choice, {"cooperative", "pingpong", "simt", "mma"}, {}},
      {"gemm", "warp_tile", K::list, {}, {2}},  // or auto (mainloop = mma)
      {"gemm", "epilogue", K::choice, {"tma", "default"}, {}},
      {"gemm", "raster", K::choice, {"along_m", "along_n"}, {}},
      {"gemm", "swizzle", K::integer, {}, {}},
      {"gemm", "split_k", K::integer, {}, {}},
      {"gemm", "stream_k", K::integer, {}, {}},  // the doc gives no values: 0 (off) or 1 (on) here
      {"gemm", "math", K::choice, {"precise", "fast"}, {}},
      {"gemm", "epilogue_tile", K::list, {}, {2}},  // or auto
      {"gemm", "swap_ab", K::integer, {}, {}},  // 0 (off) or 1 (C^T = B^T A^T)
      {"gemm", "bias_prefetch", K::integer, {}, {}},  // or auto: 0 (the consumers load the bias) or 1 (the producer warp)
      {"conv", "mainloop", K::choice, {"auto", "simt", "tma", "mma"}, {}},
      {"conv", "tile", K::list, {}, {3}},
      {"conv", "thread_tile", K::list, {}, {2}},
      {"conv", "cluster", K::list, {}, {2}},
      {"conv", "stages", K::integer, {}, {}},
      {"conv", "gather", K::choice, {"auto", "taps", "decode"}, {}},
      {"conv", "fragments", K::choice, {"auto", "slice"}, {}},
      {"rowwise", "threads", K::integer, {}, {}},
      {"rowwise", "rows_per_block", K::integer, {}, {}},
      {"rowwise", "vector", K::integer, {}, {}},
      {"rowwise", "items_per_thread", K::integer, {}, {}},
      {"rowwise", "reduction", K::choice, {"warp", "block", "two_pass"}, {}},
      {"rowwise", "cache_row", K::choice, {"none", "registers", "shared", "l2"}, {}},
      {"rowwise", "unroll", K::integer, {}, {}},
      {"rowwise", "math", K::choice, {"precise", "fast"}, {}},
      {"rowwise", "keep", K::choice, {"none", "registers"}, {}},
      {"rowwise", "online", K::integer, {}, {}},
      {"rowwise", "blocks_per_sm", K::integer, {}, {}},
      {"rowwise", "tail", K::choice, {"checked", "exact", "fixed"}, {}},
      {"rowwise", "store_hint", K::choice, {"none", "evict_last"}, {}},
      {"rowwise", "preload", K::choice, {"none", "all", "write"}, {}},
      {"rowwise", "grid", K::choice, {"stride", "rows"}, {}},
      {"elementwise", "threads", K::integer, {}, {}},
      {"elementwise", "vector", K::integer, {}, {}},
      {"elementwise", "items_per_thread", K::integer, {}, {}},
      {"elementwise", "unroll", K::integer, {}, {}},
      {"elementwise", "transpose", K::choice, {"auto", "off", "on"}, {}},
      {"sparse", "strategy", K::choice, {"row_per_thread", "vector_per_row", "nnz_split"}, {}},
      {"sparse", "vector", K::integer, {}, {}},
      {"sparse", "threads", K::integer, {}, {}},
      // The doc names the key without its values: none, readonly (ld.global.nc), shared here.
      {"sparse", "cache_x", K::choice, {"none", "readonly", "shared"}, {}},
      {"stencil", "tile", K::list, {}, {2, 3}},
      {"stencil", "halo", K::choice, {"shared", "registers"}, {}},
      {"stencil", "register_block", K::integer, {}, {}},
      {"stencil", "vector", K::integer, {}, {}},  // 1, 2 or 4, with halo = registers
      {"stencil", "temporal", K::integer, {}, {}},
  };
  return keys;
}

const ScheduleKey* find_schedule_key(const std::string& family, const std::string& key) {
  for (auto& k : schedule_keys())
    if (k.family == family && k.key == key) return &k;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Errors

KnowledgeError::KnowledgeError(std::string f, int l, int c, const std::string& message, const std::string& source_line)
    : std::runtime_error([&] {
        std::ostringstream o;
        if (l > 0)
          o << f << ":" << l << ":" << c << ": error: " << message;
        else
          o << f << ": error: " << message;
        if (l > 0 && !source_line.empty())
          o << "\n  " << source_line << "\n  " << std::string(c > 0 ? c - 1 : 0, ' ') << "^";
        return o.str();
      }()),
      file(std::move(f)), line(l), column(c) {}

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Numbers in messages: integers without a fraction, others with four significant digits.
std::string fmt(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// A scanner shared by predicates and moves: identifiers, numbers and punctuation, with columns.

class Scanner {
 public:
  explicit Scanner(const std::string& s) : s_(s) {}
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  int column() const { return static_cast<int>(pos_); }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool accept(const std::string& tok) {
    skip_ws();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    pos_ += tok.size();
    return true;
  }
  bool ident_start() {
    skip_ws();
    return pos_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_');
  }
  std::string ident() {
    skip_ws();
    size_t b = pos_;
    if (!ident_start()) return "";
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    return s_.substr(b, pos_ - b);
  }
  bool number_start() {
    skip_ws();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) return true;
    return (c == '-' || c == '+' || c == '.') && pos_ + 1 < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])) || s_[pos_ + 1] == '.');
  }
  // A decimal number with optional sign, fraction and exponent; stops before "..".
  std::optional<double> number(std::string* text = nullptr) {
    skip_ws();
    size_t b = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && s_[pos_ + 1] != '.') {
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < s_.size() && (s_[e] == '-' || s_[e] == '+')) ++e;
      if (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) {
        pos_ = e;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      }
    }
    std::string t = s_.substr(b, pos_ - b);
    if (text) *text = t;
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size()) {
      pos_ = b;
      return std::nullopt;
    }
    return v;
  }
  std::string rest() {
    skip_ws();
    return s_.substr(pos_, 1);
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Predicates

std::optional<Predicate> parse_predicate(const std::string& text, std::string* error, int* column) {
  Scanner sc(text);
  auto fail = [&](const std::string& msg, int col) -> std::optional<Predicate> {
    if (error) *error = msg;
    if (column) *column = col;
    return std::nullopt;
  };
  Predicate p;
  p.text = text;
  int name_col = (sc.skip_ws(), sc.column());
  std::string name = sc.ident();
  if (name.empty()) return fail("expected a feature name", sc.column());
  if (sc.accept(":")) {
    if (!contains(dsl_families(), name)) return fail("unknown family '" + name + "' before ':'", name_col);
    p.family = name;
    name_col = (sc.skip_ws(), sc.column());
    name = sc.ident();
    if (name.empty()) return fail("expected a feature name", sc.column());
  }
  p.feature = name;
  int op_col = (sc.skip_ws(), sc.column());
  if (sc.accept("<=")) p.op = Predicate::Op::le;
  else if (sc.accept(">=")) p.op = Predicate::Op::ge;
  else if (sc.accept("==")) p.op = Predicate::Op::eq;
  else if (sc.accept("!=")) p.op = Predicate::Op::ne;
  else if (sc.accept("<")) p.op = Predicate::Op::lt;
  else if (sc.accept(">")) p.op = Predicate::Op::gt;
  else if (sc.ident_start()) {
    std::string w = sc.ident();
    if (w == "in") p.op = Predicate::Op::in;
    else if (w == "not" && sc.ident() == "in") p.op = Predicate::Op::not_in;
    else return fail("expected a comparison (<, <=, >, >=, ==, !=, in, not in)", op_col);
  } else {
    return fail("expected a comparison (<, <=, >, >=, ==, !=, in, not in)", op_col);
  }
  bool list = p.op == Predicate::Op::in || p.op == Predicate::Op::not_in;
  if (list && !sc.accept("[")) return fail("expected '[' after '" + std::string(p.op == Predicate::Op::in ? "in" : "not in") + "'", sc.column());
  int kinds = 0;  // 1: numbers seen, 2: identifiers seen
  for (;;) {
    int vcol = (sc.skip_ws(), sc.column());
    if (sc.number_start()) {
      auto v = sc.number();
      if (!v) return fail("bad number", vcol);
      p.numbers.push_back(*v);
      kinds |= 1;
    } else if (sc.ident_start()) {
      p.strings.push_back(sc.ident());
      kinds |= 2;
    } else {
      return fail("expected a number or a name", vcol);
    }
    if (kinds == 3) return fail("a list mixes numbers and names", vcol);
    if (!list) break;
    if (sc.accept(",")) continue;
    if (sc.accept("]")) break;
    return fail("expected ',' or ']'", sc.column());
  }
  if (!sc.at_end()) return fail("unexpected '" + sc.rest() + "'", sc.column());
  p.textual = kinds == 2;
  if (p.textual && p.op != Predicate::Op::eq && p.op != Predicate::Op::ne && !list)
    return fail("a name compares only with ==, !=, in, not in", op_col);
  return p;
}

namespace {

const char* op_text(Predicate::Op op) {
  switch (op) {
    case Predicate::Op::lt: return "<";
    case Predicate::Op::le: return "<=";
    case Predicate::Op::gt: return ">";
    case Predicate::Op::ge: return ">=";
    case Predicate::Op::eq: return "==";
    case Predicate::Op::ne: return "!=";
    case Predicate::Op::in: return "in";
    case Predicate::Op::not_in: return "not in";
  }
  return "?";
}

std::string literal_text(const Predicate& p) {
  std::vector<std::string> parts;
  if (p.textual) parts = p.strings;
  else
    for (double v : p.numbers) parts.push_back(fmt(v));
  if (p.op == Predicate::Op::in || p.op == Predicate::Op::not_in) return "[" + join(parts, ", ") + "]";
  return parts.empty() ? "" : parts[0];
}

}  // namespace

Evaluation evaluate(const Predicate& p, const Features& f, const std::string& family) {
  Evaluation e;
  if (!p.family.empty() && p.family != family) {
    e.truth = Truth::skipped;
    e.detail = p.text + " (only for " + p.family + ")";
    return e;
  }
  bool held = false;
  std::string value;
  if (p.textual) {
    auto it = f.str.find(p.feature);
    if (it == f.str.end()) {
      e.truth = Truth::unknown;
      e.detail = p.feature + " unknown";
      return e;
    }
    value = it->second;
    bool member = contains(p.strings, value);
    switch (p.op) {
      case Predicate::Op::eq: case Predicate::Op::in: held = member; break;
      case Predicate::Op::ne: case Predicate::Op::not_in: held = !member; break;
      default: held = false;  // rejected by the parser
    }
  } else {
    auto it = f.num.find(p.feature);
    if (it == f.num.end()) {
      e.truth = Truth::unknown;
      e.detail = p.feature + " unknown";
      return e;
    }
    double v = it->second;
    value = fmt(v);
    double r = p.numbers.empty() ? 0 : p.numbers[0];
    switch (p.op) {
      case Predicate::Op::lt: held = v < r; break;
      case Predicate::Op::le: held = v <= r; break;
      case Predicate::Op::gt: held = v > r; break;
      case Predicate::Op::ge: held = v >= r; break;
      case Predicate::Op::eq: held = v == r; break;
      case Predicate::Op::ne: held = v != r; break;
      case Predicate::Op::in: held = std::find(p.numbers.begin(), p.numbers.end(), v) != p.numbers.end(); break;
      case Predicate::Op::not_in: held = std::find(p.numbers.begin(), p.numbers.end(), v) == p.numbers.end(); break;
    }
  }
  e.truth = held ? Truth::yes : Truth::no;
  // "cache_row=none" reads better than "cache_row=none == none"; every other form shows both sides.
  if (p.textual && p.op == Predicate::Op::eq)
    e.detail = p.feature + "=" + value;
  else
    e.detail = p.feature + "=" + value + " " + op_text(p.op) + " " + literal_text(p);
  return e;
}

// ---------------------------------------------------------------------------------------------
// Moves

const char* verb_name(Move::Verb v) {
  switch (v) {
    case Move::Verb::set: return "set";
    case Move::Verb::double_: return "double";
    case Move::Verb::halve: return "halve";
    case Move::Verb::increase: return "increase";
    case Move::Verb::decrease: return "decrease";
    case Move::Verb::fuse: return "fuse";
    case Move::Verb::rewrite: return "rewrite";
    case Move::Verb::port: return "port";
  }
  return "?";
}

std::optional<Move> parse_move(const std::string& text, std::string* error, int* column) {
  Scanner sc(text);
  auto fail = [&](const std::string& msg, int col) -> std::optional<Move> {
    if (error) *error = msg;
    if (column) *column = col;
    return std::nullopt;
  };
  Move m;
  m.text = text;
  int col = (sc.skip_ws(), sc.column());
  std::string word = sc.ident();
  if (word.empty()) return fail("expected a move (set, double, halve, increase, decrease, fuse, rewrite, port)", col);
  if (sc.accept(":")) {
    if (!contains(dsl_families(), word)) return fail("unknown family '" + word + "' before ':'", col);
    m.family = word;
    col = (sc.skip_ws(), sc.column());
    word = sc.ident();
  }
  static const std::vector<std::pair<std::string, Move::Verb>> verbs = {
      {"set", Move::Verb::set},           {"double", Move::Verb::double_}, {"halve", Move::Verb::halve},
      {"increase", Move::Verb::increase}, {"decrease", Move::Verb::decrease}, {"fuse", Move::Verb::fuse},
      {"rewrite", Move::Verb::rewrite},   {"port", Move::Verb::port}};
  auto v = std::find_if(verbs.begin(), verbs.end(), [&](auto& p) { return p.first == word; });
  if (v == verbs.end())
    return fail("unknown move '" + word + "' (set, double, halve, increase, decrease, fuse, rewrite, port)", col);
  m.verb = v->second;
  if (m.verb == Move::Verb::fuse || m.verb == Move::Verb::rewrite || m.verb == Move::Verb::port) {
    if (!sc.at_end()) return fail("'" + word + "' takes no key", sc.column());
    return m;
  }
  m.key_column = (sc.skip_ws(), sc.column());
  m.key = sc.ident();
  if (m.key.empty()) return fail("expected a schedule key after '" + word + "'", m.key_column);
  if (m.verb != Move::Verb::set) {
    if (!sc.at_end()) return fail("'" + word + "' takes a key only", sc.column());
    return m;
  }
  std::vector<std::string> shown;
  for (;;) {
    MoveValue mv;
    mv.column = (sc.skip_ws(), sc.column());
    if (sc.accept("[")) {
      mv.kind = MoveValue::Kind::list;
      for (;;) {
        int ecol = (sc.skip_ws(), sc.column());
        std::string t;
        auto n = sc.number_start() ? sc.number(&t) : std::nullopt;
        if (!n || *n != std::floor(*n)) return fail("expected an integer", ecol);
        mv.list.push_back(static_cast<long long>(*n));
        if (sc.accept(",")) continue;
        if (sc.accept("]")) break;
        return fail("expected ',' or ']'", sc.column());
      }
      std::vector<std::string> parts;
      for (long long x : mv.list) parts.push_back(std::to_string(x));
      shown.push_back("[" + join(parts, ", ") + "]");
    } else if (sc.number_start()) {
      auto n = sc.number();
      if (!n || *n != std::floor(*n)) return fail("expected an integer", mv.column);
      mv.lo = mv.hi = static_cast<long long>(*n);
      mv.kind = MoveValue::Kind::integer;
      if (sc.accept("..")) {
        int hcol = (sc.skip_ws(), sc.column());
        auto h = sc.number_start() ? sc.number() : std::nullopt;
        if (!h || *h != std::floor(*h)) return fail("expected an integer after '..'", hcol);
        mv.hi = static_cast<long long>(*h);
        mv.kind = MoveValue::Kind::range;
        if (mv.hi < mv.lo) return fail("empty range " + std::to_string(mv.lo) + ".." + std::to_string(mv.hi), mv.column);
        shown.push_back(std::to_string(mv.lo) + ".." + std::to_string(mv.hi));
      } else {
        shown.push_back(std::to_string(mv.lo));
      }
    } else if (sc.ident_start()) {
      mv.kind = MoveValue::Kind::ident;
      mv.ident = sc.ident();
      shown.push_back(mv.ident);
    } else {
      return fail("expected a value: an integer, a range a..b, a name or a list [a, b]", mv.column);
    }
    m.alternatives.push_back(mv);
    if (sc.accept("|")) continue;
    if (!sc.at_end()) return fail("unexpected '" + sc.rest() + "'", sc.column());
    break;
  }
  m.value = join(shown, "|");
  return m;
}

std::string check_move(const Move& m, const std::string& family, int* column) {
  auto at = [&](int c) {
    if (column) *column = c;
  };
  at(0);
  if (!m.family.empty() && m.family != family) return "the move is for family '" + m.family + "', not '" + family + "'";
  if (m.key.empty()) return "";
  const ScheduleKey* k = find_schedule_key(family, m.key);
  if (!k) {
    std::vector<std::string> keys;
    for (auto& s : schedule_keys())
      if (s.family == family) keys.push_back(s.key);
    at(m.key_column);
    return "family '" + family + "' has no schedule key '" + m.key + "' (its keys: " + join(keys, ", ") + ")";
  }
  if (m.verb != Move::Verb::set) {
    if (k->kind != ScheduleKey::Kind::integer) {
      at(m.key_column);
      return std::string("'") + verb_name(m.verb) + "' needs an integer key; '" + m.key + "' of family '" + family +
             "' is " + (k->kind == ScheduleKey::Kind::list ? "a list" : "a choice");
    }
    return "";
  }
  for (auto& v : m.alternatives) {
    at(v.column);
    switch (k->kind) {
      case ScheduleKey::Kind::integer:
        if (v.kind != MoveValue::Kind::integer && v.kind != MoveValue::Kind::range)
          return "'" + m.key + "' takes an integer or a range a..b";
        if (v.lo < 0) return "'" + m.key + "' takes a non-negative integer";
        break;
      case ScheduleKey::Kind::list: {
        std::vector<std::string> ls;
        for (size_t n : k->lengths) ls.push_back(std::to_string(n));
        std::string want = "'" + m.key + "' of family '" + family + "' takes a list of " + join(ls, " or ") + " integers";
        if (v.kind != MoveValue::Kind::list) return want;
        if (std::find(k->lengths.begin(), k->lengths.end(), v.list.size()) == k->lengths.end()) return want;
        for (long long x : v.list)
          if (x <= 0) return want + " above zero";
        break;
      }
      case ScheduleKey::Kind::choice:
        if (v.kind != MoveValue::Kind::ident || !contains(k->choices, v.ident))
          return "'" + m.key + "' of family '" + family + "' is one of " + join(k->choices, ", ");
        break;
    }
  }
  at(0);
  return "";
}

// ---------------------------------------------------------------------------------------------
// Methods, rules, knowledge

bool Method::applies_to(const std::string& family, const std::string& bottleneck) const {
  return contains(families, family) && contains(bottlenecks, bottleneck);
}
bool Method::is_cuda_only(const std::string& family) const { return contains(cuda_only, family); }
std::vector<const Move*> Method::moves_for(const std::string& family) const {
  std::vector<const Move*> out;
  if (is_cuda_only(family)) return out;
  for (auto& m : moves)
    if (m.family.empty() || m.family == family) out.push_back(&m);
  return out;
}

const Method* Knowledge::method(const std::string& id) const {
  auto it = methods.find(id);
  return it == methods.end() ? nullptr : &it->second;
}
const FeatureSpec* Knowledge::feature(const std::string& name) const {
  for (auto& f : features)
    if (f.name == name) return &f;
  return nullptr;
}
std::map<std::pair<std::string, std::string>, std::vector<std::string>> Knowledge::coverage() const {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> out;
  for (auto& b : bottleneck_classes())
    for (auto& f : dsl_families()) out[{b, f}];
  for (auto& r : rules) {
    auto& v = out[{r.bottleneck, r.family}];
    for (auto& m : r.methods)
      if (!contains(v, m)) v.push_back(m);
  }
  return out;
}

std::string default_knowledge_dir() {
  if (const char* e = std::getenv("KSOL_KNOWLEDGE"); e && *e) return e;
  return source_root() + "/knowledge";
}

namespace {

// The text of every file read, so that any error, however late it is found, shows its line.
class Sources {
 public:
  const std::string& add(const std::string& file, std::string text) {
    auto& lines = lines_[file];
    lines.clear();
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return texts_[file] = std::move(text);
  }
  [[noreturn]] void fail(const Location& at, const std::string& msg) const {
    std::string src;
    auto it = lines_.find(at.file);
    if (it != lines_.end() && at.line >= 1 && at.line <= static_cast<int>(it->second.size())) src = it->second[at.line - 1];
    throw KnowledgeError(at.file, at.line, at.column, msg, src);
  }

 private:
  std::map<std::string, std::vector<std::string>> lines_;
  std::map<std::string, std::string> texts_;
};

// Reads the values of one TOML file, turning every problem into a located KnowledgeError.
class Reader {
 public:
  Reader(const Sources& src, std::string file) : src_(src), file_(std::move(file)) {}

  Location loc(const toml::source_region& r, int extra_col = 0) const {
    return {file_, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column) + extra_col};
  }
  Location loc(const toml::node& n, int extra_col = 0) const { return loc(n.source(), extra_col); }
  // The column of character `i` of a single-line basic or literal string node: one past the quote.
  Location in_string(const toml::node& n, int i) const { return loc(n, 1 + i); }
  [[noreturn]] void fail(const Location& at, const std::string& msg) const { src_.fail(at, msg); }
  [[noreturn]] void fail(const toml::node& n, const std::string& msg) const { src_.fail(loc(n), msg); }

  const toml::node* need(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) fail(loc(t), std::string("missing required key '") + key + "'");
    return n;
  }
  std::string str(const toml::table& t, const char* key, bool required) const {
    const toml::node* n = required ? need(t, key) : t.get(key);
    if (!n) return "";
    auto v = n->value<std::string>();
    if (!v) fail(*n, std::string("'") + key + "' must be a string");
    return trim(*v);
  }
  const toml::array* array(const toml::table& t, const char* key, bool required) const {
    const toml::node* n = required ? need(t, key) : t.get(key);
    if (!n) return nullptr;
    if (!n->as_array()) fail(*n, std::string("'") + key + "' must be an array");
    return n->as_array();
  }
  // An array of strings, each with the node it came from.
  std::vector<std::pair<std::string, const toml::node*>> strs(const toml::table& t, const char* key, bool required) const {
    std::vector<std::pair<std::string, const toml::node*>> out;
    const toml::array* a = array(t, key, required);
    if (!a) return out;
    for (auto& e : *a) {
      auto v = e.value<std::string>();
      if (!v) fail(e, std::string("'") + key + "' must be an array of strings");
      out.emplace_back(*v, &e);
    }
    return out;
  }
  void only_keys(const toml::table& t, std::initializer_list<const char*> keys, const std::string& where) const {
    std::vector<std::string> ok(keys.begin(), keys.end());
    for (auto& [k, v] : t)
      if (!contains(ok, std::string(k.str())))
        fail(loc(k.source()), "unknown key '" + std::string(k.str()) + "' in " + where + " (keys: " + join(ok, ", ") + ")");
  }
  // A list of names from a fixed set, distinct, non-empty when `required`.
  std::vector<std::string> names_from(const toml::table& t, const char* key, const std::vector<std::string>& allowed,
                                      const char* what, bool required) const {
    std::vector<std::string> out;
    auto items = strs(t, key, required);
    if (required && items.empty()) fail(*t.get(key), std::string("'") + key + "' must name at least one " + what);
    for (auto& [s, n] : items) {
      if (!contains(allowed, s)) fail(*n, "unknown " + std::string(what) + " '" + s + "' (" + join(allowed, ", ") + ")");
      if (contains(out, s)) fail(*n, "duplicate " + std::string(what) + " '" + s + "'");
      out.push_back(s);
    }
    return out;
  }

  const std::string& file() const { return file_; }

 private:
  const Sources& src_;
  std::string file_;
};

toml::table parse_file(Sources& src, const std::string& path) {
  if (!fs::exists(path)) throw KnowledgeError(path, 0, 0, "no such file", "");
  const std::string& text = src.add(path, read_file(path));
  auto parsed = toml::parse(std::string_view(text), std::string_view(path));
  if (!parsed) {
    auto& e = parsed.error();
    src.fail({path, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column)},
             std::string(e.description()));
  }
  return std::move(parsed).table();
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Parses and checks one predicate string against the vocabulary. `families` lists the families
// a prefix may name (empty: no prefix allowed).
Predicate read_predicate(const Reader& R, const Knowledge& k, const std::string& text, const toml::node& n,
                         const std::vector<std::string>& families) {
  std::string err;
  int col = 0;
  auto p = parse_predicate(text, &err, &col);
  if (!p) R.fail(R.in_string(n, col), "bad predicate: " + err);
  p->at = R.in_string(n, 0);
  size_t name_at = text.find(p->feature, p->family.empty() ? 0 : text.find(':') + 1);
  Location feature_at = R.in_string(n, static_cast<int>(name_at == std::string::npos ? 0 : name_at));
  if (!p->family.empty()) {
    if (families.empty()) R.fail(R.in_string(n, static_cast<int>(text.find(p->family))), "a rule's predicates take no family prefix (the rule has one family)");
    if (!contains(families, p->family))
      R.fail(R.in_string(n, static_cast<int>(text.find(p->family))),
             "family '" + p->family + "' is not one of the card's families (" + join(families, ", ") + ")");
  }
  const FeatureSpec* fs = k.feature(p->feature);
  if (!fs) R.fail(feature_at, "unknown feature '" + p->feature + "' (declare it in features.toml)");
  if (fs->textual != p->textual) {
    if (fs->textual) R.fail(feature_at, "feature '" + p->feature + "' is a string; compare it with names");
    R.fail(feature_at, "feature '" + p->feature + "' is a number; compare it with numbers");
  }
  if (fs->textual && !fs->values.empty())
    for (auto& v : p->strings)
      if (!contains(fs->values, v))
        R.fail(R.in_string(n, static_cast<int>(text.rfind(v))),
               "'" + v + "' is not a value of feature '" + p->feature + "' (" + join(fs->values, ", ") + ")");
  return *p;
}

void load_features_file(Sources& src, Knowledge& k, const std::string& path) {
  toml::table root = parse_file(src, path);
  Reader R(src, path);
  R.only_keys(root, {"feature"}, "the top level");
  const toml::node* arr = root.get("feature");
  if (!arr || !arr->as_array()) R.fail(Location{path, 1, 1}, "features.toml needs [[feature]] entries");
  static const std::vector<std::string> sources = {"classifier", "ncu", "ptxas", "task", "device", "schedule", "code", "derived"};
  for (auto& e : *arr->as_array()) {
    const toml::table* t = e.as_table();
    if (!t) R.fail(e, "[[feature]] entries must be tables");
    R.only_keys(*t, {"name", "kind", "values", "derive", "source", "doc"}, "[[feature]]");
    FeatureSpec f;
    f.at = R.loc(*t);
    f.name = R.str(*t, "name", true);
    if (!is_identifier(f.name)) R.fail(*t->get("name"), "feature name '" + f.name + "' is not an identifier");
    if (k.feature(f.name)) R.fail(*t->get("name"), "duplicate feature '" + f.name + "'");
    std::string kind = R.str(*t, "kind", true);
    if (kind != "number" && kind != "string") R.fail(*t->get("kind"), "kind must be 'number' or 'string'");
    f.textual = kind == "string";
    f.doc = R.str(*t, "doc", true);
    f.source = R.str(*t, "source", true);
    if (!contains(sources, f.source)) R.fail(*t->get("source"), "unknown source '" + f.source + "' (" + join(sources, ", ") + ")");
    for (auto& [v, n] : R.strs(*t, "values", false)) {
      if (!f.textual) R.fail(*n, "only string features have 'values'");
      if (!is_identifier(v)) R.fail(*n, "value '" + v + "' is not an identifier");
      f.values.push_back(v);
    }
    f.derive = R.str(*t, "derive", false);
    if (!f.derive.empty() || f.source == "derived") {
      const toml::node* dn = t->get("derive");
      if (f.source != "derived") R.fail(*dn, "a feature with 'derive' must have source = \"derived\"");
      if (!dn) R.fail(*t, "a derived feature needs 'derive'");
      if (f.textual) R.fail(*dn, "only number features can be derived");
      std::string raw = *dn->value<std::string>();
      ExprError err;
      auto ex = Expr::parse(raw, &err);
      if (!ex) R.fail(R.in_string(*dn, err.column), "bad expression: " + err.message);
      std::vector<std::string> names;
      ex->names(&names);
      for (auto& nm : names) {
        const FeatureSpec* used = k.feature(nm);
        if (!used || used->textual)
          R.fail(R.in_string(*dn, static_cast<int>(raw.find(nm))),
                 "'" + nm + "' is not a number feature declared above '" + f.name + "'");
      }
    }
    k.features.push_back(f);
  }
  // The two axes of the table must be declared exactly as the code knows them.
  for (auto [name, values] : {std::pair{"bottleneck", &bottleneck_classes()}, std::pair{"family", &dsl_families()}}) {
    const FeatureSpec* f = k.feature(name);
    if (!f || !f->textual || f->values != *values)
      throw KnowledgeError(path, 0, 0,
                           std::string("feature '") + name + "' must be declared as a string with values " + join(*values, ", "), "");
  }
}

Method load_card(Sources& src, const Knowledge& k, const std::string& path) {
  toml::table t = parse_file(src, path);
  Reader R(src, path);
  R.only_keys(t, {"id", "title", "families", "bottlenecks", "when", "requires", "why", "how", "dsl_moves", "cuda_only",
                  "expected", "speedup", "risks", "related"},
              "a method card");
  Method m;
  m.at = {path, 1, 1};
  m.id = R.str(t, "id", true);
  std::string stem = fs::path(path).stem().string();
  if (m.id != stem) R.fail(*t.get("id"), "id '" + m.id + "' does not match the file name '" + stem + ".toml'");
  if (!is_identifier(m.id)) R.fail(*t.get("id"), "id '" + m.id + "' is not an identifier");
  m.title = R.str(t, "title", true);
  m.families = R.names_from(t, "families", dsl_families(), "family", true);
  m.bottlenecks = R.names_from(t, "bottlenecks", bottleneck_classes(), "bottleneck", true);
  for (auto& [s, n] : R.strs(t, "when", true)) m.when.push_back(trim(s));
  if (m.when.empty()) R.fail(*t.get("when"), "'when' needs at least one rule in words");
  for (auto& [s, n] : R.strs(t, "requires", true)) m.preconditions.push_back(read_predicate(R, k, s, *n, m.families));
  m.why = R.str(t, "why", true);
  m.how = R.str(t, "how", true);
  m.expected = R.str(t, "expected", true);
  for (auto& [s, n] : R.strs(t, "cuda_only", false)) {
    if (!contains(m.families, s)) R.fail(*n, "cuda_only family '" + s + "' is not one of the card's families (" + join(m.families, ", ") + ")");
    m.cuda_only.push_back(s);
  }
  for (auto& [s, n] : R.strs(t, "dsl_moves", true)) {
    std::string err;
    int col = 0;
    auto mv = parse_move(s, &err, &col);
    if (!mv) R.fail(R.in_string(*n, col), "bad move: " + err);
    mv->at = R.in_string(*n, 0);
    if (!mv->family.empty() && !contains(m.families, mv->family))
      R.fail(mv->at, "family '" + mv->family + "' is not one of the card's families (" + join(m.families, ", ") + ")");
    if (!mv->family.empty() && m.is_cuda_only(mv->family))
      R.fail(mv->at, "family '" + mv->family + "' is listed in cuda_only, so it has no moves");
    for (auto& fam : m.families) {
      if (m.is_cuda_only(fam) || (!mv->family.empty() && mv->family != fam)) continue;
      std::string why = check_move(*mv, fam, &col);
      if (!why.empty()) R.fail(R.in_string(*n, col), "bad move: " + why);
    }
    m.moves.push_back(*mv);
  }
  for (auto& fam : m.families)
    if (!m.is_cuda_only(fam) && m.moves_for(fam).empty())
      R.fail(*t.get("dsl_moves"), "no move for family '" + fam + "': add one, or list the family in cuda_only");
  const toml::array* sp = R.array(t, "speedup", true);
  if (sp->size() != 2 || !sp->get(0)->value<double>() || !sp->get(1)->value<double>())
    R.fail(*t.get("speedup"), "'speedup' must be [low, high], two numbers");
  m.speedup_lo = *sp->get(0)->value<double>();
  m.speedup_hi = *sp->get(1)->value<double>();
  if (!(m.speedup_lo > 0 && m.speedup_lo <= m.speedup_hi))
    R.fail(*t.get("speedup"), "'speedup' must satisfy 0 < low <= high");
  for (auto& [s, n] : R.strs(t, "risks", true)) m.risks.push_back(trim(s));
  if (m.risks.empty()) R.fail(*t.get("risks"), "'risks' needs at least one entry");
  for (auto& [s, n] : R.strs(t, "related", false)) m.related.push_back(s);
  return m;
}

void load_table(Sources& src, Knowledge& k, const std::string& path) {
  toml::table root = parse_file(src, path);
  Reader R(src, path);
  R.only_keys(root, {"rule"}, "the top level");
  const toml::node* arr = root.get("rule");
  if (!arr || !arr->as_array()) throw KnowledgeError(path, 0, 0, "the decision table needs [[rule]] entries", "");
  std::map<std::string, Location> ids;
  for (auto& e : *arr->as_array()) {
    const toml::table* t = e.as_table();
    if (!t) R.fail(e, "[[rule]] entries must be tables");
    R.only_keys(*t, {"id", "bottleneck", "family", "when", "methods", "note"}, "[[rule]]");
    Rule r;
    r.at = R.loc(*t);
    r.id = R.str(*t, "id", true);
    if (!is_identifier(r.id)) R.fail(*t->get("id"), "rule id '" + r.id + "' is not an identifier");
    if (ids.count(r.id))
      R.fail(*t->get("id"), "duplicate rule id '" + r.id + "' (first at line " + std::to_string(ids[r.id].line) + ")");
    ids[r.id] = r.at;
    r.bottleneck = R.str(*t, "bottleneck", true);
    if (!contains(bottleneck_classes(), r.bottleneck))
      R.fail(*t->get("bottleneck"), "unknown bottleneck '" + r.bottleneck + "' (" + join(bottleneck_classes(), ", ") + ")");
    r.family = R.str(*t, "family", true);
    if (!contains(dsl_families(), r.family))
      R.fail(*t->get("family"), "unknown family '" + r.family + "' (" + join(dsl_families(), ", ") + ")");
    r.note = R.str(*t, "note", false);
    for (auto& [s, n] : R.strs(*t, "when", false)) r.when.push_back(read_predicate(R, k, s, *n, {}));
    auto methods = R.strs(*t, "methods", true);
    if (methods.empty()) R.fail(*t->get("methods"), "a rule needs at least one method");
    for (auto& [id, n] : methods) {
      const Method* m = k.method(id);
      if (!m) R.fail(*n, "no method card '" + id + "' (expected methods/" + id + ".toml)");
      if (contains(r.methods, id)) R.fail(*n, "method '" + id + "' is listed twice");
      if (!contains(m->families, r.family))
        R.fail(*n, "method '" + id + "' does not apply to family '" + r.family + "' (its families: " + join(m->families, ", ") + ")");
      if (!contains(m->bottlenecks, r.bottleneck))
        R.fail(*n, "method '" + id + "' does not address '" + r.bottleneck + "' (its bottlenecks: " + join(m->bottlenecks, ", ") + ")");
      r.methods.push_back(id);
    }
    k.rules.push_back(r);
  }
  // Every cell needs a rule that always fires and offers at least two methods, so the planner
  // always has a ranked answer for any (bottleneck, family).
  for (auto& b : bottleneck_classes())
    for (auto& f : dsl_families()) {
      const Rule* fallback = nullptr;
      for (auto& r : k.rules)
        if (r.bottleneck == b && r.family == f && r.unconditional() && r.methods.size() >= 2) {
          fallback = &r;
          break;
        }
      if (!fallback)
        throw KnowledgeError(path, 0, 0,
                             "cell (" + b + ", " + f + ") has no rule without 'when' offering at least two methods; "
                             "add one after that cell's other rules", "");
    }
  for (size_t i = 0; i < k.rules.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (k.rules[j].unconditional() && k.rules[j].bottleneck == k.rules[i].bottleneck && k.rules[j].family == k.rules[i].family) {
        k.warnings.push_back(path + ":" + std::to_string(k.rules[i].at.line) + ": rule " + k.rules[i].id +
                             " follows the unconditional rule " + k.rules[j].id +
                             " of its cell, so it can only add methods ranked after that rule's");
        break;
      }
}

}  // namespace

Knowledge load_knowledge(const std::string& dir) {
  Knowledge k;
  k.dir = dir;
  if (!fs::is_directory(dir)) throw KnowledgeError(dir, 0, 0, "no knowledge folder", "");
  Sources src;
  load_features_file(src, k, (fs::path(dir) / "features.toml").string());

  fs::path mdir = fs::path(dir) / "methods";
  if (!fs::is_directory(mdir)) throw KnowledgeError(mdir.string(), 0, 0, "no methods folder", "");
  std::vector<std::string> cards;
  for (auto& e : fs::directory_iterator(mdir))
    if (e.path().extension() == ".toml") cards.push_back(e.path().string());
  std::sort(cards.begin(), cards.end());  // directory order is not deterministic
  // Related-method links are checked once every card is known.
  std::vector<std::pair<std::string, std::string>> related;  // (card path, id)
  for (auto& path : cards) {
    Method m = load_card(src, k, path);
    for (auto& r : m.related) related.emplace_back(path, r);
    k.methods.emplace(m.id, std::move(m));
  }
  for (auto& [path, id] : related)
    if (!k.method(id)) {
      // Point at the name inside the card's `related` array.
      Reader R(src, path);
      toml::table t = parse_file(src, path);
      for (auto& e : *t.get("related")->as_array())
        if (e.value<std::string>() == id) R.fail(e, "related method '" + id + "' has no card");
    }

  load_table(src, k, (fs::path(dir) / "decision_table.toml").string());
  for (auto& [id, m] : k.methods) {
    bool used = false;
    for (auto& r : k.rules) used |= contains(r.methods, id);
    if (!used) k.warnings.push_back(m.at.file + ": method '" + id + "' is in no rule of decision_table.toml, so it is never chosen");
  }
  return k;
}

// ---------------------------------------------------------------------------------------------
// Features

Features load_features(const std::string& path, const Knowledge* k) {
  Sources src;
  toml::table root = parse_file(src, path);
  Reader R(src, path);
  const toml::table* t = &root;
  if (const toml::node* n = root.get("features")) {
    if (!n->as_table()) R.fail(*n, "'features' must be a table");
    t = n->as_table();
  }
  Features f;
  for (auto& [key, v] : *t) {
    std::string name(key.str());
    const FeatureSpec* spec = k ? k->feature(name) : nullptr;
    if (k && !spec) R.fail(R.loc(key.source()), "unknown feature '" + name + "' (see " + k->dir + "/features.toml)");
    if (auto s = v.value_exact<std::string>()) {
      if (spec && !spec->textual) R.fail(v, "feature '" + name + "' is a number");
      if (spec && !spec->values.empty() && !contains(spec->values, *s))
        R.fail(v, "'" + *s + "' is not a value of feature '" + name + "' (" + join(spec->values, ", ") + ")");
      f.str[name] = *s;
    } else if (auto b = v.value_exact<bool>()) {
      if (spec && spec->textual) R.fail(v, "feature '" + name + "' is a string");
      f.num[name] = *b ? 1 : 0;
    } else if (auto d = v.value<double>()) {
      if (spec && spec->textual) R.fail(v, "feature '" + name + "' is a string");
      f.num[name] = *d;
    } else {
      R.fail(v, "feature '" + name + "' must be a number, a string or a boolean");
    }
  }
  return f;
}

void derive_features(const Knowledge& k, Features* f) {
  for (auto& spec : k.features) {
    if (spec.derive.empty() || f->num.count(spec.name)) continue;
    ExprError err;
    auto e = Expr::parse(spec.derive, &err);
    if (!e) continue;  // validated at load; unreachable for a loaded Knowledge
    double v = e->eval(f->num, &err);
    if (err.message.empty() && std::isfinite(v)) f->num[spec.name] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// Choosing

std::vector<Choice> choose(const Knowledge& k, const Features& f, size_t max, Trace* trace) {
  ChooseOptions opt;
  opt.max = max;
  return choose(k, f, opt, trace);
}

std::vector<Choice> choose(const Knowledge& k, const Features& f_in, const ChooseOptions& opt, Trace* trace) {
  std::vector<Choice> out;
  auto note = [&](const std::string& line) {
    if (trace) trace->lines.push_back(line);
  };
  Features f = f_in;
  derive_features(k, &f);
  auto b = f.str.find("bottleneck"), fam = f.str.find("family");
  if (b == f.str.end() || fam == f.str.end()) {
    for (const char* name : {"bottleneck", "family"})
      if (!f.str.count(name)) {
        if (trace) trace->unknown_features.insert(name);
        note(std::string("no choice: feature '") + name + "' unknown");
      }
    return out;
  }
  const std::string& bottleneck = b->second;
  const std::string& family = fam->second;
  std::set<std::string> offered;
  // Evaluates a list of predicates; returns true when all hold (skipped ones do not count),
  // collecting the details of those that held, or the first that did not.
  auto all_hold = [&](const std::vector<Predicate>& ps, std::vector<std::string>* held, std::string* failed) {
    for (auto& p : ps) {
      Evaluation e = evaluate(p, f, family);
      if (e.truth == Truth::skipped) continue;
      if (e.truth == Truth::unknown) {
        if (trace) trace->unknown_features.insert(p.feature);
        *failed = e.detail + " (predicate '" + p.text + "' is false)";
        return false;
      }
      if (e.truth == Truth::no) {
        *failed = e.detail + " is false";
        return false;
      }
      // A card often repeats its rule's condition; say it once.
      if (!contains(*held, e.detail)) held->push_back(e.detail);
    }
    return true;
  };
  bool cell_seen = false;
  for (auto& r : k.rules) {
    if (out.size() >= opt.max) break;
    if (r.bottleneck != bottleneck || r.family != family) continue;
    cell_seen = true;
    std::vector<std::string> rule_reasons;
    std::string failed;
    if (!all_hold(r.when, &rule_reasons, &failed)) {
      note(r.id + " skipped: " + failed);
      continue;
    }
    note(r.id + " fired" + (rule_reasons.empty() ? std::string(" (unconditional)") : ": " + join(rule_reasons, ", ")));
    for (auto& id : r.methods) {
      if (out.size() >= opt.max) break;
      if (offered.count(id)) continue;
      if (opt.exclude.count(id)) {
        note(r.id + " passed over " + id + ": excluded");
        continue;
      }
      const Method* m = k.method(id);
      if (!m) continue;  // a loaded Knowledge has every referenced card
      bool cuda = m->moves_for(family).empty();
      if (opt.dsl_only && cuda) {
        note(r.id + " passed over " + id + ": no DSL move for " + family);
        continue;
      }
      std::vector<std::string> reasons = rule_reasons;
      if (!all_hold(m->preconditions, &reasons, &failed)) {
        note(r.id + " passed over " + id + ": " + failed);
        continue;
      }
      offered.insert(id);
      Choice c;
      c.rank = static_cast<int>(out.size()) + 1;
      c.method = id;
      c.title = m->title;
      c.rule = r.id;
      c.bottleneck = bottleneck;
      c.family = family;
      c.reasons = reasons;
      for (const Move* mv : m->moves_for(family))
        c.moves.push_back(mv->family.empty() ? trim(mv->text) : trim(mv->text.substr(mv->text.find(':') + 1)));
      c.cuda_only = cuda;
      note(r.id + " chose " + id + " (#" + std::to_string(c.rank) + ")");
      out.push_back(std::move(c));
    }
  }
  if (!cell_seen && opt.max > 0) note("no rule for (" + bottleneck + ", " + family + ")");
  return out;
}

std::string explain(const Choice& c) {
  std::string s = "rule " + c.rule + " [" + c.bottleneck + "/" + c.family + "] chose " + c.method + " (#" +
                  std::to_string(c.rank) + ")";
  if (c.reasons.empty())
    s += ": the cell's default rule";
  else
    s += " because " + join(c.reasons, ", ");
  if (c.cuda_only) s += "; CUDA only (no DSL move for " + c.family + ")";
  else s += "; moves: " + join(c.moves, "; ");
  return s;
}

std::string card_text(const Method& m, const std::string& family) {
  std::ostringstream o;
  o << m.title << " [" << m.id << "]\n";
  o << "When:\n";
  for (auto& w : m.when) o << "- " << w << "\n";
  o << "Why: " << m.why << "\n";
  o << "How: " << m.how << "\n";
  auto moves = m.moves_for(family);
  if (moves.empty()) {
    o << "DSL moves: none for " << family << " (write it in CUDA)\n";
  } else {
    o << "DSL moves:";
    for (const Move* mv : moves) o << " `" << mv->text << "`";
    o << "\n";
  }
  o << "Expected: " << m.expected << " (" << fmt(m.speedup_lo) << "-" << fmt(m.speedup_hi) << "x)\n";
  o << "Risks:\n";
  for (auto& r : m.risks) o << "- " << r << "\n";
  return o.str();
}

}  // namespace ksol::agents
