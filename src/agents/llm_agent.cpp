#include "agents/llm_agent.h"

#include <sstream>

#include "codegen/codegen.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "search/optimize.h"

namespace ksol::agents {

std::string default_dsl_card() { return read_file(source_root() + "/docs/DSL_CARD.md"); }

LlmAgent::LlmAgent(llm::Client& client, const Task& t, const Knowledge& k, std::string dsl_card, int max_tokens)
    : client_(client), task_(t), k_(k), card_(std::move(dsl_card)), max_tokens_(max_tokens) {}

std::string LlmAgent::system_prompt() const {
  return "You write GPU kernels in the ksol DSL. A harness that trusts no candidate checks every program on several "
         "seeds and input distributions against a float64 reference, then times it; only a correct, faster program "
         "counts.\n\nAnswer with exactly one complete program in a fenced block that starts with ```ksol and ends "
         "with ```, and nothing after it. Keep the program's name, parameters and computation; change how it runs "
         "(its schedule) or rewrite it into an equivalent, faster form.\n\n# The ksol DSL\n\n" +
         card_;
}

std::string LlmAgent::user_prompt(const dsl::Program& parent, const Profile& prof, const std::string& method_text) const {
  std::ostringstream o;
  o << "# Task " << task_.name << " (precision policy " << task_.precision << ")\n\n";
  for (auto& ts : task_.tensors) {
    o << "- " << (ts.role == Role::in ? "input " : "output ") << ts.name << ": " << dtype_name(ts.dtype) << "[";
    for (size_t i = 0; i < ts.shape.size(); ++i) o << (i ? ", " : "") << ts.shape[i];
    o << "]\n";
  }
  if (!prof.dims.empty()) {
    o << "\nThe size that weighs most:";
    for (auto& [d, v] : prof.dims) o << " " << d << "=" << static_cast<long long>(v);
    o << "\n";
  }
  o << "\n# Where the current program stands\n\n";
  if (prof.pct_sol >= 0)
    o << "It runs at " << static_cast<int>(prof.pct_sol * 100 + 0.5) << "% of speed-of-light; the bound is "
      << (prof.bound.empty() ? "unknown" : prof.bound) << ", the bottleneck class " << bottleneck_of(prof) << " ("
      << prof.source << ").\n";
  else
    o << "It has not been timed yet.\n";
  if (!prof.summary.empty()) o << "\nNsight Compute on the current program:\n" << prof.summary << "\n";
  o << "\n```ksol\n" << dsl::print_source(parent) << "```\n";
  if (!method_text.empty()) o << "\n# The method to apply (from ksol's method cards)\n\n" << method_text << "\n";
  o << "\nWrite the improved program.\n";
  return o.str();
}

const char* rejection_name(Rejection::Kind k) {
  switch (k) {
    case Rejection::Kind::none: return "accepted";
    case Rejection::Kind::truncated: return "truncated";
    case Rejection::Kind::no_code_block: return "no code block";
    case Rejection::Kind::wrong_language: return "wrong language";
    case Rejection::Kind::unclosed_block: return "unclosed block";
    case Rejection::Kind::parse_error: return "parse error";
    case Rejection::Kind::signature: return "signature mismatch";
    case Rejection::Kind::cannot_generate: return "cannot generate";
    case Rejection::Kind::repeats_parent: return "repeats the parent";
    case Rejection::Kind::source_scan: return "source scan";
    case Rejection::Kind::no_entry_point: return "no entry point";
    case Rejection::Kind::repeats_tried: return "repeats a tried kernel";
  }
  return "?";
}

// Parses the answer's ksol block and asks its family's generator; the signature is checked apart.
std::optional<dsl::Program> read_dsl_answer(const std::string& text, const std::string& finish_reason, int max_tokens,
                                            const codegen::Binding& b, Rejection* why, const std::string& asked) {
  auto reject = [&](Rejection::Kind k, std::string m) {
    why->kind = k;
    why->message = std::move(m);
    return std::nullopt;
  };
  std::string code = llm::extract_code_block(text, {"ksol", ""});
  if (code.empty()) {
    if (finish_reason == "length")
      return reject(Rejection::Kind::truncated, "the answer was cut off at the token limit (finish reason \"length\", " +
                                                    std::to_string(max_tokens) + " tokens asked for; --llm-max-tokens raises it)");
    for (const std::string& lang : llm::code_block_languages(text))
      if (lang != "ksol" && !lang.empty())
        return reject(Rejection::Kind::wrong_language,
                      "the answer is a ```" + lang + " block, but " + asked + " was asked for, in a ```ksol block");
    if (text.find("```") != std::string::npos)
      return reject(Rejection::Kind::unclosed_block, "the ```ksol block is not closed (the answer ends inside it)");
    return reject(Rejection::Kind::no_code_block, "the answer holds no fenced ```ksol block");
  }
  try {
    dsl::Program p = dsl::parse_program(code, "answer.ksol");
    codegen::Support s = codegen::can_implement(p, b);
    if (!s.ok) return reject(Rejection::Kind::cannot_generate, "the program cannot be generated: " + s.reason);
    return p;
  } catch (const dsl::DslError& e) {
    return reject(Rejection::Kind::parse_error, std::string("the program does not parse: ") + e.what());
  } catch (const std::exception& e) {
    return reject(Rejection::Kind::parse_error, std::string("the program does not parse: ") + e.what());
  }
}

// The answer must keep the kernel's name and its tensors (names, in order): the binding to the
// task and the comparison with the parent rest on them.
bool same_signature(const dsl::Program& p, const dsl::Program& parent, std::string* why) {
  auto names = [](const std::vector<dsl::Param>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ", ") + x.name;
    return s;
  };
  if (p.name != parent.name || names(p.inputs) != names(parent.inputs) || names(p.outputs) != names(parent.outputs)) {
    *why = "the program must keep the kernel's signature: " + parent.name + "(" + names(parent.inputs) + ") -> (" +
           names(parent.outputs) + "), not " + p.name + "(" + names(p.inputs) + ") -> (" + names(p.outputs) + ")";
    return false;
  }
  return true;
}

