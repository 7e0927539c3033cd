// The typed IR of the ksol DSL (docs/DSL.md): what the parser produces, what the printer
// prints, and what every family's code generator reads. Plain value types.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ksol::dsl {

// A position in the source: 1-based line and column.
struct Loc {
  int line = 0, col = 0;
};

enum class Type { f32, f64, bf16, f16, i32, i64, boolean };
const char* type_name(Type t);
bool type_is_float(Type t);

// One index of a tensor read: a variable plus a constant offset (offsets make stencils), or
// two variables plus an offset (`h + r - 1`: an output index shifted by a filter index, as a
// convolution reads its image), the first with a positive coefficient and the second with a
// nonzero one (`h*2 + r - 1` for stride 2, `h + r*2 - 2` for dilation 2, `h - r + 1` for a
// transposed convolution). The value is (scale*var + plus_scale*plus + offset) / divisor; with a
// divisor (`(h - r + 1)/2`, a transposed convolution's stride) a value that is not a multiple of
// it is outside the tensor, as one past its extents is.
struct IndexExpr {
  std::string var;
  std::string plus;  // the second variable added to `var`, or empty
  int64_t offset = 0;
  int64_t scale = 1, plus_scale = 1;  // coefficients, other than 1 only with `plus`
  int64_t divisor = 1;                // other than 1 only with `plus`
  Loc loc;
};
// Whether the index is more than a variable plus an offset (a sum of two, a divisor).
inline bool index_is_compound(const IndexExpr& ix) { return !ix.plus.empty() || ix.divisor != 1; }
// An index as the program writes it: i, i-1, h+r-1, h*2+r*3-2, (h-r+1)/2.
std::string index_text(const IndexExpr& ix);

struct Expr {
  enum class Kind {
    number,   // `number`
    read,     // `name`[indices]: a parameter or an earlier definition
    dim,      // `name`: a dim's value (an extent used as a number)
    index,    // `name`: an index's value at the element computed (i64; a mask's m >= n)
    unary,    // `op` ("-") args[0]
    binary,   // args[0] `op` args[1]; op is one of + - * /
    compare,  // args[0] `op` args[1]; op is one of < <= > >= == !=; type boolean
    call,     // `name`(args): a function (exp, max, select, ...)
    cast,     // `name` is the target type's name; args[0]
  };
  Kind kind = Kind::number;
  Type type = Type::f32;
  Loc loc;
  double number = 0;
  std::string name;
  std::string op;
  std::vector<IndexExpr> indices;
  std::vector<Expr> args;
};

enum class ReduceOp { none, sum, max, min, mean, argmax, scan };
const char* reduce_name(ReduceOp r);
struct Definition;
// The keyword a definition's reduction is written with: reduce_name's, or "prodscan" for a scan
// whose operator is the product.
const char* reduce_word(const Definition& d);
// Whether an extent is written as a number (F: f32[K, C, 3, 3]) rather than a dim name.
bool extent_is_number(const std::string& extent);

struct Definition {
  std::string name;
  std::vector<std::string> indices;  // left-hand index variables, in order
  std::vector<std::string> extents;  // the dim each index ranges over (resolved by the checker)
  ReduceOp reduce = ReduceOp::none;
  std::string over;                  // the reduced index when reduce != none
  std::string over_extent;           // its dim
  // Further reduced indices of a sum over several (`sum(...) over c, r, s`: `over` is c, these
  // r and s, outermost first), with their extents; empty for a reduction over one index.
  std::vector<std::string> over_rest, over_rest_extents;
  // Each reduced index's extent as the program writes it after the index (`over r:3, s:3`: a
  // pool's window, which no tensor is read at plainly), parallel to `over` then `over_rest`; ""
  // where it is inferred from the reads.
  std::vector<std::string> over_written;
  Expr body;                         // the reduced expression (or the value, when reduce == none)
  // A scan's operator: false the sum (`scan`), true the product (`prodscan`: a cumulative
  // product; the interpreter rounds each step's product to the type as it does the sum's, the
  // generated kernels multiply each thread's run, then the lanes' and warps' in a tree).
  bool scan_product = false;
  Type type = Type::f32;             // the definition's element type
  bool is_output = false;
  Loc loc;
};

