// The built-in expert and random agents (see expert.h).
#include "agents/expert.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "codegen/common.h"

namespace ksol::agents {
namespace {

// Every family with a generator is searchable; knobs and defaults come from the generator.
const codegen::detail::FamilyGenerator* generator_of(const std::string& family) {
  return codegen::detail::family_by_name(family);
}

using codegen::detail::value_text;

bool is_int(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

std::string value_of(const codegen::Schedule& s, const std::string& key) {
  for (auto& [k, v] : s)
    if (k == key) return v;
  return "";
}

// The numbers in a list value's text: "[128, 64, 16]" gives 128, 64, 16.
std::vector<double> numbers_in(const std::string& t) {
  std::vector<double> out;
  for (size_t i = 0; i < t.size();) {
    if (std::isdigit(static_cast<unsigned char>(t[i]))) {
      size_t j = i;
      while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
      out.push_back(std::stod(t.substr(i, j - i)));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

double elem_bytes_of(const dsl::Program& p) {
  double b = 0;
  for (auto& x : p.inputs) {
    switch (x.type) {
      case dsl::Type::f64: case dsl::Type::i64: b = std::max(b, 8.0); break;
      case dsl::Type::bf16: case dsl::Type::f16: b = std::max(b, 2.0); break;
      default: b = std::max(b, 4.0); break;
    }
  }
  return b > 0 ? b : 4;
}

// The values one move offers for its key, given the current value and the family's grid.
std::vector<std::string> move_values(const Move& m, const std::string& cur, const std::vector<std::string>& grid) {
  std::vector<std::string> out;
  long long c = is_int(cur) ? std::stoll(cur) : 0;
  switch (m.verb) {
    case Move::Verb::set:
      for (auto& a : m.alternatives) {
        switch (a.kind) {
          case MoveValue::Kind::integer: out.push_back(std::to_string(a.lo)); break;
          case MoveValue::Kind::ident: out.push_back(a.ident); break;
          case MoveValue::Kind::range:
            for (long long v = 1; v <= a.hi; v *= 2)
              if (v >= a.lo) out.push_back(std::to_string(v));
            break;
          case MoveValue::Kind::list: {
            std::string s = "[";
            for (size_t i = 0; i < a.list.size(); ++i) s += (i ? ", " : "") + std::to_string(a.list[i]);
            out.push_back(s + "]");
            break;
          }
        }
      }
      break;
    case Move::Verb::double_: if (c > 0) out.push_back(std::to_string(c * 2)); break;
    case Move::Verb::halve: if (c > 1) out.push_back(std::to_string(c / 2)); break;
    case Move::Verb::increase:
      for (auto& g : grid)
        if (is_int(g) && std::stoll(g) > c) { out.push_back(g); break; }
      break;
    case Move::Verb::decrease:
      for (auto it = grid.rbegin(); it != grid.rend(); ++it)
        if (is_int(*it) && std::stoll(*it) < c) { out.push_back(*it); break; }
      break;
    default: break;
  }
  return out;
}

}  // namespace

std::string bottleneck_of(const Profile& p) {
  if (!p.bottleneck.empty()) return p.bottleneck;  // measured (Nsight Compute)
  if (p.bound == "compute") return "compute";
  if (p.pct_sol >= 0.3) return "memory_bandwidth";
  return "memory_latency";
}

codegen::Schedule full_schedule(const dsl::Program& p) {
  codegen::Schedule s;
  const auto* g = generator_of(p.family);
  if (!g) {
    for (auto& [k, v] : p.schedule) s.emplace_back(k, value_text(v));
    return s;
  }
  for (auto& knob : g->knobs) {
    const dsl::ScheduleValue* v = p.knob(knob.key);
    s.emplace_back(knob.key, v ? value_text(*v) : knob.default_value);
  }
  return s;
}

Features features_of(const dsl::Program& p, const Profile& prof) {
  Features f;
  std::string bn = bottleneck_of(prof);
  f.str["bottleneck"] = bn;
  f.str["family"] = p.family;
  f.str["language"] = "dsl";
  if (!prof.precision.empty()) f.str["precision"] = prof.precision;
  f.num["sm_count"] = prof.sm_count;
  f.num["kernels"] = 1;
  f.num["spills"] = 0;
  f.num["persistent"] = 0;
  f.num["elem_bytes"] = elem_bytes_of(p);
  if (prof.pct_sol >= 0) {
    f.num["pct_sol"] = prof.pct_sol;
    if (prof.bound == "memory") f.num["achieved_bw_frac"] = prof.pct_sol;
    if (prof.bound == "compute") f.num["achieved_flop_frac"] = prof.pct_sol;
  }
  for (auto& [k, v] : prof.metrics) f.num[k] = v;  // measured beats the roofline's estimate
  codegen::Schedule s = full_schedule(p);
  for (auto& [k, v] : s) {
    if (is_int(v)) f.num[k] = static_cast<double>(std::stoll(v));
    else f.str[k] = v;
  }
  double items = f.num.count("items_per_thread") ? f.num["items_per_thread"] : 1;
  f.num["accumulators"] = items;
  if (!f.num.count("unroll")) f.num["unroll"] = 1;
  f.num["uses_shared"] = value_of(s, "cache_row") == "shared" || value_of(s, "reduction") == "block" ? 1 : 0;
  f.num["sm"] = prof.sm;
  if (p.family == "gemm" || p.family == "conv") {
    // The CTA tile "[m, n, k]", the main loop's instructions, and the output tiles at the
    // representative size (tile_mn, tile_waves and wave_efficiency are derived from them). A
    // conv's implicit GEMM has a row per output pixel (N*H*W) and a column per filter (K).
    std::vector<double> tile = numbers_in(value_of(s, "tile"));
    if (tile.size() == 3) {
      f.num["tile_m"] = tile[0], f.num["tile_n"] = tile[1], f.num["tile_k"] = tile[2];
      auto dim = [&](const char* d) { return prof.dims.count(d) ? prof.dims.at(d) : -1.0; };
      double m = p.family == "gemm" ? dim("M") : (dim("N") > 0 && dim("H") > 0 && dim("W") > 0 ? dim("N") * dim("H") * dim("W") : -1);
      double n = p.family == "gemm" ? dim("N") : dim("K");
      if (m > 0 && n > 0) f.num["output_tiles"] = std::ceil(m / tile[0]) * std::ceil(n / tile[1]);
    }
    // conv: the tensor cores where its mainloop (tma or mma, named or taken by auto) multiplies
    // on them; thread_tile outputs per thread on CUDA cores.
    f.num["uses_tensor_cores"] = p.family == "conv" ? (codegen::detail::conv_uses_tensor_cores(p) ? 1 : 0)
                                                    : value_of(s, "mainloop") == "simt" ? 0 : 1;
    // The math unit a conv's or a GEMM's products may use: the tensor cores for 16-bit data or
    // TF32 products. For a GEMM it replaces the schedule's math knob (precise or fast), which no
    // rule reads; with that knob in its place no card requiring "math == tensor" was offered.
    if (p.family == "conv") f.str["math"] = codegen::detail::conv_allows_tensor_cores(p) ? "tensor" : "fma";
    if (p.family == "gemm") f.str["math"] = codegen::detail::gemm_allows_tensor_cores(p) ? "tensor" : "fma";
    std::vector<double> tt = numbers_in(value_of(s, "thread_tile"));
    if (p.family == "conv" && tt.size() == 2) f.num["thread_outputs"] = tt[0] * tt[1];
  }

  // Extents: the row length is the reduced dim's extent; rows the product of the others.
  double total = 1;
  for (auto& d : p.dims)
    if (prof.dims.count(d)) total *= prof.dims.at(d);
  if (p.family == "rowwise") {
    std::string red;
    int passes = 0;
    for (auto& d : p.defs)
      if (d.reduce != dsl::ReduceOp::none) {
        red = d.over_extent;
        ++passes;
      }
    if (!red.empty() && prof.dims.count(red)) {
      double row_len = prof.dims.at(red);
      f.num["row_len"] = row_len;
      f.num["rows"] = row_len > 0 ? total / row_len : 0;
      double rpb = f.num.count("rows_per_block") ? f.num["rows_per_block"] : 1;
      const double blocks = std::ceil(f.num["rows"] / std::max(1.0, rpb));
      f.num["grid_blocks"] = value_of(s, "grid") == "rows" ? blocks : std::min(65536.0, blocks);  // stride: at most 65536
    }
    f.num["row_passes"] = value_of(s, "cache_row") == "none" ? passes + 1 : 1;
  } else if (p.family == "elementwise") {
    double per_block = f.num["threads"] * std::max(1.0, f.num["vector"]) * std::max(1.0, items);
    if (per_block > 0) f.num["grid_blocks"] = std::min(65536.0, std::ceil(total / per_block));
  }
  return f;
}

std::vector<codegen::Schedule> apply_moves(const Method& m, const dsl::Program& parent, size_t max,
                                           std::vector<std::string>* notes) {
  const auto* g = generator_of(parent.family);
  codegen::Schedule base = full_schedule(parent);
  // key -> the distinct values the card's moves offer, in move order.
  std::vector<std::pair<std::string, std::vector<std::string>>> offers;
  for (const Move* mv : m.moves_for(parent.family)) {
    if (mv->key.empty()) {
      if (notes) notes->push_back(std::string(verb_name(mv->verb)) + ": not a schedule edit, skipped by the built-in expert");
      continue;
    }
    std::vector<std::string> grid;
    if (g)
      for (auto& k : g->knobs)
        if (k.key == mv->key) grid = k.grid;
    if (g && grid.empty()) {
      if (notes) notes->push_back("'" + mv->text + "': key " + mv->key + " is not a knob of the " + parent.family + " generator");
      continue;
    }
    std::string cur = value_of(base, mv->key);
    auto it = std::find_if(offers.begin(), offers.end(), [&](auto& o) { return o.first == mv->key; });
    if (it == offers.end()) {
      offers.push_back({mv->key, {}});
      it = offers.end() - 1;
    }
    for (auto& v : move_values(*mv, cur, grid))
      if (v != cur && std::find(it->second.begin(), it->second.end(), v) == it->second.end()) it->second.push_back(v);
  }
  offers.erase(std::remove_if(offers.begin(), offers.end(), [](auto& o) { return o.second.empty(); }), offers.end());
  // Vector widths: 16-byte accesses first (the widest one load or store instruction moves: vector
  // 4 for f32, 8 for bf16), then narrower ones, widest first; wider than 16 bytes last (two
  // instructions and more registers for no more bytes per instruction).
  const double eb = elem_bytes_of(parent);
  for (auto& [key, vals] : offers) {
    if (key != "vector") continue;
    auto rank = [&](const std::string& v) {
      double bytes = is_int(v) ? static_cast<double>(std::stoll(v)) * eb : 0;
      return bytes == 16 ? -1e9 : bytes < 16 ? -bytes : bytes;
    };
    std::stable_sort(vals.begin(), vals.end(), [&](const std::string& x, const std::string& y) { return rank(x) < rank(y); });
  }

  std::vector<codegen::Schedule> out;
  auto add = [&](const codegen::Schedule& s) {
    if (s != base && std::find(out.begin(), out.end(), s) == out.end() && out.size() < max) out.push_back(s);
  };
  auto set = [](codegen::Schedule s, const std::string& key, const std::string& v) {
    bool found = false;
    for (auto& kv : s)
      if (kv.first == key) kv.second = v, found = true;
    if (!found) s.emplace_back(key, v);
    return s;
  };
  // Every key together (the card's full edit), odometer over the alternatives.
  if (!offers.empty()) {
    std::vector<size_t> at(offers.size(), 0);
    while (true) {
      codegen::Schedule s = base;
      for (size_t i = 0; i < offers.size(); ++i) s = set(s, offers[i].first, offers[i].second[at[i]]);
      add(s);
      size_t k = offers.size();
      while (k > 0 && ++at[k - 1] == offers[k - 1].second.size()) at[--k] = 0;
      if (k == 0) break;
    }
  }
  // Then each key alone (when the combination is refused, a part may still help).
  if (offers.size() > 1)
    for (auto& [key, vals] : offers)
      for (auto& v : vals) add(set(base, key, v));
  return out;
}

std::vector<Proposal> ExpertAgent::propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                           const std::set<std::string>& exclude, std::vector<std::string>* log) {
  Features f = features_of(parent, prof);
  derive_features(k_, &f);
  ChooseOptions o;
  o.max = 8;
  o.dsl_only = true;
  o.exclude = exclude;
  Trace trace;
  std::vector<Choice> choices = choose(k_, f, o, &trace);
  std::vector<Proposal> out;
  if (choices.empty() && log) {
    log->push_back("expert: no method applies (" + f.str["bottleneck"] + "/" + parent.family + ")");
    for (auto& l : trace.lines) log->push_back("expert:   " + l);
  }
  for (const Choice& c : choices) {
    const Method* m = k_.method(c.method);
    if (!m) continue;
    std::string why = explain(c);
    if (log) log->push_back("expert: " + why);
    std::vector<std::string> notes;
    std::vector<codegen::Schedule> scheds = apply_moves(*m, parent, 24, &notes);
    if (log)
      for (auto& n : notes) log->push_back("expert:   " + c.method + ": " + n);
    for (auto& s : scheds) {
      dsl::Program q = codegen::with_schedule(parent, s);
      codegen::Support sup = codegen::can_implement(q, b);
      if (!sup.ok) {
        if (log) log->push_back("expert:   " + c.method + ": refused {" + codegen::schedule_text(s) + "}: " + sup.reason);
        continue;
      }
      out.push_back({std::move(q), s, c.method, why});
    }
  }
  return out;
}

std::vector<Proposal> RandomAgent::propose(const dsl::Program& parent, const Profile&, const codegen::Binding& b,
                                           const std::set<std::string>&, std::vector<std::string>* log) {
  std::string key = parent.name + "/" + parent.family + "/" + std::to_string(parent.dims.size());
  for (auto& d : parent.dims) key += "," + d;
  auto it = spaces_.find(key);
  if (it == spaces_.end()) {
    // Uniform random search without replacement: one seeded permutation of the legal schedules,
    // walked in order; each call starts one further on, so the loop (which takes the first
    // schedule it has not tried) draws the next, and the ones after it can be built ahead.
    Space sp;
    sp.order = codegen::schedule_space(parent, b).legal;
    std::shuffle(sp.order.begin(), sp.order.end(), rng_);
    it = spaces_.emplace(key, std::move(sp)).first;
  }
  Space& sp = it->second;
  std::vector<Proposal> out;
  if (sp.order.empty()) {
    if (log) log->push_back("random: the schedule space of " + parent.name + " holds no legal schedule");
    return out;
  }
  codegen::Schedule base = full_schedule(parent);
  for (size_t k = sp.next; k < sp.order.size() && out.size() < batch_; ++k) {
    const codegen::Schedule& s = sp.order[k];
    if (s == base) continue;
    out.push_back({codegen::with_schedule(parent, s), s, "random",
                   "drawn uniformly (without replacement) from " + std::to_string(sp.order.size()) + " legal schedules"});
  }
  sp.next = std::min(sp.next + 1, sp.order.size());
  return out;
}

std::unique_ptr<Agent> make_agent(const std::string& name, const Knowledge& k, uint64_t seed) {
  if (name == "expert") return std::make_unique<ExpertAgent>(k, seed);
  if (name == "random") return std::make_unique<RandomAgent>(seed);
  throw std::invalid_argument("unknown agent '" + name + "' (expert | random)");
}

}  // namespace ksol::agents
