#include "core/expr.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ksol {
namespace {

struct Num final : Expr {
  double v;
  explicit Num(double x) : v(x) {}
  double eval(const std::map<std::string, double>&, ExprError*) const override { return v; }
  void names(std::vector<std::string>*) const override {}
};

struct Name final : Expr {
  std::string name;
  int column;
  Name(std::string n, int c) : name(std::move(n)), column(c) {}
  double eval(const std::map<std::string, double>& env, ExprError* err) const override {
    auto it = env.find(name);
    if (it != env.end()) return it->second;
    if (err && err->message.empty()) *err = {"unknown name '" + name + "'", column};
    return std::numeric_limits<double>::quiet_NaN();
  }
  void names(std::vector<std::string>* out) const override { out->push_back(name); }
};

struct Binary final : Expr {
  char op;
  std::unique_ptr<Expr> a, b;
  Binary(char o, std::unique_ptr<Expr> x, std::unique_ptr<Expr> y) : op(o), a(std::move(x)), b(std::move(y)) {}
  double eval(const std::map<std::string, double>& env, ExprError* err) const override {
    double x = a->eval(env, err), y = b->eval(env, err);
    switch (op) {
      case '+': return x + y;
      case '-': return x - y;
      case '*': return x * y;
      case '/': return x / y;
      default: return std::pow(x, y);
    }
  }
  void names(std::vector<std::string>* out) const override { a->names(out); b->names(out); }
};

struct Call final : Expr {
  std::string fn;
  std::vector<std::unique_ptr<Expr>> args;
  double eval(const std::map<std::string, double>& env, ExprError* err) const override {
    std::vector<double> v;
    for (auto& a : args) v.push_back(a->eval(env, err));
    if (fn == "min") return std::min(v[0], v[1]);
    if (fn == "max") return std::max(v[0], v[1]);
    if (fn == "ceil_div") return std::ceil(v[0] / v[1]);
    if (fn == "sqrt") return std::sqrt(v[0]);
    if (fn == "log2") return std::log2(v[0]);
    if (fn == "abs") return std::fabs(v[0]);
    return std::ceil(v[0]);  // ceil
  }
  void names(std::vector<std::string>* out) const override {
    for (auto& a : args) a->names(out);
  }
};

int arity(const std::string& fn) {
  if (fn == "min" || fn == "max" || fn == "ceil_div") return 2;
  if (fn == "sqrt" || fn == "log2" || fn == "abs" || fn == "ceil") return 1;
  return -1;
}

// Recursive-descent parser: sum := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := '-' unary | power; power := atom ('^' unary)?
class Parser {
 public:
  Parser(const std::string& s, ExprError* e) : s_(s), err_(e) {}

  std::unique_ptr<Expr> parse() {
    auto e = sum();
    if (!e) return nullptr;
    skip();
    if (pos_ != s_.size()) return fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    return e;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::unique_ptr<Expr> fail(const std::string& m) {
    if (err_->message.empty()) *err_ = {m, static_cast<int>(pos_)};
    return nullptr;
  }
  std::unique_ptr<Expr> sum() {
    auto l = term();
    while (l) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) break;
      char op = s_[pos_++];
      auto r = term();
      if (!r) return nullptr;
      l = std::make_unique<Binary>(op, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Expr> term() {
    auto l = unary();
    while (l) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) break;
      char op = s_[pos_++];
      auto r = unary();
      if (!r) return nullptr;
      l = std::make_unique<Binary>(op, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Expr> unary() {
    skip();
    if (pos_ < s_.size() && s_[pos_] == '-') {
      ++pos_;
      auto x = unary();
      if (!x) return nullptr;
      return std::make_unique<Binary>('-', std::make_unique<Num>(0), std::move(x));
    }
    auto a = atom();
    if (!a) return nullptr;
    skip();
    if (pos_ < s_.size() && s_[pos_] == '^') {
      ++pos_;
      auto b = unary();
      if (!b) return nullptr;
      return std::make_unique<Binary>('^', std::move(a), std::move(b));
    }
    return a;
  }
  std::unique_ptr<Expr> atom() {
    skip();
    if (pos_ >= s_.size()) return fail("expected a number, a name or '('");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      auto e = sum();
      if (!e) return nullptr;
      skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')'");
      ++pos_;
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(s_.substr(pos_), &used);
      } catch (...) {
        return fail("bad number");
      }
      pos_ += used;
      return std::make_unique<Num>(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      skip();
      if (pos_ < s_.size() && s_[pos_] == '(') {
        int n = arity(name);
        if (n < 0) {
          pos_ = start;
          return fail("unknown function '" + name + "'");
        }
        ++pos_;
        auto call = std::make_unique<Call>();
        call->fn = name;
        for (int i = 0; i < n; ++i) {
          auto a = sum();
          if (!a) return nullptr;
          call->args.push_back(std::move(a));
          skip();
          char want = (i + 1 < n) ? ',' : ')';
          if (pos_ >= s_.size() || s_[pos_] != want)
            return fail(std::string("expected '") + want + "' in " + name + "()");
          ++pos_;
        }
        return call;
      }
      return std::make_unique<Name>(name, static_cast<int>(start));
    }
    return fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& s_;
  ExprError* err_;
  size_t pos_ = 0;
};

}  // namespace

std::unique_ptr<Expr> Expr::parse(const std::string& text, ExprError* err) {
  ExprError local;
  ExprError* e = err ? err : &local;
  *e = {};
  return Parser(text, e).parse();
}

double eval_expr(const std::string& text, const std::map<std::string, double>& env) {
  ExprError err;
  auto e = Expr::parse(text, &err);
  if (!e) throw std::runtime_error("in '" + text + "' at column " + std::to_string(err.column + 1) + ": " + err.message);
  double v = e->eval(env, &err);
  if (!err.message.empty())
    throw std::runtime_error("in '" + text + "' at column " + std::to_string(err.column + 1) + ": " + err.message);
  return v;
}

}  // namespace ksol