namespace {
// The progress line's first line of a message (a parse error's line and caret follow it).
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
}  // namespace

std::optional<dsl::Program> LlmAgent::accept(const std::string& answer, const codegen::Binding& b, std::string* why) const {
  Rejection r;
  std::optional<dsl::Program> p = read_dsl_answer(answer, "stop", max_tokens_, b, &r);
  if (!p) *why = r.message;
  return p;
}

std::optional<dsl::Program> LlmAgent::check(const llm::Answer& a, const dsl::Program& parent, const codegen::Binding& b,
                                            Rejection* why) const {
  std::optional<dsl::Program> p = read_dsl_answer(a.text, a.finish_reason, max_tokens_, b, why);
  if (!p) return p;
  if (!same_signature(*p, parent, &why->message)) {
    why->kind = Rejection::Kind::signature;
    return std::nullopt;
  }
  if (dsl::print_source(*p) == dsl::print_source(parent)) {
    why->kind = Rejection::Kind::repeats_parent;
    why->message = "the answer repeats the parent program";
    return std::nullopt;
  }
  return p;
}

const LlmSpend* LlmAgent::spend_of(const dsl::Program& p) const {
  auto it = by_program_.find(dsl::print_source(p));
  return it == by_program_.end() ? nullptr : &it->second;
}

void LlmAgent::review(const search::OptimizeResult& r) const {
  for (const search::Attempt& at : r.trajectory) {
    if (at.method.rfind("llm", 0) != 0) continue;
    std::string o;
    if (at.outcome.ok()) {
      o = r.best == at.index ? "verified, the task's best" : "verified";
    } else if (at.outcome.screened) {
      o = at.outcome.error.rfind("screened out", 0) == 0 ? at.outcome.error : "screened out: " + at.outcome.error;
    } else {
      // The evaluators say "<gate> gate: <message>"; a size's own failed gate otherwise.
      const std::string& e = at.outcome.error;
      std::string gate = e.find(" gate: ") != std::string::npos ? e.substr(0, e.find(" gate: ")) : "";
      for (const search::SizeResult& z : at.outcome.sizes)
        if (gate.empty() && z.failed_gate != Gate::none) gate = to_string(z.failed_gate);
      if (gate.empty()) gate = "evaluation";
      std::string msg = e.substr(0, e.find('\n'));
      if (progress_) progress_("llm: c" + std::to_string(at.index) + " (" + at.method + ", the model's program) failed the " + gate + " gate: " + msg);
      o = "failed: " + gate + ": " + msg;
    }
    if (const LlmSpend* sp = spend_of(at.program); sp && outcome_)
      for (int64_t id : sp->request_ids) outcome_(id, o);
  }
}

