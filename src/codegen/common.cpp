// What the families share: knobs, the ABI binding, identifiers, expressions, source text.
#include "codegen/common.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <sstream>

namespace ksol::codegen::detail {
namespace {

using dsl::Expr;
using dsl::Type;

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}


// Names the generated code may not give to a program's tensors and definitions.
const char* const kReserved[] = {
    // C++ keywords and literals
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "char8_t", "char16_t",
    "char32_t", "class", "co_await", "co_return", "co_yield", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else",
    "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long",
    "mutable", "namespace", "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public",
    "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef",
    "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor",
    "std", "main",
    // CUDA and C names the generated code relies on
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "uint4", "int2", "float4", "INFINITY", "NAN",
    "int32_t", "int64_t", "uint32_t", "uint64_t", "uintptr_t", "size_t", "cudaStream_t", "cudaError_t",
    "ksol_call", "ksol_run", "exp", "expf", "log", "logf", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "fabs", "fabsf",
    "abs", "llabs", "tanh", "tanhf", "erf", "erff", "min", "max",
    // helpers and locals of the generated code
    "Pack", "load_pack", "store_pack", "max_nan", "min_nan", "clamp_nan", "relu", "sigmoid", "silu", "gelu",
    "gelu_tanh", "tf32_round", "tanh_fast", "sigmoid_fast", "silu_fast", "gelu_tanh_fast", "call", "stream", "err",
    "ksol_cp_async4", "ksol_cp_async16", "ksol_cp_commit", "ksol_cp_wait", "KsolSlices", "ksol_mma_tf32", "ksol_bits", "ksol_row",
    "ksol_tf32_bits", "ksol_slice_smem", "kSliceBytes", "a_all", "b_all", "kstep",
    "ksol_a_slot", "ksol_b_slot", "kSR", "kSW",
    "c_acc", "frag_v", "hr", "ptr"};

// Precedence of emitted C++, for the fewest parentheses that keep the IR's evaluation order.
enum Prec { kCompare = 1, kAdd = 2, kMul = 3, kUnary = 4, kAtom = 5 };

struct Code {
  std::string text;
  int prec = kAtom;
};

std::string wrap(const Code& c, int min_prec) { return c.prec < min_prec ? "(" + c.text + ")" : c.text; }

std::string from_float(const std::string& code, Type t) {
  if (t == Type::bf16) return "__float2bfloat16_rn(" + code + ")";
  if (t == Type::f16) return "__float2half_rn(" + code + ")";
  return code;
}

// CUDA functions for one-argument float maps: {f32 name, f64 name}; empty when a helper does it.
struct MathFn {
  const char* dsl;
  const char* f32;
  const char* f64;
};
constexpr MathFn kMath[] = {
    {"exp", "expf", "exp"},   {"log", "logf", "log"},     {"sqrt", "sqrtf", "sqrt"},
    {"rsqrt", "rsqrtf", "rsqrt"}, {"tanh", "tanhf", "tanh"}, {"abs", "fabsf", "fabs"},
};

const MathFn* math_fn(const std::string& name) {
  for (const MathFn& f : kMath)
    if (name == f.dsl) return &f;
  return nullptr;
}

bool is_float_helper(const std::string& n) {
  return n == "sigmoid" || n == "silu" || n == "gelu" || n == "gelu_tanh" || n == "sigmoid_fast" || n == "silu_fast" ||
         n == "gelu_tanh_fast" || n == "tanh_fast";
}
// The helpers math = fast has a form of: exp and the division through the intrinsics.
bool has_fast_helper(const std::string& n) { return n == "sigmoid" || n == "silu" || n == "gelu_tanh"; }
bool is_generic_helper(const std::string& n) { return n == "relu" || n == "min" || n == "max" || n == "clamp"; }

std::string generic_helper_name(const std::string& n) {
  if (n == "min") return "min_nan";
  if (n == "max") return "max_nan";
  if (n == "clamp") return "clamp_nan";
  return n;
}

Code emit(const Expr& e, const ExprEmitter& em);

Code emit_call(const Expr& e, const ExprEmitter& em) {
  const Type t = e.type;
  if (e.name == "select") {
    Code c = emit(e.args[0], em), a = emit(e.args[1], em), b = emit(e.args[2], em);
    return {"(" + c.text + " ? " + a.text + " : " + b.text + ")", kAtom};
  }
  // Half-precision calls compute in f32 and round once, like the half types' own operators.
  const Type work = is_half(t) ? Type::f32 : t;
  std::vector<std::string> args;
  for (const Expr& a : e.args) {
    Code c = emit(a, em);
    args.push_back(is_half(a.type) ? to_float(c.text, a.type) : c.text);
  }
  std::string inner;
  if (e.name == "tf32") {
    em.helpers->use("tf32_round", Type::f32);
    inner = "tf32_round(" + args[0] + ")";
  } else if (e.name == "tanh" && em.fast_math && work == Type::f32) {
    em.helpers->use("tanh_fast", Type::f32);
    inner = "tanh_fast(" + args[0] + ")";
  } else if (const MathFn* f = math_fn(e.name); f && dsl::type_is_float(work)) {
    std::string fn = work == Type::f64 ? f->f64 : f->f32;
    if (em.fast_math && work == Type::f32 && (e.name == "exp" || e.name == "log")) fn = "__" + fn;
    inner = fn + "(" + args[0] + ")";
  } else if (e.name == "abs") {
    inner = std::string(work == Type::i64 ? "llabs" : "abs") + "(" + args[0] + ")";
  } else if (is_float_helper(e.name)) {
    const std::string h = em.fast_math && work == Type::f32 && has_fast_helper(e.name) ? e.name + "_fast" : e.name;
    em.helpers->use(h, work);
    inner = h + "(" + args[0] + ")";
  } else if (is_generic_helper(e.name)) {
    em.helpers->use(generic_helper_name(e.name), work);
    inner = generic_helper_name(e.name) + "(" + join_names(args) + ")";
  } else {
    throw Refused("function '" + e.name + "' has no CUDA form here");
  }
  return {from_float(inner, t), kAtom};
}

Code emit(const Expr& e, const ExprEmitter& em) {
  switch (e.kind) {
    case Expr::Kind::number: {
      std::string s = literal(e.number, e.type);
      return {s, s[0] == '-' ? kUnary : kAtom};
    }
    case Expr::Kind::dim: return {cast_code(em.dim(e.name), Type::i64, e.type), e.type == Type::i64 ? kAtom : kUnary};
    case Expr::Kind::index:
      if (!em.index) throw Refused("the index '" + e.name + "' used as a value: this family's kernels do not give it");
      return {cast_code("(" + em.index(e.name) + ")", Type::i64, e.type), e.type == Type::i64 ? kAtom : kUnary};
    case Expr::Kind::read: return {em.read(e), kAtom};
    case Expr::Kind::unary: {
      Code a = emit(e.args[0], em);
      if (is_half(e.type)) return {from_float("-" + to_float(a.text, e.type), e.type), kAtom};
      std::string inner = wrap(a, kUnary);
      if (inner[0] == '-') inner = "(" + inner + ")";  // never `--x`
      return {"-" + inner, kUnary};
    }
    case Expr::Kind::binary: {
      const int prec = (e.op == "+" || e.op == "-") ? kAdd : kMul;
      Code a = emit(e.args[0], em), b = emit(e.args[1], em);
      const bool fast_div = em.fast_math && e.op == "/" && (e.type == Type::f32 || is_half(e.type));
      if (is_half(e.type)) {
        if (fast_div) return {from_float("__fdividef(" + to_float(a.text, e.type) + ", " + to_float(b.text, e.type) + ")", e.type), kAtom};
        return {from_float(to_float(a.text, e.type) + " " + e.op + " " + to_float(b.text, e.type), e.type), kAtom};
      }
      if (fast_div && em.reciprocal && e.type == Type::f32)
        if (std::string r = em.reciprocal(e.args[1]); !r.empty()) return {wrap(a, kMul) + " * " + r, kMul};
      if (fast_div) return {"__fdividef(" + a.text + ", " + b.text + ")", kAtom};
      // The right operand keeps its parentheses at equal precedence: a + (b + c) is not
      // (a + b) + c in floating point.
      return {wrap(a, prec) + " " + e.op + " " + wrap(b, prec + 1), prec};
    }
    case Expr::Kind::compare: {
      Code a = emit(e.args[0], em), b = emit(e.args[1], em);
      const Type t = e.args[0].type;
      if (is_half(t)) return {to_float(a.text, t) + " " + e.op + " " + to_float(b.text, t), kCompare};
      return {wrap(a, kAdd) + " " + e.op + " " + wrap(b, kAdd), kCompare};
    }
    case Expr::Kind::cast: {
      Code a = emit(e.args[0], em);
      const Type from = e.args[0].type;
      if (from == e.type) return a;
      std::string inner = a.text;
      bool c_style = !is_half(from) && !is_half(e.type);
      if (c_style && a.prec < kAtom) inner = "(" + inner + ")";
      return {cast_code(inner, from, e.type), c_style ? kUnary : kAtom};
    }
    case Expr::Kind::call: return emit_call(e, em);
  }
  return {"?", kAtom};
}

std::string format_index(const dsl::IndexExpr& ix) { return dsl::index_text(ix); }

int dsl_prec(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::compare: return kCompare;
    case Expr::Kind::binary: return (e.op == "+" || e.op == "-") ? kAdd : kMul;
    case Expr::Kind::unary: return kUnary;
    default: return kAtom;
  }
}

void collect_reads(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::read) out.push_back(&e);
  for (const Expr& a : e.args) collect_reads(a, out);
}

