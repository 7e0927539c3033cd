// The run-wide budget of `ksol optimize --budget-total-seconds` (src/cli/optimize.cpp): each task,
// once its seed is timed, gets a share of what is left of the run after the fixed work still to
// come, in proportion to its SOL headroom (headroom_share); what it does not use goes to the tasks
// after it, since every share is computed from the time actually left.
#pragma once
#include <cstddef>
#include <vector>

namespace ksol {
struct Task;
}

namespace ksol::search {

// A task's fixed work: its baselines, its seed and its hidden grade, which it does whatever its
// search does. Counted in the worker's seconds (not the wall's: a cold run's first compiles are
// not the evaluations' cost) and in evaluations, one per candidate and size. A baseline stopped
// after its first calls (far_slower) is one evaluation at the little it cost, as Shape counts it:
// the rate is per evaluation of a task's shape, so tasks whose naive baselines stop early lower the
// rate the tasks after them are expected at.
struct FixedWork {
  double seconds = 0;
  int evaluations = 0;
};

class RunBudget {
 public:
  // The evaluations a task's fixed work takes: its baselines and its seed at every visible size;
  // its hidden grade (the returned kernel and the baselines at every hidden size) when its own
  // kernel wins.
  struct Shape {
    int visible = 0, hidden = 0;
  };
  static Shape shape_of(const Task& t);

  // Assumed for an evaluation until three tasks have been measured (beside their measurements).
  static constexpr double kPriorSecondsPerEvaluation = 1.5;

  RunBudget(double total_seconds, int gpus, std::vector<Shape> tasks);

  // Task `i`'s seed is timed at `elapsed` seconds into the run, at `pct_sol` (0..1), its fixed work
  // so far (baselines and seed) being `so_far`: its search's share in seconds (at least 1 ms).
  double share(size_t i, double pct_sol, const FixedWork& so_far, double elapsed);
  // Task `i` is done (with or without a share); `graded`: its hidden grade ran.
  void finish(size_t i, const FixedWork& fixed, bool graded);

  // The worker's seconds one evaluation of fixed work is expected to take: the median over the
  // finished tasks of each task's seconds per evaluation (so one task's slow naive baseline or
  // oversized hidden case does not become every task's cost), `current` counted as one more.
  double seconds_per_evaluation(const FixedWork* current = nullptr) const;
  // The fixed work expected of the tasks not yet finished, task `except` left out, in the
  // worker's seconds over all GPUs (a task's grade counted by the share of tasks graded so far).
  double fixed_left(double per_evaluation, size_t except = static_cast<size_t>(-1)) const;

 private:
  enum class State { waiting, searching, done };
  double total_ = 0;
  int gpus_ = 1;
  std::vector<Shape> shapes_;
  std::vector<State> state_;
  std::vector<double> rates_;  // seconds per evaluation of each finished task
  int graded_ = 0, finished_ = 0;
  double weight_sum_ = 0;
  int seen_ = 0;
};

}  // namespace ksol::search
