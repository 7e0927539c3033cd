#include "agents/kernel_loop.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <set>
#include <stdexcept>

#include "codegen/codegen.h"
#include "compile/compiler.h"
#include "core/hash.h"
#include "core/stop.h"
#include "core/util.h"

namespace fs = std::filesystem;

namespace ksol::agents {

AnswerLanguage parse_answer_language(const std::string& s) {
  if (s == "dsl") return AnswerLanguage::dsl;
  if (s == "cuda") return AnswerLanguage::cuda;
  if (s == "either") return AnswerLanguage::either;
  throw std::invalid_argument("--answer " + s + ": expected dsl, cuda or either");
}

const char* answer_language_name(AnswerLanguage a) {
  switch (a) {
    case AnswerLanguage::dsl: return "dsl";
    case AnswerLanguage::cuda: return "cuda";
    case AnswerLanguage::either: return "either";
  }
  return "?";
}

std::string default_cuda_card() { return read_file(source_root() + "/docs/CUDA_CARD.md"); }

Kernel kernel_from_file(const std::string& path) {
  Kernel k;
  k.origin = path;
  k.source = read_file(path);
  if (fs::path(path).extension() == ".ksol") {
    k.language = "dsl";
    k.program = dsl::parse_program(k.source, path);
  } else {
    k.language = "cuda";
  }
  return k;
}

namespace {

const std::vector<std::string> kCudaTags = {"cuda", "cu", "c++", "cpp"};

bool is_cuda_tag(const std::string& l) { return std::find(kCudaTags.begin(), kCudaTags.end(), l) != kCudaTags.end(); }

}  // namespace

std::optional<std::string> read_cuda_answer(const std::string& text, const std::string& finish_reason, int max_tokens, Rejection* why,
                                            const std::string& asked) {
  auto reject = [&](Rejection::Kind k, std::string m) -> std::optional<std::string> {
    why->kind = k;
    why->message = std::move(m);
    return std::nullopt;
  };
  std::string code = llm::extract_code_block(text, kCudaTags);
  if (code.empty()) {
    if (finish_reason == "length")
      return reject(Rejection::Kind::truncated, "the answer was cut off at the token limit (finish reason \"length\", " +
                                                    std::to_string(max_tokens) + " tokens asked for; --llm-max-tokens raises it)");
    for (const std::string& lang : llm::code_block_languages(text))
      if (!is_cuda_tag(lang))
        return reject(Rejection::Kind::wrong_language,
                      "the answer is a ```" + (lang.empty() ? std::string("(unlabelled)") : lang) + " block, but " + asked +
                          " was asked for, in a ```cuda block");
    if (text.find("```") != std::string::npos)
      return reject(Rejection::Kind::unclosed_block, "the ```cuda block is not closed (the answer ends inside it)");
    return reject(Rejection::Kind::no_code_block, "the answer holds no fenced ```cuda block");
  }
  std::vector<StaticFinding> f = static_scan(code);
  if (!f.empty())
    return reject(Rejection::Kind::source_scan, "gate 1 (the source scan) refuses the kernel:\n" + format_findings("answer.cu", code, f));
  // The scan ignores comments and strings, so a ksol_run named only there is caught at the link;
  // this check only spares a compile of an answer that plainly lacks the entry point.
  if (code.find("ksol_run") == std::string::npos)
    return reject(Rejection::Kind::no_entry_point,
                  "the CUDA answer defines no entry point: it must export extern \"C\" int ksol_run(const ksol_call* call) "
                  "(include/ksol/abi.h)");
  return code;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// What makes two kernels the same: a program's canonical text (comments and layout aside), a
// CUDA source's text.
std::string kernel_key(const Kernel& k) { return sha256_hex(k.program ? dsl::print_source(*k.program) : k.source); }

std::string us(double v) { return v > 0 ? sig(v, 4) + " us" : "-"; }

// The task as a kernel writer needs it: tensors in the ABI's order, dims in the ABI's order.
std::string task_text(const Task& t) {
  std::ostringstream o;
  o << "# Task " << t.name << " (precision policy " << t.precision << ")\n\n";
  if (!t.description.empty()) o << t.description << "\n\n";
  o << "Tensors, in the order ksol_run receives them (call->tensors[i]):\n";
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const TensorSpec& ts = t.tensors[i];
    o << "- [" << i << "] " << (ts.role == Role::in ? "input " : "output ") << ts.name << ": " << dtype_name(ts.dtype) << "[";
    for (size_t j = 0; j < ts.shape.size(); ++j) o << (j ? ", " : "") << ts.shape[j];
    o << "]\n";
  }
  o << "Dims, in the order of call->dims:";
  for (size_t i = 0; i < t.dims.size(); ++i) o << (i ? ", " : " ") << t.dims[i];
  o << "\n";
  return o.str();
}

// Where a kernel stands: its time and %SOL per size, and the profile (filtered by its class).
std::string standing_text(const search::Outcome& out, const Profile& prof) {
  std::ostringstream o;
  for (const search::SizeResult& z : out.sizes)
    if (z.status == Status::ok) o << "- " << z.size << ": " << us(z.median_us) << ", " << fixed(z.pct_sol * 100, 1) << "% of speed-of-light (" << z.bound << "-bound)\n";
  if (prof.pct_sol >= 0)
    o << "Bottleneck class at the size that weighs most: " << bottleneck_of(prof) << " (" << prof.source << ").\n";
  if (!prof.summary.empty()) o << "\nNsight Compute, the metrics that matter for this class:\n" << prof.summary;
  return o.str();
}

std::string kernel_block(const Kernel& k) {
  return "```" + std::string(k.language == "dsl" ? "ksol" : "cuda") + "\n" + k.source + (k.source.empty() || k.source.back() == '\n' ? "" : "\n") + "```\n";
}

std::string trajectory_text(const std::vector<Tried>& tried, size_t last = 12) {
  if (tried.empty()) return "Nothing has been tried yet.\n";
  std::ostringstream o;
  size_t from = tried.size() > last ? tried.size() - last : 0;
  for (size_t i = from; i < tried.size(); ++i) {
    const Tried& x = tried[i];
    o << "- branch " << x.branch << ", " << x.role << " (" << x.language << (x.index >= 0 ? ", c" + std::to_string(x.index) : std::string()) << "): " << x.result << "\n";
    if (!x.diagnosis.empty()) o << "  diagnosis: " << first_line(x.diagnosis) << "\n";
  }
  return o.str();
}

std::string answer_rules(AnswerLanguage a) {
  switch (a) {
    case AnswerLanguage::dsl:
      return "Answer with exactly one complete program in a fenced block that starts with ```ksol and ends with ```, and nothing after "
             "it. Keep the kernel's name and tensors.";
    case AnswerLanguage::cuda:
      return "Answer with exactly one complete CUDA source in a fenced block that starts with ```cuda and ends with ```, and nothing "
             "after it. It must export extern \"C\" int ksol_run(const ksol_call* call) and queue all its work on call->stream.";
    case AnswerLanguage::either:
      return "Answer with exactly one complete kernel, either a ksol DSL program in a ```ksol block or a CUDA source in a ```cuda "
             "block (exporting extern \"C\" int ksol_run(const ksol_call* call), all work on call->stream), and nothing after it. "
             "Choose the language that can express the plan.";
  }
  return "";
}

}  // namespace

