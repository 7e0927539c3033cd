// Batch mode for `ksol optimize --agent batch:FORMAT:MODEL:DIR` (agents/llm_batch.h), on both of
// its paths (the schedule search and the LLM's kernel loop): before the run, a folder whose last
// batch has no results yet ends the command at once with what to do; after it, the requests the
// run deferred become the next batch, and the command ends with exit_status::waiting.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agents/llm.h"
#include "agents/llm_batch.h"
#include "cli/optimize_args.h"

namespace ksol::cli {

bool is_batch_agent(const OptimizeArgs& a);

// Before anything runs. The exit status to end with (exit_status::waiting, with what to do
// printed) when the folder's last batch still waits for its results; a UsageError without a store
// (`store`: the run's) or when the folder has batches and --resume is not given; nullopt: go on
// (with a line saying what batch mode does).
std::optional<int> batch_before_run(const OptimizeArgs& a, const std::string& store);

// The command line with `--resume RUN` in place of any --resume it had.
std::string resume_command(const std::vector<std::string>& words, int64_t run);

// After the run: the requests it deferred written as the next batch; the notice, or nullopt when
// no request waits (the client is no batch, or every answer was in). A note says when answers of
// earlier batches went unused.
std::optional<agents::llm::BatchNotice> batch_after_run(agents::llm::Client& c, const OptimizeArgs& a, int64_t run);

}  // namespace ksol::cli
