#include "cli/optimize_batch.h"

#include <iostream>

#include "cli/usage.h"
#include "core/util.h"

namespace ksol::cli {

bool is_batch_agent(const OptimizeArgs& a) { return a.agent.rfind("batch:", 0) == 0; }

std::optional<int> batch_before_run(const OptimizeArgs& a, const std::string& store) {
  if (!is_batch_agent(a)) return std::nullopt;
  agents::llm::Spec sp = agents::llm::parse_spec(a.agent);
  if (store.empty())
    throw UsageError("batch mode needs the store (--store \"\" turns it off): each round goes on from the evaluations the last one "
                     "recorded there (--resume), so that it asks again exactly the requests that round wrote");
  // The printed steps name the endpoint and the key's variable as the run's client would.
  if (!a.llm_base_url.empty()) sp.base_url = a.llm_base_url;
  if (!a.llm_key_env.empty() && a.llm_key_env != "none") sp.key_env = a.llm_key_env;
  agents::llm::BatchBackend folder(sp);
  if (std::optional<agents::llm::BatchNotice> w = folder.waiting()) {
    std::cerr << "ksol optimize: " << w->next << "\n";
    return exit_status::waiting;
  }
  const int64_t run = folder.last_run();
  if (run && !a.resume)
    throw UsageError(sp.dir + " holds batches, the last written by run " + std::to_string(run) +
                     ": go on with --resume " + std::to_string(run) + " (" + resume_command(a.words, run) +
                     "), or give another folder for a new search");
  if (run && a.resume != run)
    std::cerr << "ksol optimize: note: the last batch in " << sp.dir << " was written by run " << run << "; resuming run "
              << a.resume << " instead\n";
  // A profile's figures differ from one run to the next, and they are in the prompts: a resumed
  // round would ask other requests than the ones the last round wrote.
  std::cerr << "ksol optimize: batch mode (" << sp.dir << "): requests without an answer go into a batch and the run ends "
            << "waiting for it (exit status 75); parents are classified by the roofline, without Nsight Compute\n";
  return std::nullopt;
}

std::string resume_command(const std::vector<std::string>& words, int64_t run) {
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--resume") {
      ++i;
      continue;
    }
    if (words[i].rfind("--resume=", 0) == 0) continue;
    out.push_back(words[i]);
  }
  out.push_back("--resume");
  out.push_back(std::to_string(run));
  return join(out, " ");
}

std::optional<agents::llm::BatchNotice> batch_after_run(agents::llm::Client& c, const OptimizeArgs& a, int64_t run) {
  agents::llm::BatchBackend* b = agents::llm::batch_backend(c);
  if (!b) return std::nullopt;
  if (const int n = b->unused())
    std::cerr << "ksol optimize: note: " << n << " answered request(s) of earlier batches were not asked again: the search stopped "
              << "sooner (a budget) or took another path than the round that wrote them (a screen, timed again, ranked its "
              << "candidates otherwise); their answers are unused\n";
  return b->close(run, resume_command(a.words, run));
}

}  // namespace ksol::cli
