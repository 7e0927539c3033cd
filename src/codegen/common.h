// Internal to src/codegen: what the families share. A family is a FamilyGenerator (its knobs,
// can_implement, generator and kernel name); codegen.cpp lists them. Refusals inside a family
// are thrown as Refused and turned into a Support by the driver.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "dsl/ir.h"

namespace ksol::codegen::detail {

// The most shared memory an sm_90 block may opt into (227 KB): the tma paths' stages and the mma
// pipeline's dynamic buffers.
inline constexpr int64_t kSharedLimitBytes = 232448;

// A schedule value as it is written in a program ("4", "block", "[128, 256, 64]").
std::string value_text(const dsl::ScheduleValue& v);
// The generator of a family by name, or nullptr; the one table of families is in codegen.cpp.
const struct FamilyGenerator* family_by_name(const std::string& family);


// A reason why a family cannot implement a program; never an internal error.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One schedule key of a family: its name, default, and the values schedule_space tries.
struct Knob {
  std::string key;
  std::string default_value;
  std::vector<std::string> grid;
};

struct FamilyGenerator {
  std::string name;
  std::vector<Knob> knobs;
  // Throws Refused when the program or its schedule is outside what the family generates.
  void (*check)(const dsl::Program&, const Binding&);
  std::string (*generate)(const dsl::Program&, const Binding&);  // after check passed
  std::string (*kernel_name)(const dsl::Program&);                // after check passed
};
const FamilyGenerator& elementwise_family();
const FamilyGenerator& rowwise_family();
const FamilyGenerator& gemm_family();
const FamilyGenerator& conv_family();
const FamilyGenerator& direct_family();
// Whether a conv program (whose schedule is legal) runs CUTLASS's sm90 conv: mainloop = tma, or
// auto where the tensor cores apply.
bool conv_uses_tma(const dsl::Program& p);
// The conv program's kernel multiplies on the tensor cores (mainloop tma or mma, named or taken
// by auto); false for a program the generator refuses.
bool conv_uses_tensor_cores(const dsl::Program& p);
// The conv program's data and products are ones the tensor cores take (16-bit data, or f32 data
// in TF32 products), whatever its mainloop; false for a program the generator refuses.
bool conv_allows_tensor_cores(const dsl::Program& p);
// gemm: the program's products may run on the tensor cores (16-bit operands, or f32 ones the
// program rounds with tf32(...)); false for f32 products and for programs the family refuses.
bool gemm_allows_tensor_cores(const dsl::Program& p);

// A schedule value from its text: digits make an integer, anything else a name.
dsl::ScheduleValue schedule_value(const std::string& text);

// The program's schedule read against a family's knobs: unknown keys and ill-typed values are
// refused, missing keys take their defaults.
class Knobs {
 public:
  Knobs(const dsl::Program& p, const FamilyGenerator& f);
  int64_t integer(const std::string& key) const;
  // The `threads` key: a multiple of 32 from 32 to 1024 (whole warps, one block), else Refused.
  int64_t threads() const;
  // integer(key), refused unless it is one of `allowed`.
  int64_t one_of(const std::string& key, const std::vector<int64_t>& allowed) const;
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed) const;
  // The raw value of a key (its default when the program does not set it).
  const dsl::ScheduleValue& value(const std::string& key) const;

 private:
  const FamilyGenerator* family_;
  std::map<std::string, dsl::ScheduleValue> values_;
};

// While one is set (schedule_space), every Knobs read notes the highest knob index (the family's
// order) read so far: a refusal then depends on the knobs up to it alone.
struct KnobReads {
  int last = -1;
};
void note_knob_reads(KnobReads* reads);  // nullptr stops noting

// The candidate ABI as the task lays it out: tensor names and dim names in call order.
struct AbiLayout {
  std::vector<std::string> tensors;
  std::vector<std::string> dims;
};
// Refused unless every parameter is a task tensor and vice versa, and every dim the program
// uses is a task dim.
AbiLayout resolve_binding(const dsl::Program& p, const Binding& b);

// --- types -------------------------------------------------------------------------------------
const char* cuda_type(dsl::Type t);
int type_bytes(dsl::Type t);
bool is_half(dsl::Type t);  // bf16 or f16: stored as such, computed in f32

