#include "search/stitched.h"

#include "codegen/codegen.h"
#include "codegen/job.h"
#include "compile/compiler.h"
#include "sol/sol.h"

namespace ksol::search {

Outcome stitched_outcome(const StitchedRun& r, const std::string& label, double sol_us) {
  Outcome o;
  o.label = label;
  SizeResult sr;
  sr.size = "module";
  sr.weight = 1;
  if (!r.ok) {
    sr.status = "failed";
    sr.message = "worker: " + r.message;
  } else {
    sr.status = r.result.value("status", std::string("failed"));
    sr.message = r.result.value("message", std::string(""));
    if (r.result.contains("timing") && r.result["timing"].is_object()) {
      const auto& tm = r.result["timing"];
      sr.median_us = tm.value("median_us", 0.0);
      sr.ci_low_us = tm.value("ci_low_us", sr.median_us);
      sr.ci_high_us = tm.value("ci_high_us", sr.median_us);
    }
    if (sr.status == "ok" && sr.median_us <= 0) sr.status = "failed", sr.message = "the worker reported no time";
    if (sol_us > 0 && sr.median_us > 0) {
      sr.sol_us = sol_us;
      sr.pct_sol = sol_us / sr.median_us;
      flag_faster_than_sol(sr, "the module");
    }
  }
  o.worker_seconds = r.seconds;
  o.status = sr.status == "ok" ? "ok" : "failed";
  if (!o.ok()) o.error = "stitched module: " + sr.message;
  o.sizes.push_back(sr);
  return o;
}

nlohmann::json PieceEvaluator::with_piece(const std::string& so_path, const std::string& kernel) const {
  nlohmann::json p = pieces_;
  p.at(index_)["so"] = so_path;
  p.at(index_)["kernel"] = kernel;
  return p;
}

Outcome PieceEvaluator::evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t, const std::string&) {
  if (auto u = unsupported(t, p, label)) return *u;
  Outcome o;
  o.label = label;
  o.kernel = codegen::kernel_name(p);
  std::string so;
  if (build_) {
    std::string why;
    so = build_(t, p, label, &why);
    if (so.empty()) {
      o.error = "build: " + why.substr(0, 2000);
      return o;
    }
  } else {
    CompileResult cr = compile(codegen::compile_job(t, p, t.name + "/" + label + ".ksol"));
    if (!cr.ok) {
      o.error = cr.stage + " gate: " + cr.message.substr(0, 2000);
      return o;
    }
    so = cr.so_path;
  }
  libs_[label] = so;
  Outcome r = stitched_outcome(run_(with_piece(so, o.kernel)), label, sol_us_);
  r.kernel = o.kernel;
  return r;
}

std::map<std::string, Outcome> PieceEvaluator::baselines(const Task&) { return baselines_; }

}  // namespace ksol::search