void collect_types(const Expr& e, std::set<Type>& out) {
  out.insert(e.type);
  for (const Expr& a : e.args) collect_types(a, out);
}

}  // namespace

std::string value_text(const dsl::ScheduleValue& v) {
  switch (v.kind) {
    case dsl::ScheduleValue::Kind::integer: return std::to_string(v.integer);
    case dsl::ScheduleValue::Kind::ident: return v.ident;
    case dsl::ScheduleValue::Kind::list: {
      std::string s = "[";
      for (size_t i = 0; i < v.list.size(); ++i) s += (i ? ", " : "") + std::to_string(v.list[i]);
      return s + "]";
    }
  }
  return "?";
}

// --- knobs -------------------------------------------------------------------------------------

dsl::ScheduleValue schedule_value(const std::string& text) {
  dsl::ScheduleValue v;
  // A list "[a, b, c]" of integers, as value_text writes it.
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    std::string inner = text.substr(1, text.size() - 2);
    bool ok = true;
    std::vector<int64_t> items;
    std::istringstream in(inner);
    for (std::string item; ok && std::getline(in, item, ',');) {
      size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
      item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
      ok = !item.empty() && item.size() < 18 && item.find_first_not_of("0123456789") == std::string::npos;
      if (ok) items.push_back(std::stoll(item));
    }
    if (ok && !items.empty()) {
      v.kind = dsl::ScheduleValue::Kind::list;
      v.list = items;
      return v;
    }
  }
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    v.kind = dsl::ScheduleValue::Kind::integer;
    v.integer = std::stoll(text);
  } else {
    v.kind = dsl::ScheduleValue::Kind::ident;
    v.ident = text;
  }
  return v;
}

namespace {
thread_local KnobReads* t_knob_reads = nullptr;
}  // namespace

void note_knob_reads(KnobReads* reads) { t_knob_reads = reads; }

const dsl::ScheduleValue& Knobs::value(const std::string& key) const {
  if (t_knob_reads) {
    for (size_t i = 0; i < family_->knobs.size(); ++i)
      if (family_->knobs[i].key == key) {
        t_knob_reads->last = std::max(t_knob_reads->last, static_cast<int>(i));
        break;
      }
  }
  return values_.at(key);
}

Knobs::Knobs(const dsl::Program& p, const FamilyGenerator& f) : family_(&f) {
  std::vector<std::string> keys;
  for (const Knob& k : f.knobs) {
    keys.push_back(k.key);
    values_[k.key] = schedule_value(k.default_value);
  }
  for (const auto& [key, value] : p.schedule) {
    if (!values_.count(key))
      throw Refused("unknown schedule key '" + key + "' for the " + f.name + " family; it accepts " + join_names(keys));
    values_[key] = value;
  }
}

int64_t Knobs::integer(const std::string& key) const {
  const dsl::ScheduleValue& v = value(key);
  if (v.kind != dsl::ScheduleValue::Kind::integer)
    throw Refused(key + " = " + value_text(v) + " must be an integer");
  return v.integer;
}

int64_t Knobs::threads() const {
  const int64_t t = integer("threads");
  if (t < 32 || t > 1024 || t % 32 != 0)
    throw Refused("threads = " + std::to_string(t) + " must be a multiple of 32 between 32 and 1024");
  return t;
}

int64_t Knobs::one_of(const std::string& key, const std::vector<int64_t>& allowed) const {
  int64_t v = integer(key);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::vector<std::string> names;
  for (int64_t a : allowed) names.push_back(std::to_string(a));
  throw Refused(key + " = " + std::to_string(v) + " must be one of " + join_names(names));
}

std::string Knobs::one_of(const std::string& key, const std::vector<std::string>& allowed) const {
  const dsl::ScheduleValue& v = value(key);
  if (v.kind == dsl::ScheduleValue::Kind::ident && std::find(allowed.begin(), allowed.end(), v.ident) != allowed.end())
    return v.ident;
  throw Refused(key + " = " + value_text(v) + " must be one of " + join_names(allowed));
}

// --- binding -----------------------------------------------------------------------------------

AbiLayout resolve_binding(const dsl::Program& p, const Binding& b) {
  AbiLayout abi;
  std::vector<std::string> params;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const dsl::Param& prm : *list) params.push_back(prm.name);
  abi.tensors = b.tensor_order.empty() ? params : b.tensor_order;
  abi.dims = b.dim_order.empty() ? p.dims : b.dim_order;
  for (const std::string& n : params)
    if (std::find(abi.tensors.begin(), abi.tensors.end(), n) == abi.tensors.end())
      throw Refused("parameter '" + n + "' is not a tensor of the task (its tensors: " + join_names(abi.tensors) + ")");
  for (const std::string& n : abi.tensors)
    if (std::find(params.begin(), params.end(), n) == params.end())
      throw Refused("task tensor '" + n + "' is not a parameter of the program (its parameters: " + join_names(params) +
                    ")");
  for (const std::string& d : p.dims)
    if (std::find(abi.dims.begin(), abi.dims.end(), d) == abi.dims.end())
      throw Refused("dim '" + d + "' is not a dim of the task (its dims: " + join_names(abi.dims) + ")");
  for (const dsl::Param& prm : p.inputs)
    if (prm.format != "dense") throw Refused("parameter '" + prm.name + "' is " + prm.format + "; this family reads dense tensors only");
  return abi;
}

// --- types -------------------------------------------------------------------------------------

const char* cuda_type(Type t) {
  switch (t) {
    case Type::f32: return "float";
    case Type::f64: return "double";
    case Type::bf16: return "__nv_bfloat16";
    case Type::f16: return "__half";
    case Type::i32: return "int32_t";
    case Type::i64: return "int64_t";
    case Type::boolean: return "bool";
  }
  return "?";
}

int type_bytes(Type t) {
  switch (t) {
    case Type::f64:
    case Type::i64: return 8;
    case Type::bf16:
    case Type::f16: return 2;
    case Type::boolean: return 1;
    default: return 4;
  }
}

bool is_half(Type t) { return t == Type::bf16 || t == Type::f16; }

// --- identifiers -------------------------------------------------------------------------------

Names::Names(const std::vector<std::string>& internal) {
  for (const char* r : kReserved) taken_.insert(r);
  for (const std::string& s : internal) taken_.insert(s);
}

std::string Names::fresh(std::string base) {
  while (taken_.count(base) || base.rfind("__", 0) == 0) base += "_";
  taken_.insert(base);
  return base;
}

const std::string& Names::add(const std::string& dsl_name) {
  auto it = ids_.find(dsl_name);
  if (it != ids_.end()) return it->second;
  return ids_[dsl_name] = fresh(dsl_name);
}

const std::string& Names::operator[](const std::string& dsl_name) const {
  auto it = ids_.find(dsl_name);
  if (it == ids_.end()) throw std::logic_error("codegen: no identifier for '" + dsl_name + "'");
  return it->second;
}

std::string Names::derived(const std::string& dsl_name, const std::string& suffix) {
  std::string key = dsl_name + "\x01" + suffix;
  auto it = derived_.find(key);
  if (it != derived_.end()) return it->second;
  return derived_[key] = fresh((*this)[dsl_name] + "_" + suffix);
}

// --- expressions -------------------------------------------------------------------------------

void Helpers::use(const std::string& name, Type t) {
  // The generic helpers are templates: one definition serves every type.
  used_.insert({name, is_float_helper(name) ? t : Type::f32});
}