std::string RolePrompts::planner_system() {
  return "You plan the next optimisation of a GPU kernel. A harness that trusts no kernel checks every candidate on several seeds "
         "against a float64 reference, then times it; only a correct, faster kernel counts. You get the task, the current kernel, "
         "where it stands (times, %SOL, the bottleneck class and the profile metrics that matter for it), the method cards ksol's "
         "decision table chose for it, and what was tried so far with what became of it.\n\nAnswer with a plan of at most ten "
         "lines: which method to apply, what to change in the kernel and why it should help here. Write no code. Do not plan "
         "what the trajectory shows has failed.";
}

std::string RolePrompts::coder_system(AnswerLanguage a, const std::string& dsl_card, const std::string& cuda_card) {
  std::string s =
      "You write GPU kernels for ksol. A harness that trusts no kernel checks every candidate on several seeds and input "
      "distributions against a float64 reference, then times it; only a correct, faster kernel counts.\n\n" +
      answer_rules(a) + "\n";
  if (a != AnswerLanguage::cuda) s += "\n# The ksol DSL\n\n" + dsl_card;
  if (a != AnswerLanguage::dsl) s += "\n# CUDA kernels for ksol\n\n" + cuda_card;
  return s;
}

std::string RolePrompts::reviewer_system() {
  return "You review a GPU kernel that a harness refused or that failed one of its gates (the source scan, the compile, "
         "correctness, the timing gate). From the result and the source, say in at most eight lines what is wrong and what "
         "must change to fix it. Write no code.";
}

