// The built-in agents that need no LLM, for DSL programs of the families with a code generator.
//
//   expert: the parent's profile -> features -> knowledge::choose (the decision table) -> the
//           chosen card's dsl_moves applied to the parent's schedule -> candidate programs that
//           codegen::can_implement accepts. Every choice is logged with explain(choice).
//   random: schedules drawn uniformly from codegen::schedule_space (for comparison).
//
// Both are deterministic for a seed. Nothing here touches a GPU.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agents/knowledge.h"
#include "codegen/codegen.h"
#include "dsl/ir.h"

namespace ksol::agents {

// What the agent knows of the parent's measurement (at the size the search weighs most).
struct Profile {
  std::string bound;                // "memory" | "compute" (the SOL bound); "" unknown
  double pct_sol = -1;              // 0..1; < 0 unknown
  std::map<std::string, double> dims;  // the representative size's dims
  std::string precision;            // the task's precision policy (fp32, bf16, ...)
  double sm_count = 132;            // H200 unless told otherwise (the search fills both from its evaluator's GPU)
  double sm = 90;                   // compute capability x 10 (the H200's) unless told otherwise
  // From Nsight Compute when the search could profile the kernel (agents/profile.h): its
  // metrics as features, the class they give, where the class came from, and the filtered
  // summary for prompts. Without them the class is the roofline's (bottleneck_of).
  std::map<std::string, double> metrics;
  std::string bottleneck;           // compute | memory_bandwidth | memory_latency; "": roofline
  std::string source = "roofline";  // e.g. "ncu, thresholds otsu(n=34)"
  std::string summary;
};

// memory_bandwidth (memory-bound, %SOL >= 0.3), memory_latency (memory-bound, lower), compute.
std::string bottleneck_of(const Profile& p);

// The program's schedule with every key of its family (missing keys at their defaults), in the
// family's key order. Empty for a family without a generator.
codegen::Schedule full_schedule(const dsl::Program& p);

// Profile and code features for the decision table (knowledge/features.toml names).
Features features_of(const dsl::Program& p, const Profile& prof);

// The schedules a card's DSL moves make from `parent` (moves on the same key are alternatives;
// different keys combine, then each key alone), in a deterministic order, parent excluded,
// at most `max`. `notes` receives the moves that are not schedule edits (fuse, rewrite, port).
std::vector<codegen::Schedule> apply_moves(const Method& m, const dsl::Program& parent, size_t max = 24,
                                           std::vector<std::string>* notes = nullptr);

struct Proposal {
  dsl::Program program;
  codegen::Schedule schedule;
  std::string method;  // card id, or "random"
  std::string why;     // explain(choice), or how it was drawn
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual std::string name() const = 0;
  // Candidate children of `parent`, best first; only programs can_implement accepts. Methods in
  // `exclude` are not chosen. Refusals and choices go to `log`.
  virtual std::vector<Proposal> propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                        const std::set<std::string>& exclude, std::vector<std::string>* log) = 0;
};

class ExpertAgent : public Agent {
 public:
  ExpertAgent(const Knowledge& k, uint64_t seed) : k_(k), rng_(seed) {}
  std::string name() const override { return "expert"; }
  std::vector<Proposal> propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                const std::set<std::string>& exclude, std::vector<std::string>* log) override;

 private:
  const Knowledge& k_;
  std::mt19937_64 rng_;
};

class RandomAgent : public Agent {
 public:
  explicit RandomAgent(uint64_t seed, size_t batch = 8) : rng_(seed), batch_(batch) {}
  std::string name() const override { return "random"; }
  std::vector<Proposal> propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                const std::set<std::string>& exclude, std::vector<std::string>* log) override;

 private:
  std::mt19937_64 rng_;
  size_t batch_;
  struct Space {
    std::vector<codegen::Schedule> order;  // the legal schedules, shuffled once
    size_t next = 0;                       // where the next call starts
  };
  std::map<std::string, Space> spaces_;  // by program name+family
};

// "expert" or "random"; throws std::invalid_argument otherwise. `k` must outlive the agent.
std::unique_ptr<Agent> make_agent(const std::string& name, const Knowledge& k, uint64_t seed);

}  // namespace ksol::agents