// --- identifiers -------------------------------------------------------------------------------
// C++ identifiers for the program's names: a DSL name keeps its spelling unless it collides with
// a C++ keyword, a CUDA name or an identifier the generated code uses itself, in which case it
// gets a trailing underscore. Derived names (X_pack, m_partials) are made unique the same way.
class Names {
 public:
  explicit Names(const std::vector<std::string>& internal);
  const std::string& add(const std::string& dsl_name);
  const std::string& operator[](const std::string& dsl_name) const;
  std::string derived(const std::string& dsl_name, const std::string& suffix);
  // A fresh identifier for something of the generated code's own (`base`, or `base_`...).
  std::string fresh(std::string base);

 private:
  std::set<std::string> taken_;
  std::map<std::string, std::string> ids_;
  std::map<std::string, std::string> derived_;
};

// --- expressions -------------------------------------------------------------------------------
// Device helpers an expression needs (NaN-propagating max, sigmoid, ...), emitted once each.
class Helpers {
 public:
  void use(const std::string& name, dsl::Type t);
  bool empty() const { return used_.empty(); }
  std::string source() const;  // definitions of everything used, in a fixed order

 private:
  std::set<std::pair<std::string, dsl::Type>> used_;
};

// Emits CUDA for DSL expressions. `read` gives the code of a tensor read (parameter or
// definition) in that tensor's own type; `dim` the identifier holding a dim's value.
struct ExprEmitter {
  std::function<std::string(const dsl::Expr&)> read;
  std::function<std::string(const std::string&)> dim;
  // An index used as a value: its code (an int64_t) at the element computed; unset where the
  // family's kernels do not give it (the expression is then refused with the reason).
  std::function<std::string(const std::string&)> index;
  Helpers* helpers = nullptr;
  // math = fast: f32 exp and log through the SFU intrinsics (__expf, __logf: 2 + 1.16|x| ulp and
  // 2^-21.41 absolute error), f32 division as __fdividef (2 ulp for |b| in [2^-126, 2^126]) and
  // tanh (also inside gelu_tanh) as tanh.approx.f32 (about 2^-11 relative error);
  // bf16/f16 arithmetic, done in f32, likewise. Otherwise IEEE-rounded library calls and '/'.
  bool fast_math = false;
  // math = fast only: the code of a precomputed __fdividef(1.0f, b) for an f32 divisor b that is
  // the same for every element a loop computes (a row's sum), or "" when there is none. a / b is
  // then a * that reciprocal: __fdividef is itself a * rcp.approx(b), so one reciprocal per row
  // replaces one per element.
  std::function<std::string(const dsl::Expr&)> reciprocal;
  std::string operator()(const dsl::Expr& e) const;
};
// Whether `math = fast` changes anything in `p`: an exp, a log or a floating-point division.
bool has_fast_math_ops(const dsl::Program& p);
// Refused (with the reason) when `math = fast` would change nothing in `p`.
void check_fast_math(const dsl::Program& p);
// Refused unless every function and cast in `e` has a CUDA form for its types.
void check_emittable(const dsl::Expr& e);
// Whether `e` reads an index as a value (Expr::Kind::index) anywhere.
bool uses_index(const dsl::Expr& e);

std::string literal(double v, dsl::Type t);
// `code` of type `from` converted to `to`, exactly as the IR's cast does.
std::string cast_code(const std::string& code, dsl::Type from, dsl::Type to);
std::string to_float(const std::string& code, dsl::Type t);  // half -> float; others unchanged

// --- the program as text -----------------------------------------------------------------------
std::string format_expr(const dsl::Expr& e);
std::string format_definition(const dsl::Definition& d);  // `Y[r, c] = ...` as in the DSL
std::string dtype_tag(const dsl::Program& p);               // the first output's type: f32, bf16, ...
// `<family>_<program>_<dtype>`, without repeating a dtype the program's name already ends with.
std::string name_stem(const dsl::Program& p, const std::string& family);

// Every read (parameter or definition) inside `e`, in source order.
std::vector<const dsl::Expr*> reads_in(const dsl::Expr& e);

