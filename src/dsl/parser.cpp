// Tokens to an unchecked Program by recursive descent (docs/DSL.md, "The algorithm" and
// "The schedule"), and parse_program: the front end's passes in order.
#include <cstdlib>
#include <limits>

#include "dsl/front.h"

namespace ksol::dsl {

Program parse_program(const std::string& text, const std::string& file) {
  detail::Source src(file, text);
  std::vector<detail::Token> tokens = detail::lex(src);
  detail::Parsed parsed = detail::parse(src, tokens);
  detail::check(src, parsed);
  parsed.program.family = detail::recognise_family(src, parsed);
  parsed.program.file = file;
  return std::move(parsed.program);
}

namespace detail {

bool is_type_name(const std::string& w) {
  for (const char* t : {"f32", "f64", "bf16", "f16", "i32", "i64"})
    if (w == t) return true;
  return false;
}

Type type_from_name(const std::string& w) {
  for (Type t : {Type::f32, Type::f64, Type::bf16, Type::f16, Type::i32, Type::i64})
    if (w == type_name(t)) return t;
  return Type::f32;
}

namespace {

bool is_reduction_keyword(const std::string& w) {
  return w == "sum" || w == "max" || w == "min" || w == "mean" || w == "argmax" || w == "scan" || w == "prodscan";
}

ReduceOp reduce_from_name(const std::string& w) {
  if (w == "prodscan") return ReduceOp::scan;
  for (ReduceOp r : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::mean, ReduceOp::argmax, ReduceOp::scan})
    if (w == reduce_name(r)) return r;
  return ReduceOp::none;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::ident: return "'" + t.text + "'";
    case Tok::keyword: return "keyword '" + t.text + "'";
    case Tok::number: return "number " + t.text;
    case Tok::punct: return "'" + t.text + "'";
    case Tok::newline: return "end of line";
    case Tok::end: return "end of file";
  }
  return "?";
}

class Parser {
 public:
  Parser(const Source& src, const std::vector<Token>& tokens) : src_(src), toks_(tokens) {}

  Parsed run() {
    skip_newlines();
    if (!is_keyword_tok(peek(), "kernel"))
      fail_at(peek(), "expected 'kernel NAME(inputs) -> (outputs) { ... }' but found " + describe(peek()));
    next();
    Program& p = out_.program;
    p.name = expect_ident("the kernel's name").text;
    expect("(", "after the kernel's name");
    p.inputs = params();
    expect(")", "after the inputs");
    skip_newlines();  // the outputs may start a line of their own
    expect("->", "between the inputs and the outputs");
    expect("(", "before the outputs");
    p.outputs = params(true);
    expect(")", "after the outputs");
    skip_newlines();
    expect("{", "to open the kernel's body");
    statements();
    skip_newlines();
    // Schedules: any number with a guard (`schedule when M * N >= 4096 { ... }`), then at most one
    // without, which must be the last.
    bool unguarded = false;
    while (is_keyword_tok(peek(), "schedule")) {
      const Token& kw = next();
      if (unguarded)
        fail_at(kw, "a schedule follows the schedule without 'when', which must be the last (it runs at the sizes no guard takes)");
      if (peek().kind == Tok::ident && peek().text == "when") {
        next();
        GuardedSchedule g;
        g.loc = kw.loc;
        g.when = guard();
        schedule(g.schedule, g.schedule_keys);
        p.guarded.push_back(std::move(g));
      } else {
        schedule(p.schedule, p.schedule_keys);
        unguarded = true;
      }
      skip_newlines();
    }
    if (!p.guarded.empty() && !unguarded)
      src_.fail(p.guarded.back().loc, "the schedules with 'when' need a last 'schedule { ... }' without 'when' for the sizes no guard takes");
    if (peek().kind != Tok::end) fail_at(peek(), "expected 'schedule { ... }' or the end of the file but found " + describe(peek()));
    return std::move(out_);
  }

 private:
  const Source& src_;
  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int nodes_ = 0;  // in the current statement
  Parsed out_;

