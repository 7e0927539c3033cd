// The IR interpreter (interpret.h). Deliberately simple: no fusion, no reordering, sequential
// sums in index order, every definition materialised as a full array.
#include "codegen/interpret.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "codegen/common.h"
#include "task/inputs.h"

namespace ksol::codegen {
namespace {

using dsl::Definition;
using dsl::Expr;
using dsl::ReduceOp;
using dsl::Type;

double saturate_int(double v, double lo, double hi) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  return v < lo ? lo : (v > hi ? hi : v);
}

class Interpreter {
 public:
  Interpreter(const dsl::Program& p, const std::map<std::string, int64_t>& dims, const HostArrays& inputs, Arithmetic a)
      : p_(p), dims_(dims), arith_(a) {
    for (const std::string& d : p.dims)
      if (!dims.count(d)) throw std::runtime_error("interpret: no value for dim '" + d + "'");
    for (const dsl::Param& in : p.inputs) {
      if (in.format != "dense") throw std::runtime_error("interpret: '" + in.name + "' is " + in.format + "; only dense tensors");
      auto it = inputs.find(in.name);
      if (it == inputs.end()) throw std::runtime_error("interpret: no values for input '" + in.name + "'");
      if (static_cast<int64_t>(it->second.size()) != numel(in.extents))
        throw std::runtime_error("interpret: input '" + in.name + "' has " + std::to_string(it->second.size()) +
                                 " values, its shape holds " + std::to_string(numel(in.extents)));
      tensors_[in.name] = {&in.extents, it->second};
    }
  }

  HostArrays run() {
    for (const Definition& d : p_.defs) define(d);
    HostArrays out;
    for (const dsl::Param& o : p_.outputs) out[o.name] = tensors_.at(o.name).values;
    return out;
  }

 private:
  struct Tensor {
    const std::vector<std::string>* extents = nullptr;
    std::vector<double> values;
  };
  const dsl::Program& p_;
  const std::map<std::string, int64_t>& dims_;
  Arithmetic arith_;
  std::map<std::string, Tensor> tensors_;
  const Definition* current_ = nullptr;

  // A dim's value, or a fixed extent's (F: f32[K, C, 3, 3]).
  int64_t extent(const std::string& e) const { return dsl::extent_is_number(e) ? std::stoll(e) : dims_.at(e); }

  int64_t numel(const std::vector<std::string>& extents) const {
    int64_t n = 1;
    for (const std::string& e : extents) n *= extent(e);
    return n;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("interpret: in '" + current_->name + "': " + what);
  }

  // The value as the IR's type holds it (typed arithmetic) or unchanged (exact).
  double round(double v, Type t) const {
    switch (t) {
      case Type::i32: return saturate_int(v, -2147483648.0, 2147483647.0);
      case Type::i64: return saturate_int(v, -9223372036854775808.0, 9223372036854775807.0);
      case Type::boolean: return v != 0 ? 1 : 0;
      default: break;
    }
    if (arith_ == Arithmetic::exact) return v;
    switch (t) {
      case Type::f32: return static_cast<float>(v);
      case Type::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
      case Type::f16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
      default: return v;
    }
  }

  // tf32(x): to nearest, ties to even, at 10 mantissa bits (cvt.rn.tf32.f32).
  static double tf32_round(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    std::memcpy(&x, &u, 4);
    return x;
  }
  static double max_nan(double a, double b) { return (std::isnan(a) || a > b) ? a : b; }
  static double min_nan(double a, double b) { return (std::isnan(a) || a < b) ? a : b; }

