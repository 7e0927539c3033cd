// Subcommands registered from their own files (ksol optimize is declared in search/optimize.h).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>

namespace ksol::cli {

// `ksol import kernelbench FILE...`: PyTorch problems traced, costed, lowered and screened by
// the Python front end (python/ksol_torch, docs/TORCH.md). Ends the parse with its exit status.
void add_import_command(CLI::App& app, const bool& json_out);

// Runs a subcommand's body from its CLI11 callback: errors are printed (file:line:col ones as
// they are), and the exit status ends the parse (CLI::Success or CLI::RuntimeError).
[[noreturn]] void finish_command(const std::function<int()>& body);

}  // namespace ksol::cli
