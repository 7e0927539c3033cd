// The code generation driver: finds the family's generator, asks it, and walks its knob grid.
// Adding a family is a new file defining a FamilyGenerator plus one line in kFamilies.
#include "codegen/codegen.h"

#include <map>
#include <stdexcept>

#include "codegen/common.h"
#include "codegen/sparse_stencil.h"

namespace ksol::codegen {
namespace {

using detail::FamilyGenerator;

const FamilyGenerator* lookup(const std::string& family) {
  const FamilyGenerator* const kFamilies[] = {
      &detail::elementwise_family(),
      &detail::rowwise_family(),
      &detail::gemm_family(),
      &detail::conv_family(),
      &detail::sparse_family(),
      &detail::stencil_family(),
  };
  for (const FamilyGenerator* f : kFamilies)
    if (f->name == family) return f;
  return nullptr;
}

const FamilyGenerator* family_of(const dsl::Program& p) { return lookup(p.family); }

std::string no_family(const dsl::Program& p) {
  return "no code generator for the " + (p.family.empty() ? std::string("(unrecognised)") : p.family) +
         " family yet; generators exist for elementwise, rowwise, gemm, conv, sparse and stencil";
}

// The generator for p when it can implement it; throws std::runtime_error with the reason otherwise.
const FamilyGenerator& checked(const dsl::Program& p, const Binding& b) {
  Support s = can_implement(p, b);
  if (!s.ok) throw std::runtime_error("cannot generate '" + p.name + "': " + s.reason);
  return *family_of(p);
}

}  // namespace

Support can_implement(const dsl::Program& p, const Binding& b) {
  const FamilyGenerator* f = family_of(p);
  if (!f) return {false, no_family(p)};
  try {
    f->check(p, b);
  } catch (const detail::Refused& r) {
    return {false, r.what()};
  }
  return {true, ""};
}

std::string generate_cuda(const dsl::Program& p, const Binding& b) { return checked(p, b).generate(p, b); }

// The name depends on the program and its schedule alone: no task's binding is checked here (a
// schedule legal only for some tasks, such as the sparse nnz_split that needs an NNZ dim, still
// has its name).
std::string kernel_name(const dsl::Program& p) {
  const FamilyGenerator* f = family_of(p);
  if (!f) throw std::runtime_error("cannot name '" + p.name + "': " + no_family(p));
  try {
    return f->kernel_name(p);
  } catch (const detail::Refused& r) {
    throw std::runtime_error("cannot name '" + p.name + "': " + r.what());
  }
}

// Replaces q's schedule with s (the algorithm untouched).
static void set_schedule(dsl::Program& q, const Schedule& s) {
  q.schedule.clear();
  q.schedule_keys.clear();
  for (const auto& [key, text] : s) {
    q.schedule.emplace_back(key, detail::schedule_value(text));
    q.schedule_keys[key] = {};
  }
}

dsl::Program with_schedule(const dsl::Program& p, const Schedule& s) {
  dsl::Program q = p;
  set_schedule(q, s);
  return q;
}

std::string schedule_text(const Schedule& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].first + " = " + s[i].second;
  return out;
}

Schedule Space::schedule(size_t index) const {
  Schedule s(keys.size());
  for (size_t k = keys.size(); k-- > 0;) {
    s[k] = {keys[k], grids[k][index % grids[k].size()]};
    index /= grids[k].size();
  }
  return s;
}

std::vector<Space::ReasonCount> Space::by_reason() const {
  std::vector<ReasonCount> out(reasons.size());
  for (size_t r = 0; r < reasons.size(); ++r) out[r].reason = reasons[r];
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (verdicts[i] == 0) continue;
    ReasonCount& c = out[verdicts[i] - 1];
    if (c.count++ == 0) c.first = i;
  }
  return out;
}

Space schedule_space(const dsl::Program& p, const Binding& b) {
  Space space;
  const FamilyGenerator* f = family_of(p);
  if (!f) {
    // No family: the one (empty) schedule, refused.
    space.reasons.push_back(no_family(p));
    space.verdicts.push_back(1);
    return space;
  }
  const size_t n = f->knobs.size();
  size_t total = 1;
  for (const detail::Knob& k : f->knobs) {
    space.keys.push_back(k.key);
    space.grids.push_back(k.grid);
    total *= k.grid.size();
  }
  space.verdicts.reserve(total);
  std::map<std::string, uint32_t> reason_ids;
  // Odometer over the knobs' grids, the last knob turning fastest. One copy of the program takes
  // each schedule in turn (copying the algorithm per schedule was most of the time).
  std::vector<size_t> at(n, 0);
  dsl::Program q = p;
  detail::KnobReads reads;
  struct Stop {
    ~Stop() { detail::note_knob_reads(nullptr); }
  } stop;
  while (true) {
    Schedule s;
    for (size_t k = 0; k < n; ++k) s.emplace_back(f->knobs[k].key, f->knobs[k].grid[at[k]]);
    set_schedule(q, s);
    reads.last = -1;
    detail::note_knob_reads(&reads);
    Support r = can_implement(q, b);
    detail::note_knob_reads(nullptr);
    // The knobs after the last one read turn through the rest of their block with the same verdict.
    size_t first_free = n;  // the knobs from here on did not decide this verdict
    uint32_t verdict = 0;
    if (r.ok) {
      space.legal.push_back(s);
    } else {
      auto [it, fresh] = reason_ids.emplace(r.reason, static_cast<uint32_t>(space.reasons.size() + 1));
      if (fresh) space.reasons.push_back(r.reason);
      verdict = it->second;
      first_free = static_cast<size_t>(reads.last + 1);
    }
    // Schedules left in the block of knobs first_free..n-1, this one included.
    size_t left = 1, offset = 0;
    for (size_t k = first_free; k < n; ++k) {
      left *= f->knobs[k].grid.size();
      offset = offset * f->knobs[k].grid.size() + at[k];
    }
    space.verdicts.insert(space.verdicts.end(), left - offset, verdict);
    for (size_t k = first_free; k < n; ++k) at[k] = 0;
    size_t k = first_free;
    while (k > 0 && ++at[k - 1] == f->knobs[k - 1].grid.size()) at[--k] = 0;
    if (k == 0) break;
  }
  return space;
}

// The CUTLASS kernels (gemm's tensor-core mainloops, conv's mainloop = tma) need sm_90a and libcuda.
CompileNeeds compile_needs(const dsl::Program& p) {
  CompileNeeds n;
  if (p.family == "conv") {
    bool tma = false;
    try {
      tma = detail::conv_uses_tma(p);
    } catch (const detail::Refused&) {
      return n;  // a refused program is never compiled
    }
    if (!tma) return n;
  } else {
    if (p.family != "gemm") return n;
    const dsl::ScheduleValue* v = p.knob("mainloop");
    if (v && v->kind == dsl::ScheduleValue::Kind::ident && v->ident == "simt") return n;
  }
  n.arch = "sm_90a";
  n.extra_flags = {"--expt-relaxed-constexpr"};
  n.libs = {"cuda"};
  return n;
}

namespace detail {
const FamilyGenerator* family_by_name(const std::string& family) { return lookup(family); }
}  // namespace detail

}  // namespace ksol::codegen