  double call(const Expr& e, const std::vector<double>& x) const {
    const std::string& n = e.name;
    if (n == "exp") return std::exp(x[0]);
    if (n == "log") return std::log(x[0]);
    if (n == "sqrt") return std::sqrt(x[0]);
    if (n == "rsqrt") return 1.0 / std::sqrt(x[0]);
    if (n == "abs") return std::fabs(x[0]);
    if (n == "tanh") return std::tanh(x[0]);
    if (n == "sigmoid") return 1.0 / (1.0 + std::exp(-x[0]));
    if (n == "relu") return x[0] < 0 ? 0.0 : x[0];
    if (n == "gelu") return 0.5 * x[0] * (1.0 + std::erf(x[0] * 0.707106781186547524));
    if (n == "gelu_tanh")
      return 0.5 * x[0] * (1.0 + std::tanh(0.797884560802865356 * (x[0] + 0.044715 * x[0] * x[0] * x[0])));
    if (n == "silu") return x[0] / (1.0 + std::exp(-x[0]));
    if (n == "min") return min_nan(x[0], x[1]);
    if (n == "max") return max_nan(x[0], x[1]);
    if (n == "clamp") return x[0] < x[1] ? x[1] : (x[0] > x[2] ? x[2] : x[0]);
    if (n == "select") return x[0] != 0 ? x[1] : x[2];
    if (n == "tf32") return tf32_round(static_cast<float>(x[0]));
    fail("unknown function '" + n + "'");
  }

  double eval(const Expr& e, const std::map<std::string, int64_t>& env) const {
    switch (e.kind) {
      case Expr::Kind::number: return round(e.number, e.type);
      case Expr::Kind::dim: return round(static_cast<double>(dims_.at(e.name)), e.type);
      case Expr::Kind::index: return round(static_cast<double>(env.at(e.name)), e.type);
      case Expr::Kind::read: return read(e, env);
      case Expr::Kind::unary: return round(-eval(e.args[0], env), e.type);
      case Expr::Kind::binary: {
        const double a = eval(e.args[0], env), b = eval(e.args[1], env);
        if (e.op == "+") return round(a + b, e.type);
        if (e.op == "-") return round(a - b, e.type);
        if (e.op == "*") return round(a * b, e.type);
        if (!dsl::type_is_float(e.type)) {
          if (b == 0) fail("integer division by zero");
          return round(std::trunc(a / b), e.type);
        }
        return round(a / b, e.type);
      }
      case Expr::Kind::compare: {
        const double a = eval(e.args[0], env), b = eval(e.args[1], env);
        if (e.op == "<") return a < b;
        if (e.op == "<=") return a <= b;
        if (e.op == ">") return a > b;
        if (e.op == ">=") return a >= b;
        if (e.op == "==") return a == b;
        return a != b;
      }
      case Expr::Kind::cast: return round(eval(e.args[0], env), e.type);
      case Expr::Kind::call: {
        std::vector<double> x;
        for (const Expr& a : e.args) x.push_back(eval(a, env));
        return round(call(e, x), e.type);
      }
    }
    return 0;
  }

  double read(const Expr& e, const std::map<std::string, int64_t>& env) const {
    const Tensor& t = tensors_.at(e.name);
    int64_t flat = 0;
    for (size_t k = 0; k < e.indices.size(); ++k) {
      const dsl::IndexExpr& ix = e.indices[k];
      const int64_t n = extent((*t.extents)[k]);
      int64_t i = ix.scale * env.at(ix.var) + (ix.plus.empty() ? 0 : ix.plus_scale * env.at(ix.plus)) + ix.offset;
      // A divided index that is not a multiple of its divisor is outside the tensor.
      if (ix.divisor != 1) i = i >= 0 && i % ix.divisor == 0 ? i / ix.divisor : -1;
      if (i < 0 || i >= n) {
        const dsl::Param* prm = p_.param(e.name);
        if (prm && prm->zero_outside) return 0;
        if (prm && prm->lowest_outside) return -std::numeric_limits<double>::infinity();
        fail("reads " + e.name + " at index " + std::to_string(i) + " of " + std::to_string(n) +
             " (offset reads outside a tensor have no defined value)");
      }
      flat = flat * n + i;
    }
    return t.values[flat];
  }