std::string Helpers::source() const {
  std::ostringstream o;
  auto used = [&](const char* n, Type t = Type::f32) { return used_.count({n, t}) > 0; };
  // f32 on the GPU (sm_80 and later): one max.NaN / min.NaN instruction instead of two compares
  // and a select; the same result but for the sign of equal zeros (the instruction takes +0 over
  // -0 for max, -0 for min, in either order).
  if (used("max_nan"))
    o << "// NaN-propagating maximum, as PyTorch's: a NaN operand wins.\n"
         "template <typename T>\n"
         "__device__ __forceinline__ T max_nan(T a, T b) { return (a != a || a > b) ? a : b; }\n"
         "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
         "__device__ __forceinline__ float max_nan(float a, float b) {\n"
         "  float r;\n"
         "  asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
         "  return r;\n"
         "}\n"
         "#endif\n";
  if (used("min_nan"))
    o << "// NaN-propagating minimum, as PyTorch's: a NaN operand wins.\n"
         "template <typename T>\n"
         "__device__ __forceinline__ T min_nan(T a, T b) { return (a != a || a < b) ? a : b; }\n"
         "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
         "__device__ __forceinline__ float min_nan(float a, float b) {\n"
         "  float r;\n"
         "  asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
         "  return r;\n"
         "}\n"
         "#endif\n";
  if (used("clamp_nan"))
    o << "// x limited to [lo, hi]; a NaN x stays NaN.\n"
         "template <typename T>\n"
         "__device__ __forceinline__ T clamp_nan(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }\n";
  if (used("tf32_round") || used("mma_tf32"))  // mma_tf32's ksol_tf32_bits rounds by it off sm_90
    o << "// x rounded to TF32 (10 mantissa bits; to nearest, ties to even), the precision the tensor\n"
         "// cores multiply f32 data in. sm_90 converts in one instruction (cvt.rn.tf32.f32), whose 13\n"
         "// bits below TF32's are cleared here; elsewhere, and on the host, the same rounding by integer\n"
         "// steps (inf and NaN stay).\n"
         "__device__ __forceinline__ float tf32_round(float x) {\n"
         "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
         "  unsigned int r;\n"
         "  asm(\"cvt.rn.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
         "  return __uint_as_float(r & 0xffffe000u);\n"
         "#else\n"
         "  unsigned int u;\n"
         "  __builtin_memcpy(&u, &x, 4);\n"
         "  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;\n"
         "  __builtin_memcpy(&x, &u, 4);\n"
         "  return x;\n"
         "#endif\n"
         "}\n";
  if (used("mma_tf32"))
    o << "// One warp's D += A * B on the tensor cores: mma.sync.m16n8k8 with TF32 operands (their upper 19\n"
         "// bits) and f32 accumulators. Lane (g, t) = (lane / 4, lane % 4) holds A[g][t], A[g + 8][t],\n"
         "// A[g][t + 4], A[g + 8][t + 4] of the 16 x 8 A; B[t][g], B[t + 4][g] of the 8 x 8 B (k x n);\n"
         "// D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]. Every lane of the warp takes part.\n"
         "__device__ __forceinline__ void ksol_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {\n"
         "#if defined(__CUDA_ARCH__)\n"
         "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, \"\n"
         "      \"{%0, %1, %2, %3};\\n\"\n"
         "      : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
         "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
         "#elif defined(KSOL_HOST_EMULATION)\n"
         "  ::ksol_emu::mma_m16n8k8_tf32(d, a, b);\n"
         "#endif\n"
         "}\n"
         "// x rounded to TF32 as an operand's bits (to nearest, ties to even): one cvt.rn.tf32.f32 on sm_90,\n"
         "// whose bits below TF32's mma.sync does not read (tf32_round clears them too); elsewhere tf32_round.\n"
         "__device__ __forceinline__ unsigned ksol_tf32_bits(float x) {\n"
         "  unsigned u;\n"
         "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
         "  asm(\"cvt.rn.tf32.f32 %0, %1;\" : \"=r\"(u) : \"f\"(x));\n"
         "#else\n"
         "  const float r = tf32_round(x);\n"
         "  __builtin_memcpy(&u, &r, 4);\n"
         "#endif\n"
         "  return u;\n"
         "}\n"
         "// x's bits as an operand, x already rounded to TF32.\n"
         "__device__ __forceinline__ unsigned ksol_bits(float x) {\n"
         "#ifdef __CUDA_ARCH__\n"
         "  return __float_as_uint(x);\n"
         "#else\n"
         "  unsigned u;\n"
         "  __builtin_memcpy(&u, &x, 4);\n"
         "  return u;\n"
         "#endif\n"
         "}\n"
         ;
  if (used("cp_async"))
    o << "// cp.async (sm_80 and later): a 4-byte copy from global to shared memory that does not pass\n"
         "// through the registers, zeros where `pred` is false (then no byte of `src` is read). A thread's\n"
         "// copies form groups (ksol_cp_commit); ksol_cp_wait<N>() returns once all but its newest N groups\n"
         "// have landed. The host emulation defers each group's copies until a wait asks for them.\n"
         "__device__ __forceinline__ void ksol_cp_async4(void* dst, const void* src, bool pred) {\n"
         "#if defined(__CUDA_ARCH__)\n"
         "  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));\n"
         "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\"r\"(s), \"l\"(src), \"r\"(pred ? 4 : 0) : \"memory\");\n"
         "#elif defined(KSOL_HOST_EMULATION)\n"
         "  ::ksol_emu::cp_async(dst, src, 4, pred ? 4 : 0);\n"
         "#endif\n"
         "}\n"
         "// The same for 16 aligned bytes, bypassing L1 (.cg): four floats a copy.\n"
         "__device__ __forceinline__ void ksol_cp_async16(void* dst, const void* src, bool pred) {\n"
         "#if defined(__CUDA_ARCH__)\n"
         "  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));\n"
         "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(s), \"l\"(src), \"r\"(pred ? 16 : 0) : \"memory\");\n"
         "#elif defined(KSOL_HOST_EMULATION)\n"
         "  ::ksol_emu::cp_async(dst, src, 16, pred ? 16 : 0);\n"
         "#endif\n"
         "}\n"
         "__device__ __forceinline__ void ksol_cp_commit() {\n"
         "#if defined(__CUDA_ARCH__)\n"
         "  asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
         "#elif defined(KSOL_HOST_EMULATION)\n"
         "  ::ksol_emu::cp_commit();\n"
         "#endif\n"
         "}\n"
         "template <int N>\n"
         "__device__ __forceinline__ void ksol_cp_wait() {\n"
         "#if defined(__CUDA_ARCH__)\n"
         "  asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(N) : \"memory\");\n"
         "#elif defined(KSOL_HOST_EMULATION)\n"
         "  ::ksol_emu::cp_wait(N);\n"
         "#endif\n"
         "}\n";
  if (used("relu"))
    o << "// max(x, 0) that keeps a NaN x.\n"
         "template <typename T>\n"
         "__device__ __forceinline__ T relu(T x) { return x < T(0) ? T(0) : x; }\n";
  struct FloatHelper {
    const char* name;
    const char* comment;
    const char* f32;
    const char* f64;
  };
  const FloatHelper kFloat[] = {
      {"sigmoid", "// Logistic sigmoid 1 / (1 + exp(-x)) with IEEE exp: sigmoid(-inf) = 0, sigmoid(inf) = 1.\n",
       "1.0f / (1.0f + expf(-x))", "1.0 / (1.0 + exp(-x))"},
      {"silu", "// SiLU x * sigmoid(x), written x / (1 + exp(-x)) with IEEE exp.\n", "x / (1.0f + expf(-x))",
       "x / (1.0 + exp(-x))"},
      {"gelu", "// GELU with the exact erf: 0.5 x (1 + erf(x / sqrt(2))).\n",
       "0.5f * x * (1.0f + erff(x * 0.707106781186547524f))", "0.5 * x * (1.0 + erf(x * 0.707106781186547524))"},
      {"gelu_tanh", "// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).\n",
       "0.5f * x * (1.0f + tanhf(0.797884560802865356f * (x + 0.044715f * x * x * x)))",
       "0.5 * x * (1.0 + tanh(0.797884560802865356 * (x + 0.044715 * x * x * x)))"},
      // math = fast: the same functions through __expf and __fdividef (f32 only). GELU's tanh form is
      // rewritten exactly: 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)).
      {"sigmoid_fast", "// sigmoid, math = fast: 1 / (1 + exp(-x)) through __expf and __fdividef.\n",
       "__fdividef(1.0f, 1.0f + __expf(-x))", nullptr},
      {"silu_fast", "// SiLU, math = fast: x / (1 + exp(-x)) through __expf and __fdividef.\n",
       "__fdividef(x, 1.0f + __expf(-x))", nullptr},
      // The constants are folded so that the function is five f32 operations (three multiplies, two
      // fused multiply-adds) and one SFU operation, where the precise form's order of operations
      // takes seven: a GEMM's fused epilogue runs it once per output element (in a cooperative
      // kernel, while the tensor cores wait for the next tile).
      {"gelu_tanh_fast",
       "// GELU (tanh form), math = fast: 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), written\n"
       "// h + h tanh(u) with h = x / 2 and u = x (sqrt(2 / pi) + 0.044715 sqrt(2 / pi) x^2), with the hardware's\n"
       "// tanh (one SFU operation).\n",
       "fmaf(0.5f * x, tanh_fast(x * fmaf(0.0356774081363001250f, x * x, 0.797884560802865356f)), 0.5f * x)", nullptr},
  };
  if (used("tanh_fast") || used("gelu_tanh_fast"))
    o << "// tanh, math = fast: the SFU's tanh.approx.f32 (relative error about 2^-11; PTX ISA).\n"
         "__device__ __forceinline__ float tanh_fast(float x) {\n"
         "#ifdef __CUDA_ARCH__\n"
         "  float r;\n"
         "  asm(\"tanh.approx.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x));\n"
         "  return r;\n"
         "#else\n"
         "  return tanhf(x);\n"
         "#endif\n"
         "}\n";
  for (const FloatHelper& h : kFloat) {
    bool f32 = used(h.name, Type::f32), f64 = used(h.name, Type::f64);
    if (!f32 && !f64) continue;
    o << h.comment;
    if (f32) o << "__device__ __forceinline__ float " << h.name << "(float x) {\n  return " << h.f32 << ";\n}\n";
    if (f64 && h.f64) o << "__device__ __forceinline__ double " << h.name << "(double x) {\n  return " << h.f64 << ";\n}\n";
  }
  return o.str();
}

std::string ExprEmitter::operator()(const Expr& e) const { return emit(e, *this).text; }

namespace {
bool fast_math_op(const Expr& e) {
  if (e.kind == Expr::Kind::call && (e.name == "exp" || e.name == "log" || e.name == "tanh" || has_fast_helper(e.name)))
    return true;
  if (e.kind == Expr::Kind::binary && e.op == "/" && dsl::type_is_float(e.type)) return true;
  for (const Expr& a : e.args)
    if (fast_math_op(a)) return true;
  return false;
}
}  // namespace

bool has_fast_math_ops(const dsl::Program& p) {
  for (const dsl::Definition& d : p.defs)
    if (fast_math_op(d.body)) return true;
  return false;
}

void check_fast_math(const dsl::Program& p) {
  if (!has_fast_math_ops(p))
    throw Refused("math = fast changes exp, log, tanh, division, sigmoid, silu and gelu_tanh, and '" + p.name +
                  "' has none; math must be precise");
}

bool uses_index(const Expr& e) {
  if (e.kind == Expr::Kind::index) return true;
  for (const Expr& a : e.args)
    if (uses_index(a)) return true;
  return false;
}

