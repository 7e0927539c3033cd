#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include "task/task.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/expr.h"
#include "core/hash.h"
#include "core/util.h"

namespace fs = std::filesystem;

namespace ksol {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
  }
  return 0;
}
bool dtype_is_float(DType t) { return t != DType::i32 && t != DType::i64; }
const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}
std::optional<DType> parse_dtype(const std::string& s) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (s == dtype_name(t)) return t;
  return std::nullopt;
}
double dtype_unit_roundoff(DType t) {
  switch (t) {
    case DType::f64: return std::ldexp(1.0, -53);
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
    default: return 0;
  }
}

TaskError::TaskError(std::string f, int l, int c, const std::string& message, const std::string& source_line)
    : std::runtime_error([&] {
        std::ostringstream o;
        o << f << ":" << l << ":" << c << ": error: " << message;
        if (!source_line.empty()) o << "\n  " << source_line << "\n  " << std::string(c > 0 ? c - 1 : 0, ' ') << "^";
        return o.str();
      }()),
      file(std::move(f)), line(l), column(c) {}

const SizeSet* Task::find_size(const std::string& n) const {
  for (auto& s : sizes)
    if (s.name == n) return &s;
  return nullptr;
}
const BaselineSpec* Task::find_baseline(const std::string& n) const {
  for (auto& b : baselines)
    if (b.name == n) return &b;
  return nullptr;
}
std::map<std::string, double> Task::env(const SizeSet& s) const { return s.dims; }
double Task::eval(const std::string& e, const SizeSet& s) const { return eval_expr(e, s.dims); }
std::vector<int64_t> Task::shape_of(const TensorSpec& t, const SizeSet& s) const {
  std::vector<int64_t> out;
  for (auto& e : t.shape) out.push_back(static_cast<int64_t>(std::llround(eval(e, s))));
  return out;
}
int64_t Task::numel(const TensorSpec& t, const SizeSet& s) const {
  int64_t n = 1;
  for (int64_t d : shape_of(t, s)) n *= d;
  return n;
}
bool Task::use_cpu_reference(const SizeSet& s) const {
  if (ref_gpu.empty()) return true;
  double work = flops_at(s);
  if (work <= 0)
    for (auto& t : tensors) work += static_cast<double>(numel(t, s));
  return work <= cpu_max_work;
}
bool Task::tensor_core_accumulation() const { return math == "tensor" && (precision == "bf16" || precision == "fp16"); }

double Task::policy_unit_roundoff() const {
  if (precision == "tf32") return std::ldexp(1.0, -11);
  if (precision == "fp64") return std::ldexp(1.0, -53);
  return std::ldexp(1.0, -24);  // fp32, and bf16/fp16 with fp32 accumulation
}

namespace {

// Reads one task.toml, turning every problem into a TaskError at the offending node.
class Loader {
 public:
  Loader(std::string file, std::string text) : file_(std::move(file)), text_(std::move(text)) {
    std::istringstream in(text_);
    for (std::string l; std::getline(in, l);) lines_.push_back(l);
  }

  [[noreturn]] void fail(const toml::source_region& at, const std::string& msg, int extra_col = 0) const {
    int line = static_cast<int>(at.begin.line), col = static_cast<int>(at.begin.column) + extra_col;
    std::string src = (line >= 1 && line <= static_cast<int>(lines_.size())) ? lines_[line - 1] : "";
    throw TaskError(file_, line, col, msg, src);
  }
  [[noreturn]] void fail(const toml::node& n, const std::string& msg, int extra_col = 0) const {
    fail(n.source(), msg, extra_col);
  }

