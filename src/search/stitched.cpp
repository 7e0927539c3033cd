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
    sr.status = Status::failed;
    sr.failed_gate = Gate::worker;
    sr.error_class = "worker_error";
    sr.message = "worker: " + r.message;
  } else {
    static_cast<SizeEvaluation&>(sr) = from_worker_result(r.result);
    sr.size = "module";
    if (sr.ok() && sr.median_us <= 0) sr.status = Status::failed, sr.failed_gate = Gate::worker, sr.error_class = "no_time", sr.message = "the worker reported no time";
    if (sol_us > 0 && sr.median_us > 0) {
      sr.sol_us = sol_us;
      sr.pct_sol = sol_us / sr.median_us;
      flag_faster_than_sol(sr, "the module");
    }
  }
  o.worker_seconds = r.seconds;
  o.status = sr.ok() ? Status::ok : Status::failed;
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