// --- generated source --------------------------------------------------------------------------
// Lines with indentation; open() / close() bracket a block.
class Writer {
 public:
  void line(const std::string& s = "");
  void open(const std::string& head);  // "head {"
  void close(const std::string& tail = "}");
  void reopen(const std::string& head);  // "} head {": the next branch of an if at the same depth
  void comment(const std::string& text);  // wrapped `// ` lines at the current indentation
  void raw(const std::string& text);      // pre-indented text, copied as is
  Writer nested(int deeper = 0) const;    // an empty writer at this one's indentation (plus `deeper` levels)
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int depth_ = 0;
};

// The Pack type with load_pack / store_pack: kVec consecutive elements as one aligned access.
std::string pack_source();
// Index division by products of extents that the host knows at launch: the struct KsolDiv (a
// divisor, its magic number and shift), KsolDivs (`count` of them, a kernel parameter; none for 0), the
// host's ksol_divider(d), and ksol_div<kFast>(n, v) / ksol_mod<kFast>(n, v). With kFast (every
// n and d under 2^31) a division is a multiply-high, an add and a shift (Granlund and
// Montgomery's round-up method); otherwise the 64-bit division.
void index_divider_source(Writer& w, size_t count);
// The divisors a kernel divides its indices by (host expressions, each listed once in order of
// first use: dv.v[i] divides by list()[i]), the kernel's division code and the host's dividers.
class IndexDivisors {
 public:
  // ksol_div<fast>(n, dv.v[i]) / ksol_mod<fast>(n, dv.v[i]) for d's index i; `fast` is the
  // template argument (a constant expression: kFast, sizeof(Idx) == 4).
  std::string div(const std::string& n, const std::string& d, const std::string& fast) {
    return "ksol_div<" + fast + ">(" + n + ", dv.v[" + std::to_string(index_of(d)) + "])";
  }
  std::string mod(const std::string& n, const std::string& d, const std::string& fast) {
    return "ksol_mod<" + fast + ">(" + n + ", dv.v[" + std::to_string(index_of(d)) + "])";
  }
  size_t index_of(const std::string& d);  // adds d the first time it is asked for
  const std::vector<std::string>& list() const { return v_; }
  bool empty() const { return v_.empty(); }
  // Host code: `KsolDivs dv;` and each divider, for a launch that passes dv.
  void host_dividers(Writer& w) const;

 private:
  std::vector<std::string> v_;
};
// The ABI prologue of ksol_run: checks the call, binds every dim and tensor to a named local
// (through `names`) and the stream to `stream`. Leaves the function open.
void open_ksol_run(Writer& w, const dsl::Program& p, const AbiLayout& abi, const Names& names);
// A kernel's parameter list for the dense tensors and dims of the ABI (inputs const, every
// pointer __restrict__, dims of `dim_type`), and the matching argument list; `open_tail` ends both
// with ", " for parameters that follow.
std::string kernel_params_decl(const dsl::Program& p, const AbiLayout& abi, const Names& names, bool open_tail,
                               const std::string& dim_type = "int64_t");
std::string kernel_params_pass(const dsl::Program& p, const AbiLayout& abi, const Names& names, bool open_tail);
// The SIMT main loop's step over one staged slice: each thread's fragments of As and Bs (kTM x
// kTN outputs, kTY x kTX threads) and their outer product into acc with fmaf, as the gemm (simt)
// and conv generators share it. Leaves the slice loop closed; the caller's barrier follows.
void simt_slice_fma(Writer& w);

