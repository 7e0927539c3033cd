// Searching one DSL piece of a stitched PyTorch module (python/ksol_torch/stitch.py): each of the
// piece's candidates is built and the whole module is evaluated with it in the piece's place, the
// other pieces at their current best, so every candidate passes the gates end to end and its time
// is the module's. `ksol optimize FILE.py` searches the pieces one after another this way.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/optimize.h"

namespace ksol::search {

// The worker's reply for a stitched module: ok (the call worked) and the result object
// (status, message, timing.median_us and ci_*), or why the call failed.
struct StitchedRun {
  bool ok = false;
  nlohmann::json result;
  std::string message;
  double seconds = 0;  // the worker's wall time
};

class PieceEvaluator : public Evaluator {
 public:
  // `pieces`: the request's pieces (nodes, so, dims); `index`: the one searched; `run`: evaluates
  // a stitched module (the Python worker); `baselines`: the module's, by name (eager, compile...).
  // `build` (optional) makes a candidate's library instead of nvcc (ksol optimize --emulate
  // builds for the host's CUDA emulator): the library's path, or "" with the reason in `why`.
  using Build = std::function<std::string(const Task&, const dsl::Program&, const std::string& label, std::string* why)>;
  // `screen` (optional) times stitched modules, each given as the request's pieces, in one
  // screen (the Python worker's): with it the search screens a batch and verifies only its
  // contenders; without it every candidate is evaluated in full.
  using Screen = std::function<ksol::ScreenBatch(const std::vector<nlohmann::json>& stitched)>;
  PieceEvaluator(nlohmann::json pieces, size_t index, std::function<StitchedRun(const nlohmann::json&)> run,
                 std::map<std::string, Outcome> baselines, Build build = nullptr, double sol_us = 0, Screen screen = nullptr)
      : pieces_(std::move(pieces)), index_(index), run_(std::move(run)), baselines_(std::move(baselines)), build_(std::move(build)),
        screen_(std::move(screen)), sol_us_(sol_us) {}
  Outcome evaluate(const Task& t, const dsl::Program& p, const std::string& label, int64_t parent, const std::string& method) override;
  std::map<std::string, Outcome> baselines(const Task& t) override;
  // Builds a batch's libraries (nvcc on every core, or `build` one by one), kept by label.
  std::vector<Built> build(const Task& t, const std::vector<BuildItem>& items) override;
  bool screens() const override { return static_cast<bool>(screen_); }
  // The next generation compiled in the background (with nvcc: not when `build` makes the libraries).
  void prefetch(const Task& t, const std::vector<dsl::Program>& next) override {
    if (!build_) prefetching_.start(t, next);
  }
  void cancel_prefetch() override { prefetching_.cancel(); }
  // The module timed with each item's library in the piece's place, in one screen.
  std::vector<ScreenTime> screen(const Task& t, const std::vector<BuildItem>& items, const std::string& size, double* worker_seconds) override;
  // The pieces with the searched one's library replaced (what a candidate was evaluated as).
  nlohmann::json with_piece(const std::string& so_path, const std::string& kernel) const;
  // The library each evaluated candidate was built into, by label (c0, c1, ...).
  const std::map<std::string, std::string>& libraries() const { return libs_; }

 private:
  nlohmann::json pieces_;
  size_t index_;
  std::function<StitchedRun(const nlohmann::json&)> run_;
  std::map<std::string, Outcome> baselines_;
  // The library of a program (built now when no build() made it): its path, or "" with `why`.
  std::string library(const Task& t, const dsl::Program& p, const std::string& label, std::string* why);
  std::map<std::string, std::string> libs_;
  Build build_;
  Screen screen_;
  BackgroundBuild prefetching_;
  double sol_us_ = 0;
};

// The outcome of one stitched evaluation at the module's single size ("module"). `sol_us` > 0:
// the module's speed-of-light time; a result faster than it allows is "suspect", never a result.
Outcome stitched_outcome(const StitchedRun& r, const std::string& label, double sol_us = 0);

// A piece left as PyTorch's own calls of its ops: {"nodes", "family", "keep": true} and, where
// given, "why" (not built, failing a gate); the worker builds no library for it.
nlohmann::json kept_piece(const nlohmann::json& piece, const std::string& why = "");
// How many of `pieces` ksol computes (not kept as PyTorch's calls).
size_t computed_pieces(const nlohmann::json& pieces);
// `pieces` with piece `i` kept as PyTorch's calls (kept_piece), or null where no other piece
// would stay ksol's: that module would be the forward itself.
nlohmann::json keeping_piece(const nlohmann::json& pieces, size_t i, const std::string& why = "");

// The module with one of its pieces kept as PyTorch's calls, where it failed a gate with every
// piece at its seed (`error`): each piece ksol computes is kept in turn, while another one stays
// ksol's, and the fastest module that passes every gate is the answer (`ok`), the kept piece
// saying why. `run` evaluates a stitched module, `sol_us` is the module's SOL time from a run's
// result, `stop` ends the tries early. `tries`: each try's piece and module time or error.
struct KeptRescue {
  bool ok = false;
  nlohmann::json pieces;
  Outcome outcome;
  double sol_us = 0;
  nlohmann::json tries = nlohmann::json::array();
};
KeptRescue keep_a_failing_piece(const nlohmann::json& pieces, const std::string& error,
                                const std::function<StitchedRun(const nlohmann::json&)>& run,
                                const std::function<double(const nlohmann::json&)>& sol_us, const std::function<bool()>& stop);

}  // namespace ksol::search