  std::string str(const toml::table& t, const char* key, const std::string& def, bool required = false) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(t, std::string("missing required key '") + key + "'");
      return def;
    }
    if (auto v = n->value<std::string>()) return *v;
    fail(*n, std::string("'") + key + "' must be a string");
  }
  double num(const toml::table& t, const char* key, double def) const {
    const toml::node* n = t.get(key);
    if (!n) return def;
    if (auto v = n->value<double>()) return *v;
    fail(*n, std::string("'") + key + "' must be a number");
  }
  bool boolean(const toml::table& t, const char* key, bool def) const {
    const toml::node* n = t.get(key);
    if (!n) return def;
    if (auto v = n->value<bool>()) return *v;
    fail(*n, std::string("'") + key + "' must be true or false");
  }
  std::vector<std::string> strs(const toml::table& t, const char* key, bool required = false) const {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(t, std::string("missing required key '") + key + "'");
      return out;
    }
    const toml::array* a = n->as_array();
    if (!a) fail(*n, std::string("'") + key + "' must be an array of strings");
    for (auto& e : *a) {
      if (auto v = e.value<std::string>()) out.push_back(*v);
      else fail(e, std::string("'") + key + "' must be an array of strings");
    }
    return out;
  }
  void only_keys(const toml::table& t, std::initializer_list<const char*> keys, const char* where) const {
    std::set<std::string> ok(keys.begin(), keys.end());
    for (auto& [k, v] : t)
      if (!ok.count(std::string(k.str()))) fail(k.source(), std::string("unknown key '") + std::string(k.str()) + "' in " + where);
  }
  const toml::table* table(const toml::table& root, const char* key, bool required) const {
    const toml::node* n = root.get(key);
    if (!n) {
      if (required) fail(toml::source_region{{1, 1}, {1, 1}, nullptr}, std::string("missing table [") + key + "]");
      return nullptr;
    }
    if (!n->as_table()) fail(*n, std::string("'") + key + "' must be a table");
    return n->as_table();
  }
  // Validates an expression string stored under `key`, reporting the column inside the string.
  void check_expr(const toml::table& t, const char* key, const std::set<std::string>& names) const {
    const toml::node* n = t.get(key);
    if (!n) return;
    auto s = n->value<std::string>();
    if (!s) fail(*n, std::string("'") + key + "' must be a string expression");
    check_expr_text(*n, *s, names);
  }
  void check_expr_text(const toml::node& n, const std::string& s, const std::set<std::string>& names) const {
    ExprError err;
    auto e = Expr::parse(s, &err);
    if (!e) fail(n, "bad expression: " + err.message, err.column + 1);
    std::vector<std::string> used;
    e->names(&used);
    for (auto& u : used)
      if (!names.count(u)) {
        size_t at = s.find(u);
        fail(n, "unknown dim '" + u + "' (declared dims: " + join({names.begin(), names.end()}, ", ") + ")",
             static_cast<int>(at == std::string::npos ? 0 : at) + 1);
      }
  }

  std::string file_;
  std::string text_;
  std::vector<std::string> lines_;
};

}  // namespace