// The warp-level tensor-core kernels' shared parts (conv's and direct's mainloop = mma): an
// implicit GEMM whose slices sit in shared memory as As[kSR][kPA] (A's element (m, k) at
// As[ksol_row(k)][ksol_a_slot(m, k)]) and Bs[kSR][kPB] (B's (k, n) at Bs[ksol_row(k)][ksol_b_slot(n,
// k)]), each warp computing kFM x kFN fragments of 16 x 16 f32
// accumulators c_frag at pixels/rows wm0.. and columns wn0.., kKS reduction positions a fragment
// product. `frag_type` is the fragments' element type (nvcuda::wmma::precision::tf32, __nv_bfloat16
// or __half). TF32 fragments take the slices' data as rounded to TF32 (tf32_round, cvt.rn) when
// they were staged or, in the cp.async pipeline, once they landed.
// With stages S >= 2 the slices are S shared buffers filled by cp.async (pipelined_slice_loop);
// only TF32 data are pipelined, so there is no staging tile beside them.
struct WmmaShape {
  int64_t fm = 4, fn = 2;  // fragments per warp
  int64_t ks = 8;          // a fragment's reduction step: 8 (TF32) or 16 (16-bit)
  int64_t pad = 4;         // elements a staged row is padded by (16 bytes; 8 elements with `sync`)
  bool sync = false;       // TF32 by mma.sync.m16n8k8 (operands loaded lane by lane), else WMMA
};
// The slice loop of the implicit GEMMs staged through registers (conv's simt and mma kernels,
// direct's mma): for each slice of kBK reduction positions below `depth`, the registers ra/rb
// into As (at `a_at`, an expression of the element e) and Bs[e % kBK][e / kBK], a barrier, the
// next slice's loads (`load`, given its first position), the slice's products (`multiply`), a
// barrier. The first slice's loads come before it. With `tf32`, the registers hold the data as
// loaded and are rounded to TF32 (tf32_round) as they are stored: a rounding at the load would make
// each load's wait come right after it, where the stores come after the slice's products.
// `b_at`: where a staged B element goes (e = tid + l * kThreads, l and tid in scope): as it is for
// the CUDA-core kernels (kPlainBAt), at ksol_row and ksol_b_slot for the mma kernels (kMmaBAt, whose
// slot is a loop-invariant register plus a constant wherever a thread's elements lie whole warps'
// columns apart: the condition is a compile-time constant).
inline const char* const kPlainBAt = "Bs[e % kBK][e / kBK]";
inline const char* const kMmaBAt =
    "Bs[ksol_row(e % kBK)][kThreads % kBK == 0 && kThreads / kBK % (16 * kFN) == 0 ? ksol_b_slot(tid / kBK, tid % kBK) "
    "+ kSW * l * (kThreads / kBK) : ksol_b_slot(e / kBK, e % kBK)]";
// `preload` (optional): emitted right after the barrier, before the next slice's loads (the
// fragments of `fragments = slice`).
void staged_slice_loop(Writer& w, const std::string& a_at, const std::function<void(Writer&, const std::string&)>& load,
                       const std::function<void(Writer&)>& multiply, bool tf32 = false, const std::string& b_at = kPlainBAt,
                       const std::function<void(Writer&)>& preload = {});
// The mma kernels' tile rules: `tile` [ROWS, COLUMNS, SLICE] in whole warps of `thread_tile`
// [FM, FN] fragments (entries 1, 2, 4 or 8, at most 16 fragments), a slice a multiple of the
// fragments' step (8 for TF32, 16 for `type` bf16/f16), at most 1024 threads and 48 KB of static
// shared memory (the padded slices: f32 rows padded by 8 for TF32; rows of `type` padded by 16
// bytes and a 1280-byte staging tile a warp for WMMA).
// `rows` and `cols` name the tile's dimensions in messages ("pixels", "filters"). Registers: a
// thread's accumulators (8 a fragment), its staged A elements (kLA of them, each with `a_regs`
// more registers of gather state) and B elements (kLB), plus 40 for the rest, must fit in what a
// block of its threads leaves a thread (65536 / threads, at most 255), or the kernel would spill.
// Returns the warps a block; Refused with the rule broken otherwise.
// With `stages` >= 2 (the cp.async pipeline, TF32 only) there are S padded slices and nothing is
// staged in registers (a_regs each A element). `slice_fragments` (fragments = slice) counts the
// slice's other k-steps' operand registers too. `extra_static`: bytes of the kernel's own static
// shared arrays besides the slices, which count against the same limits.
int64_t check_mma_tile(const std::vector<int64_t>& tile, const std::vector<int64_t>& thread_tile, bool tf32, dsl::Type type,
                       const char* rows, const char* cols, int64_t a_regs, int64_t stages = 1, bool slice_fragments = false,
                       int64_t extra_static = 0);
