#include "search/run_budget.h"

#include <algorithm>

#include "search/optimize.h"
#include "task/task.h"

namespace ksol::search {

RunBudget::Shape RunBudget::shape_of(const Task& t) {
  const int kernels = static_cast<int>(t.baselines.size()) + 1;
  return {kernels * static_cast<int>(visible_sizes(t).size()), kernels * static_cast<int>(hidden_sizes(t).size())};
}

RunBudget::RunBudget(double total_seconds, int gpus, std::vector<Shape> tasks)
    : total_(total_seconds), gpus_(std::max(1, gpus)), shapes_(std::move(tasks)), state_(shapes_.size(), State::waiting) {}

double RunBudget::seconds_per_evaluation(const FixedWork* current) const {
  std::vector<double> r = rates_;
  if (current && current->evaluations > 0) r.push_back(current->seconds / current->evaluations);
  // Until three tasks are measured, one of them cannot set the rate alone: the first task of a run
  // is the one that builds and draws what the others then find ready.
  if (r.size() < 3) r.push_back(kPriorSecondsPerEvaluation);
  std::sort(r.begin(), r.end());
  size_t m = r.size() / 2;
  return r.size() % 2 ? r[m] : 0.5 * (r[m - 1] + r[m]);
}

double RunBudget::fixed_left(double per_evaluation, size_t except) const {
  // The share of tasks whose own kernel won and was graded, with one graded and one not assumed.
  const double graded = (graded_ + 1.0) / (finished_ + 2.0);
  double s = 0;
  for (size_t j = 0; j < shapes_.size(); ++j) {
    if (j == except || state_[j] == State::done) continue;
    const double grade = graded * shapes_[j].hidden;
    s += per_evaluation * (state_[j] == State::waiting ? shapes_[j].visible + grade : grade);
  }
  return s;
}

double RunBudget::share(size_t i, double pct_sol, const FixedWork& so_far, double elapsed) {
  const double w = std::clamp(1.0 - pct_sol, 0.05, 1.0);
  weight_sum_ += w;
  ++seen_;
  int left = 0;
  for (size_t j = 0; j < state_.size(); ++j) left += state_[j] == State::waiting || j == i ? 1 : 0;
  const double rate = seconds_per_evaluation(&so_far);
  // Left for searching: the run's time less what is spent, this task's own grade and the fixed
  // work of the others, spread over the GPUs that search at once.
  const double others = fixed_left(rate, i) / gpus_;
  const double own_grade = rate * (i < shapes_.size() ? shapes_[i].hidden : 0);
  const double remaining = std::max(0.0, total_ - elapsed - others - own_grade) * gpus_;
  if (i < state_.size()) state_[i] = State::searching;
  return std::max(headroom_share(remaining, w, left, weight_sum_ / seen_), 1e-3);
}

void RunBudget::finish(size_t i, const FixedWork& fixed, bool graded) {
  if (i < state_.size()) state_[i] = State::done;
  if (fixed.evaluations > 0) rates_.push_back(fixed.seconds / fixed.evaluations);
  ++finished_;
  graded_ += graded ? 1 : 0;
}

}  // namespace ksol::search