void check_emittable(const Expr& e) {
  if (e.kind == Expr::Kind::call && e.name != "select") {
    const Type t = e.type;
    bool ok = dsl::type_is_float(t) || ((e.name == "abs" || is_generic_helper(e.name)) && t != Type::boolean);
    if (!ok) throw Refused(std::string("function '") + e.name + "' on " + dsl::type_name(t) + " is not supported");
    if (!math_fn(e.name) && !is_float_helper(e.name) && !is_generic_helper(e.name) && e.name != "tf32")
      throw Refused("function '" + e.name + "' has no CUDA form here");
  }
  if (e.kind == Expr::Kind::cast && e.type == Type::boolean) throw Refused("a cast to bool is not supported");
  for (const Expr& a : e.args) check_emittable(a);
}

std::string literal(double v, Type t) {
  char buf[64];
  switch (t) {
    case Type::f32:
    case Type::bf16:
    case Type::f16: {
      auto res = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
      std::string s(buf, res.ptr);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      s += "f";
      return t == Type::f32 ? s : from_float(s, t);
    }
    case Type::f64: {
      auto res = std::to_chars(buf, buf + sizeof buf, v);
      std::string s(buf, res.ptr);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
    case Type::i64: return "int64_t{" + std::to_string(static_cast<int64_t>(v)) + "}";
    case Type::i32: return std::to_string(static_cast<int64_t>(v));
    case Type::boolean: return v != 0 ? "true" : "false";
  }
  return "?";
}

std::string to_float(const std::string& code, Type t) {
  if (t == Type::bf16) return "__bfloat162float(" + code + ")";
  if (t == Type::f16) return "__half2float(" + code + ")";
  return code;
}

std::string cast_code(const std::string& code, Type from, Type to) {
  if (from == to) return code;
  switch (to) {
    case Type::f32: return is_half(from) ? to_float(code, from) : "(float)" + code;
    case Type::f64: return is_half(from) ? "(double)" + to_float(code, from) : "(double)" + code;
    case Type::bf16:
      if (from == Type::f32) return "__float2bfloat16_rn(" + code + ")";
      if (from == Type::f64) return "__double2bfloat16(" + code + ")";
      return "__float2bfloat16_rn(" + (is_half(from) ? to_float(code, from) : "(float)" + code) + ")";
    case Type::f16:
      if (from == Type::f32) return "__float2half_rn(" + code + ")";
      if (from == Type::f64) return "__double2half(" + code + ")";
      return "__float2half_rn(" + (is_half(from) ? to_float(code, from) : "(float)" + code) + ")";
    case Type::i32:
    case Type::i64:
      return std::string("(") + cuda_type(to) + ")" + (is_half(from) ? to_float(code, from) : code);
    case Type::boolean: return "(" + code + " != 0)";
  }
  return code;
}

// --- the program as text -----------------------------------------------------------------------

std::string format_expr(const Expr& e) {
  auto sub = [](const Expr& a, int min_prec) {
    std::string s = format_expr(a);
    return dsl_prec(a) < min_prec ? "(" + s + ")" : s;
  };
  switch (e.kind) {
    case Expr::Kind::number: {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof buf, e.number);
      return std::string(buf, res.ptr);
    }
    case Expr::Kind::dim:
    case Expr::Kind::index: return e.name;
    case Expr::Kind::read: {
      std::string s = e.name + "[";
      for (size_t i = 0; i < e.indices.size(); ++i) s += (i ? ", " : "") + format_index(e.indices[i]);
      return s + "]";
    }
    case Expr::Kind::unary: return "-" + sub(e.args[0], kUnary);
    case Expr::Kind::binary: {
      int p = dsl_prec(e);
      return sub(e.args[0], p) + " " + e.op + " " + sub(e.args[1], p + 1);
    }
    case Expr::Kind::compare: return sub(e.args[0], kAdd) + " " + e.op + " " + sub(e.args[1], kAdd);
    case Expr::Kind::cast:
    case Expr::Kind::call: {
      std::vector<std::string> args;
      for (const Expr& a : e.args) args.push_back(format_expr(a));
      return e.name + "(" + join_names(args) + ")";
    }
  }
  return "?";
}

std::string format_definition(const dsl::Definition& d) {
  std::string s = d.name + "[" + join_names(d.indices) + "] = ";
  if (d.reduce == dsl::ReduceOp::none) return s + format_expr(d.body);
  s += dsl::reduce_word(d) + std::string("(") + format_expr(d.body) + ") over " + d.over;
  for (const std::string& v : d.over_rest) s += ", " + v;
  return s;
}

std::string dtype_tag(const dsl::Program& p) {
  return p.outputs.empty() ? "void" : dsl::type_name(p.outputs.front().type);
}

std::string name_stem(const dsl::Program& p, const std::string& family) {
  std::string tag = dtype_tag(p);
  std::string stem = family + "_" + p.name;
  const std::string suffix = "_" + tag;
  if (p.name.size() < suffix.size() || p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    stem += suffix;
  return stem;
}

std::vector<const Expr*> reads_in(const Expr& e) {
  std::vector<const Expr*> out;
  collect_reads(e, out);
  return out;
}

// --- generated source --------------------------------------------------------------------------

namespace {

// A long declaration or call broken after its opening parenthesis, the arguments packed onto
// continuation lines four spaces deeper; other lines are returned as they are.
std::vector<std::string> wrapped(const std::string& s, size_t indent) {
  constexpr size_t kWidth = 110;
  if (indent + s.size() <= kWidth || s.rfind("//", 0) == 0 || s.rfind("#", 0) == 0) return {s};
  // The last parenthesised list, closed at the end of the line (before `;`, ` {` or `)`).
  size_t close = s.find_last_of(')');
  if (close == std::string::npos || s.find_first_not_of(";{ )", close + 1) != std::string::npos) return {s};
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = close + 1; i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos || open == 0) return {s};
  if (open + 1 < close && s.find(',', open) > close && s.find(" && ") != std::string::npos) {
    // A long condition: broken after its `&&`s.
    std::vector<std::string> out;
    std::string line, rest = s;
    for (size_t at; (at = rest.find(" && ")) != std::string::npos; rest = rest.substr(at + 4)) {
      std::string piece = rest.substr(0, at) + " &&";
      if (!line.empty() && indent + line.size() + 1 + piece.size() > kWidth) {
        out.push_back(line);
        line = "    ";
      }
      line += (line.empty() || line == "    " ? "" : " ") + piece;
    }
    if (indent + line.size() + 1 + rest.size() > kWidth) {
      out.push_back(line);
      line = "    ";
    }
    out.push_back(line + (line == "    " ? "" : " ") + rest);
    return out;
  }
  std::vector<std::string> args;
  std::string cur;
  depth = 0;
  for (size_t i = open + 1; i < close; ++i) {
    char c = s[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      args.push_back(cur);
      cur.clear();
      continue;
    }
    if (!(cur.empty() && c == ' ')) cur += c;
  }
  args.push_back(cur);
  if (args.size() < 2) return {s};
  std::vector<std::string> out = {s.substr(0, open + 1)};
  std::string line = "    ";
  for (size_t i = 0; i < args.size(); ++i) {
    std::string piece = args[i] + (i + 1 < args.size() ? "," : s.substr(close));
    if (line.size() > 4 && indent + line.size() + 1 + piece.size() > kWidth) {
      out.push_back(line);
      line = "    ";
    }
    line += (line.size() > 4 ? " " : "") + piece;
  }
  out.push_back(line);
  return out;
}

}  // namespace

void Writer::line(const std::string& s) {
  for (const std::string& l : wrapped(s, 2 * depth_)) {
    if (!l.empty()) text_ += std::string(2 * depth_, ' ') + l;
    text_ += "\n";
  }
}

void Writer::open(const std::string& head) {
  line(head + " {");
  ++depth_;
}

void Writer::close(const std::string& tail) {
  --depth_;
  line(tail);
}

void Writer::reopen(const std::string& head) {
  --depth_;
  line("} " + head + " {");
  ++depth_;
}

