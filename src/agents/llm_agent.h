// An agent whose programs an LLM writes. The decision table plays the Planner (it picks the
// method to apply, with the card as prompt text); the LLM is the Coder (it writes the whole DSL
// program); a program that does not parse, type-check or fit its family's generator gets one
// repair prompt carrying the error (the Debugger), then the branch is dropped. Nothing the model
// answers can crash the run: every answer is parsed, never executed here. `ksol optimize` uses it
// with `--answer schedule` only; an LLM agent otherwise runs the kernel loop (agents/kernel_loop.h),
// whose roles share this file's answer checks.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agents/expert.h"
#include "agents/llm.h"
#include "task/task.h"
#include "store/store.h"

namespace ksol::search {
struct OptimizeResult;
}

namespace ksol::agents {

// Why an answer cannot be used. Each class has its own message in the progress output, the
// repair prompt and the store's outcome ("rejected: <kind>: <message>").
struct Rejection {
  enum class Kind {
    none, truncated, no_code_block, wrong_language, unclosed_block, parse_error, signature, cannot_generate, repeats_parent,
    source_scan,    // a CUDA answer with a construct gate 1 forbids (compile/compiler.h's static_scan)
    no_entry_point, // a CUDA answer that defines no ksol_run (include/ksol/abi.h)
    repeats_tried   // the same kernel as one already tried for the task: not evaluated again
  };
  Kind kind = Kind::none;
  std::string message;
};
// "truncated", "no code block", "wrong language", ..., as the progress output names them.
const char* rejection_name(Rejection::Kind k);

// What the LLM spent: on a task, or on the requests that led to one program.
struct LlmSpend {
  llm::Usage usage;
  std::vector<int64_t> request_ids;  // the store's llm_requests rows (those recorded)
};

class LlmAgent : public Agent {
 public:
  // `client` and `k` must outlive the agent.
  LlmAgent(llm::Client& client, const Task& t, const Knowledge& k, std::string dsl_card, int max_tokens = 2048);
  std::string name() const override { return "llm"; }
  std::vector<Proposal> propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                const std::set<std::string>& exclude, std::vector<std::string>* log) override;

  // The prompts, exposed for tests and for the prompt-size log.
  std::string system_prompt() const;
  std::string user_prompt(const dsl::Program& parent, const Profile& prof, const std::string& method_text) const;
  // Checks an answer: the program it holds, or the reason it cannot be used.
  std::optional<dsl::Program> accept(const std::string& answer, const codegen::Binding& b, std::string* why) const;
  // The whole check of an answer against its parent: truncation (finish reason "length"), the
  // code block and its language, the parse (line:col), the signature, the family's generator.
  std::optional<dsl::Program> check(const llm::Answer& a, const dsl::Program& parent, const codegen::Binding& b, Rejection* why) const;

  // Where each request's and answer's fate is said as it happens (the run's progress output);
  // `outcome` receives (llm_requests row, outcome) for the store.
  void set_progress(std::function<void(const std::string&)> progress) { progress_ = std::move(progress); }
  void set_outcome(std::function<void(int64_t, const std::string&)> outcome) { outcome_ = std::move(outcome); }
  // What this agent's requests cost, and what those behind one proposed program cost (by its source).
  const LlmSpend& spend() const { return spend_; }
  const LlmSpend* spend_of(const dsl::Program& p) const;
  // After the search: what became of each program the model wrote (verified, screened out, or
  // failed at the compile or correctness gate), to the progress output for the failures and to
  // the store for every request behind it.
  void review(const search::OptimizeResult& r) const;

 private:
  llm::Client& client_;
  Task task_;
  const Knowledge& k_;
  std::string card_;
  int max_tokens_;
  std::function<void(const std::string&)> progress_;
  std::function<void(int64_t, const std::string&)> outcome_;
  bool waiting_ = false;  // a request went into a batch: no more until the run is resumed
  LlmSpend spend_;
  std::map<std::string, LlmSpend> by_program_;
};

// The DSL reference card for prompts (docs/DSL_CARD.md of the source tree).
std::string default_dsl_card();

// Reads an answer's ```ksol block: the program, or the class and message of why it cannot be
// used (truncated, no block, a block in another language, unclosed, parse error at line:col, a
// program its family cannot generate). `asked` names what the prompt asked for, for the
// wrong-language message ("a ksol DSL program (--answer dsl)").
std::optional<dsl::Program> read_dsl_answer(const std::string& text, const std::string& finish_reason, int max_tokens,
                                            const codegen::Binding& b, Rejection* why,
                                            const std::string& asked = "a ksol DSL program");
// Whether `p` keeps `parent`'s kernel name and tensors; `why` names both signatures when not.
bool same_signature(const dsl::Program& p, const dsl::Program& parent, std::string* why);

// The store row of one LLM request, as `ksol optimize` records it (run and outcome left to the caller).
store::LlmRequestRow request_row(const llm::RequestRecord& q);

}  // namespace ksol::agents
