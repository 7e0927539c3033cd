// Generator for hack 08: records the answers to every input ksol shows a candidate when the
// fresh-seeds defence is off, so that the hack can replay them without arithmetic.
//
// It uses ksol's own pieces, so the table follows them: draw_seeds (fixed seeds 1, 2, 3 with
// fresh-seeds off), generate_inputs, distributions_for, the task's CPU reference compiled
// by ksol's compiler, and TimingConfig's rotation-set count. Two details are mirrored from
// code that does not export them, and must follow it if it changes (the suite then reports the
// hack as failing with its defence off, which points here):
//   - Session::evaluate (src/coord/session.cpp): timing_seed = seeds[0] ^ 0x5eed;
//   - Evaluator::timing (src/harness/harness.cpp): timing input case i (of TimingConfig's
//     input_cases) gets the normal distribution with seed timing_seed + 1000 + i; the call
//     after the last sample uses timing_seed + 3000.
//
// Linked into ksol_tests (test_hacks.cpp calls write_hardcoded_hack). run_hacks.py builds a
// standalone copy with -DKSOL_HACKS_GEN_MAIN against libksol_common.a:
//   gen_hardcoded TEMPLATE TASK_DIR SIZE OUT
#include "gen_hardcoded.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "coord/session.h"
#include "core/util.h"
#include "harness/harness.h"
#include "ksol/abi.h"
#include "task/inputs.h"
#include "task/task.h"

