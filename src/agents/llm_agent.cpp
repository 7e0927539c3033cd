#include "agents/llm_agent.h"

#include <sstream>

#include "codegen/codegen.h"
#include "core/util.h"
#include "dsl/ir.h"

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

std::optional<dsl::Program> LlmAgent::accept(const std::string& answer, const codegen::Binding& b, std::string* why) const {
  std::string code = llm::extract_code_block(answer, {"ksol", ""});
  if (code.empty()) {
    *why = answer.find("```") == std::string::npos ? "the answer holds no fenced ```ksol block"
                                                   : "the ```ksol block is missing or not closed (was the answer cut off?)";
    return std::nullopt;
  }
  try {
    dsl::Program p = dsl::parse_program(code, "answer.ksol");
    codegen::Support s = codegen::can_implement(p, b);
    if (!s.ok) {
      *why = "the program cannot be generated: " + s.reason;
      return std::nullopt;
    }
    return p;
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
}

namespace {
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
}  // namespace

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
  r.max_tokens = max_tokens_;
  r.system = system_prompt();
  r.messages.push_back({"user", user_prompt(parent, prof, method_text)});
  llm::Answer a = client_.ask(r);
  for (int round = 0; round < 2; ++round) {
    if (!a.ok) {
      say("no answer: " + a.error);
      return {};
    }
    std::string reason;
    std::optional<dsl::Program> p = accept(a.text, b, &reason);
    if (p && !same_signature(*p, parent, &reason)) p.reset();
    if (p) {
      if (dsl::print_source(*p) == dsl::print_source(parent)) {
        say("the answer repeats the parent; dropped");
        return {};
      }
      say(std::string(round ? "repaired answer accepted" : "answer accepted") + (a.cached ? " (cached)" : "") + ": " +
          p->family + " {" + codegen::schedule_text(full_schedule(*p)) + "}");
      return {Proposal{*p, full_schedule(*p), method, plan}};
    }
    if (round == 1) {
      say("repair failed too (" + reason + "); branch dropped");
      return {};
    }
    say("answer rejected (" + reason + "); one repair prompt");
    r.purpose = "repair";
    r.messages.push_back({"assistant", a.text});
    r.messages.push_back({"user", "That answer cannot be used: " + reason +
                                      "\n\nReply with the corrected complete program in one ```ksol block and nothing else."});
    a = client_.ask(r);
  }
  return {};
}

}  // namespace ksol::agents
