#include "task/lowered.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/hash.h"
#include "core/util.h"

namespace ksol {
namespace fs = std::filesystem;

namespace {
// f32 data; i64 for the indices an argmax or argmin writes.
DType lowered_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "i64") return DType::i64;
  throw std::runtime_error("the lowered module has a tensor of type " + s + ": only f32 data and i64 indices are lowered");
}
}  // namespace

Task lowered_task(const nlohmann::json& syn, const std::string& file, const std::string& name_suffix) {
  Task t;
  t.name = fs::path(file).stem().string() + name_suffix;
  t.dir = fs::absolute(file).parent_path().string();
  t.spec_path = fs::absolute(file).string();
  t.spec_text = read_file(file);
  t.spec_hash = sha256_hex(t.spec_text + syn.value("program", ""));
  t.family = syn.value("family", "");
  t.description = "lowered from " + file;
  SizeSet s;
  s.name = "module";
  for (auto& d : syn.at("dim_order")) {
    std::string name = d.get<std::string>();
    t.dims.push_back(name);
    s.dims[name] = syn.at("dims").at(name).get<double>();
  }
  for (auto& j : syn.at("tensors")) {
    TensorSpec ts;
    ts.name = j.at("name").get<std::string>();
    ts.dtype = lowered_dtype(j.at("dtype").get<std::string>());
    ts.role = j.at("role") == "out" ? Role::out : Role::in;
    for (auto& d : j.at("shape")) ts.shape.push_back(d.get<std::string>());
    t.tensors.push_back(ts);
  }
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", syn.value("flops", 0.0));
  t.flops = b;
  std::snprintf(b, sizeof b, "%.17g", syn.value("bytes", 0.0));
  t.bytes = b;
  t.sizes.push_back(s);
  return t;
}

}  // namespace ksol
