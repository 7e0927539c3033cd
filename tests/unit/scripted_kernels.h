// The kernel loop's test bench (agents/kernel_loop.h): an evaluator whose CUDA path is the real
// gate 1 and nvcc and whose times are scripted, and the softmax task set up for a loop whose
// requests' purposes, outcomes and progress lines are kept. Shared by test_kernel_loop.cpp (a
// scripted model in process) and test_kernel_loop_roles.cpp (the model over HTTP).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agents/kernel_loop.h"
#include "compile/compiler.h"
#include "core/util.h"

namespace ksol::test_support {

// A kernel that passed every gate in `us` at every visible size (SOL 50 us, memory-bound).
inline search::Outcome scripted_outcome(const Task& t, const std::string& label, double us) {
  search::Outcome o;
  o.label = label;
  o.status = Status::ok;
  for (const SizeSet* z : search::visible_sizes(t)) {
    search::SizeResult r;
    r.size = z->name;
    r.status = Status::ok;
    r.median_us = us;
    r.ci_low_us = r.ci_high_us = us;
    r.sol_us = 50;
    r.pct_sol = 50 / us;
    r.bound = "memory";
    r.weight = z->weight;
    o.sizes.push_back(r);
  }
  return o;
}

// CUDA kernels through the real gate 1 and nvcc (the compile half of `ksol eval --candidate`),
// then a scripted time: a source with "FAST" (a CUDA comment) or "vector = 4" (a DSL schedule)
// runs in 100 us, one with "WRONG" or "threads = 128" fails the correctness gate, anything else
// takes 300 us. Baselines 400 (naive) and 200 us. With `answers_fail`, every kernel but the
// first evaluated (the start) fails the correctness gate, whatever it holds.
struct ScriptedKernels : agents::KernelEvaluator {
  std::string dir;
  int evaluations = 0, compiles = 0;
  bool answers_fail = false;
  std::vector<std::string> languages;

  static search::Outcome timed(const Task& t, const std::string& label, double us) { return scripted_outcome(t, label, us); }
  search::Outcome evaluate(const Task& t, const agents::Kernel& k, const std::string& label, int64_t, const std::string&) override {
    ++evaluations;
    languages.push_back(k.language);
    if (k.language == "cuda") {
      std::string path = dir + "/" + label + ".cu";
      write_file_atomic(path, k.source);
      CompileResult c = compile(candidate_job(t, path));
      ++compiles;
      if (!c.ok) {
        search::Outcome o;
        o.label = label;
        o.error = c.stage + " gate: " + c.message;
        return o;
      }
    }
    auto has = [&](const char* m) { return k.source.find(m) != std::string::npos; };
    if (has("WRONG") || has("threads = 128") || (answers_fail && evaluations > 1)) {
      search::Outcome o = timed(t, label, 300);
      o.status = Status::failed;
      o.sizes[0].status = Status::failed;
      o.sizes[0].failed_gate = Gate::correctness;
      o.sizes[0].error_class = "wrong_result";
      o.sizes[0].message = "Y[3, 7] = 0.5, expected 0.25";
      o.error = o.sizes[0].size + ": failed at correctness: " + o.sizes[0].message;
      return o;
    }
    return timed(t, label, has("FAST") || has("vector = 4") ? 100 : 300);
  }
  std::map<std::string, search::Outcome> baselines(const Task& t) override {
    return {{"naive", timed(t, "baseline:naive", 400)}, {"vendor", timed(t, "baseline:vendor", 200)}};
  }
};

// The softmax task, its seed program and the scripted evaluator, with one branch of two repairs
// by default; `run` keeps each request's record (purpose first), each outcome given to a
// request's row, and the progress lines.
struct LoopCase {
  Task task = load_task(resolve_task_path("softmax_f32"));
  agents::Knowledge k = agents::load_knowledge(agents::default_knowledge_dir());
  std::string dir;
  std::vector<std::string> purposes;  // as the store's recorder receives them
  std::vector<agents::llm::RequestRecord> records;
  std::vector<std::pair<int64_t, std::string>> outcomes;
  std::vector<std::string> progress;
  ScriptedKernels ev;
  agents::KernelLoopOptions o;

  LoopCase() {
    dir = ::testing::TempDir() + "/ksol-kloop-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    ev.dir = dir;
    o.branches = 1;
    o.repairs = 2;
    o.family = "rowwise";
    o.dsl_card = agents::default_dsl_card();
    o.cuda_card = agents::default_cuda_card();
    o.progress = [this](const std::string& l) { progress.push_back(l); };
    o.outcome = [this](int64_t id, const std::string& out) { outcomes.push_back({id, out}); };
  }
  ~LoopCase() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  LoopCase(const LoopCase&) = delete;
  LoopCase& operator=(const LoopCase&) = delete;
  static int& counter() {
    static int c = 0;
    return c;
  }
  agents::Kernel seed() const { return agents::kernel_from_file(task.dir + "/program.ksol"); }
  // The loop from `start`, asking `c`; a request's row id is its place in `records`, from 1.
  agents::KernelLoopResult run(agents::llm::Client& c, const agents::Kernel& start) {
    c.set_recorder([this](const agents::llm::RequestRecord& q) -> int64_t {
      purposes.push_back(q.purpose);
      records.push_back(q);
      return static_cast<int64_t>(records.size());
    });
    return agents::run_kernel_loop(task, start, c, k, ev, o);
  }
  std::string all_progress() const { return join(progress, "\n"); }
};

// The seed program with one schedule line changed, as a model would answer it.
inline std::string with(const std::string& seed, const std::string& from, const std::string& to) {
  std::string s = seed;
  return s.replace(s.find(from), from.size(), to);
}

inline bool have_nvcc() { return run_process({"nvcc", "--version"}, 30).exit_code == 0; }

// The task's naive baseline as a model would write it in a ```cuda block, marked `marker`.
inline std::string cuda_answer(const std::string& marker = "FAST") {
  std::string src = read_file(source_root() + "/tasks/llm/softmax_f32/naive.cu");
  return "Here is the kernel:\n```cuda\n// " + marker + "\n" + src + "```\n";
}

// cuda_answer with a stream of its own, which gate 1's source scan refuses.
inline std::string cuda_answer_with_a_stream() {
  std::string bad = cuda_answer();
  bad.insert(bad.find("extern \"C\""), "static cudaStream_t mine() { cudaStream_t s; cudaStreamCreate(&s); return s; }\n");
  return bad;
}

}  // namespace ksol::test_support