const Kernel* KernelLoopResult::best_kernel() const {
  const search::Attempt* b = result.best_attempt();
  return b && static_cast<size_t>(b->index) < kernels.size() ? &kernels[static_cast<size_t>(b->index)] : nullptr;
}

nlohmann::json KernelLoopResult::to_json() const {
  auto spend_json = [](const LlmSpend& s) {
    return nlohmann::json{{"prompt_tokens", s.usage.prompt_tokens}, {"completion_tokens", s.usage.completion_tokens},
                          {"requests", s.usage.requests}, {"dollars", s.usage.dollars}};
  };
  nlohmann::json j = result.to_json();
  for (size_t i = 0; i < kernels.size() && i < j["trajectory"].size(); ++i) {
    j["trajectory"][i]["language"] = kernels[i].language;
    if (auto it = spend_of.find(static_cast<int>(i)); it != spend_of.end()) j["trajectory"][i]["llm"] = spend_json(it->second);
  }
  if (const Kernel* k = best_kernel(); k && j.contains("best")) {
    j["best"]["language"] = k->language;
    j["best"]["source"] = k->source;
    if (k->language == "cuda") j["best"].erase("program");
  }
  j["llm"] = spend_json(spend);
  if (const search::Attempt* b = result.best_attempt(); b && !result.use_baseline)
    if (auto it = spend_of.find(b->index); it != spend_of.end()) j["llm"]["best_kernel"] = spend_json(it->second);
  nlohmann::json tr = nlohmann::json::array();
  for (const Tried& x : tried)
    tr.push_back({{"branch", x.branch}, {"role", x.role}, {"language", x.language}, {"attempt", x.index}, {"result", x.result},
                  {"diagnosis", x.diagnosis}});
  j["answers"] = tr;
  return j;
}

namespace {

// The fastest ok baseline per size, as one outcome.
search::Outcome fastest_per_size(const std::map<std::string, search::Outcome>& bases, std::string* best_name) {
  search::Outcome best;
  best.status = Status::ok;
  std::map<std::string, search::SizeResult> at;
  for (auto& [name, o] : bases)
    for (const search::SizeResult& z : o.sizes)
      if (z.status == Status::ok && z.median_us > 0 && (!at.count(z.size) || z.median_us < at[z.size].median_us)) at[z.size] = z;
  for (auto& [s, z] : at) best.sizes.push_back(z);
  if (best.sizes.empty()) best.status = Status::failed;
  double top = 0;
  for (auto& [name, o] : bases)
    if (o.ok()) {
      double sp = search::speedup(o, best);  // > 1 when o is slower than the fastest per size
      if (best_name->empty() || sp < top) *best_name = name, top = sp;
    }
  return best;
}

class Loop {
 public:
  Loop(const Task& t, llm::Client& c, const Knowledge& k, KernelEvaluator& ev, const KernelLoopOptions& o)
      : t_(t), client_(c), k_(k), ev_(ev), o_(o), b_(search::binding_of(t)) {}

  KernelLoopResult run(const Kernel& start);

