// An agent whose programs an LLM writes. The decision table plays the Planner (it picks the
// method to apply, with the card as prompt text); the LLM is the Coder (it writes the whole DSL
// program); a program that does not parse, type-check or fit its family's generator gets one
// repair prompt carrying the error (the Debugger), then the branch is dropped. Nothing the model
// answers can crash the run: every answer is parsed, never executed here.
#pragma once
#include <memory>
#include <string>

#include "agents/expert.h"
#include "agents/llm.h"
#include "task/task.h"

namespace ksol::agents {

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

 private:
  llm::Client& client_;
  Task task_;
  const Knowledge& k_;
  std::string card_;
  int max_tokens_;
};

// The DSL reference card for prompts (docs/DSL_CARD.md of the source tree).
std::string default_dsl_card();

}  // namespace ksol::agents