void Writer::comment(const std::string& text) {
  const size_t width = std::max<size_t>(40, 100 - 2 * depth_ - 3);
  std::istringstream in(text);
  std::string word, cur;
  while (in >> word) {
    if (!cur.empty() && cur.size() + 1 + word.size() > width) {
      line("// " + cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : " ") + word;
  }
  if (!cur.empty()) line("// " + cur);
}

void Writer::raw(const std::string& text) { text_ += text; }

Writer Writer::nested(int deeper) const {
  Writer w;
  w.depth_ = depth_ + deeper;
  return w;
}

// For 0 <= n < 2^31 and 1 <= d < 2^31, with s the least shift that 2^s >= d and
// m = floor(2^32 (2^s - d) / d) + 1, n / d = (umulhi(n, m) + n) >> s (the round-up method of
// Granlund and Montgomery); the sum stays under 2^32.
void index_divider_source(Writer& w, size_t count) {
  w.comment("Index division by a product of extents: kFast (every index under 2^31) multiplies by a "
            "divider's magic number and shifts, where 64-bit division would take dozens of instructions.");
  w.open("struct KsolDiv");
  w.line("int64_t d;   // the divisor");
  w.line("uint32_t m;  // its magic number (kFast)");
  w.line("uint32_t s;  // its shift (kFast)");
  w.close("};");
  if (count > 0) {
    w.open("struct KsolDivs");
    w.line("KsolDiv v[" + std::to_string(count) + "];");
    w.close("};");
  }
  w.line("template <bool kFast>");
  w.open("__device__ __forceinline__ int64_t ksol_div(int64_t n, const KsolDiv& v)");
  w.open("if constexpr (kFast)");
  w.line("const uint32_t u = static_cast<uint32_t>(n);");
  w.line("return static_cast<int64_t>((__umulhi(u, v.m) + u) >> v.s);");
  w.close();
  w.line("return n / v.d;");
  w.close();
  w.line("template <bool kFast>");
  w.open("__device__ __forceinline__ int64_t ksol_mod(int64_t n, const KsolDiv& v)");
  w.line("return n - ksol_div<kFast>(n, v) * v.d;");
  w.close();
  w.comment("The divider of d (host side): magic number and shift where 1 <= d <= 2^31 - 1 (the kFast launch's "
            "divisors), the divisor alone otherwise.");
  w.open("KsolDiv ksol_divider(int64_t d)");
  w.line("KsolDiv v{d, 0, 0};");
  w.line("if (d < 1 || d > 2147483647) return v;");
  w.line("while ((int64_t(1) << v.s) < d) ++v.s;");
  w.line("v.m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << v.s) - uint64_t(d))) / uint64_t(d) + 1);");
  w.line("return v;");
  w.close();
  w.line();
}

size_t IndexDivisors::index_of(const std::string& d) {
  auto it = std::find(v_.begin(), v_.end(), d);
  if (it != v_.end()) return static_cast<size_t>(it - v_.begin());
  v_.push_back(d);
  return v_.size() - 1;
}

void IndexDivisors::host_dividers(Writer& w) const {
  w.line("KsolDivs dv;");
  for (size_t i = 0; i < v_.size(); ++i) w.line("dv.v[" + std::to_string(i) + "] = ksol_divider(" + v_[i] + ");");
}

std::string pack_source() {
  return "// kVec consecutive elements moved as one aligned access (at most 16 bytes: one 128-bit load).\n"
         "template <typename T, int kVec>\n"
         "struct alignas(sizeof(T) * kVec) Pack {\n"
         "  T v[kVec];\n"
         "};\n"
         "template <int kVec, typename T>\n"
         "__device__ __forceinline__ Pack<T, kVec> load_pack(const T* p) {\n"
         "  return *reinterpret_cast<const Pack<T, kVec>*>(p);\n"
         "}\n"
         "template <int kVec, typename T>\n"
         "__device__ __forceinline__ void store_pack(T* p, const Pack<T, kVec>& x) {\n"
         "  *reinterpret_cast<Pack<T, kVec>*>(p) = x;\n"
         "}\n";
}

void open_ksol_run(Writer& w, const dsl::Program& p, const AbiLayout& abi, const Names& names) {
  std::string order = "ksol_run's call: tensors (";
  for (size_t i = 0; i < abi.tensors.size(); ++i) order += (i ? ", " : "") + abi.tensors[i];
  order += "), dims (";
  for (size_t i = 0; i < abi.dims.size(); ++i) order += (i ? ", " : "") + abi.dims[i];
  w.comment(order + ") in this order: the task's, or without a task the program's own (inputs, then outputs; dims "
            "in the order the header first names them).");
  w.open("extern \"C\" int ksol_run(const ksol_call* call)");
  w.line("if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != " +
         std::to_string(abi.tensors.size()) + " || call->num_dims != " + std::to_string(abi.dims.size()) + ")");
  w.line("  return 1;");
  std::vector<std::string> used_dims;
  for (size_t i = 0; i < abi.dims.size(); ++i) {
    if (std::find(p.dims.begin(), p.dims.end(), abi.dims[i]) == p.dims.end()) continue;
    w.line("const int64_t " + names[abi.dims[i]] + " = call->dims[" + std::to_string(i) + "];");
    used_dims.push_back(names[abi.dims[i]] + " < 0");
  }
  if (!used_dims.empty()) {
    std::string cond;
    for (size_t i = 0; i < used_dims.size(); ++i) cond += (i ? " || " : "") + used_dims[i];
    w.line("if (" + cond + ") return 2;");
  }
  for (size_t i = 0; i < abi.tensors.size(); ++i) {
    const dsl::Param* prm = p.param(abi.tensors[i]);
    bool input = false;
    for (const dsl::Param& in : p.inputs) input = input || in.name == prm->name;
    std::string type = std::string(input ? "const " : "") + cuda_type(prm->type) + "*";
    w.line(type + " " + names[prm->name] + " = static_cast<" + type + ">(call->tensors[" + std::to_string(i) + "]);");
  }
  w.line("const cudaStream_t stream = static_cast<cudaStream_t>(call->stream);");
}

std::string kernel_params_decl(const dsl::Program& p, const AbiLayout& abi, const Names& names, bool open_tail,
                               const std::string& dim_type) {
  std::string s;
  for (const std::string& t : abi.tensors) {
    const dsl::Param* prm = p.param(t);
    bool input = false;
    for (const dsl::Param& in : p.inputs) input = input || in.name == t;
    s += std::string(input ? "const " : "") + cuda_type(prm->type) + "* __restrict__ " + names[t] + ", ";
  }
  for (size_t i = 0; i < p.dims.size(); ++i) s += (i ? ", " : "") + dim_type + " " + names[p.dims[i]];
  if (p.dims.empty() && !open_tail && s.size() >= 2) s.resize(s.size() - 2);
  return s + (open_tail && !p.dims.empty() ? ", " : "");
}

std::string kernel_params_pass(const dsl::Program& p, const AbiLayout& abi, const Names& names, bool open_tail) {
  std::string s;
  for (const std::string& t : abi.tensors) s += names[t] + ", ";
  for (size_t i = 0; i < p.dims.size(); ++i) s += (i ? ", " : "") + names[p.dims[i]];
  if (p.dims.empty() && !open_tail && s.size() >= 2) s.resize(s.size() - 2);
  return s + (open_tail && !p.dims.empty() ? ", " : "");
}

void simt_slice_fma(Writer& w) {
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < kBK; ++kk)");
  w.line("float a_frag[kTM], b_frag[kTN];");
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < kTM; ++i) a_frag[i] = As[kk][ty + i * kTY];");
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < kTN; ++j) b_frag[j] = Bs[kk][tx + j * kTX];");
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < kTM; ++i)");
  w.line("  #pragma unroll");
  w.line("  for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);");
  w.close();
}

void staged_slice_loop(Writer& w, const std::string& a_at, const std::function<void(Writer&, const std::string&)>& load,
                       const std::function<void(Writer&)>& multiply, bool tf32, const std::string& b_at,
                       const std::function<void(Writer&)>& preload) {
  auto staged = [&](const std::string& r) { return tf32 ? "tf32_round(" + r + ")" : r; };
  w.open("for (int k0 = 0; k0 < depth; k0 += kBK)");
  w.comment("A slice that is a whole multiple of the threads has no element past its end: the test folds away.");
  w.line("#pragma unroll");
  w.open("for (int l = 0; l < kLA; ++l)");
  w.line("const int e = tid + l * kThreads;");
  w.line("if ((kBK * kBM) % kThreads == 0 || e < kBK * kBM) " + a_at + " = " + staged("ra[l]") + ";");
  w.close();
  w.line("#pragma unroll");
  w.open("for (int l = 0; l < kLB; ++l)");
  w.line("const int e = tid + l * kThreads;");
  w.line("if ((kBK * kBN) % kThreads == 0 || e < kBK * kBN) " + b_at + " = " + staged("rb[l]") + ";");
  w.close();
  w.line("__syncthreads();");
  if (preload) preload(w);
  w.open("if (k0 + kBK < depth)");
  load(w, "(k0 + kBK)");
  w.close();
  multiply(w);
  w.line("__syncthreads();  // the slices are rewritten for the next one");
  w.close();
}

void mma_launch(Writer& w, const std::string& kernel, const std::string& grid, const std::string& threads,
                const std::string& args, int64_t stages, const std::string& scope) {
  if (stages < 2) {
    w.line(kernel + "<<<" + grid + ", " + threads + ", 0, stream>>>(" + args + ");");
    return;
  }
  w.open("");
  w.line("constexpr int kSliceBytes = " + std::to_string(stages) + " * " + scope + "kSR * (" + scope + "kPA + " + scope +
         "kPB) * int(sizeof(float));");
  w.line("if (kSliceBytes > 48 * 1024 && cudaFuncSetAttribute(" + kernel +
         ", cudaFuncAttributeMaxDynamicSharedMemorySize, kSliceBytes) != cudaSuccess) return 4;");
  w.line(kernel + "<<<" + grid + ", " + threads + ", kSliceBytes, stream>>>(" + args + ");");
  w.close();
}

void bind_stage(Writer& w, const std::string& stage_type, const std::string& stage) {
  w.line(stage_type + " (*const As)[kPA] = slices.a[" + stage + "];");
  w.line(stage_type + " (*const Bs)[kPB] = slices.b[" + stage + "];");
}