 private:
  void say(const std::string& l) {
    res_.result.log.push_back("llm: " + l);
    if (o_.progress) o_.progress("llm: " + l);
  }
  // One request: its purpose, its cost on the task and on the branch, and its store row.
  llm::Answer ask(const std::string& purpose, const std::string& system, const std::string& user, LlmSpend* branch) {
    llm::Request r;
    r.purpose = purpose;
    r.task = t_.name;
    r.max_tokens = o_.max_tokens;
    r.system = system;
    r.messages.push_back({"user", user});
    llm::Answer a = client_.ask(r);
    for (llm::Usage* u : {&res_.spend.usage, &branch->usage}) {
      u->prompt_tokens += a.usage.prompt_tokens;
      u->completion_tokens += a.usage.completion_tokens;
      u->requests += a.cached ? 0 : a.attempts;
      u->dollars += a.usage.dollars;
    }
    if (a.record_id) res_.spend.request_ids.push_back(a.record_id), branch->request_ids.push_back(a.record_id);
    if (a.deferred) {
      // Batch mode: the loop stops at the request whose answer comes later, so that the resumed
      // run, replaying it, asks exactly the requests this one wrote.
      waiting_ = true;
      say("the " + purpose + " request " + a.error);
      outcome(a, "batched: " + a.error);
    } else if (!a.ok) {
      say("no answer to the " + purpose + " request: " + a.error);
    }
    return a;
  }
  void outcome(const llm::Answer& a, const std::string& o) {
    if (o_.outcome && a.record_id) o_.outcome(a.record_id, o);
  }
  Profile profile_of(int index);
  std::string planner_prompt(int parent, const Profile& prof, const std::vector<Choice>& cards);
  std::optional<Kernel> read_kernel(const llm::Answer& a, const Kernel& parent, Rejection* why);
  int evaluate(const Kernel& k, int parent, const std::string& method, const std::string& why, LlmSpend* branch);
  bool out_of_budget(std::string* why) const {
    if (stop_requested()) return *why = "interrupted", true;
    if (client_.exhausted(why)) return true;
    if (waiting_) return *why = "waiting for a batch answer", true;
    if (o_.budget_seconds > 0 && std::chrono::duration<double>(Clock::now() - t0_).count() >= o_.budget_seconds)
      return *why = "seconds", true;
    return false;
  }

