// The names of the harness's defences, shared by the coordinator (which validates
// --defence-off) and the worker (which applies them). docs/HARNESS.md describes each.
#pragma once
#include <string>
#include <vector>

namespace ksol {
const std::vector<std::string>& defence_names();
}
