// Guards for schedules by problem size (see dispatch.h).
#include "search/dispatch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace ksol::search {
namespace {

dsl::GuardTerm term(std::vector<std::string> dims, int64_t mod, std::string op, int64_t value) {
  dsl::GuardTerm g;
  g.dims = std::move(dims);
  g.mod = mod;
  g.op = std::move(op);
  g.value = value;
  return g;
}

}  // namespace

std::optional<DecisionList> learn_guards(const dsl::Program& p, const std::vector<SizeDims>& sizes, const std::vector<size_t>& assign,
                                         size_t max_guards, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<DecisionList> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (sizes.empty() || sizes.size() != assign.size()) return fail("no sizes");
  {
    std::set<size_t> comps(assign.begin(), assign.end());
    if (comps.size() > max_guards + 1) return fail("more than " + std::to_string(max_guards) + " guards would be needed");
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t j = i + 1; j < sizes.size(); ++j)
        if (sizes[i].dims == sizes[j].dims && assign[i] != assign[j])
          return fail("sizes " + sizes[i].name + " and " + sizes[j].name + " have the same dims but different schedules");
    max_guards = std::min(max_guards, sizes.size() - 1);
  }
  const std::vector<std::string>& dims = p.dims;
  // The candidate terms in order of preference: misalignment of a dim that is some tensor's
  // innermost (contiguous) extent, smallest modulus first (the weakest claim the sizes support);
  // thresholds on the product of every dim, then on each dim; misalignment of the other dims.
  std::vector<std::string> inner, outer;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const dsl::Param& prm : *list)
      if (!prm.extents.empty() && !dsl::extent_is_number(prm.extents.back()) &&
          std::find(inner.begin(), inner.end(), prm.extents.back()) == inner.end())
        inner.push_back(prm.extents.back());
  for (const std::string& d : dims)
    if (std::find(inner.begin(), inner.end(), d) == inner.end()) outer.push_back(d);
  std::vector<dsl::GuardTerm> terms;
  for (const std::string& d : inner)
    for (int64_t m : {2, 4, 8, 16}) terms.push_back(term({d}, m, "!=", 0));
  std::vector<std::vector<std::string>> products;
  if (dims.size() > 1) products.push_back(dims);
  for (const std::string& d : dims) products.push_back({d});
  for (const auto& prod : products) {
    std::set<double> values;
    for (const SizeDims& s : sizes) {
      double v = 1;
      for (const std::string& d : prod) v *= static_cast<double>(s.dims.at(d));
      values.insert(v);
    }
    for (auto it = values.begin(); it != values.end() && std::next(it) != values.end(); ++it) {
      double mid = std::sqrt(*it * *std::next(it));
      if (!(mid < 9.2e18)) continue;
      int64_t t = static_cast<int64_t>(std::llround(mid));
      if (static_cast<double>(t) <= *it) t = static_cast<int64_t>(*it) + 1;
      terms.push_back(term(prod, 0, ">=", t));
      terms.push_back(term(prod, 0, "<", t));
    }
  }
  for (const std::string& d : outer)
    for (int64_t m : {2, 4, 8, 16}) terms.push_back(term({d}, m, "!=", 0));
  // Which sizes each term takes; of terms that take the same sizes, the first (preferred) alone.
  std::vector<std::vector<bool>> holds;
  {
    std::vector<dsl::GuardTerm> kept;
    for (const dsl::GuardTerm& g : terms) {
      std::vector<bool> h(sizes.size());
      for (size_t k = 0; k < sizes.size(); ++k) h[k] = dsl::guard_holds({g}, sizes[k].dims);
      if (std::find(holds.begin(), holds.end(), h) != holds.end()) continue;
      holds.push_back(h);
      kept.push_back(g);
    }
    terms = kept;
  }
  // The shortest lists first; among lists of one length, the preferred terms (the least sum of
  // their ranks), then the fewest sizes taken by guards (the exceptions guarded, the common case last).
  struct Found {
    std::vector<size_t> terms;
    std::vector<size_t> to;
    size_t otherwise = 0;
    size_t rank = 0, taken = 0;
  };
  std::optional<Found> best;
  std::vector<size_t> chosen, to;
  std::function<void(std::vector<size_t>&, size_t, size_t, size_t)> walk = [&](std::vector<size_t>& left, size_t depth, size_t rank, size_t taken) {
    std::set<size_t> comps;
    for (size_t k : left) comps.insert(assign[k]);
    if (comps.size() == 1) {
      if (!best || rank < best->rank || (rank == best->rank && taken < best->taken))
        best = Found{chosen, to, *comps.begin(), rank, taken};
      return;
    }
    if (depth == 0) return;
    for (size_t t = 0; t < terms.size(); ++t) {
      std::vector<size_t> in, rest;
      for (size_t k : left) (holds[t][k] ? in : rest).push_back(k);
      if (in.empty() || rest.empty()) continue;
      bool one = true;
      for (size_t k : in) one = one && assign[k] == assign[in[0]];
      if (!one) continue;
      chosen.push_back(t);
      to.push_back(assign[in[0]]);
      walk(rest, depth - 1, rank + t, taken + in.size());
      chosen.pop_back();
      to.pop_back();
    }
  };
  std::vector<size_t> all(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) all[k] = k;
  for (size_t len = 0; len <= max_guards && !best; ++len) walk(all, len, 0, 0);
  if (!best) return fail("no decision list of at most " + std::to_string(max_guards) + " one-term guards over the dims separates the sizes' schedules");
  DecisionList list;
  for (size_t i = 0; i < best->terms.size(); ++i) {
    list.when.push_back({terms[best->terms[i]]});
    list.to.push_back(best->to[i]);
  }
  list.otherwise = best->otherwise;
  return list;
}

dsl::Program dispatch_program(const dsl::Program& base, const std::vector<dsl::Program>& components, const DecisionList& list) {
  dsl::Program p = dsl::variant(base, base.guarded.size());
  for (size_t i = 0; i < list.when.size(); ++i) {
    const dsl::Program& c = components.at(list.to[i]);
    dsl::GuardedSchedule g;
    g.when = list.when[i];
    g.schedule = c.schedule;
    g.schedule_keys = c.schedule_keys;
    p.guarded.push_back(std::move(g));
  }
  const dsl::Program& d = components.at(list.otherwise);
  p.schedule = d.schedule;
  p.schedule_keys = d.schedule_keys;
  return p;
}

}  // namespace ksol::search