  const Token& peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  static bool is_punct(const Token& t, const char* p) { return t.kind == Tok::punct && t.text == p; }
  static bool is_keyword_tok(const Token& t, const char* k) { return t.kind == Tok::keyword && t.text == k; }
  bool accept(const char* p) {
    if (!is_punct(peek(), p)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const { src_.fail(t.loc, message); }

  // Newlines inside () and [] are not tokens, so a missing ')' is noticed at the next line's
  // first token; the caret then goes where the ')' was due, just after the previous token.
  [[noreturn]] void fail_expected(const std::string& wanted) const {
    const Token& t = peek();
    std::string found = describe(t);
    if (t.kind == Tok::keyword) found += ", which is reserved";
    if (pos_ > 0 && toks_[pos_ - 1].kind != Tok::newline && toks_[pos_ - 1].loc.line < t.loc.line) {
      const Token& prev = toks_[pos_ - 1];
      src_.fail({prev.loc.line, prev.loc.col + static_cast<int>(prev.text.size())},
                "expected " + wanted + " but found " + found + " on line " + std::to_string(t.loc.line));
    }
    fail_at(t, "expected " + wanted + " but found " + found);
  }
  const Token& expect(const char* p, const std::string& why) {
    if (!is_punct(peek(), p)) fail_expected(std::string("'") + p + "' " + why);
    return next();
  }
  const Token& expect_ident(const std::string& what) {
    if (peek().kind != Tok::ident) fail_expected(what);
    return next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::newline) next();
  }
  void skip_separators() {
    while (peek().kind == Tok::newline || is_punct(peek(), ";")) next();
  }
  // A statement or schedule entry ends at a newline, at ';' or just before the closing '}'.
  void end_of_statement(const std::string& what) {
    if (peek().kind == Tok::newline || is_punct(peek(), ";")) {
      next();
      return;
    }
    if (is_punct(peek(), "}")) return;
    fail_at(peek(), "expected the end of the " + what + " (a newline or ';') but found " + describe(peek()));
  }

  // `outputs`: a definition's left side names at least one index, so an output has an extent.
  std::vector<Param> params(bool outputs = false) {
    std::vector<Param> list;
    do {
      Param prm;
      const Token& name = expect_ident("a parameter 'NAME: TYPE[EXTENTS]'");
      prm.name = name.text;
      prm.loc = name.loc;
      expect(":", "after the parameter's name");
      const Token& t = expect_ident("a type (f32, f64, bf16, f16, i32, i64)");
      if (!is_type_name(t.text)) {
        if (peek().kind == Tok::ident && is_type_name(peek().text)) {
          if (t.text != "csr" && t.text != "coo" && t.text != "ell")
            fail_at(t, "unknown storage format '" + t.text + "'; the sparse formats are csr, coo and ell");
          prm.format = t.text;
          prm.type = type_from_name(next().text);
        } else {
          fail_at(t, "unknown type '" + t.text + "'; the types are f32, f64, bf16, f16, i32, i64");
        }
      } else {
        prm.type = type_from_name(t.text);
      }
      expect("[", "to open the parameter's extents");
      // `f32[]`: no extents, one value (a scalar parameter read as `s[]`).
      if (!is_punct(peek(), "]")) do {
        // A number is a fixed extent, as a conv's 3x3 filter has (F: f32[K, C, 3, 3]).
        if (peek().kind == Tok::number) {
          const Token& n = peek();
          if (!n.integer || to_int(n) < 1)
            fail_at(n, "an extent is a dim name such as N or a positive integer, not " + n.text);
          prm.extents.push_back(std::to_string(to_int(next())));
          continue;
        }
        prm.extents.push_back(expect_ident("an extent (a dim name such as N)").text);
      } while (accept(","));
      const Token& close = expect("]", "to close the parameter's extents");
      if (outputs && prm.extents.empty())
        fail_at(close, "an output has at least one extent (a definition writes " + prm.name +
                           "[i, ...]): one value is an extent of 1, " + prm.name + ": " + type_name(prm.type) +
                           "[U] with U = 1, written as " + prm.name + "[u] = ...");
      if (peek().kind == Tok::ident && peek().text == "outside") {
        next();
        // `outside -inf` is a max pool's padding: the maximum of a window ignores it.
        if (is_punct(peek(), "-") && peek(1).kind == Tok::ident && peek(1).text == "inf") {
          next();
          next();
          prm.lowest_outside = true;
        } else {
          const Token& v = peek();
          if (v.kind != Tok::number || v.value != 0) {
            std::string decl = prm.name + ": " + type_name(prm.type) + "[";
            for (size_t i = 0; i < prm.extents.size(); ++i) decl += (i ? ", " : "") + prm.extents[i];
            fail_at(v, "only 0 or -inf may be read outside a tensor's extents: " + decl + "] outside 0");
          }
          next();
          prm.zero_outside = true;
        }
      }
      list.push_back(std::move(prm));
    } while (accept(","));
    return list;
  }

  void statements() {
    while (true) {
      skip_separators();
      if (is_punct(peek(), "}")) {
        next();
        return;
      }
      if (peek().kind == Tok::end) fail_at(peek(), "expected '}' to close the kernel's body but found end of file");
      statement();
      if (is_keyword_tok(peek(), "over"))
        fail_at(peek(), "a reduction must be the whole right-hand side: NAME[...] = sum(EXPR) over INDEX");
      end_of_statement("statement");
    }
  }

  void statement() {
    Definition d;
    StmtLocs locs;
    nodes_ = 0;
    const Token& name = expect_ident("a definition 'NAME[i, j] = ...'");
    d.name = name.text;
    d.loc = name.loc;
    expect("[", "after the defined name (a definition is NAME[i, j] = ...)");
    do {
      const Token& idx = expect_ident("a left-hand index (a plain name)");
      if (is_punct(peek(), "+") || is_punct(peek(), "-"))
        fail_at(peek(), "left-hand indices are plain names; offsets are allowed only in reads");
      d.indices.push_back(idx.text);
      locs.indices.push_back(idx.loc);
    } while (accept(","));
    expect("]", "to close the left-hand indices");
    expect("=", "after the left-hand side");
    locs.body = peek().loc;
    const Token& t = peek();
    if (t.kind == Tok::keyword && is_reduction_keyword(t.text) && reduction_follows()) {
      next();
      d.reduce = reduce_from_name(t.text);
      d.scan_product = t.text == "prodscan";
      expect("(", "after '" + t.text + "'");
      d.body = expr();
      if (is_punct(peek(), ","))
        fail_at(peek(), "a reduction takes one expression: " + t.text + "(EXPR) over INDEX");
      expect(")", "to close '" + t.text + "('");
      if (!is_keyword_tok(peek(), "over"))
        fail_at(peek(), "expected 'over INDEX' after " + t.text + "(...) but found " + describe(peek()));
      next();
      const Token& over = expect_ident("the reduced index after 'over'");
      d.over = over.text;
      locs.over = over.loc;
      d.over_written.push_back(written_extent());
      while (accept(",")) {
        const Token& more = expect_ident("another reduced index after ','");
        d.over_rest.push_back(more.text);
        locs.over_rest.push_back(more.loc);
        d.over_written.push_back(written_extent());
      }
      if (!(peek().kind == Tok::newline || is_punct(peek(), ";") || is_punct(peek(), "}")))
        fail_at(peek(), "a reduction must be the whole right-hand side; compute the rest in a following definition");
    } else {
      d.body = expr();
    }
    out_.program.defs.push_back(std::move(d));
    out_.stmts.push_back(std::move(locs));
  }

  // `:EXTENT` after a reduced index (a positive integer or a dim name), or "" without one.
  std::string written_extent() {
    if (!accept(":")) return "";
    const Token& e = peek();
    if (e.kind == Tok::number) {
      if (!e.integer || to_int(e) < 1) fail_at(e, "a reduced index's extent is a dim name or a positive integer, not " + e.text);
      return std::to_string(to_int(next()));
    }
    return expect_ident("the reduced index's extent after ':' (a dim name or a positive integer)").text;
  }

  // sum, mean, argmax and scan are always reductions; max and min are reductions only when
  // their closing parenthesis is followed by 'over', and the two-argument functions otherwise.
  bool reduction_follows() const {
    const std::string& w = peek().text;
    if (w != "max" && w != "min") return true;
    if (!is_punct(peek(1), "(")) return false;
    int depth = 0;
    for (size_t i = pos_ + 1; i < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (t.kind == Tok::end) return false;
      if (is_punct(t, "(")) ++depth;
      if (is_punct(t, ")") && --depth == 0) return i + 1 < toks_.size() && is_keyword_tok(toks_[i + 1], "over");
    }
    return false;
  }

  Expr make(Expr::Kind kind, const Token& at) {
    // Later passes recurse over the tree, so its size is bounded as well as its nesting.
    if (++nodes_ > 10000) fail_at(at, "expression too long (more than 10000 terms); split it into definitions");
    Expr e;
    e.kind = kind;
    e.loc = at.loc;
    return e;
  }

  Expr expr() {
    // Deep enough for any real program; the limit keeps a hostile input from exhausting the stack.
    if (++depth_ > 200) fail_at(peek(), "expression nested too deeply (more than 200 levels)");
    Expr e = comparison();
    --depth_;
    return e;
  }

  Expr comparison() {
    Expr left = additive();
    for (const char* op : {"<", "<=", ">", ">=", "==", "!="}) {
      if (!is_punct(peek(), op)) continue;
      Expr e = make(Expr::Kind::compare, next());
      e.op = op;
      e.args.push_back(std::move(left));
      e.args.push_back(additive());
      for (const char* again : {"<", "<=", ">", ">=", "==", "!="})
        if (is_punct(peek(), again)) fail_at(peek(), "comparisons do not chain; compare two values at a time");
      return e;
    }
    return left;
  }

  Expr additive() {
    Expr left = term();
    while (is_punct(peek(), "+") || is_punct(peek(), "-")) {
      Expr e = make(Expr::Kind::binary, peek());
      e.op = next().text;
      e.args.push_back(std::move(left));
      e.args.push_back(term());
      left = std::move(e);
    }
    return left;
  }

  Expr term() {
    Expr left = unary();
    while (is_punct(peek(), "*") || is_punct(peek(), "/")) {
      Expr e = make(Expr::Kind::binary, peek());
      e.op = next().text;
      e.args.push_back(std::move(left));
      e.args.push_back(unary());
      left = std::move(e);
    }
    return left;
  }

  Expr unary() {
    if (!is_punct(peek(), "-")) return primary();
    const Token& minus = next();
    if (++depth_ > 200) fail_at(minus, "expression nested too deeply (more than 200 levels)");
    Expr operand = unary();
    --depth_;
    // A negated number is a number, so that -1e-6 prints and reads back as one literal.
    if (operand.kind == Expr::Kind::number) {
      operand.number = -operand.number;
      operand.loc = minus.loc;
      return operand;
    }
    Expr e = make(Expr::Kind::unary, minus);
    e.op = "-";
    e.args.push_back(std::move(operand));
    return e;
  }

  Expr primary() {
    const Token& t = peek();
    if (t.kind == Tok::number) {
      Expr e = make(Expr::Kind::number, next());
      e.number = t.value;
      return e;
    }
    if (is_punct(t, "(")) {
      next();
      Expr e = expr();
      expect(")", "to close '('");
      return e;
    }
    if (t.kind == Tok::keyword) {
      if (t.text == "max" || t.text == "min") return call(Expr::Kind::call);
      if (is_reduction_keyword(t.text))
        fail_at(t, "'" + t.text + "' is a reduction and must be the whole right-hand side: NAME[...] = " + t.text +
                       "(EXPR) over INDEX");
      fail_at(t, "expected an expression but found " + describe(t));
    }
    if (t.kind != Tok::ident) fail_at(t, "expected an expression but found " + describe(t));
    if (is_punct(peek(1), "(")) return call(is_type_name(t.text) ? Expr::Kind::cast : Expr::Kind::call);
    if (is_punct(peek(1), "[")) return read();
    Expr e = make(Expr::Kind::dim, next());
    e.name = t.text;
    return e;
  }

  Expr call(Expr::Kind kind) {
    const Token& name = next();
    Expr e = make(kind, name);
    e.name = name.text;
    expect("(", "after '" + name.text + "'");
    if (is_punct(peek(), ")")) fail_at(peek(), "'" + name.text + "' needs at least one argument");
    do {
      e.args.push_back(expr());
    } while (accept(","));
    expect(")", "to close '" + name.text + "('");
    return e;
  }

  Expr read() {
    const Token& name = next();
    Expr e = make(Expr::Kind::read, name);
    e.name = name.text;
    expect("[", "after the tensor's name");
    // `s[]` reads a tensor of no extents (one value: `s: f32[]`).
    if (!is_punct(peek(), "]")) do {
        e.indices.push_back(index());
      } while (accept(","));
    expect("]", "to close the indices of '" + name.text + "'");
    return e;
  }

  // NAME, NAME + INT, NAME - INT, or NAME + NAME with an optional + INT or - INT after it
  // (a convolution's h + r - 1).
  // A name's coefficient after '*' (h*2), or 1 without one.
  int64_t coefficient(const std::string& name) {
    if (!is_punct(peek(), "*")) return 1;
    next();
    const Token& c = peek();
    if (c.kind != Tok::number)
      fail_at(c, "an index coefficient is a positive integer after the name: " + name + "*2, not " + name + "*" + c.text);
    if (!c.integer || to_int(c) < 1) fail_at(c, "an index coefficient is a positive integer, not " + c.text);
    return to_int(next());
  }

  IndexExpr index() {
    const char* shape = "an index is a name, optionally plus a second name and plus or minus an integer: i, i+1, h+r-1, "
                        "the two names with integer coefficients in a conv: h*2+r-1";
    // (h-r+1)/2: a sum of two names divided by a positive integer (a transposed convolution's
    // stride); a value that is not a multiple of it reads outside the tensor.
    if (is_punct(peek(), "(")) {
      const Token& open = next();
      IndexExpr ix = sum_index(shape);
      expect(")", "to close the divided index");
      expect("/", "after a parenthesized index (an index in parentheses is divided: (h-r+1)/2)");
      const Token& c = peek();
      if (c.kind != Tok::number || !c.integer || to_int(c) < 1)
        fail_at(c, "an index divisor is a positive integer, not " + c.text);
      ix.divisor = to_int(next());
      if (ix.plus.empty()) fail_at(open, "a divided index is a sum of two names, as a transposed convolution reads: (h-r+1)/2");
      if (!is_punct(peek(), ",") && !is_punct(peek(), "]")) fail_at(peek(), shape);
      return ix;
    }
    IndexExpr ix = sum_index(shape);
    if (!is_punct(peek(), ",") && !is_punct(peek(), "]")) fail_at(peek(), shape);
    // A strided or dilated read is a conv's image read, which adds two indices.
    if (ix.scale != 1 && ix.plus.empty())
      src_.fail(ix.loc, "an index coefficient (" + index_text(ix) + ") is only for a conv's image read, which adds two "
                        "indices: h*2+r-1 (stride 2), h+r*2-2 (dilation 2)");
    return ix;
  }

  IndexExpr sum_index(const char* shape) {
    if (peek().kind == Tok::number && is_punct(peek(1), "*") && peek(2).kind == Tok::ident)
      fail_at(peek(), "write an index coefficient after its name: " + peek(2).text + "*" + peek().text + ", not " +
                          peek().text + "*" + peek(2).text);
    if (peek().kind != Tok::ident) fail_at(peek(), shape);
    const Token& var = next();
    IndexExpr ix;
    ix.var = var.text;
    ix.loc = var.loc;
    ix.scale = coefficient(ix.var);
    bool has_offset = false;
    while (is_punct(peek(), "+") || is_punct(peek(), "-")) {
      bool minus = next().text == "-";
      const Token& n = peek();
      if (n.kind == Tok::ident) {
        if (!ix.plus.empty() || has_offset) fail_at(n, shape);
        ix.plus = next().text;
        ix.plus_scale = coefficient(ix.plus);
        if (minus) ix.plus_scale = -ix.plus_scale;
        continue;
      }
      if (n.kind != Tok::number || has_offset) fail_at(n, shape);
      if (!n.integer) fail_at(n, "an index offset must be an integer, not " + n.text);
      ix.offset = to_int(next());
      if (minus) ix.offset = -ix.offset;
      has_offset = true;
    }
    return ix;
  }

  int64_t to_int(const Token& t) const {
    if (t.value > static_cast<double>(std::numeric_limits<int64_t>::max()))
      fail_at(t, "the integer " + t.text + " is too large");
    return std::strtoll(t.text.c_str(), nullptr, 10);
  }

  // `DIM [* DIM]... [% INTEGER] OP INTEGER [and ...]`: the dims are checked against the kernel's
  // by the checker.
  std::vector<GuardTerm> guard() {
    std::vector<GuardTerm> terms;
    do {
      GuardTerm g;
      g.loc = peek().loc;
      g.dims.push_back(expect_ident("a dim after 'when' (a guard such as 'when M * N >= 4096')").text);
      while (accept("*")) g.dims.push_back(expect_ident("a dim after '*' in the guard").text);
      if (accept("%")) {
        const Token& m = peek();
        if (m.kind != Tok::number || !m.integer || to_int(m) <= 0) fail_at(m, "a guard's modulus is a positive integer, not " + describe(m));
        g.mod = to_int(next());
      }
      const Token& op = peek();
      if (!(is_punct(op, "<") || is_punct(op, "<=") || is_punct(op, ">") || is_punct(op, ">=") || is_punct(op, "==") || is_punct(op, "!=")))
        fail_expected("a comparison (< <= > >= == !=) in the guard");
      g.op = next().text;
      bool negative = accept("-");
      const Token& v = peek();
      if (v.kind != Tok::number || !v.integer) fail_at(v, "a guard compares with an integer, not " + describe(v));
      g.value = to_int(next()) * (negative ? -1 : 1);
      terms.push_back(std::move(g));
    } while (peek().kind == Tok::ident && peek().text == "and" && (next(), true));
    return terms;
  }

  void schedule(std::vector<std::pair<std::string, ScheduleValue>>& entries, std::map<std::string, Loc>& keys) {
    skip_newlines();
    expect("{", "after 'schedule'");
    while (true) {
      skip_separators();
      if (is_punct(peek(), "}")) {
        next();
        return;
      }
      if (peek().kind == Tok::end) fail_at(peek(), "expected '}' to close the schedule but found end of file");
      const Token& key = expect_ident("a schedule entry 'NAME = VALUE'");
      if (auto it = keys.find(key.text); it != keys.end())
        fail_at(key, "schedule key '" + key.text + "' is set twice (first at " + std::to_string(it->second.line) + ":" +
                         std::to_string(it->second.col) + ")");
      expect("=", "after the schedule key '" + key.text + "'");
      entries.emplace_back(key.text, schedule_value());
      keys[key.text] = key.loc;
      end_of_statement("schedule entry");
    }
  }

  ScheduleValue schedule_value() {
    const char* shape = "a schedule value is an integer, a name or a list of integers such as [128, 64]";
    ScheduleValue v;
    const Token& t = peek();
    v.loc = t.loc;
    if (t.kind == Tok::number) {
      if (!t.integer) fail_at(t, std::string(shape) + "; " + t.text + " is not an integer");
      v.kind = ScheduleValue::Kind::integer;
      v.integer = to_int(next());
      return v;
    }
    if (t.kind == Tok::ident || t.kind == Tok::keyword) {
      v.kind = ScheduleValue::Kind::ident;
      v.ident = next().text;
      return v;
    }
    if (!is_punct(t, "[")) fail_at(t, shape);
    next();
    v.kind = ScheduleValue::Kind::list;
    if (is_punct(peek(), "]")) fail_at(peek(), "a schedule list needs at least one integer");
    do {
      const Token& n = peek();
      if (n.kind != Tok::number || !n.integer) fail_at(n, "a schedule list holds integers only, not " + describe(n));
      v.list.push_back(to_int(next()));
    } while (accept(","));
    expect("]", "to close the schedule list");
    return v;
  }
};

}  // namespace

Parsed parse(const Source& src, const std::vector<Token>& tokens) { return Parser(src, tokens).run(); }

}  // namespace detail
}  // namespace ksol::dsl