void pipelined_slice_loop(Writer& w, const std::function<void(Writer&, const std::string&, const std::string&)>& issue,
                          const std::function<void(Writer&)>& multiply, const std::function<void(Writer&)>& preload) {
  w.comment("The first kStages - 1 slices' copies in flight, a group each (empty past the end).");
  w.line("#pragma unroll");
  w.open("for (int s = 0; s < kStages - 1; ++s)");
  w.open("if (s * kBK < depth)");
  issue(w, "(s * kBK)", "s");
  w.close();
  w.line("ksol_cp_commit();");
  w.close();
  w.line("int stage = 0;");
  w.open("for (int k0 = 0; k0 < depth; k0 += kBK)");
  w.line("ksol_cp_wait<kStages - 2>();  // this thread's copies of the slice have landed (the newer ones may not have)");
  w.line("__syncthreads();  // every thread's copies are visible, and the buffer rewritten below is no longer read");
  if (preload) preload(w);
  w.open("");
  w.line("const int ahead = k0 + (kStages - 1) * kBK;");
  w.line("const int into = stage == 0 ? kStages - 1 : stage - 1;  // the buffer the last slice used");
  w.open("if (ahead < depth)");
  issue(w, "ahead", "into");
  w.close();
  w.line("ksol_cp_commit();");
  w.close();
  w.open("");
  if (!preload) bind_stage(w, "float", "stage");  // a preload has read the buffer: the products read registers
  multiply(w);
  w.close();
  w.line("stage = stage + 1 == kStages ? 0 : stage + 1;");
  w.close();
}

int64_t check_mma_stages(int64_t stages, Type type) {
  if (stages == 0) return 1;
  if (stages < 1 || stages > 4)
    throw Refused("stages = " + std::to_string(stages) + " must be between 1 and 4, or auto (mainloop = mma: 1 stages the "
                  "next slice in registers, 2 to 4 fill as many shared buffers by cp.async)");
  if (stages >= 2 && type_bytes(type) != 4)
    throw Refused("stages = " + std::to_string(stages) + ": mainloop = mma pipelines slices of 32-bit elements only (cp.async "
                  "copies 4 bytes at least, and the gather reads one " + std::string(dsl::type_name(type)) +
                  " element at a time); stages = 1 stages them in registers");
  return stages;
}

int64_t check_mma_tile(const std::vector<int64_t>& tile, const std::vector<int64_t>& tt, bool tf32, Type type,
                       const char* rows, const char* cols, int64_t a_regs, int64_t stages, bool slice_fragments,
                       int64_t extra_static) {
  auto text = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  const std::string tile_text = "tile = " + text(tile), tt_text = "thread_tile = " + text(tt);
  const std::string mode = "mainloop = mma";
  const int64_t bm = tile[0], bn = tile[1], bk = tile[2], fm = tt[0], fn = tt[1];
  for (int64_t t : tt)
    if (!(t == 1 || t == 2 || t == 4 || t == 8))
      throw Refused(tt_text + " must have entries 1, 2, 4 or 8 (" + mode + ": 16 x 16 fragments per warp)");
  if (fm * fn > 16)
    throw Refused(tt_text + ": " + mode + " holds " + std::to_string(fm * fn * 8) +
                  " f32 accumulators per thread (8 a fragment); at most 128 fit in the registers");
  for (int64_t t : tile)
    if (t < 1 || t > 512) throw Refused(tile_text + " must have entries between 1 and 512");
  if (bm % (16 * fm) != 0 || bn % (16 * fn) != 0)
    throw Refused(tile_text + " is not whole warps of " + tt_text + " (" + std::to_string(16 * fm) + " " + rows + " x " +
                  std::to_string(16 * fn) + " " + cols + " each, in " + mode + ")");
  const int64_t ks = tf32 ? 8 : 16;
  if (bk % ks != 0)
    throw Refused(tile_text + ": " + mode + " takes a slice that is a multiple of " + std::to_string(ks) + " (" +
                  (tf32 ? "TF32" : std::string(dsl::type_name(type))) + " fragments are 16 x 16 x " + std::to_string(ks) + ")");
  const int64_t warps = (bm / (16 * fm)) * (bn / (16 * fn));
  if (warps * 32 > 1024)
    throw Refused(tile_text + " with " + tt_text + " makes " + std::to_string(warps * 32) + " threads per block (" + mode +
                  ": one warp per " + std::to_string(16 * fm) + " x " + std::to_string(16 * fn) + " outputs); a block has at most 1024");
  // TF32 (mma.sync) pads rows by 8 elements and has no staging tile; WMMA pads by 16 bytes.
  const int64_t elem = tf32 ? 4 : type_bytes(type), pad = tf32 ? 8 : 16 / elem;
  // mma.sync's slices keep two reduction positions a row (kSR = bk / 2 rows of 2 * bm + pad).
  const int64_t slices = tf32 ? bk / 2 * (2 * bm + pad + 2 * bn + pad) * elem : bk * (bm + pad + bn + pad) * elem;
  const int64_t staging = tf32 ? 0 : warps * 16 * 20 * 4;
  // stages >= 2 is TF32 only: no staging tile
  const int64_t bytes = stages * slices + staging + extra_static;
  const std::string staged = stages >= 2 ? " with stages = " + std::to_string(stages) : "";
  // Register-staged slices are static shared arrays (48 KB without the opt-in); the pipeline's
  // buffers are dynamic shared memory, up to sm_90's opt-in maximum.
  if (stages < 2 && bytes > 48 * 1024)
    throw Refused(tile_text + " with " + tt_text + " stages " + std::to_string(bytes) + " bytes of shared memory per block (" +
                  mode + "); static shared memory is at most 49152 (no opt-in; stages = 2 to 4 take dynamic shared memory)");
  // mma_launch opts in to more dynamic shared memory only where the buffers alone pass 48 KB.
  if (stages >= 2 && stages * slices <= 48 * 1024 && bytes > 48 * 1024)
    throw Refused(tile_text + " with " + tt_text + staged + ": its buffers (" + std::to_string(stages * slices) +
                  " bytes) and its static arrays (" + std::to_string(extra_static) + ") pass 49152 bytes together "
                  "while the buffers alone take no opt-in");
  if (bytes > kSharedLimitBytes)
    throw Refused(tile_text + " with " + tt_text + staged + " stages " + std::to_string(bytes) +
                  " bytes of shared memory per block (" + mode + "); dynamic shared memory is at most " +
                  std::to_string(kSharedLimitBytes) + " (sm_90's opt-in maximum)");
  const int64_t threads = 32 * warps, la = (bk * bm + threads - 1) / threads, lb = (bk * bn + threads - 1) / threads;
  // The pipeline copies straight to shared memory: no staged values, the gather state remains.
  // fragments = slice holds every k-step's operands of a slice (4 A and 4 B registers a fragment
  // pair each) where one k-step's are live otherwise.
  const int64_t held = slice_fragments ? (bk / ks - 1) * 4 * (fm + fn) : 0;
  const int64_t regs = (stages >= 2 ? fm * fn * 8 + la * a_regs + 40 : fm * fn * 8 + la * (1 + a_regs) + lb + 40) + held;
  const int64_t budget = std::min<int64_t>(255, 65536 / threads);
  if (regs > budget)
    throw Refused(tile_text + " with " + tt_text + staged + (slice_fragments ? " with fragments = slice" : "") +
                  " needs about " + std::to_string(regs) + " registers a thread (" + std::to_string(fm * fn * 8) +
                  " accumulators, " +
                  (stages >= 2 ? std::to_string(la) + " gathered elements' state" :
                                 std::to_string(la) + " + " + std::to_string(lb) + " staged elements") +
                  (slice_fragments ? ", " + std::to_string(held) + " more operand registers" : "") + "); " +
                  std::to_string(threads) + " threads a block leave at most " + std::to_string(budget) + " (" + mode + ")");
  return warps;
}

void wmma_constants(Writer& w, const WmmaShape& s) {
  w.line("constexpr int kFM = " + std::to_string(s.fm) + ", kFN = " + std::to_string(s.fn) +
         ";  // 16 x 16 fragments per warp: rows x columns");
  w.line("constexpr int kWM = kBM / (16 * kFM), kWN = kBN / (16 * kFN), kThreads = 32 * kWM * kWN;  // warps");
  w.line("constexpr int kKS = " + std::to_string(s.ks) + ";  // a fragment's reduction step");
  if (s.sync)
    w.line("// Row lengths of the staged slices: two reduction positions of the tile's rows (columns), padded by 8 "
           "elements, so that each quarter-warp's 16-byte operand loads (2 x 4 lanes) hit 32 distinct banks.");
  else
    w.line("// Row lengths of the staged slices: padded by 16 bytes (WMMA loads rows of a multiple of 16 bytes).");
  if (!s.sync) {
    w.line("constexpr int kPA = kBM + " + std::to_string(s.pad) + ", kPB = kBN + " + std::to_string(s.pad) + ";");
    w.comment("Where the slices keep reduction position k of row m of A and of column n of B: in order (WMMA's "
              "fragments load whole rows).");
    w.line("constexpr int kSR = kBK, kSW = 1;  // slice rows; slots a row or column takes in one");
    w.line("__device__ __forceinline__ int ksol_row(int k) { return k; }");
    w.line("__device__ __forceinline__ int ksol_a_slot(int m, int) { return m; }");
    w.line("__device__ __forceinline__ int ksol_b_slot(int n, int) { return n; }");
    return;
  }
  w.line("constexpr int kPA = 2 * kBM + " + std::to_string(s.pad) + ", kPB = 2 * kBN + " + std::to_string(s.pad) + ";");
  w.comment("Where the slices keep reduction position k of row m of A and of column n of B: positions k and k + 4 "
            "of each 8 share slice row ksol_row(k), and within each warp's rows (columns) the slots interleave so "
            "that a lane's operand registers of one fragment product lie side by side, in the instruction's order: "
            "lane g = lane / 4 takes A's rows g and g + 8 of fragment i at positions t and t + 4 (t = lane % 4) from "
            "slots 32i + 4g .. 32i + 4g + 3 of row ksol_row(t), and B's column g of the 8-wide tiles 2j and 2j + 1 "
            "at t and t + 4 from slots 32j + 4g .. 32j + 4g + 3, each by one 16-byte load.");
  w.line("constexpr int kSR = kBK / 2, kSW = 2;  // slice rows; slots a row or column takes in one");
  w.line("__device__ __forceinline__ int ksol_row(int k) { return k / 8 * 4 + k % 4; }");
  w.line("__device__ __forceinline__ int ksol_a_slot(int m, int k) {");
  w.line("  const int w = m / (16 * kFM) * (16 * kFM), r = m - w;  // the warp's first row, the row in the warp's");
  w.line("  return 2 * w + r / 16 * 32 + r % 8 * 4 + k / 4 % 2 * 2 + r / 8 % 2;");
  w.line("}");
  w.line("__device__ __forceinline__ int ksol_b_slot(int n, int k) {");
  w.line("  const int w = n / (16 * kFN) * (16 * kFN), c = n - w;  // the warp's first column, the column in the warp's");
  w.line("  return 2 * w + c / 16 * 32 + c % 8 * 4 + c / 8 % 2 * 2 + k / 4 % 2;");
  w.line("}");
}

