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

nlohmann::json kept_piece(const nlohmann::json& piece, const std::string& why) {
  nlohmann::json k = {{"nodes", piece.at("nodes")}, {"family", piece.value("family", "")}, {"keep", true}};
  if (!why.empty()) k["why"] = why;
  if (piece.value("vendor", false)) k["vendor"] = true;  // a piece of the vendor-call plan stays one
  return k;
}

size_t computed_pieces(const nlohmann::json& pieces) {
  size_t n = 0;
  for (const nlohmann::json& q : pieces) n += q.value("keep", false) ? 0 : 1;
  return n;
}

nlohmann::json keeping_piece(const nlohmann::json& pieces, size_t i, const std::string& why) {
  if (computed_pieces(pieces) - (pieces.at(i).value("keep", false) ? 0 : 1) == 0) return nullptr;
  nlohmann::json alt = pieces;
  alt[i] = kept_piece(pieces[i], why);
  return alt;
}

KeptRescue keep_a_failing_piece(const nlohmann::json& pieces, const std::string& error,
                                const std::function<StitchedRun(const nlohmann::json&)>& run,
                                const std::function<double(const nlohmann::json&)>& sol_us, const std::function<bool()>& stop) {
  KeptRescue out;
  for (size_t i = 0; i < pieces.size() && !(stop && stop()); ++i) {
    if (pieces[i].value("keep", false)) continue;
    nlohmann::json alt = keeping_piece(
        pieces, i, "the module failed a gate with this piece at its seed schedule and passed with PyTorch's calls in its place (" + error.substr(0, 300) + ")");
    if (alt.is_null()) break;  // the only piece ksol computes: keeping it leaves the forward itself
    StitchedRun r = run(alt);
    const double sol = r.ok ? sol_us(r.result) : 0.0;
    Outcome o = stitched_outcome(r, "seeds", sol);
    out.tries.push_back(o.ok() ? nlohmann::json{{"piece", i}, {"module_us", o.score_us()}}
                               : nlohmann::json{{"piece", i}, {"error", o.error.substr(0, 500)}});
    if (o.ok() && (!out.ok || o.score_us() < out.outcome.score_us())) {
      out.ok = true;
      out.pieces = alt;
      out.outcome = o;
      out.sol_us = sol;
    }
  }
  return out;
}

nlohmann::json PieceEvaluator::with_piece(const std::string& so_path, const std::string& kernel) const {
  nlohmann::json p = pieces_;
  p.at(index_)["so"] = so_path;
  p.at(index_)["kernel"] = kernel;
  return p;
}

std::string PieceEvaluator::library(const Task& t, const dsl::Program& p, const std::string& label, std::string* why) {
  if (auto it = libs_.find(label); it != libs_.end()) return it->second;
  std::string so;
  if (build_) {
    so = build_(t, p, label, why);
  } else {
    CompileResult cr = compile(codegen::compile_job(t, p, t.name + "/" + label + ".ksol"));
    if (!cr.ok) *why = cr.stage + " gate: " + cr.message.substr(0, 2000);
    else so = cr.so_path;
  }
  if (!so.empty()) libs_[label] = so;
  return so;
}

std::vector<Built> PieceEvaluator::build(const Task& t, const std::vector<BuildItem>& items) {
  prefetching_.wait();
  std::vector<Built> out;
  if (!build_) {
    for (const CompiledItem& c : compile_batch(t, items, out))
      if (c.result.ok) libs_[items[c.index].label] = c.result.so_path;
    return out;
  }
  out.resize(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    std::string why;
    if (auto u = unsupported(t, *items[k].program, items[k].label)) out[k].ok = false, out[k].error = "unsupported: " + u->error;
    else if (library(t, *items[k].program, items[k].label, &why).empty()) out[k].ok = false, out[k].error = "build: " + why.substr(0, 2000);
  }
  return out;
}

std::vector<ScreenTime> PieceEvaluator::screen(const Task& t, const std::vector<BuildItem>& items, const std::string&, double* worker_seconds) {
  std::vector<ScreenTime> out(items.size());
  if (!screen_) return out;
  std::vector<nlohmann::json> stitched;
  std::vector<size_t> which;
  for (auto& [k, so] : screen_libraries(items, out, [&](const BuildItem& it, std::string* why) { return library(t, *it.program, it.label, why); })) {
    stitched.push_back(with_piece(so, codegen::kernel_name(*items[k].program)));
    which.push_back(k);
  }
  ksol::ScreenBatch sb = screen_(stitched);
  if (worker_seconds) *worker_seconds = sb.worker_seconds;
  take_screen_times(sb, which, out);
  return out;
}

Outcome PieceEvaluator::evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t, const std::string&) {
  if (auto u = unsupported(t, p, label)) return *u;
  Outcome o;
  o.label = label;
  o.kernel = codegen::kernel_name(p);
  std::string why, so = library(t, p, label, &why);
  if (so.empty()) {
    o.error = (build_ ? "build: " : "") + why.substr(0, 2000);
    return o;
  }
  Outcome r = stitched_outcome(run_(with_piece(so, o.kernel)), label, sol_us_);
  r.kernel = o.kernel;
  return r;
}

std::map<std::string, Outcome> PieceEvaluator::baselines(const Task&) { return baselines_; }

}  // namespace ksol::search
