// The legal schedules of a program's family (codegen::schedule_space), kept compact (one byte
// per knob: the index of its value in the knob's grid) and computed once per program text in
// the background: a row-wise family's grid holds millions of schedules and takes seconds to
// walk, so `ksol optimize` starts every task's walk while the GPU measures baselines.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "dsl/ir.h"

namespace ksol::search {

struct LegalSpace {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> grids;
  std::vector<uint8_t> legal;  // size() * keys.size() grid indices
  size_t size() const { return keys.empty() ? 0 : legal.size() / keys.size(); }
  codegen::Schedule schedule(size_t i) const;
};

// Starts (or finds) the computation for this program and binding; the future is shared.
std::shared_future<std::shared_ptr<const LegalSpace>> legal_space(const dsl::Program& p, const codegen::Binding& b);

}  // namespace ksol::search
