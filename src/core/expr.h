// Arithmetic expressions over named dims, used by task shapes, costs, sizes and tolerances.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ksol {

// A parse or evaluation error, with the 0-based column inside the expression text.
struct ExprError {
  std::string message;
  int column = 0;
};

class Expr {
 public:
  // Parses `text`; on failure returns nullptr and fills `err`.
  static std::unique_ptr<Expr> parse(const std::string& text, ExprError* err);
  virtual ~Expr() = default;
  // Evaluates with `env`; an unknown name fills `err` and returns NaN.
  virtual double eval(const std::map<std::string, double>& env, ExprError* err) const = 0;
  virtual void names(std::vector<std::string>* out) const = 0;
};

// Parses and evaluates in one step; throws std::runtime_error with the column on failure.
double eval_expr(const std::string& text, const std::map<std::string, double>& env);

}  // namespace ksol