// The mma kernels' `stages` (0 for auto): 1 (auto too) stages the next slice in registers, 2 to 4
// fill as many shared buffers by cp.async, for 32-bit elements only (`type`, the staged data's).
// Returns the count; Refused with the rule broken otherwise.
int64_t check_mma_stages(int64_t stages, dsl::Type type);
// The pipelined slice loop of the mma kernels (stages >= 2): the first stages - 1 slices' copies
// issued, then for each slice of kBK positions below `depth`: wait until this thread's copies of
// it have landed (cp.async.wait_group kStages - 2), a barrier (everyone's copies visible, the
// buffer of the slice before free), the copies of the slice stages - 1 ahead issued into that
// buffer (`issue`, given that slice's first position; it binds As and Bs to buffer `stage`
// itself), the slice's products from its buffer (`multiply`, with As and Bs bound to it; TF32
// data are rounded as the fragments load, wmma_slice_product's `round`). Every thread commits a
// group per slice, empty past the end, so the wait's count holds to the last slice. Only TF32
// data are pipelined, whose mma.sync epilogue reads no shared memory: nothing waits on the
// buffers after the loop.
// `preload` (optional) as staged_slice_loop's: after the barrier, before the copies are issued;
// it binds the buffer itself, and `multiply` then gets no As and Bs (it reads registers only).
void pipelined_slice_loop(Writer& w, const std::function<void(Writer&, const std::string&, const std::string&)>& issue,
                          const std::function<void(Writer&)>& multiply, const std::function<void(Writer&)>& preload = {});
// The launch of an mma kernel (`kernel`, with its template arguments), `grid` and `threads`
// expressions, `args` its arguments, in ksol_run: with `stages` >= 2 its slices are kSliceBytes of
// dynamic shared memory (`scope` qualifies kSR, kPA and kPB, e.g. "ksol_mma::"), opted into past
// 48 KB (ksol_run returns 4 where the device refuses). The launch error is left for the caller.
void mma_launch(Writer& w, const std::string& kernel, const std::string& grid, const std::string& threads,
                const std::string& args, int64_t stages, const std::string& scope = "");
// An mma kernel's slice loop, from its first loads to its last products: the cp.async pipeline
// (`stages` >= 2, `issue` its copies) or the slices staged through registers (ra and rb of
// `stage_type`, `load` their loads, stored at `a_at` and kMmaBAt), each slice's products by
// wmma_slice_product, or with `slice_fragments` its operands loaded after the barrier
// (mma_fragment_loads) and multiplied after the next slice's loads are issued.
struct MmaLoop {
  int64_t stages = 1;
  bool slice_fragments = false, tf32 = false;
  std::string frag_type, stage_type, a_at;
  std::function<void(Writer&, const std::string&, const std::string&)> issue;  // (first position, buffer)
  std::function<void(Writer&, const std::string&)> load;                       // (first position)
};
void mma_slice_loop(Writer& w, const MmaLoop& m);
// Binds As and Bs to the pipeline's buffer `stage` (a stage index expression).
void bind_stage(Writer& w, const std::string& stage_type, const std::string& stage);
// The constants kFM, kFN, kWM, kWN, kThreads, kKS, kPA, kPB, kSR, kSW (after kBM, kBN, kBK) and
// the slice layout's functions ksol_row, ksol_a_slot and ksol_b_slot, through which every store
// into the slices goes (kSW: the slots one row or column takes in a slice row).
// TF32 products take mma.sync.m16n8k8 (`sync`: the helper ksol_mma_tf32, Helpers' "mma_tf32"),
// whose operands each lane loads itself, 16 bytes at a time, from slices that keep positions k and
// k + 4 in one row, interleaved so that each load gives a fragment's registers in order, rows
// padded by 8 elements (conflict-free), with accumulators in registers in the instruction's layout
// and no staging tile; 16-bit data take WMMA's fragments (slices in order) and a staging tile a
// warp.
void wmma_constants(Writer& w, const WmmaShape& s);
// The shared slices and the per-warp staging tile Cs, tid, warp, lane, wm0, wn0 (at the top of
// the kernel, `stage_type` the staged elements' type). With `stages` >= 2 (TF32 only): kStages
// buffers of both slices, which the loop binds to As and Bs. Without `staging` (mma.sync) there
// is no staging tile.
void wmma_declarations(Writer& w, const std::string& stage_type, int64_t stages = 1, bool staging = true);
// The accumulators, declared and zeroed: c_frag[kFM][kFN] (WMMA), or with `sync`
// c_acc[kFM][2 * kFN][4] (two m16n8 tiles a 16 x 16 fragment, four f32 a lane each).
void wmma_accumulators(Writer& w, bool sync = false);
// One staged slice's fragment products (inside the slice loop, between its barriers): mma.sync
// for `tf32` (helpers "mma_tf32"), WMMA fragments of `frag_type` otherwise.
// TF32 operands are taken as the slices hold them, rounded to TF32 already where they were
// staged through registers; with `round` (the cp.async pipeline, whose copies land as loaded)
// each operand is rounded as its fragment loads (ksol_tf32_bits: one cvt.rn on sm_90). The tensor
// cores read a TF32 operand's upper 19 bits.
void wmma_slice_product(Writer& w, const std::string& frag_type, bool tf32, bool round = false);
// The TF32 slice product in two parts, for `fragments = slice`: mma_fragment_loads declares
// a_all[kBK / kKS][kFM][4] and b_all[kBK / kKS][2 * kFN][2] and loads every k-step's operands of
// the slice (rounded as they load with `round`), where the slice loop emits it right after its
// barrier, before the next slice's loads are issued (whose address arithmetic then hides the
// shared-memory latency); mma_fragment_products multiplies them. `bind` (the pipeline) binds As
// and Bs to buffer `stage` around the loads.
void mma_fragment_loads(Writer& w, bool round, bool bind);
void mma_fragment_products(Writer& w);
// Each accumulator to the epilogue: `element` emits the store of one output at (fr, fc) of
// fragment (i, j), its value frag_v (inside a loop: `continue` skips it). WMMA: through the warp's
// staging tile; `rows_fastest`: lanes 0-15 take consecutive rows (pixels), else consecutive
// columns; `row` (rows_fastest only) is emitted once per fragment row i, where fr is known and fc
// is not, for what depends on the row alone (its decode), which `element` then uses. `sync`
// (mma.sync): straight from the registers, a lane's two rows of each 16-row piece in turn, `row`
// emitted once for each, and `row_end` (sync only) after each row's last element, where every
// lane of the warp arrives (a shuffle across its lanes may go there).
void wmma_store_fragments(Writer& w, bool rows_fastest, const std::function<void(Writer&)>& element,
                          const std::function<void(Writer&)>& row = nullptr, bool sync = false,
                          const std::function<void(Writer&)>& row_end = nullptr);