  void define(const Definition& d) {
    current_ = &d;
    Tensor& out = tensors_[d.name];
    out.extents = &d.extents;
    out.values.assign(numel(d.extents), 0.0);
    std::vector<int64_t> ext;
    for (const std::string& e : d.extents) ext.push_back(extent(e));
    const int64_t over_n = d.reduce == ReduceOp::none ? 0 : extent(d.over_extent);
    std::map<std::string, int64_t> env;
    std::vector<int64_t> idx(ext.size(), 0);
    // A scan over its last index runs along the row-major order: a running sum per row.
    const bool running_scan = d.reduce == ReduceOp::scan && d.indices.back() == d.over;
    double carry = 0;
    for (int64_t flat = 0; flat < static_cast<int64_t>(out.values.size()); ++flat) {
      for (size_t k = 0; k < idx.size(); ++k) env[d.indices[k]] = idx[k];
      if (running_scan) {
        if (idx.back() == 0) carry = d.scan_product ? 1 : 0;
        const double v = eval(d.body, env);
        carry = round(d.scan_product ? carry * v : carry + v, d.type);
        out.values[flat] = carry;
      } else {
        out.values[flat] = value_at(d, env, over_n);
      }
      for (size_t k = idx.size(); k-- > 0;)
        if (++idx[k] < ext[k]) break;
        else idx[k] = 0;
    }
  }

  // A reduction over several indices (a conv's sum over c, r, s, a pool's max over r, s): every
  // combination, the first index outermost, one rounded addition each (a mean divides the sum by
  // their count).
  double reduce_over_all(const Definition& d, std::map<std::string, int64_t>& env) const {
    std::vector<std::string> vars = {d.over};
    std::vector<int64_t> ext = {extent(d.over_extent)};
    for (size_t j = 0; j < d.over_rest.size(); ++j) {
      vars.push_back(d.over_rest[j]);
      ext.push_back(extent(d.over_rest_extents[j]));
    }
    int64_t total = 1;
    for (int64_t e : ext) total *= e;
    std::vector<int64_t> idx(vars.size(), 0);
    const bool extreme = d.reduce == ReduceOp::max || d.reduce == ReduceOp::min;
    double acc = d.reduce == ReduceOp::max   ? -std::numeric_limits<double>::infinity()
                 : d.reduce == ReduceOp::min ? std::numeric_limits<double>::infinity()
                                             : 0.0;
    for (int64_t step = 0; step < total; ++step) {
      for (size_t k = 0; k < vars.size(); ++k) env[vars[k]] = idx[k];
      const double v = eval(d.body, env);
      if (d.reduce == ReduceOp::max) acc = max_nan(acc, v);
      else if (d.reduce == ReduceOp::min) acc = min_nan(acc, v);
      else acc = round(acc + v, d.type);
      for (size_t k = idx.size(); k-- > 0;)
        if (++idx[k] < ext[k]) break;
        else idx[k] = 0;
    }
    if (d.reduce == ReduceOp::mean) acc = round(acc / static_cast<double>(total), d.type);
    return extreme ? round(acc, d.type) : acc;
  }

