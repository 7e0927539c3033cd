// Every built-in task's seed program (program.ksol, where ksol optimize starts) computes what
// the task asks, checked on the CPU with the correctness gate's comparator against the task's
// float64 reference: its algorithm through the IR interpreter, and, where the family's code can
// run on the host (everything but CUTLASS's tensor-core mainloops: for a conv on CUTLASS, its CUDA-core
// fallback), its generated CUDA too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "host_reference.h"
#include "search/optimize.h"

using namespace ksol;
using namespace ksol::test_support;
namespace fs = std::filesystem;

namespace {

// Dims small enough for the interpreter and the host emulation (which runs every CUDA thread),
// with ragged edges, in the task's own dim names: few rows, rows of 301.
SizeSet small_size(const Task& t) {
  const SizeSet* s = t.find_size("small");
  SizeSet out = *s;
  out.name = "seed-check";
  for (auto& [d, v] : out.dims) {
    if (d == "NNZ") continue;
    double cap = d == "K" ? 96 : (d == "R" || d == "M" || d == "H") ? 19 : 301;  // off the tile and vector multiples
    v = std::min(v, cap);
  }
  if (out.dims.count("NNZ")) out.dims["NNZ"] = std::min(out.dims["NNZ"], out.dims["M"] * 8);
  return out;
}

// The interpreter's float64 outputs, stored in each output's dtype as a candidate would leave them.
OutputBytes interpreted(const Task& t, const SizeSet& s, const dsl::Program& p, std::vector<HostTensor> in) {
  std::vector<HostTensor> out = make_reference_outputs(t, s);
  std::vector<void*> ptrs;
  for (size_t k = 0; k < t.tensors.size(); ++k) {
    HostTensor& h = t.tensors[k].role == Role::in ? in[k] : out[k];
    ptrs.push_back(h.f64.empty() ? static_cast<void*>(h.bytes.data()) : static_cast<void*>(h.f64.data()));
  }
  std::vector<int64_t> dims = dims_of(t, s);
  ksol_call call{KSOL_ABI_VERSION, static_cast<int32_t>(ptrs.size()), ptrs.data(), static_cast<int32_t>(dims.size()), dims.data(), nullptr};
  if (codegen::interpret_call(p, search::binding_of(t), &call) != 0) throw std::runtime_error("interpret_call failed");
  OutputBytes got(t.tensors.size());
  for (size_t k = 0; k < t.tensors.size(); ++k) {
    if (t.tensors[k].role != Role::out) continue;
    if (out[k].f64.empty()) {
      got[k] = out[k].bytes;
      continue;
    }
    got[k].resize(out[k].numel * dtype_size(t.tensors[k].dtype));
    for (int64_t i = 0; i < out[k].numel; ++i) store_from_double(t.tensors[k].dtype, got[k].data(), i, out[k].f64[i]);
  }
  return got;
}

// The host emulation runs the CUDA ksol writes itself, not CUTLASS's tensor-core mainloops.
bool runs_on_host(const dsl::Program& p) { return codegen::compile_needs(p).arch != "sm_90a"; }

// What runs on the host for `p`: p itself, or for a conv on CUTLASS its CUDA-core fallback (the
// kernel of mainloop = simt at the default tile, which the tma source carries for the shapes
// CUTLASS cannot take).
dsl::Program host_form(const dsl::Program& p) {
  if (p.family == "conv" && !runs_on_host(p)) return codegen::with_schedule(p, {{"mainloop", "simt"}});
  return p;
}

// The program at `path` is accepted for the task in `dir`, and what it computes (the interpreter's
// reading of it, and its generated CUDA run on the host where ksol wrote all of it) passes the
// task's correctness checks on a small ragged size, every distribution.
void check_program(const std::string& path, const std::string& dir) {
  Task t = load_task(dir);
  SCOPED_TRACE(t.name);
  dsl::Program p = dsl::parse_program(read_file(path), path);
  codegen::Binding b = search::binding_of(t);
  codegen::Support sup = codegen::can_implement(p, b);
  ASSERT_TRUE(sup.ok) << sup.reason;
  SizeSet s = small_size(t);
  Reference ref(t);
  // The interpreter reads no sparse (csr, coo, ell) operands and has no stencil boundary rule
  // (the family copies boundary cells); those seeds are checked through their generated code only.
  bool interp = p.family != "sparse" && p.family != "stencil";
  std::unique_ptr<codegen::HostBuild> build;
  if (const dsl::Program h = host_form(p); runs_on_host(h)) {
    build = std::make_unique<codegen::HostBuild>(codegen::build_for_host(codegen::generate_cuda(h, b)));
    ASSERT_TRUE(build->ok) << build->message;
  }
  ASSERT_TRUE(interp || build) << "a seed the interpreter cannot check must run on the host";
  for (Distribution d : distributions_for(t)) {
    std::vector<HostTensor> in = generate_inputs(t, s, d, 21);
    std::vector<HostTensor> want = ref.run(t, s, in, false);
    std::vector<HostTensor> mag = t.magnitude == "abs" ? ref.run(t, s, in, true) : want;
    const std::vector<HostTensor>* m = t.magnitude == "abs" ? &mag : nullptr;
    if (interp) {
      EXPECT_EQ(check_outputs(t, s, in, interpreted(t, s, p, in), want, m), "") << "interpreter, " << distribution_name(d);
    }
    if (build) {
      OutputBytes buffers = poisoned_outputs(t, s);
      for (size_t k = 0; k < t.tensors.size(); ++k)
        if (t.tensors[k].role == Role::in) buffers[k] = in[k].bytes;
      codegen::HostRun r = codegen::run_on_host(build->so_path, buffers, dims_of(t, s));
      ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
      EXPECT_EQ(check_outputs(t, s, in, buffers, want, m), "") << "generated code, " << distribution_name(d);
    }
  }
}

}  // namespace

TEST(Seeds, EveryTaskSeedComputesTheTasksOutputs) {
  int seeds = 0;
  for (const std::string& dir : builtin_task_dirs()) {
    std::string path = dir + "/program.ksol";
    if (!fs::exists(path)) continue;
    ++seeds;
    check_program(path, dir);
  }
  EXPECT_GE(seeds, 10);
}

// examples/tuned: the hand-picked schedules measured on an H200 (NAME.ksol or NAME_variant.ksol
// for the task NAME) are still accepted and still compute their task's outputs.
TEST(Seeds, EveryTunedExampleComputesItsTasksOutputs) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(source_root()) / "examples" / "tuned")) {
    if (e.path().extension() != ".ksol") continue;
    const std::string stem = e.path().stem().string();
    std::string dir;
    try {
      dir = resolve_task_path(stem);
    } catch (const std::exception&) {
      dir = resolve_task_path(stem.substr(0, stem.rfind('_')));  // spmv_csr_f32_banded: spmv_csr_f32
    }
    ++n;
    SCOPED_TRACE(e.path().string());
    check_program(e.path().string(), dir);
  }
  EXPECT_GE(n, 12);
}