void wmma_declarations(Writer& w, const std::string& stage_type, int64_t stages, bool staging) {
  if (stages >= 2) {
    // Only TF32 is pipelined (cp.async copies 32-bit elements), and mma.sync has no staging tile.
    w.line("constexpr int kStages = " + std::to_string(stages) + ";  // slices in flight or in use");
    w.comment("The slices' buffers, each as As and Bs (see ksol_a_slot and ksol_b_slot).");
    w.line("struct KsolSlices { " + stage_type + " a[kStages][kSR][kPA]; " + stage_type + " b[kStages][kSR][kPB]; };");
    w.line("extern __shared__ uint4 ksol_slice_smem[];  // kSliceBytes of dynamic shared memory (mma_launch)");
    w.line("KsolSlices& slices = *reinterpret_cast<KsolSlices*>(ksol_slice_smem);");
  } else {
    w.line("__shared__ __align__(32) " + stage_type + " As[kSR][kPA];  // the A slice (see ksol_a_slot)");
    w.line("__shared__ __align__(32) " + stage_type + " Bs[kSR][kPB];  // the B slice (see ksol_b_slot)");
    if (staging) w.line("__shared__ __align__(32) float Cs[kWM * kWN][16][20];  // each warp's 16 x 16 staging tile, rows padded");
  }
  w.line("const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;");
  w.line("const int wm0 = (warp % kWM) * 16 * kFM, wn0 = (warp / kWM) * 16 * kFN;");
}

void wmma_accumulators(Writer& w, bool sync) {
  if (sync) {
    w.comment("Each 16 x 16 fragment (i, j) as two 16 x 8 mma.sync tiles 2j and 2j + 1, four accumulators a lane each.");
    w.line("float c_acc[kFM][2 * kFN][4];");
    w.line("#pragma unroll");
    w.line("for (int i = 0; i < kFM; ++i)");
    w.line("  #pragma unroll");
    w.line("  for (int j = 0; j < 2 * kFN; ++j) c_acc[i][j][0] = c_acc[i][j][1] = c_acc[i][j][2] = c_acc[i][j][3] = 0.0f;");
    return;
  }
  w.line("nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, kKS, float> c_frag[kFM][kFN];");
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < kFM; ++i)");
  w.line("  #pragma unroll");
  w.line("  for (int j = 0; j < kFN; ++j) nvcuda::wmma::fill_fragment(c_frag[i][j], 0.0f);");
}

namespace {

// One k-step's TF32 operands from the slices into `a`[i][0..3] and `b`[2j or 2j + 1][0..1], the
// k-step's slice row `row` (kk / 2): one 16-byte load for each A fragment and one for each two
// 8-wide B tiles, where ksol_a_slot and ksol_b_slot put them in mma.sync's order, each value
// through `bits` (ksol_bits, or ksol_tf32_bits to round it).
void mma_operand_loads(Writer& w, const std::string& bits, const std::string& a, const std::string& b, const std::string& row) {
  // One operand's loop: fragment `idx` of `count` from `slice` at the warp's `origin`, the float4's
  // four values into `dst` in mma.sync's order.
  auto loads = [&](const std::string& count, const std::string& slice, const std::string& origin, const std::string& idx,
                   const std::array<std::string, 4>& dst) {
    w.line("#pragma unroll");
    w.open("for (int " + idx + " = 0; " + idx + " < " + count + "; ++" + idx + ")");
    w.line("const float4 v = *reinterpret_cast<const float4*>(&" + slice + "[" + row + " + lane % 4][2 * " + origin + " + 32 * " + idx +
           " + 4 * (lane / 4)]);");
    const char* lanes[4] = {"x", "y", "z", "w"};
    for (int c = 0; c < 4; ++c) w.line(dst[c] + " = " + bits + "(v." + lanes[c] + ");");
    w.close();
  };
  loads("kFM", "As", "wm0", "i", {a + "[i][0]", a + "[i][1]", a + "[i][2]", a + "[i][3]"});
  loads("kFN", "Bs", "wn0", "j", {b + "[2 * j][0]", b + "[2 * j][1]", b + "[2 * j + 1][0]", b + "[2 * j + 1][1]"});
}

// The TF32 slice product by mma.sync.m16n8k8: each lane loads its own operand registers from the
// slices (no fragment API), a k-step at a time, right before their products.
void mma_sync_slice_product(Writer& w, bool round) {
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < kBK; kk += kKS)");
  w.comment("Lane (lane / 4, lane % 4) takes rows lane / 4 and lane / 4 + 8 at positions lane % 4 and lane % 4 + 4 "
            "(see ksol_mma_tf32), " + std::string(round ? "rounded to TF32 as they load." : "TF32 already in the slice."));
  w.line("unsigned a_frag[kFM][4], b_frag[2 * kFN][2];");
  mma_operand_loads(w, round ? "ksol_tf32_bits" : "ksol_bits", "a_frag", "b_frag", "kk / 2");
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < kFM; ++i)");
  w.line("  #pragma unroll");
  w.line("  for (int j = 0; j < 2 * kFN; ++j) ksol_mma_tf32(c_acc[i][j], a_frag[i], b_frag[j]);");
  w.close();
}

}  // namespace

void mma_fragment_loads(Writer& w, bool round, bool bind) {
  w.comment(std::string("The slice's operands, every k-step's, loaded before the next slice's loads are issued") +
            (round ? " (rounded to TF32 as they load)." : " (TF32 already in the slice)."));
  w.line("unsigned a_all[kBK / kKS][kFM][4], b_all[kBK / kKS][2 * kFN][2];");
  w.open("");
  if (bind) bind_stage(w, "float", "stage");
  w.line("#pragma unroll");
  w.open("for (int kstep = 0; kstep < kBK / kKS; ++kstep)");
  mma_operand_loads(w, round ? "ksol_tf32_bits" : "ksol_bits", "a_all[kstep]", "b_all[kstep]", "kstep * kKS / 2");
  w.close();
  w.close();
}

void mma_slice_loop(Writer& w, const MmaLoop& m) {
  const bool piped = m.stages >= 2;
  std::function<void(Writer&)> preload;
  if (m.slice_fragments) preload = [&](Writer& x) { mma_fragment_loads(x, piped, piped); };
  auto multiply = [&](Writer& x) {
    if (m.slice_fragments) mma_fragment_products(x);
    else wmma_slice_product(x, m.frag_type, m.tf32, piped);
  };
  if (piped) {
    pipelined_slice_loop(w, m.issue, multiply, preload);
    return;
  }
  w.line(m.stage_type + " ra[kLA], rb[kLB];");
  m.load(w, "0");
  staged_slice_loop(w, m.a_at, m.load, multiply, m.tf32, kMmaBAt, preload);
}

void mma_fragment_products(Writer& w) {
  w.line("#pragma unroll");
  w.line("for (int kstep = 0; kstep < kBK / kKS; ++kstep)");
  w.line("  #pragma unroll");
  w.line("  for (int i = 0; i < kFM; ++i)");
  w.line("    #pragma unroll");
  w.line("    for (int j = 0; j < 2 * kFN; ++j) ksol_mma_tf32(c_acc[i][j], a_all[kstep][i], b_all[kstep][j]);");
}

void wmma_slice_product(Writer& w, const std::string& frag_type, bool tf32, bool round) {
  if (tf32) {
    mma_sync_slice_product(w, round);
    return;
  }
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < kBK; kk += kKS)");
  w.line("nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, kKS, " + frag_type + ", nvcuda::wmma::col_major> a_frag[kFM];");
  w.line("nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, kKS, " + frag_type + ", nvcuda::wmma::row_major> b_frag[kFN];");
  auto load_frags = [&](const std::string& frag, const std::string& count, const std::string& at, const std::string& ld) {
    w.line("#pragma unroll");
    w.open("for (int i = 0; i < " + count + "; ++i)");
    w.line("nvcuda::wmma::load_matrix_sync(" + frag + "[i], " + at + ", " + ld + ");");
    w.close();
  };
  load_frags("a_frag", "kFM", "&As[kk][wm0 + i * 16]", "kPA");
  load_frags("b_frag", "kFN", "&Bs[kk][wn0 + i * 16]", "kPB");
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < kFM; ++i)");
  w.line("  #pragma unroll");
  w.line("  for (int j = 0; j < kFN; ++j) nvcuda::wmma::mma_sync(c_frag[i][j], a_frag[i], b_frag[j], c_frag[i][j]);");
  w.close();
}

