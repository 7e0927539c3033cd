// Subcommands registered from their own files (ksol optimize is declared in search/optimize.h).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/usage.h"

namespace ksol::cli {

// `ksol import kernelbench FILE...`: PyTorch problems traced, costed, lowered and screened by
// the Python front end (python/ksol_torch, docs/TORCH.md). Ends the parse with its exit status.
void add_import_command(CLI::App& app, const bool& json_out);

// `ksol eval-module PROBLEM.py --candidate X`: candidates for a PyTorch problem through the
// Python evaluation worker, beside eager and torch.compile (src/cli/eval_module.cpp).
void add_eval_module_command(CLI::App& app, const bool& json_out);

// `ksol runs`, `ksol show RUN`, `ksol export RUN DIR`: the store (`store`, the global --store)
// read as a record of what ran, never written (src/cli/runs.cpp).
void add_run_commands(CLI::App& app, const std::string& store, const bool& json_out);

// Prints rows[0] as the header, a rule, then the other rows, in aligned columns.
void print_columns(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

}  // namespace ksol::cli