Task load_task(const std::string& path_in) {
  fs::path p = fs::absolute(path_in);
  if (fs::is_directory(p)) p /= "task.toml";
  if (!fs::exists(p)) throw TaskError(p.string(), 0, 0, "no such task file", "");
  Task t;
  t.spec_path = p.string();
  t.dir = p.parent_path().string();
  t.spec_text = read_file(t.spec_path);
  std::string display = path_in;
  if (fs::is_directory(path_in)) display = (fs::path(path_in) / "task.toml").string();
  Loader L(display, t.spec_text);

  auto parsed = toml::parse(std::string_view(t.spec_text), std::string_view(display));
  if (!parsed) L.fail(parsed.error().source(), std::string(parsed.error().description()));
  const toml::table& root = parsed.table();
  L.only_keys(root, {"task", "tensor", "cost", "tolerance", "reference", "size", "baseline", "sparse"}, "the top level");

  const toml::table* task = L.table(root, "task", true);
  L.only_keys(*task, {"name", "family", "description", "precision", "dims", "special_values"}, "[task]");
  t.name = L.str(*task, "name", "", true);
  t.family = L.str(*task, "family", "", true);
  t.description = L.str(*task, "description", "");
  t.precision = L.str(*task, "precision", "fp32");
  if (!std::set<std::string>{"fp32", "tf32", "bf16", "fp16", "fp64"}.count(t.precision))
    L.fail(*task->get("precision"), "precision must be one of fp32, tf32, bf16, fp16, fp64");
  t.special_values = L.boolean(*task, "special_values", false);
  t.dims = L.strs(*task, "dims", true);
  std::set<std::string> dimset(t.dims.begin(), t.dims.end());
  if (dimset.size() != t.dims.size()) L.fail(*task->get("dims"), "dims must be distinct");

  const toml::node* tens = root.get("tensor");
  if (!tens || !tens->as_array()) L.fail(*task, "a task needs at least one [[tensor]]");
  std::set<std::string> tnames;
  for (auto& tn : *tens->as_array()) {
    const toml::table* tt = tn.as_table();
    if (!tt) L.fail(tn, "[[tensor]] entries must be tables");
    L.only_keys(*tt, {"name", "dtype", "shape", "role", "init", "compare", "rtol", "atol", "of", "values"}, "[[tensor]]");
    TensorSpec ts;
    ts.name = L.str(*tt, "name", "", true);
    if (!tnames.insert(ts.name).second) L.fail(*tt->get("name"), "duplicate tensor '" + ts.name + "'");
    std::string dt = L.str(*tt, "dtype", "", true);
    auto d = parse_dtype(dt);
    if (!d) L.fail(*tt->get("dtype"), "unknown dtype '" + dt + "' (f32, f64, bf16, f16, i32, i64)");
    ts.dtype = *d;
    std::string role = L.str(*tt, "role", "", true);
    if (role != "in" && role != "out") L.fail(*tt->get("role"), "role must be 'in' or 'out'");
    ts.role = role == "in" ? Role::in : Role::out;
    ts.shape = L.strs(*tt, "shape", true);
    const toml::array* sh = tt->get("shape")->as_array();
    for (size_t i = 0; i < ts.shape.size(); ++i) L.check_expr_text(*sh->get(i), ts.shape[i], dimset);
    ts.init = L.str(*tt, "init", dtype_is_float(ts.dtype) ? "random" : "");
    static const std::set<std::string> inits = {"random", "uniform01", "csr.row_ptr", "csr.col_idx", "coo.row", "coo.col",
                                                "csc.col_ptr", "csc.row_idx", "ell.col_idx"};
    if (ts.role == Role::in && !inits.count(ts.init))
      L.fail(tt->get("init") ? *tt->get("init") : *tt, "unknown init '" + ts.init + "'");
    if (ts.role == Role::in && !dtype_is_float(ts.dtype) && (ts.init == "random" || ts.init == "uniform01"))
      L.fail(*tt, "integer input '" + ts.name + "' needs a structural init (csr.row_ptr, csr.col_idx, coo.row, coo.col, csc.col_ptr, csc.row_idx, ell.col_idx)");
    ts.compare = L.str(*tt, "compare", ts.role == Role::in ? "" : dtype_is_float(ts.dtype) ? "tolerance" : "exact");
    static const std::set<std::string> comparators = {"tolerance", "exact", "relative", "sorted_rows", "index_of"};
    if (ts.role == Role::in && tt->get("compare")) L.fail(*tt->get("compare"), "only outputs have a comparator");
    if (ts.role == Role::out && !comparators.count(ts.compare))
      L.fail(*tt->get("compare"), "unknown comparator '" + ts.compare + "' (tolerance, exact, relative, sorted_rows, index_of)");
    if (ts.role == Role::out && ts.compare == "tolerance" && !dtype_is_float(ts.dtype))
      L.fail(*tt->get("compare"), "integer output '" + ts.name + "' cannot use the tolerance comparator");
    ts.rtol = L.num(*tt, "rtol", 0);
    ts.atol = L.num(*tt, "atol", 0);
    if (ts.compare == "relative" && ts.rtol <= 0 && ts.atol <= 0) L.fail(*tt, "comparator 'relative' needs rtol or atol");
    ts.of = L.str(*tt, "of", "");
    ts.values = L.str(*tt, "values", "");
    if (ts.compare == "index_of" && (ts.of.empty() || ts.values.empty()))
      L.fail(*tt, "comparator 'index_of' needs 'of' (the input indexed) and 'values' (the output with the values)");
    t.tensors.push_back(ts);
  }
  for (auto& ts : t.tensors) {
    if (ts.compare != "index_of") continue;
    const TensorSpec* of = nullptr;
    const TensorSpec* vals = nullptr;
    for (auto& o : t.tensors) {
      if (o.name == ts.of && o.role == Role::in) of = &o;
      if (o.name == ts.values && o.role == Role::out) vals = &o;
    }
    // The index tensor, the values and the indexed input must agree on every dim but the last.
    bool leading_match = of && of->shape.size() == ts.shape.size() &&
                         std::equal(ts.shape.begin(), ts.shape.end() - 1, of->shape.begin());
    if (!of || !vals || of->shape.empty() || dtype_is_float(ts.dtype) || ts.shape != vals->shape || !leading_match)
      L.fail(*tens, "tensor '" + ts.name + "': index_of needs an integer output shaped like output '" + ts.values +
                        "' and an input '" + ts.of + "' with the same leading dims");
  }
  bool has_out = false;
  for (auto& ts : t.tensors) has_out |= ts.role == Role::out;
  if (!has_out) L.fail(*tens, "a task needs at least one output tensor");

  if (const toml::table* c = L.table(root, "cost", false)) {
    L.only_keys(*c, {"flops", "bytes", "math"}, "[cost]");
    L.check_expr(*c, "flops", dimset);
    L.check_expr(*c, "bytes", dimset);
    t.flops = L.str(*c, "flops", "0");
    t.bytes = L.str(*c, "bytes", "0");
    t.math = L.str(*c, "math", "fma");
    if (t.math != "tensor" && t.math != "fma" && t.math != "none") L.fail(*c->get("math"), "math must be tensor, fma or none");
  }
  if (const toml::table* c = L.table(root, "tolerance", false)) {
    L.only_keys(*c, {"accumulation", "magnitude", "rtol_scale", "floor"}, "[tolerance]");
    L.check_expr(*c, "accumulation", dimset);
    t.accumulation = L.str(*c, "accumulation", "1");
    t.magnitude = L.str(*c, "magnitude", "ref");
    if (t.magnitude != "abs" && t.magnitude != "ref") L.fail(*c->get("magnitude"), "magnitude must be 'abs' or 'ref'");
    t.rtol_scale = L.num(*c, "rtol_scale", 1.0);
    t.floor_frac = L.num(*c, "floor", 0.01);
    if (t.floor_frac < 0 || t.floor_frac > 1) L.fail(*c->get("floor"), "floor must be between 0 and 1");
  }
  if (const toml::table* s = L.table(root, "sparse", false)) {
    L.only_keys(*s, {"rows", "cols", "nnz", "pattern"}, "[sparse]");
    SparseSpec sp;
    for (const char* k : {"rows", "cols", "nnz"}) L.check_expr(*s, k, dimset);
    sp.rows = L.str(*s, "rows", "", true);
    sp.cols = L.str(*s, "cols", "", true);
    sp.nnz = L.str(*s, "nnz", "", true);
    sp.pattern = L.str(*s, "pattern", "uniform");
    t.sparse = sp;
  }
  for (auto& ts : t.tensors)
    if (ts.init.rfind("csr.", 0) == 0 || ts.init.rfind("coo.", 0) == 0 || ts.init.rfind("csc.", 0) == 0 || ts.init.rfind("ell.", 0) == 0)
      if (!t.sparse) L.fail(*tens, "tensor '" + ts.name + "' uses init '" + ts.init + "' but the task has no [sparse] table");

  auto source = [&](const toml::table& tbl, const char* key, bool required) -> std::string {
    std::string rel = L.str(tbl, key, "", required);
    if (rel.empty()) return "";
    fs::path sp = fs::path(t.dir) / rel;
    if (!fs::exists(sp)) L.fail(*tbl.get(key), "source file '" + rel + "' not found in " + t.dir);
    return sp.string();
  };
  const toml::table* ref = L.table(root, "reference", true);
  L.only_keys(*ref, {"cpu", "gpu", "cpu_max_work"}, "[reference]");
  t.ref_cpu = source(*ref, "cpu", true);
  t.ref_gpu = source(*ref, "gpu", false);
  t.cpu_max_work = L.num(*ref, "cpu_max_work", 4e9);

  const toml::node* sizes = root.get("size");
  if (!sizes || !sizes->as_array()) L.fail(*task, "a task needs at least one [[size]]");
  for (auto& sn : *sizes->as_array()) {
    const toml::table* st = sn.as_table();
    if (!st) L.fail(sn, "[[size]] entries must be tables");
    SizeSet s;
    s.name = L.str(*st, "name", "", true);
    if (t.find_size(s.name)) L.fail(*st->get("name"), "duplicate size '" + s.name + "'");
    s.weight = L.num(*st, "weight", 1.0);
    s.hidden = L.boolean(*st, "hidden", false);
    for (auto& [k, v] : *st) {
      std::string key(k.str());
      if (key == "name" || key == "weight" || key == "hidden") continue;
      if (dimset.count(key)) {
        auto d = v.value<double>();
        if (!d || *d < 0) L.fail(v, "dim '" + key + "' must be a non-negative number");
        s.dims[key] = *d;
      } else if (auto str = v.value<std::string>()) {
        s.options[key] = *str;
      } else {
        L.fail(k.source(), "unknown dim '" + key + "' in size '" + s.name + "' (declared dims: " + join(t.dims, ", ") + ")");
      }
    }
    for (auto& d : t.dims)
      if (!s.dims.count(d)) L.fail(*st, "size '" + s.name + "' gives no value for dim '" + d + "'");
    for (auto& ts : t.tensors)
      for (auto& e : ts.shape) {
        double v = eval_expr(e, s.dims);
        if (v < 0 || std::fabs(v - std::round(v)) > 1e-9)
          L.fail(*st, "size '" + s.name + "' gives tensor '" + ts.name + "' a non-whole extent " + e + " = " + std::to_string(v));
      }
    t.sizes.push_back(s);
  }

  if (const toml::node* bl = root.get("baseline")) {
    if (!bl->as_array()) L.fail(*bl, "baseline must be an array of tables ([[baseline]])");
    for (auto& bn : *bl->as_array()) {
      const toml::table* bt = bn.as_table();
      if (!bt) L.fail(bn, "[[baseline]] entries must be tables");
      L.only_keys(*bt, {"name", "source", "kind", "libs", "function", "defines"}, "[[baseline]]");
      BaselineSpec b;
      b.name = L.str(*bt, "name", "", true);
      if (t.find_baseline(b.name)) L.fail(*bt->get("name"), "duplicate baseline '" + b.name + "'");
      b.source = source(*bt, "source", true);
      b.kind = L.str(*bt, "kind", "naive");
      if (b.kind != "naive" && b.kind != "vendor" && b.kind != "user") L.fail(*bt->get("kind"), "kind must be naive, vendor or user");
      b.libs = L.strs(*bt, "libs");
      static const std::set<std::string> libs = {"cublas", "cublasLt", "cusparse", "cufft", "cudnn", "curand"};
      for (size_t i = 0; i < b.libs.size(); ++i)
        if (!libs.count(b.libs[i])) L.fail(*bt->get("libs")->as_array()->get(i), "unknown library '" + b.libs[i] + "'");
      b.function = L.str(*bt, "function", "");
      b.defines = L.strs(*bt, "defines");
      for (size_t i = 0; i < b.defines.size(); ++i) {
        // A macro name, optionally =VALUE of letters, digits, '_' and '.': nothing that could
        // become another compiler flag.
        const std::string& d = b.defines[i];
        size_t eq = d.find('=');
        std::string name = d.substr(0, eq), value = eq == std::string::npos ? "" : d.substr(eq + 1);
        auto word = [](const std::string& w, bool first_alpha) {
          if (w.empty() || (first_alpha && std::isdigit(static_cast<unsigned char>(w[0])))) return false;
          for (char c : w)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && (first_alpha || c != '.')) return false;
          return true;
        };
        if (!word(name, true) || (eq != std::string::npos && !word(value, false)))
          L.fail(*bt->get("defines")->as_array()->get(i), "a define is NAME or NAME=VALUE (letters, digits, '_'; '.' in the value)");
      }
      t.baselines.push_back(b);
    }
  }

  Sha256 h;
  h.update(t.spec_text);
  for (auto* f : {&t.ref_cpu, &t.ref_gpu})
    if (!f->empty()) h.update(read_file(*f));
  for (auto& b : t.baselines) {
    h.update(read_file(b.source));
    for (auto& d : b.defines) h.update("-D" + d);
  }
  t.spec_hash = h.hex();
  return t;
}

std::vector<std::string> builtin_task_dirs() {
  std::vector<std::string> roots;
  if (const char* e = std::getenv("KSOL_TASKS"); e && *e) roots.push_back(e);
  roots.push_back(source_root() + "/tasks");
  std::vector<std::string> out;
  for (auto& r : roots) {
    if (!fs::exists(r)) continue;
    for (auto& e : fs::recursive_directory_iterator(r))
      if (e.path().filename() == "task.toml") out.push_back(e.path().parent_path().string());
    if (!out.empty()) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_task_path(const std::string& n) {
  if (fs::exists(n)) return n;
  for (auto& d : builtin_task_dirs())
    if (fs::path(d).filename() == n) return d;
  throw std::runtime_error("no task '" + n + "': not a path, and no tasks/**/" + n + "/task.toml");
}

}  // namespace ksol