void wmma_store_fragments(Writer& w, bool rows_fastest, const std::function<void(Writer&)>& element,
                          const std::function<void(Writer&)>& row, bool sync, const std::function<void(Writer&)>& row_end) {
  if (sync) {
    // Straight from the accumulators: lane (g, t) holds rows g and g + 8 of each 16 x 8 tile, at its
    // columns 2t and 2t + 1.
    w.line("#pragma unroll");
    w.open("for (int i = 0; i < kFM; ++i)");
    w.line("#pragma unroll");
    w.open("for (int hr = 0; hr < 2; ++hr)");
    w.line("const int fr = lane / 4 + 8 * hr;  // the row in the fragment, the same for its outputs of each j");
    if (row) row(w);
    w.line("#pragma unroll");
    w.open("for (int j = 0; j < kFN; ++j)");
    w.line("#pragma unroll");
    w.open("for (int t = 0; t < 4; ++t)");
    w.line("const int fc = (t / 2) * 8 + 2 * (lane % 4) + t % 2;  // the column in the fragment");
    w.line("const float frag_v = c_acc[i][2 * j + t / 2][2 * hr + t % 2];");
    element(w);
    w.close();
    w.close();
    if (row_end) row_end(w);
    w.close();
    w.close();
    return;
  }
  const bool hoisted = rows_fastest && row;
  w.line("#pragma unroll");
  w.open("for (int i = 0; i < kFM; ++i)");
  if (hoisted) {
    w.line("const int fr = lane % 16;  // the row in the fragment, the same for its 8 outputs of each j");
    row(w);
  }
  w.line("#pragma unroll");
  w.open("for (int j = 0; j < kFN; ++j)");
  w.line("nvcuda::wmma::store_matrix_sync(&Cs[warp][0][0], c_frag[i][j], 20, nvcuda::wmma::mem_row_major);");
  w.line("__syncwarp();");
  w.line("#pragma unroll");
  w.open("for (int t = 0; t < 8; ++t)");
  if (hoisted)
    w.line("const int fc = lane / 16 + 2 * t;  // the column in the fragment");
  else if (rows_fastest)
    w.line("const int fr = lane % 16, fc = lane / 16 + 2 * t;  // the row and column in the fragment");
  else
    w.line("const int fc = lane % 16, fr = lane / 16 + 2 * t;  // the row and column in the fragment");
  w.line("const float frag_v = Cs[warp][fr][fc];");
  element(w);
  w.close();
  w.line("__syncwarp();  // read before the next fragment is stored");
  w.close();
  w.close();
}

std::string finish_source(Writer& w, const Helpers& helpers, const std::string& kernels,
                          const std::function<void(Writer&)>& host) {
  if (!helpers.empty()) w.raw(helpers.source());
  w.line();
  w.raw(kernels);
  w.line("}  // namespace");
  w.line();
  host(w);
  return w.text();
}

std::string includes(const dsl::Program& p) {
  std::set<Type> types;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const dsl::Param& prm : *list) types.insert(prm.type);
  for (const dsl::Definition& d : p.defs) {
    types.insert(d.type);
    collect_types(d.body, types);
  }
  std::string s = "#include <ksol/abi.h>\n#include <cuda_runtime.h>\n";
  if (types.count(Type::bf16)) s += "#include <cuda_bf16.h>\n";
  if (types.count(Type::f16)) s += "#include <cuda_fp16.h>\n";
  s += "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n";
  return s;
}

namespace {

bool uses_dims(const Expr& e) {
  if (e.kind == Expr::Kind::dim) return true;
  for (const Expr& a : e.args)
    if (uses_dims(a)) return true;
  return false;
}


void collect_calls(const Expr& e, std::vector<std::string>& out) {
  if (e.kind == Expr::Kind::call && std::find(out.begin(), out.end(), e.name) == out.end()) out.push_back(e.name);
  for (const Expr& a : e.args) collect_calls(a, out);
}

}  // namespace

CutlassFusion cutlass_fusion(const dsl::Program& p, const dsl::Definition& out, const std::string& acc) {
  CutlassFusion f;
  auto is_acc = [&](const Expr& e) { return e.kind == Expr::Kind::read && e.name == acc; };
  // bias[j] or f32(bias[j]), j the output's last index, in f32 or a 16-bit type.
  auto col_bias = [&](const Expr& e) -> const Expr* {
    const Expr* r = &e;
    if (r->kind == Expr::Kind::cast) {
      if (r->type != Type::f32) return nullptr;
      r = &r->args[0];
    }
    const bool ok = r->kind == Expr::Kind::read && r->name != acc && r->indices.size() == 1 &&
                    r->indices[0].var == out.indices.back() && (r->type == Type::f32 || is_half(r->type));
    return ok ? r : nullptr;
  };
  const Expr* inner = &out.body;
  if (inner->kind == Expr::Kind::cast && inner->type == out.type && inner->args[0].type == Type::f32) {
    inner = &inner->args[0];
  } else if (out.type != Type::f32) {
    f.not_fusable = "the output is not a cast of an f32 value";
    return f;
  }
  const Expr* core = nullptr;
  const Expr* bias = nullptr;
  std::function<void(const Expr&)> find = [&](const Expr& e) {
    if (core) return;
    if (e.kind == Expr::Kind::binary && e.op == "+") {
      const Expr* b = is_acc(e.args[0]) ? col_bias(e.args[1]) : is_acc(e.args[1]) ? col_bias(e.args[0]) : nullptr;
      if (b) {
        core = &e;
        bias = b;
        return;
      }
    }
    if (is_acc(e)) {
      core = &e;
      return;
    }
    for (const Expr& a : e.args) find(a);
  };
  find(*inner);
  if (!core) {
    f.not_fusable = "the epilogue does not read the sum";
    return f;
  }
  if (bias) f.bias = p.param(bias->name);
  // act: inner with every occurrence of the core replaced by "__x".
  bool other = false;
  std::function<Expr(const Expr&)> subst = [&](const Expr& e) -> Expr {
    if (&e == core) {
      Expr x;
      x.kind = Expr::Kind::read;
      x.name = "__x";
      x.type = Type::f32;
      return x;
    }
    if (e.kind == Expr::Kind::read) other = true;
    Expr c = e;
    for (size_t i = 0; i < e.args.size(); ++i) c.args[i] = subst(e.args[i]);
    return c;
  };
  f.act = subst(*inner);
  if (other) {
    f.not_fusable = "the epilogue reads tensors other than the sum and one per-column bias added to it (" +
                    format_expr(out.body) + ")";
    return f;
  }
  if (uses_dims(f.act)) {
    f.not_fusable = "the epilogue uses a dim's value";
    return f;
  }
  if (uses_index(f.act)) {
    f.not_fusable = "the epilogue uses its element's position (an index as a value)";
    return f;
  }
  f.identity = f.act.kind == Expr::Kind::read;
  f.fusable = true;
  std::vector<std::string> calls;
  collect_calls(f.act, calls);
  std::string tag = f.bias ? "bias" : "";
  for (std::string c : calls) {
    c.erase(std::remove(c.begin(), c.end(), '_'), c.end());
    tag += c;
  }
  if (!f.identity && calls.empty()) tag += "epi";
  f.tag = tag;
  return f;
}

std::string cutlass_type(Type t) {
  switch (t) {
    case Type::bf16: return "cutlass::bfloat16_t";
    case Type::f16: return "cutlass::half_t";
    default: return "float";
  }
}

std::string cutlass_activation_code(const CutlassFusion& f, Helpers& helpers, bool fast_math) {
  ExprEmitter em;
  em.helpers = &helpers;
  em.fast_math = fast_math;
  em.dim = [](const std::string&) -> std::string { throw Refused("dim in a fused epilogue"); };
  em.read = [](const Expr&) -> std::string { return "x"; };
  return em(f.act);
}

void cutlass_activation_fn(Writer& w, const std::string& act) {
  w.comment("The epilogue's function of v = acc [+ bias] in f32, applied by CUTLASS's fusion to each fragment; "
            "the same helpers and order of operations as the DSL (and the SIMT kernel).");
  w.open("template <class T> struct KsolEpilogueFn");
  w.line("__device__ __forceinline__ float operator()(float x) const { return " + act + "; }");
  w.close("};");
  w.open("template <class T, int N, bool R> struct KsolEpilogueFn<cutlass::Array<T, N, R>>");
  w.open("__device__ __forceinline__ cutlass::Array<T, N, R> operator()(cutlass::Array<T, N, R> const& v) const");
  w.line("cutlass::Array<T, N, R> r;");
  w.line("KsolEpilogueFn<T> f;");
  w.line("CUTLASS_PRAGMA_UNROLL");
  w.line("for (int i = 0; i < N; ++i) r[i] = f(v[i]);");
  w.line("return r;");
  w.close();
  w.close("};");
  w.line();
}

std::string cutlass_fusion_op(const CutlassFusion& f, const std::string& td, const std::string& elem_c, bool bias_per_row) {
  const std::string ns = "cutlass::epilogue::fusion::";
  const std::string per = bias_per_row ? "PerRow" : "PerCol";
  if (f.identity && !f.bias) return ns + "LinearCombination<" + td + ", float, " + elem_c + ", float>";
  if (f.identity) return ns + "LinComb" + per + "Bias<" + td + ", float, " + cutlass_type(f.bias->type) + ", " + elem_c + ", float>";
  if (f.bias)
    return ns + "LinComb" + per + "BiasEltAct<KsolEpilogueFn, " + td + ", float, " + cutlass_type(f.bias->type) + ", " + elem_c +
           ", float>";
  return ns + "LinCombEltAct<KsolEpilogueFn, " + td + ", float, " + elem_c + ", float>";
}

}  // namespace ksol::codegen::detail