  const Task& t_;
  llm::Client& client_;
  const Knowledge& k_;
  KernelEvaluator& ev_;
  const KernelLoopOptions& o_;
  codegen::Binding b_;
  KernelLoopResult res_;
  std::map<std::string, int> by_hash_;  // source hash -> the attempt that evaluated it
  std::set<std::string> methods_tried_;
  bool waiting_ = false;  // a request went into a batch
  Clock::time_point t0_ = Clock::now();
};

Profile Loop::profile_of(int index) {
  const search::Attempt& a = res_.result.trajectory[static_cast<size_t>(index)];
  Profile prof;
  prof.precision = t_.precision;
  if (const search::SizeResult* r = a.outcome.representative()) {
    prof.bound = r->bound;
    prof.pct_sol = r->pct_sol;
    if (const SizeSet* sz = t_.find_size(r->size)) prof.dims = sz->dims;
    std::string why;
    if (auto pr = ev_.profile(t_, res_.kernels[static_cast<size_t>(index)], r->size, &why)) {
      prof.metrics = pr->metrics;
      prof.bottleneck = pr->bottleneck;
      prof.source = "Nsight Compute, thresholds " + pr->thresholds;
      prof.summary = pr->summary;
    }
  }
  return prof;
}

std::string Loop::planner_prompt(int parent, const Profile& prof, const std::vector<Choice>& cards) {
  const Kernel& k = res_.kernels[static_cast<size_t>(parent)];
  std::ostringstream o;
  o << task_text(t_) << "\n# The current kernel (c" << parent << ", " << k.language << ")\n\n" << kernel_block(k);
  o << "\n# Where it stands\n\n" << standing_text(res_.result.trajectory[static_cast<size_t>(parent)].outcome, prof);
  o << "\n# Method cards the decision table chose\n\n";
  if (cards.empty()) o << "None applies" << (o_.family.empty() ? " (the kernel has no DSL family to look up)" : "") << "; choose the method yourself.\n";
  for (const Choice& c : cards)
    if (const Method* m = k_.method(c.method)) o << card_text(*m, o_.family) << "\n(" << explain(c) << ")\n\n";
  o << "\n# What was tried\n\n" << trajectory_text(res_.tried);
  o << "\nAnswers may be written in: " << answer_language_name(o_.answer) << ".\n";
  return o.str();
}

std::optional<Kernel> Loop::read_kernel(const llm::Answer& a, const Kernel& parent, Rejection* why) {
  const std::string asked = o_.answer == AnswerLanguage::cuda ? "a CUDA kernel (--answer cuda)"
                            : o_.answer == AnswerLanguage::dsl ? "a ksol DSL program (--answer dsl)"
                                                               : "a ksol DSL program or a CUDA kernel (--answer either)";
  bool cuda = o_.answer == AnswerLanguage::cuda;
  if (o_.answer == AnswerLanguage::either) {
    // The block the model wrote decides; an answer without one is read as the DSL's for the message.
    for (const std::string& l : llm::code_block_languages(a.text))
      if (is_cuda_tag(l)) cuda = true;
  }
  Kernel k;
  k.origin = "llm";
  if (cuda) {
    std::optional<std::string> src = read_cuda_answer(a.text, a.finish_reason, o_.max_tokens, why, asked);
    if (!src) return std::nullopt;
    k.language = "cuda";
    k.source = *src;
  } else {
    std::optional<dsl::Program> p = read_dsl_answer(a.text, a.finish_reason, o_.max_tokens, b_, why, asked);
    if (!p) return std::nullopt;
    if (parent.program && !same_signature(*p, *parent.program, &why->message)) {
      why->kind = Rejection::Kind::signature;
      return std::nullopt;
    }
    k.language = "dsl";
    k.source = dsl::print_source(*p);
    k.program = std::move(p);
  }
  if (auto it = by_hash_.find(kernel_key(k)); it != by_hash_.end()) {
    const search::Attempt& was = res_.result.trajectory[static_cast<size_t>(it->second)];
    why->kind = Rejection::Kind::repeats_tried;
    why->message = "the answer is c" + std::to_string(it->second) + " again (" +
                   (was.outcome.ok() ? "verified" : "failed: " + first_line(was.outcome.error)) + "); it is not evaluated twice";
    return std::nullopt;
  }
  return k;
}

// Evaluates a kernel as attempt `trajectory.size()`; the performance gate decides whether it is the new best.
int Loop::evaluate(const Kernel& k, int parent, const std::string& method, const std::string& why, LlmSpend* branch) {
  search::OptimizeResult& r = res_.result;
  search::Attempt at;
  at.index = static_cast<int>(r.trajectory.size());
  at.parent = parent;
  at.method = method;
  at.why = why;
  at.generation = parent < 0 ? 0 : r.generations;
  if (k.program) {
    at.program = *k.program;
    at.schedule = codegen::schedule_text(full_schedule(*k.program));
  }
  int64_t parent_id = parent >= 0 ? r.trajectory[static_cast<size_t>(parent)].outcome.candidate_id : 0;
  at.outcome = ev_.evaluate(t_, k, "c" + std::to_string(at.index), parent_id, method);
  if (at.outcome.kernel.empty()) at.outcome.kernel = k.language == "dsl" && k.program ? codegen::kernel_name(*k.program) : "c" + std::to_string(at.index) + "_cuda";
  at.at_seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  ++r.verified;
  const search::Attempt* best = r.best_attempt();
  if (at.outcome.ok()) {
    double gain = best ? search::speedup(best->outcome, at.outcome) : 0;
    if (!best || gain >= o_.gamma) {
      at.accepted = true;
      at.note = best ? "new best: " + fixed(gain, 3) + "x the previous" : "the first verified kernel";
    } else {
      at.note = "verified, " + fixed(gain, 3) + "x the best (below the gate's " + fixed(o_.gamma, 2) + "x)";
    }
  } else {
    at.note = "failed";
  }
  Kernel kept = k;
  if (kept.origin == "llm") kept.origin = "llm c" + std::to_string(at.index);
  by_hash_[kernel_key(k)] = at.index;
  res_.kernels.push_back(kept);
  if (branch) res_.spend_of[at.index] = *branch;
  r.trajectory.push_back(std::move(at));
  const search::Attempt& done = r.trajectory.back();
  if (done.accepted) r.best = done.index;
  return done.index;
}

KernelLoopResult Loop::run(const Kernel& start) {
  search::OptimizeResult& r = res_.result;
  r.task = t_.name;
  say("kernel loop: " + std::string(answer_language_name(o_.answer)) + " answers, from " + start.origin + " (" + start.language + ")");
  r.baselines = ev_.baselines(t_);
  r.baseline_best = fastest_per_size(r.baselines, &r.best_baseline);
  int s0 = evaluate(start, -1, "start", "the starting kernel (" + start.origin + ")", nullptr);
  if (!r.trajectory[static_cast<size_t>(s0)].outcome.ok()) {
    r.stop_reason = "seed_failed";
    r.use_baseline = true;
    say("the starting kernel failed: " + first_line(r.trajectory[0].outcome.error));
    r.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    return std::move(res_);
  }
  r.pct_sol_before = r.trajectory[0].outcome.pct_sol();
  int since_best = 0;
  for (int branch = 1; branch <= o_.branches; ++branch) {
    std::string why;
    if (out_of_budget(&why)) {
      r.stop_reason = why == "seconds" || why == "interrupted" ? why : "exhausted";
      say("stopped: " + why);
      break;
    }
    if (since_best >= o_.plateau) {
      r.stop_reason = "plateau";
      break;
    }
    r.generations = branch;
    const int parent = r.best;
    const Kernel& pk = res_.kernels[static_cast<size_t>(parent)];
    LlmSpend spent;
    // The Planner: the decision table's method cards for the parent, none tried before.
    Profile prof = profile_of(parent);
    std::vector<Choice> cards;
    if (!o_.family.empty()) {
      Features f;
      if (pk.program) {
        f = features_of(*pk.program, prof);
      } else {
        f.str["bottleneck"] = bottleneck_of(prof);
        f.str["family"] = o_.family;
        if (prof.pct_sol >= 0) f.num["pct_sol"] = prof.pct_sol;
        for (auto& [m, v] : prof.metrics) f.num[m] = v;
      }
      f.str["language"] = pk.language;
      derive_features(k_, &f);
      ChooseOptions co;
      co.max = static_cast<size_t>(std::max(1, o_.cards));
      co.dsl_only = o_.answer == AnswerLanguage::dsl;
      co.exclude = methods_tried_;
      cards = choose(k_, f, co);
    }
    std::string method = cards.empty() ? "llm" : "llm/" + cards[0].method;
    for (const Choice& c : cards) methods_tried_.insert(c.method);
    llm::Answer plan = ask("planner", RolePrompts::planner_system(), planner_prompt(parent, prof, cards), &spent);
    if (!plan.ok) break;
    outcome(plan, "plan");
    say("branch " + std::to_string(branch) + " plan: " + first_line(trim(plan.text)));
    // The Coder writes the branch's first kernel; the Optimizer does when the parent is a kernel
    // the model wrote that passed every gate.
    const std::string role = res_.kernels[static_cast<size_t>(parent)].origin.rfind("llm", 0) == 0 ? "optimizer" : "coder";
    const std::string coder_sys = RolePrompts::coder_system(o_.answer, o_.dsl_card, o_.cuda_card);
    std::ostringstream cu;
    cu << task_text(t_) << "\n# The current kernel (c" << parent << ", " << pk.language << ")\n\n" << kernel_block(pk);
    if (role == "optimizer") cu << "\nIt passed every gate:\n" << standing_text(r.trajectory[static_cast<size_t>(parent)].outcome, prof);
    cu << "\n# The plan\n\n" << trim(plan.text) << "\n\n" << answer_rules(o_.answer) << "\n";
    llm::Answer a = ask(role, coder_sys, cu.str(), &spent);
    bool improved = false;
    std::string current_role = role;
    Kernel last = pk;  // what the repairer fixes: the last answer that could be read, else the parent
    for (int round = 0; a.ok; ++round) {
      Tried x;
      x.branch = branch;
      x.role = current_role;
      std::string failure;  // what the reviewer reads
      Rejection rej;
      std::optional<Kernel> k = read_kernel(a, pk, &rej);
      if (!k) {
        x.language = rej.kind == Rejection::Kind::wrong_language ? "?" : answer_language_name(o_.answer);
        x.result = std::string("rejected (") + rejection_name(rej.kind) + "): " + first_line(rej.message);
        outcome(a, std::string("rejected: ") + rejection_name(rej.kind) + ": " + rej.message);
        say("the " + current_role + " answer was rejected (" + rejection_name(rej.kind) + "): " + first_line(rej.message));
        failure = "The answer was refused before evaluation (" + std::string(rejection_name(rej.kind)) + "):\n" + rej.message;
      } else {
        x.language = k->language;
        x.source_hash = kernel_key(*k);
        int i = evaluate(*k, parent, method, current_role + ": " + first_line(trim(plan.text)), &spent);
        const search::Attempt& at = r.trajectory[static_cast<size_t>(i)];
        x.index = i;
        last = *k;
        if (at.outcome.ok()) {
          double gain = search::speedup(r.trajectory[static_cast<size_t>(parent)].outcome, at.outcome);
          x.result = "verified, " + us(at.outcome.score_us()) + " (" + fixed(gain, 2) + "x the parent)" + (at.accepted ? ", the new best" : "");
          outcome(a, at.accepted ? "verified, the task's best" : "verified");
          say("c" + std::to_string(i) + " (" + k->language + ", " + current_role + ") " + x.result);
          res_.tried.push_back(x);
          improved = at.accepted;
          break;
        }
        x.result = "failed: " + first_line(at.outcome.error);
        outcome(a, "failed: " + first_line(at.outcome.error));
        say("c" + std::to_string(i) + " (" + k->language + ", " + current_role + ") failed: " + first_line(at.outcome.error));
        std::ostringstream f;
        f << "The kernel failed: " << at.outcome.error.substr(0, 4000) << "\n";
        for (const search::SizeResult& z : at.outcome.sizes)
          if (z.status != Status::ok)
            f << "- " << z.size << ": " << to_string(z.status) << (z.failed_gate == Gate::none ? "" : std::string(" at the ") + to_string(z.failed_gate) + " gate")
              << (z.error_class.empty() ? "" : " (" + z.error_class + ")") << ": " << first_line(z.message) << "\n";
        failure = f.str();
      }
      if (round >= o_.repairs) {
        res_.tried.push_back(x);
        say("branch " + std::to_string(branch) + " dropped after " + std::to_string(o_.repairs) + " repair(s)");
        break;
      }
      // The Reviewer: the result -> a diagnosis.
      std::ostringstream rv;
      rv << task_text(t_) << "\n# The kernel\n\n" << (k ? kernel_block(*k) : "(the answer could not be read as a kernel)\n\n" + a.text.substr(0, 6000) + "\n")
         << "\n# The result\n\n" << failure;
      llm::Answer d = ask("reviewer", RolePrompts::reviewer_system(), rv.str(), &spent);
      if (!d.ok) {
        res_.tried.push_back(x);
        break;
      }
      outcome(d, "diagnosis");
      x.diagnosis = trim(d.text);
      res_.tried.push_back(x);
      // The Repairer: the diagnosis and the fixes already tried (the trajectory), so that a failed
      // fix is not written again.
      std::ostringstream rp;
      rp << task_text(t_) << "\n# The kernel to fix\n\n" << kernel_block(last) << "\n# What went wrong\n\n" << failure
         << "\n# The diagnosis\n\n" << x.diagnosis << "\n\n# What was tried on this task (do not repeat a failed fix)\n\n"
         << trajectory_text(res_.tried) << "\n" << answer_rules(o_.answer) << "\n";
      current_role = "repairer";
      a = ask("repairer", coder_sys, rp.str(), &spent);
    }
    since_best = improved ? 0 : since_best + 1;
  }
  if (r.stop_reason.empty()) r.stop_reason = waiting_ ? "exhausted" : since_best >= o_.plateau ? "plateau" : "candidates";
  // The result: the best kernel against the fastest baseline, never slower than it.
  const search::Attempt* b = r.best_attempt();
  r.speedup_vs_baseline = b ? search::speedup(r.baseline_best, b->outcome) : 0;
  if (auto nv = r.baselines.find("naive"); nv != r.baselines.end() && b)
    r.speedup_vs_naive = search::speedup_vs_naive(nv->second, b->outcome, &r.naive_from_one_call);
  r.use_baseline = !b || (r.speedup_vs_baseline > 0 && r.speedup_vs_baseline < 1.0);
  r.pct_sol_after = r.use_baseline ? r.baseline_best.pct_sol() : b->outcome.pct_sol();
  if (b && !r.use_baseline) {
    r.hidden = ev_.grade_hidden(t_, res_.kernels[static_cast<size_t>(b->index)], "c" + std::to_string(b->index));
    if (r.hidden.sizes.empty()) {
      r.hidden_note = r.hidden.error;
    } else {
      std::string name;
      r.hidden_baseline_best = fastest_per_size(ev_.baselines_hidden(t_), &name);
      r.hidden_speedup = r.hidden.ok() ? search::speedup(r.hidden_baseline_best, r.hidden) : 0;
      if (!r.hidden.ok()) r.use_baseline = true, r.hidden_note = "the kernel failed on a hidden size: the baseline is returned";
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  r.search_seconds = r.seconds;
  return std::move(res_);
}

}  // namespace

KernelLoopResult run_kernel_loop(const Task& t, const Kernel& start, llm::Client& client, const Knowledge& k, KernelEvaluator& ev,
                                 const KernelLoopOptions& o) {
  Loop loop(t, client, k, ev, o);
  return loop.run(start);
}

}  // namespace ksol::agents