struct Param {
  std::string name;
  Type type = Type::f32;
  // Dim names, or positive integers written as numbers (a conv's filter: F: f32[K, C, 3, 3]);
  // numbers are not dims.
  std::vector<std::string> extents;
  std::string format = "dense";      // dense | csr | coo | ell
  bool zero_outside = false;         // `outside 0`: reads outside the extents give 0 (padding)
  bool lowest_outside = false;       // `outside -inf`: they give -inf (a max pool's padding)
  Loc loc;
};

struct ScheduleValue {
  enum class Kind { integer, ident, list };
  Kind kind = Kind::integer;
  int64_t integer = 0;
  std::string ident;
  std::vector<int64_t> list;
  Loc loc;
};

// One comparison of a schedule's guard (`schedule when ... { }`): the product of dims, taken
// modulo `mod` when mod > 0, compared with `value` by `op` (< <= > >= == !=).
struct GuardTerm {
  std::vector<std::string> dims;     // multiplied (one or more)
  int64_t mod = 0;                   // `M % 8 == 0`: 8; 0 without a modulus
  std::string op;
  int64_t value = 0;
  Loc loc;
};
// A schedule that applies when every term of its guard holds (`and`).
struct GuardedSchedule {
  std::vector<GuardTerm> when;
  std::vector<std::pair<std::string, ScheduleValue>> schedule;
  std::map<std::string, Loc> schedule_keys;
  Loc loc;                           // the `schedule` keyword
};

struct Program {
  std::string file;                  // for messages
  std::string name;
  std::vector<Param> inputs, outputs;
  std::vector<Definition> defs;      // in source order
  std::vector<std::pair<std::string, ScheduleValue>> schedule;  // in source order
  std::map<std::string, Loc> schedule_keys;                     // key -> where it was written
  // Schedules by problem size (`schedule when M * N * K >= 1000000 { ... }`), in source order:
  // the kernel runs the first whose guard holds at the call's dims, else `schedule` (written
  // last, without `when`). Empty for a program with one schedule.
  std::vector<GuardedSchedule> guarded;
  std::string family;                // gemm | rowwise | elementwise | sparse | stencil | conv
  std::vector<std::string> dims;     // every dim the program uses, in first-use order (no numbers)

  const ScheduleValue* knob(const std::string& key) const;
  const Param* param(const std::string& name) const;
  const Definition* def(const std::string& name) const;
};

// The text of a guard as the DSL writes it: `M * N >= 4096 and W % 4 != 0`.
std::string guard_text(const std::vector<GuardTerm>& when);
// Whether a guard holds at these dims (every dim the guard names must be present; products
// are exact up to 2^127).
bool guard_holds(const std::vector<GuardTerm>& when, const std::map<std::string, int64_t>& dims);
// The program with one schedule: guarded schedule `i`, or the last (unguarded) one when
// i == guarded.size().
Program variant(const Program& p, size_t i);
// The variant a call with these dims runs (a program with one schedule is its own).
Program variant_at(const Program& p, const std::map<std::string, int64_t>& dims);

// A user error in a DSL program: file:line:col, the message, the line and a caret.
class DslError : public std::runtime_error {
 public:
  DslError(const std::string& file, Loc at, const std::string& message, const std::string& source_line);
  std::string file;
  Loc at;
};

// Parses and type-checks a program; recognises its family. Throws DslError.
Program parse_program(const std::string& text, const std::string& file);
// The canonical text form of the typed IR (docs/DSL.md, "Text form of the IR").
std::string print_program(const Program& p);
// The program as DSL source that parse_program reads back to the same print_program text
// (comments and layout are not kept). print_program's text is not DSL syntax; this is.
std::string print_source(const Program& p);

}  // namespace ksol::dsl
