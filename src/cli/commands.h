// Subcommands registered from their own files (ksol optimize is declared in search/optimize.h).
#pragma once
#include <CLI/CLI.hpp>

namespace ksol::cli {

// `ksol import kernelbench FILE...`: PyTorch problems traced, costed, lowered and screened by
// the Python front end (python/ksol_torch, docs/TORCH.md). Ends the parse with its exit status.
void add_import_command(CLI::App& app, const bool& json_out);

}  // namespace ksol::cli