std::vector<Proposal> LlmAgent::propose(const dsl::Program& parent, const Profile& prof, const codegen::Binding& b,
                                        const std::set<std::string>& exclude, std::vector<std::string>* log) {
  auto say = [&](const std::string& l) {
    if (log) log->push_back("llm: " + l);
  };
  std::string why;
  if (client_.exhausted(&why)) {
    say("stopped: " + why);
    return {};
  }
  // Batch mode: the search stops at the request whose answer comes later, so that the resumed
  // run, replaying it, asks exactly the requests this one wrote.
  if (waiting_) {
    say("stopped: waiting for a batch answer");
    return {};
  }
  // The Planner: the decision table's best method not yet tried from this parent.
  Features f = features_of(parent, prof);
  derive_features(k_, &f);
  ChooseOptions co;
  co.max = 1;
  co.dsl_only = true;
  for (auto& e : exclude)
    if (e.rfind("llm/", 0) == 0) co.exclude.insert(e.substr(4));
  std::vector<Choice> choices = choose(k_, f, co);
  std::string method = "llm", method_text, plan = "no method card applies; the model chooses";
  if (!choices.empty())
    if (const Method* m = k_.method(choices[0].method)) {
      method = "llm/" + m->id;
      method_text = card_text(*m, parent.family);
      plan = explain(choices[0]);
    }
  if (exclude.count(method)) {
    say("every planned method was tried from this parent");
    return {};
  }
  say("plan: " + plan);
  llm::Request r;
  r.purpose = "coder";
  r.task = task_.name;
  r.max_tokens = max_tokens_;
  r.system = system_prompt();
  r.messages.push_back({"user", user_prompt(parent, prof, method_text)});
  auto tell = [&](const std::string& l) {
    say(l);
    if (progress_) progress_("llm: " + l);
  };
  // The requests behind this branch: what the program it yields cost.
  LlmSpend branch;
  auto ask = [&] {
    llm::Answer a = client_.ask(r);
    for (llm::Usage* u : {&spend_.usage, &branch.usage}) {
      u->prompt_tokens += a.usage.prompt_tokens;
      u->completion_tokens += a.usage.completion_tokens;
      u->requests += a.cached ? 0 : a.attempts;
      u->dollars += a.usage.dollars;
    }
    if (a.record_id) spend_.request_ids.push_back(a.record_id), branch.request_ids.push_back(a.record_id);
    return a;
  };
  auto outcome = [&](const llm::Answer& a, const std::string& o) {
    if (outcome_ && a.record_id) outcome_(a.record_id, o);
  };
  llm::Answer a = ask();
  for (int round = 0; round < 2; ++round) {
    if (a.deferred) {
      waiting_ = true;
      tell("the " + r.purpose + " request " + a.error);
      outcome(a, "batched: " + a.error);
      return {};
    }
    if (!a.ok) {
      tell("no answer to the " + r.purpose + " request: " + a.error);
      outcome(a, "no answer: " + a.error);
      return {};
    }
    Rejection why;
    std::optional<dsl::Program> p = check(a, parent, b, &why);
    if (p) {
      say(std::string(round ? "repaired answer accepted" : "answer accepted") + (a.cached ? " (cached)" : "") + ": " +
          p->family + " {" + codegen::schedule_text(full_schedule(*p)) + "}");
      outcome(a, "proposed");
      // The same program may come back from a later request (a parent asked again, answered from
      // the cache or a batch's results): every request behind it gets its fate and its cost.
      LlmSpend& of = by_program_[dsl::print_source(*p)];
      of.usage.prompt_tokens += branch.usage.prompt_tokens;
      of.usage.completion_tokens += branch.usage.completion_tokens;
      of.usage.requests += branch.usage.requests;
      of.usage.dollars += branch.usage.dollars;
      of.request_ids.insert(of.request_ids.end(), branch.request_ids.begin(), branch.request_ids.end());
      return {Proposal{*p, full_schedule(*p), method, plan}};
    }
    outcome(a, std::string("rejected: ") + rejection_name(why.kind) + ": " + why.message);
    // Repeating the parent is no error to repair: the model saw nothing to change.
    if (why.kind == Rejection::Kind::repeats_parent) {
      tell("the " + r.purpose + " answer repeats the parent; dropped");
      return {};
    }
    std::string line = "the " + r.purpose + " answer was rejected (" + rejection_name(why.kind) + "): " + first_line(why.message);
    if (round == 1) {
      tell(line + "; repair failed too, branch dropped");
      return {};
    }
    tell(line + "; one repair prompt");
    r.purpose = "repair";
    r.messages.push_back({"assistant", a.text});
    r.messages.push_back({"user", "That answer cannot be used: " + why.message +
                                      "\n\nReply with the corrected complete program in one ```ksol block and nothing else."});
    a = ask();
  }
  return {};
}

store::LlmRequestRow request_row(const llm::RequestRecord& q) {
  store::LlmRequestRow row;
  row.task = q.task;
  row.purpose = q.purpose;
  row.model = q.model;
  row.prompt_hash = q.prompt_hash;
  row.prompt = q.prompt;
  row.answer_hash = q.answer_hash;
  row.answer = q.answer;
  row.path = q.path;
  row.ok = q.ok;
  row.cached = q.cached;
  row.finish_reason = q.finish_reason;
  row.error = q.error;
  row.prompt_tokens = q.prompt_tokens;
  row.completion_tokens = q.completion_tokens;
  row.attempts = q.attempts;
  row.seconds = q.seconds;
  if (q.dollars >= 0) row.dollars = q.dollars;
  return row;
}

}  // namespace ksol::agents
