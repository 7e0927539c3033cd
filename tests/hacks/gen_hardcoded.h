// The generator behind hack 08 (08_hardcoded_seeds.cu.in): see gen_hardcoded.cpp.
#pragma once
#include <string>

namespace ksol::hacks {

// Fills the template's @TABLE@ with fingerprints and float64-reference outputs for every input
// an evaluation with the fresh-seeds defence off will show the candidate (checked cases and the
// timing loop's rotation sets) at `size_name` of the task in `task_dir`, and writes the hack
// to `out_path`. Returns the number of input sets recorded; throws std::runtime_error on error.
int write_hardcoded_hack(const std::string& template_path, const std::string& task_dir, const std::string& size_name,
                         const std::string& out_path);

}  // namespace ksol::hacks