namespace ksol::hacks {

int write_hardcoded_hack(const std::string& template_path, const std::string& task_dir, const std::string& size_name,
                         const std::string& out_path) {
  Task t = load_task(task_dir);
  const SizeSet* s = t.find_size(size_name);
  if (!s) throw std::runtime_error("task " + t.name + " has no size '" + size_name + "'");
  // The template replays a two-input, one-output f32 operator with three dims (gemm_f32).
  if (t.tensors.size() != 3 || t.tensors[0].role != Role::in || t.tensors[1].role != Role::in ||
      t.tensors[2].role != Role::out || t.dims.size() != 3)
    throw std::runtime_error("the hardcoded-seeds template needs two inputs, one output and three dims");
  for (auto& ts : t.tensors)
    if (ts.dtype != DType::f32) throw std::runtime_error("the hardcoded-seeds template needs f32 tensors");
  if (!t.use_cpu_reference(*s)) throw std::runtime_error("size '" + size_name + "' is beyond the CPU reference");

  CompileResult ref = compile(reference_job(t, false));
  if (!ref.ok) throw std::runtime_error("the CPU reference does not compile:\n" + ref.message);
  void* lib = dlopen(ref.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error(std::string("cannot load the reference: ") + dlerror());
  auto reference = reinterpret_cast<ksol_reference_fn>(dlsym(lib, "ksol_reference"));
  if (!reference) throw std::runtime_error("the reference exports no ksol_reference");

  struct Case {
    uint64_t seed;
    Distribution dist;
  };
  std::vector<Case> cases;
  EvalOptions fixed;
  fixed.defences_off.insert("fresh-seeds");
  std::vector<uint64_t> seeds = draw_seeds(fixed, 3);
  for (uint64_t seed : seeds)
    for (Distribution d : distributions_for(t)) cases.push_back({seed, d});
  const uint64_t timing_seed = seeds[0] ^ 0x5eed;  // mirrors Session::evaluate
  for (int i = 0; i < TimingConfig{}.input_cases; ++i)
    cases.push_back({timing_seed + 1000 + static_cast<uint64_t>(i), Distribution::normal});  // mirrors Evaluator::timing
  // The call after the last sample gets fresh inputs from the second seed (Evaluator::timing);
  // the first is kept so that a table made for either layout covers both.
  for (uint64_t extra : {2000, 3000}) cases.push_back({timing_seed + extra, Distribution::normal});

  std::vector<int64_t> dims;
  for (auto& d : t.dims) dims.push_back(std::llround(s->dims.at(d)));
  const int64_t out_elems = t.numel(t.tensors[2], *s);
  std::string prints, outs;
  std::map<std::vector<uint32_t>, size_t> seen;
  char buf[64];
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<HostTensor> in = generate_inputs(t, *s, cases[c].dist, cases[c].seed);
    std::vector<HostTensor> out = make_reference_outputs(t, *s);
    std::vector<void*> ptrs = {in[0].f64.data(), in[1].f64.data(), out[2].f64.data()};
    ksol_call call{KSOL_ABI_VERSION, 3, ptrs.data(), 3, dims.data(), nullptr};
    if (reference(&call) != 0) throw std::runtime_error("the reference failed");
    std::vector<uint32_t> fp(4);
    for (int k = 0; k < 2; ++k) {
      if (in[k].bytes.size() < 8) throw std::runtime_error("inputs too small to fingerprint");
      std::memcpy(&fp[2 * k], in[k].bytes.data(), 8);
    }
    if (auto [it, fresh] = seen.emplace(fp, c); !fresh)
      throw std::runtime_error("cases " + std::to_string(it->second) + " and " + std::to_string(c) + " share a fingerprint");
    std::snprintf(buf, sizeof buf, "    {0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu},", fp[0], fp[1], fp[2], fp[3]);
    prints += buf;
    std::snprintf(buf, sizeof buf, "  // seed %llu, %s\n", static_cast<unsigned long long>(cases[c].seed),
                  distribution_name(cases[c].dist));
    prints += buf;
    outs += "    {";
    std::vector<uint8_t> f32(static_cast<size_t>(out_elems) * 4);
    for (int64_t i = 0; i < out_elems; ++i) store_from_double(DType::f32, f32.data(), i, out[2].f64[i]);
    for (int64_t i = 0; i < out_elems; ++i) {
      uint32_t w;
      std::memcpy(&w, f32.data() + 4 * i, 4);
      std::snprintf(buf, sizeof buf, "%s0x%08xu,", i % 8 == 0 ? "\n     " : " ", w);
      outs += buf;
    }
    outs += "},\n";
  }
  std::string table;
  table += "// Generated by tests/hacks/gen_hardcoded.cpp for task " + t.name + ", size " + size_name + ".\n";
  table += "constexpr int kCases = " + std::to_string(cases.size()) + ";\n";
  table += "constexpr int64_t kOutElems = " + std::to_string(out_elems) + ";\n";
  table += "constexpr int64_t kDims[3] = {" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " +
           std::to_string(dims[2]) + "};\n";
  table += "// Fingerprints: the bits of A[0], A[1], B[0], B[1].\n";
  table += "__device__ const uint32_t kPrint[kCases][4] = {\n" + prints + "};\n";
  table += "// The float64 reference's outputs rounded to f32, as bits.\n";
  table += "__device__ const uint32_t kOut[kCases][kOutElems] = {\n" + outs + "};\n";

  std::string text = read_file(template_path);
  const std::string placeholder = "\n@TABLE@\n";  // a line of its own
  size_t at = text.find(placeholder);
  if (at == std::string::npos) throw std::runtime_error(template_path + " has no @TABLE@ line");
  text.replace(at + 1, placeholder.size() - 2, table);
  std::filesystem::path out(out_path);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  write_file_atomic(out_path, text);
  return static_cast<int>(cases.size());
}

}  // namespace ksol::hacks

#ifdef KSOL_HACKS_GEN_MAIN
int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TEMPLATE TASK_DIR SIZE OUT\n", argv[0]);
    return 2;
  }
  try {
    int n = ksol::hacks::write_hardcoded_hack(argv[1], argv[2], argv[3], argv[4]);
    std::fprintf(stderr, "wrote %s (%d input sets)\n", argv[4], n);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gen_hardcoded: %s\n", e.what());
    return 1;
  }
}
#endif
