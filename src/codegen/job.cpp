#include "codegen/job.h"

#include <filesystem>
#include <set>
#include <stdexcept>

#include "codegen/codegen.h"

namespace ksol::codegen {

Binding binding_for(const Task& t) {
  Binding b;
  for (auto& ts : t.tensors) b.tensor_order.push_back(ts.name);
  b.dim_order = t.dims;
  return b;
}

CompileJob compile_job(const Task& t, const dsl::Program& p, const std::string& label) {
  Binding b = binding_for(t);
  Support ok = can_implement(p, b);
  if (!ok.ok) throw std::runtime_error(label + ": unsupported for task " + t.name + ": " + ok.reason);
  CompileJob j;
  j.original = dsl::print_source(p);
  j.language = "dsl";
  j.source_text = generate_cuda(p, b);
  j.source_path = label + " (generated " + kernel_name(p) + ")";
  CompileNeeds needs = compile_needs(p);
  j.arch = needs.arch;
  j.extra_flags = needs.extra_flags;
  // The family's libraries plus the task's vendor libraries (candidates may call them too).
  std::set<std::string> libs(needs.libs.begin(), needs.libs.end());
  for (auto& bl : t.baselines) libs.insert(bl.libs.begin(), bl.libs.end());
  j.libs.assign(libs.begin(), libs.end());
  return j;
}

int export_libraries(const std::string& dir, const std::vector<KeptLibrary>& kept, nlohmann::json& doc) {
  namespace fs = std::filesystem;
  int copied = 0;
  for (const KeptLibrary& k : kept) {
    std::vector<CompileResult> built = compile_all({compile_job(*k.task, *k.program, k.name)});
    if (built.empty() || !built[0].ok || built[0].so_path.empty()) continue;
    std::error_code ec;
    fs::create_directories(dir + "/lib", ec);
    fs::copy_file(built[0].so_path, dir + "/lib/" + k.name + ".so", fs::copy_options::overwrite_existing, ec);
    if (ec) continue;
    doc["libraries"][k.name] = "lib/" + k.name + ".so";
    ++copied;
  }
  return copied;
}

}  // namespace ksol::codegen
