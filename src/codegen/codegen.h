// Code generation: a checked DSL program (src/dsl/ir.h) becomes one CUDA source exporting the
// candidate ABI (include/ksol/abi.h). Each family (elementwise, rowwise, ...) first answers
// can_implement with a reason, then generates; "unsupported" is an answer, not a failure.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dsl/ir.h"

namespace ksol::codegen {

// How the task lays out the ABI call: its tensor names in order (ksol_call.tensors) and its dim
// names in order (ksol_call.dims). Parameters bind to tensors and extents to dims by name. An
// empty list means the program's own order: inputs then outputs, and Program::dims.
struct Binding {
  std::vector<std::string> tensor_order;
  std::vector<std::string> dim_order;
};

// The answer to "can this family implement this program with this schedule?"; `reason` says
// why not (and is empty when ok).
struct Support {
  bool ok = false;
  std::string reason;
};

Support can_implement(const dsl::Program& p, const Binding& b);
// The CUDA source of the program with its schedule. Throws std::runtime_error (with the
// reason) when !can_implement.
std::string generate_cuda(const dsl::Program& p, const Binding& b);
// The generated kernel's name, made of its configuration, e.g. rowwise_softmax_f32_t256_v4_r1_block.
std::string kernel_name(const dsl::Program& p);

// One schedule as written in a program: (key, value text) pairs in the family's key order.
using Schedule = std::vector<std::pair<std::string, std::string>>;

// The schedules a family's knob grid holds for a program, in odometer order (the last knob turning
// fastest): the legal ones, and for every refused one the reason. A family's grid holds millions
// of schedules (rowwise: 6M), so each one's verdict is an index into the distinct reasons.
struct Space {
  std::vector<std::string> keys;                // the knobs, in the family's order
  std::vector<std::vector<std::string>> grids;  // the values tried for each knob
  std::vector<Schedule> legal;
  std::vector<std::string> reasons;  // each refusal's reason once, in the order first met
  std::vector<uint32_t> verdicts;    // per schedule: 0 legal, r refused for reasons[r - 1]
  size_t size() const { return verdicts.size(); }
  size_t refused() const { return verdicts.size() - legal.size(); }
  Schedule schedule(size_t index) const;  // the index-th schedule of the grid
  // How many schedules each reason refuses, and the first of them: (reason, count, index).
  struct ReasonCount {
    std::string reason;
    size_t count = 0;
    size_t first = 0;
  };
  std::vector<ReasonCount> by_reason() const;
};
// Each schedule's verdict is can_implement's. A refusal that read only the leading knobs (the
// family's check reads them through detail::Knobs, which notes the last one read) refuses every
// schedule that shares them, so those are not checked one by one.
Space schedule_space(const dsl::Program& p, const Binding& b);

// What compiling a generated source needs beyond ksol's defaults (CompileJob's arch, extra
// flags and libraries): the gemm family's CUTLASS kernels need sm_90a (WGMMA, TMA),
// --expt-relaxed-constexpr, and libcuda (TMA descriptors are encoded with cuTensorMapEncodeTiled,
// called directly: CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, so no driver entry-point lookup).
struct CompileNeeds {
  std::string arch = "sm_90";
  std::vector<std::string> extra_flags;
  std::vector<std::string> libs;
};
CompileNeeds compile_needs(const dsl::Program& p);
inline std::string required_arch(const dsl::Program& p) { return compile_needs(p).arch; }

// `p` with its schedule replaced by `s` (values parsed as integers where they are numbers).
dsl::Program with_schedule(const dsl::Program& p, const Schedule& s);
std::string schedule_text(const Schedule& s);

}  // namespace ksol::codegen
