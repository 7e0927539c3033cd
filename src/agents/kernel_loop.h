// The LLM's kernel loop: the model writes whole kernels, in the DSL or in CUDA, through separate
// roles, each its own request with its own purpose in the store:
//
//   planner   the decision table's method cards + the profile + the trajectory -> a plan (prose)
//   coder     the plan + the parent kernel -> a kernel (the first answer of a branch)
//   optimizer the same, when the parent is a kernel the model wrote that passed every gate
//   reviewer  an answer's rejection or its evaluation (gate, message, per size) -> a diagnosis
//   repairer  the diagnosis + the fixes already tried on the branch -> a fixed kernel
//
// A branch is one plan: its coder answer and at most `repairs` repairs. A CUDA answer is
// untrusted code and is evaluated like a user's CUDA candidate (`ksol eval --candidate file.cu`):
// gate 1's source scan, nvcc, then every gate in the worker. The loop is what `ksol optimize`
// runs with an LLM agent: from each task's seed program, or from the user's own kernel (`--from
// kernel.cu`), in DSL, CUDA or either (`--answer`). The DSL schedule search with the LLM as its
// only role, the coder (`--answer schedule`), is agents/llm_agent.h.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/knowledge.h"
#include "agents/llm.h"
#include "agents/llm_agent.h"
#include "dsl/ir.h"
#include "search/optimize.h"
#include "task/task.h"

namespace ksol::agents {

// The language the model is asked to answer in (`ksol optimize --answer`).
enum class AnswerLanguage { dsl, cuda, either };
// "dsl" | "cuda" | "either"; throws std::invalid_argument otherwise.
AnswerLanguage parse_answer_language(const std::string& s);
const char* answer_language_name(AnswerLanguage a);

// A kernel as the loop handles it: a DSL program or a CUDA source exporting ksol_run.
struct Kernel {
  std::string language;          // dsl | cuda
  std::string source;            // the program's text or the CUDA source
  std::optional<dsl::Program> program;  // dsl: the parsed program
  std::string origin;            // where it came from: the file, or "llm c<i>"
};
// A kernel from a file: .ksol is parsed as a DSL program, anything else read as CUDA.
Kernel kernel_from_file(const std::string& path);

// Reads a CUDA answer: the ```cuda block (also ```cu, ```c++, ```cpp), or why it cannot be used:
// truncated, no block, a block in another language, unclosed, no ksol_run, or a construct gate 1
// forbids (the scan's findings at answer.cu:line:col). `asked` names what was asked for.
std::optional<std::string> read_cuda_answer(const std::string& text, const std::string& finish_reason, int max_tokens,
                                            Rejection* why, const std::string& asked = "a CUDA kernel");

// What measures a kernel for the loop. The session's version compiles a CUDA kernel as `ksol
// eval --candidate` does and runs every gate in the worker; tests script it.
class KernelEvaluator {
 public:
  virtual ~KernelEvaluator() = default;
  // The kernel on the task's visible sizes; a failure is data (Outcome::error names the gate).
  virtual search::Outcome evaluate(const Task& t, const Kernel& k, const std::string& label, int64_t parent,
                                   const std::string& method) = 0;
  virtual std::map<std::string, search::Outcome> baselines(const Task& t) = 0;
  // Nsight Compute's metrics for a verified kernel at one size; nullopt (with `why`) where the
  // evaluator cannot profile it: the roofline classifies then.
  virtual std::optional<search::ProfileResult> profile(const Task& t, const Kernel& k, const std::string& size, std::string* why) {
    (void)t, (void)k, (void)size;
    if (why) *why = "this evaluator has no profiler";
    return std::nullopt;
  }
  // The returned kernel and the baselines on the hidden sizes; an outcome with no sizes when it
  // cannot grade.
  virtual search::Outcome grade_hidden(const Task& t, const Kernel& k, const std::string& label) {
    (void)t, (void)k;
    search::Outcome o;
    o.label = label;
    o.error = "this evaluator does not grade hidden sizes";
    return o;
  }
  virtual std::map<std::string, search::Outcome> baselines_hidden(const Task& t) {
    (void)t;
    return {};
  }
};

struct KernelLoopOptions {
  AnswerLanguage answer = AnswerLanguage::cuda;
  int branches = 6;          // plans (each a coder or optimizer answer and its repairs)
  int repairs = 2;           // repair rounds per branch
  int plateau = 3;           // stop after this many branches without a new best
  double gamma = 1.03;       // a kernel must be this much faster than the best to replace it
  double budget_seconds = 0; // 0: none
  int max_tokens = 2048;
  int cards = 2;             // method cards from the decision table in the planner's prompt
  std::string dsl_card, cuda_card;  // reference cards (docs/DSL_CARD.md, docs/CUDA_CARD.md)
  std::string family;        // the DSL family whose method cards apply (the task's seed program's); "": none
  std::function<void(const std::string&)> progress;
  std::function<void(int64_t, const std::string&)> outcome;  // (llm_requests row, outcome)
};

// One entry of the short-term memory: what was tried on the task and what became of it.
struct Tried {
  int index = -1;             // the attempt (-1: rejected before evaluation)
  int branch = 0;
  std::string role;           // coder | optimizer | repairer
  std::string language;
  std::string source_hash;
  std::string result;         // "verified, 12.3 us (1.20x the best)", "failed the correctness gate: ...", "rejected (parse error): ..."
  std::string diagnosis;      // the reviewer's, when it failed
};

struct KernelLoopResult {
  search::OptimizeResult result;   // the trajectory (attempt 0: the starting kernel), baselines, speedups
  std::vector<Kernel> kernels;     // per attempt
  std::vector<Tried> tried;        // every answer, evaluated or not, in order
  LlmSpend spend;                  // every request
  std::map<int, LlmSpend> spend_of;  // by attempt: the requests behind it
  // The result's JSON (search::OptimizeResult::to_json) with each attempt's language, the
  // returned kernel's language and source, and the LLM's spend.
  nlohmann::json to_json() const;
  const Kernel* best_kernel() const;
};

// The prompts of each role, exposed for tests and the prompt-size measurement.
struct RolePrompts {
  static std::string planner_system();
  static std::string coder_system(AnswerLanguage a, const std::string& dsl_card, const std::string& cuda_card);
  static std::string reviewer_system();
};

// Runs the loop from `start` (which is evaluated first, as attempt 0).
KernelLoopResult run_kernel_loop(const Task& t, const Kernel& start, llm::Client& client, const Knowledge& k,
                                 KernelEvaluator& ev, const KernelLoopOptions& o);

// The CUDA reference card for prompts (docs/CUDA_CARD.md of the source tree).
std::string default_cuda_card();

}  // namespace ksol::agents
