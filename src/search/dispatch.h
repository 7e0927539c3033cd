// Schedules by problem size: when different verified schedules win at different visible sizes,
// one kernel that runs each at its sizes (a program with guarded schedules, docs/DSL.md). This
// file learns the guards: a short decision list over the task's dims that sends every visible
// size to the schedule chosen for it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/ir.h"

namespace ksol::search {

// A visible size's dims (the program's dims, integers).
struct SizeDims {
  std::string name;
  std::map<std::string, int64_t> dims;
};

// The guards of a decision list: entry i sends the sizes its guard takes (among those no earlier
// entry took) to component `to[i]`; the sizes left go to `otherwise`.
struct DecisionList {
  std::vector<std::vector<dsl::GuardTerm>> when;
  std::vector<size_t> to;
  size_t otherwise = 0;
};

// A decision list over the program's dims that sends size k to component assign[k], with at
// most `max_guards` guards of one term each, or nullopt (with `why`) when none is found. Terms:
// misalignment (D % m != 0, m in 2, 4, 8, 16) of the dims that are some tensor's innermost extent,
// thresholds on the product of every dim and on each dim at the geometric midpoint between
// neighbouring visible values, then misalignment of the other dims. The shortest list wins; among
// those, the one whose terms come first in that order, then the one whose guards take the fewest
// sizes (the exceptions guarded, the common schedule last).
std::optional<DecisionList> learn_guards(const dsl::Program& p, const std::vector<SizeDims>& sizes,
                                         const std::vector<size_t>& assign, size_t max_guards, std::string* why);

// The program that runs component programs by the list: `base`'s algorithm, guarded schedules
// from the components (each a program with one schedule).
dsl::Program dispatch_program(const dsl::Program& base, const std::vector<dsl::Program>& components, const DecisionList& list);

}  // namespace ksol::search