// The #include lines the types of the program need.
std::string includes(const dsl::Program& p);
// The end of a generated source, after its constants: the helper functions used, the kernels
// (`kernels`), the close of the anonymous namespace, then the host code `host` writes. Returns
// the whole text of `w`.
std::string finish_source(Writer& w, const Helpers& helpers, const std::string& kernels,
                          const std::function<void(Writer&)>& host);


// --- CUTLASS epilogue fusion (the gemm and conv families share it) -----------------------------
// The output definition read as CUTLASS's fusion out = cast(act(core)), core = acc or
// acc + f32(bias[j]) with j the output's last index (a GEMM column: a GEMM's n, a conv's filter k).
struct CutlassFusion {
  bool fusable = false;
  std::string not_fusable;           // why not, when !fusable
  const dsl::Param* bias = nullptr;  // the per-column bias, or nullptr
  dsl::Expr act;                     // the output with the core replaced by the read "__x"
  bool identity = true;              // act is the core itself
  std::string tag;                   // for kernel names: "biasrelu", "gelutanh", ...
};
CutlassFusion cutlass_fusion(const dsl::Program& p, const dsl::Definition& out, const std::string& acc);
// The CUTLASS element type of a DSL type: cutlass::bfloat16_t, cutlass::half_t or float.
std::string cutlass_type(dsl::Type t);
// The fusion's activation as code of `x` (the f32 core), for cutlass_activation_fn.
std::string cutlass_activation_code(const CutlassFusion& f, Helpers& helpers, bool fast_math);
// `struct KsolEpilogueFn`: act (code in `x`, an f32) applied to a value and to a CUTLASS Array,
// the activation CUTLASS's EltAct fusions call.
void cutlass_activation_fn(Writer& w, const std::string& act);
// The fusion operation's type for output element `td` and source element `elem_c` ("void": no C).
// The bias is per column of CUTLASS's output (a row broadcast), or per row when `bias_per_row`
// (a GEMM computed as C^T = B^T A^T, whose output's rows are C's columns).
std::string cutlass_fusion_op(const CutlassFusion& f, const std::string& td, const std::string& elem_c,
                              bool bias_per_row = false);

}  // namespace ksol::codegen::detail