  double value_at(const Definition& d, std::map<std::string, int64_t>& env, int64_t over_n) const {
    if (!d.over_rest.empty()) return reduce_over_all(d, env);
    switch (d.reduce) {
      case ReduceOp::none: return eval(d.body, env);
      case ReduceOp::scan: {
        // The inclusive prefix up to this element's own position along `over`.
        const int64_t upto = env.at(d.over);
        double acc = d.scan_product ? 1 : 0;
        for (int64_t t = 0; t <= upto; ++t) {
          env[d.over] = t;
          const double v = eval(d.body, env);
          acc = round(d.scan_product ? acc * v : acc + v, d.type);
        }
        env[d.over] = upto;
        return acc;
      }
      case ReduceOp::argmax: {
        double best = 0;
        int64_t best_at = -1;
        for (int64_t t = 0; t < over_n; ++t) {
          env[d.over] = t;
          const double v = eval(d.body, env);
          // The first maximum; a NaN counts as the maximum (PyTorch's argmax).
          bool take = best_at < 0 || (std::isnan(v) && !std::isnan(best)) || (!std::isnan(best) && v > best);
          if (take) {
            best = v;
            best_at = t;
          }
        }
        return static_cast<double>(best_at);
      }
      default: break;
    }
    const bool extreme = d.reduce == ReduceOp::max || d.reduce == ReduceOp::min;
    double acc = d.reduce == ReduceOp::max   ? -std::numeric_limits<double>::infinity()
                 : d.reduce == ReduceOp::min ? std::numeric_limits<double>::infinity()
                                             : 0.0;
    for (int64_t t = 0; t < over_n; ++t) {
      env[d.over] = t;
      const double v = eval(d.body, env);
      if (d.reduce == ReduceOp::max) acc = max_nan(acc, v);
      else if (d.reduce == ReduceOp::min) acc = min_nan(acc, v);
      else acc = round(acc + v, d.type);
    }
    if (d.reduce == ReduceOp::mean) acc = round(acc / static_cast<double>(over_n), d.type);
    return extreme ? round(acc, d.type) : acc;
  }
};

}  // namespace

HostArrays interpret(const dsl::Program& p, const std::map<std::string, int64_t>& dims, const HostArrays& inputs,
                     Arithmetic a) {
  return Interpreter(p, dims, inputs, a).run();
}

int interpret_call(const dsl::Program& p, const Binding& b, const ksol_call* call, Arithmetic a) {
  detail::AbiLayout abi;
  try {
    abi = detail::resolve_binding(p, b);
  } catch (const detail::Refused& r) {
    throw std::runtime_error(std::string("interpret: ") + r.what());
  }
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != static_cast<int32_t>(abi.tensors.size()) ||
      call->num_dims != static_cast<int32_t>(abi.dims.size()))
    return 1;
  std::map<std::string, int64_t> dims;
  for (size_t i = 0; i < abi.dims.size(); ++i) {
    if (call->dims[i] < 0) return 2;
    dims[abi.dims[i]] = call->dims[i];
  }
  auto numel = [&](const dsl::Param& prm) {
    int64_t n = 1;
    for (const std::string& e : prm.extents) n *= dsl::extent_is_number(e) ? std::stoll(e) : dims.at(e);
    return n;
  };
  HostArrays inputs;
  for (size_t i = 0; i < abi.tensors.size(); ++i) {
    const dsl::Param* prm = p.param(abi.tensors[i]);
    bool is_input = false;
    for (const dsl::Param& in : p.inputs) is_input = is_input || in.name == prm->name;
    if (!is_input) continue;
    std::vector<double>& v = inputs[prm->name];
    v.resize(numel(*prm));
    for (size_t k = 0; k < v.size(); ++k) {
      if (prm->type == Type::i32) v[k] = static_cast<const int32_t*>(call->tensors[i])[k];
      else if (prm->type == Type::i64) v[k] = static_cast<double>(static_cast<const int64_t*>(call->tensors[i])[k]);
      else v[k] = static_cast<const double*>(call->tensors[i])[k];
    }
  }
  HostArrays outputs = interpret(p, dims, inputs, a);
  for (size_t i = 0; i < abi.tensors.size(); ++i) {
    auto it = outputs.find(abi.tensors[i]);
    if (it == outputs.end()) continue;
    const Type t = p.param(it->first)->type;
    for (size_t k = 0; k < it->second.size(); ++k) {
      if (t == Type::i32) static_cast<int32_t*>(call->tensors[i])[k] = static_cast<int32_t>(it->second[k]);
      else if (t == Type::i64) static_cast<int64_t*>(call->tensors[i])[k] = static_cast<int64_t>(it->second[k]);
      else static_cast<double*>(call->tensors[i])[k] = it->second[k];
    }
  }
  return 0;
}

}  // namespace ksol::codegen
