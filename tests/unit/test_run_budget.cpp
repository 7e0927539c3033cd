// The run-wide budget of ksol optimize (src/search/run_budget.h), replayed on the CPU: tasks with
// given fixed work (baselines and seed before the share, a hidden grade after the search), each
// searching for exactly its share.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "search/run_budget.h"
#include "task/task.h"

namespace ksol::search {
namespace {

struct SimTask {
  double visible_seconds = 15;  // baselines and seed, in the worker's seconds
  double grade_seconds = 0;     // the hidden grade (0: not graded)
  int visible = 12, hidden = 6; // evaluations
  double pct_sol = 0.4;         // the seed's
};

struct Replay {
  std::vector<double> shares;
  double end = 0;  // when the last task finished
};

Replay replay(const std::vector<SimTask>& tasks, double total) {
  std::vector<RunBudget::Shape> shapes;
  for (const SimTask& t : tasks) shapes.push_back({t.visible, t.hidden});
  RunBudget b(total, 1, shapes);
  Replay r;
  double now = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const SimTask& t = tasks[i];
    now += t.visible_seconds;
    double s = b.share(i, t.pct_sol, {t.visible_seconds, t.visible}, now);
    r.shares.push_back(s);
    now += s + t.grade_seconds;
    b.finish(i, {t.visible_seconds + t.grade_seconds, t.visible + (t.grade_seconds > 0 ? t.hidden : 0)}, t.grade_seconds > 0);
  }
  r.end = now;
  return r;
}

// The rule this replaced: every later task's fixed cost estimated as the mean of the finished
// tasks' (15 s before any), so the first task's became the estimate for all the others.
Replay replay_mean_of_tasks(const std::vector<SimTask>& tasks, double total) {
  Replay r;
  double now = 0, fixed_sum = 0, weight_sum = 0;
  int done = 0, left = static_cast<int>(tasks.size());
  for (const SimTask& t : tasks) {
    now += t.visible_seconds;
    double est = done ? fixed_sum / done : 15.0;
    double w = std::clamp(1.0 - t.pct_sol, 0.05, 1.0);
    weight_sum += w;
    double others = std::max(0, left - 1) * est;
    double remaining = std::max(0.0, total - now - others - 0.3 * est);
    double mean_w = weight_sum / (done + 1);
    double s = std::max(remaining * w / (w + (left - 1) * mean_w), 1e-3);
    r.shares.push_back(s);
    now += s + t.grade_seconds;
    fixed_sum += t.visible_seconds + t.grade_seconds;
    ++done, --left;
  }
  r.end = now;
  return r;
}

// The H200 main job's shape: 29 tasks, 780 s, the first one's fixed work 76 s (its hidden grade
// 49 s of it, on cases too large for the worker's cache), the others about 15 s and ungraded.
std::vector<SimTask> main_job() {
  std::vector<SimTask> v(29);
  v[0].visible_seconds = 27, v[0].grade_seconds = 49;
  return v;
}

TEST(RunBudget, OneCostlyFirstTaskDoesNotStarveTheOthers) {
  std::vector<SimTask> tasks = main_job();
  const double fixed = 27 + 49 + 28 * 15.0;  // 496 s: 284 s are the searches'
  Replay before = replay_mean_of_tasks(tasks, 780);
  int starved_before = 0;
  for (size_t i = 1; i < tasks.size(); ++i) starved_before += before.shares[i] < 0.01 ? 1 : 0;
  EXPECT_GE(starved_before, 5) << "the old rule: the first task's 76 s became every later task's estimate";
  Replay r = replay(tasks, 780);
  std::vector<double> later(r.shares.begin() + 2, r.shares.end());
  std::sort(later.begin(), later.end());
  const double median_share = later[later.size() / 2];
  EXPECT_GT(r.shares[1], 1.0);
  for (size_t i = 2; i < tasks.size(); ++i) EXPECT_GT(r.shares[i], 0.5 * median_share) << "task " << i;
  double searched = std::accumulate(r.shares.begin(), r.shares.end(), 0.0);
  EXPECT_GT(searched, 0.9 * (780 - fixed)) << "the searches get nearly all that the fixed work leaves";
  EXPECT_LT(r.end, 780 + 10) << "and the run ends on time";
}

TEST(RunBudget, TheRunEndsOnTimeWhenTheTasksCostWhatTheyAreExpectedTo) {
  std::vector<SimTask> tasks(10);
  for (size_t i = 0; i < tasks.size(); ++i) tasks[i].pct_sol = 0.1 * static_cast<double>(i % 9);
  tasks[3].grade_seconds = 7.5;  // 6 evaluations at the tasks' 1.25 s each
  Replay r = replay(tasks, 400);
  EXPECT_LE(r.end, 400 + 1e-6);
  EXPECT_GT(r.end, 400 - 15) << "little of the budget is left unused";
  // A task far from SOL gets more than the same task close to it.
  std::vector<SimTask> near = tasks, far = tasks;
  near[4].pct_sol = 0.9, far[4].pct_sol = 0.0;
  EXPECT_GT(replay(far, 400).shares[4], 2 * replay(near, 400).shares[4]);
}

TEST(RunBudget, FixedWorkBeyondTheBudgetLeavesNoSearch) {
  std::vector<SimTask> tasks(10);
  for (auto& t : tasks) t.visible_seconds = 60;
  Replay r = replay(tasks, 300);
  for (double s : r.shares) EXPECT_LT(s, 0.01);
}

TEST(RunBudget, OneSlowTaskDoesNotSetTheRate) {
  RunBudget b(1000, 1, std::vector<RunBudget::Shape>(6, {12, 6}));
  EXPECT_DOUBLE_EQ(b.seconds_per_evaluation(), RunBudget::kPriorSecondsPerEvaluation);
  b.finish(0, {66, 12}, false);  // a naive baseline at 2.2 s a call: 5.5 s per evaluation
  EXPECT_NEAR(b.seconds_per_evaluation(), (5.5 + 1.5) / 2, 1e-12) << "one task and the prior";
  b.finish(1, {12, 12}, false);
  b.finish(2, {13.2, 12}, false);
  EXPECT_NEAR(b.seconds_per_evaluation(), 1.1, 1e-12) << "three tasks: their median, the prior left out";
  FixedWork current{24, 12};
  EXPECT_NEAR(b.seconds_per_evaluation(&current), (1.1 + 2.0) / 2, 1e-12);
  // What is left: tasks 3-5, 12 visible evaluations each and their grades at the graded share
  // so far, (0 + 1) / (3 + 2).
  EXPECT_NEAR(b.fixed_left(1.0), 3 * (12 + 0.2 * 6), 1e-12);
  EXPECT_NEAR(b.fixed_left(1.0, 3), 2 * (12 + 0.2 * 6), 1e-12);
}

TEST(RunBudget, ATaskSearchingOnAnotherGpuStillOwesItsGrade) {
  RunBudget b(1000, 2, std::vector<RunBudget::Shape>(3, {12, 6}));
  b.share(0, 0.5, {12, 12}, 12);
  // Task 0 is searching: its grade is still ahead; task 2 has everything ahead.
  const double p = 0.5;  // (0 graded + 1) / (0 done + 2)
  EXPECT_NEAR(b.fixed_left(1.0, 1), p * 6 + (12 + p * 6), 1e-12);
}

TEST(RunBudget, ATaskShapeCountsItsBaselinesAndSeedAtEverySize) {
  Task t = load_task(resolve_task_path("axpy_f32"));  // naive and cublas; 4 visible, 2 hidden sizes
  RunBudget::Shape s = RunBudget::shape_of(t);
  EXPECT_EQ(s.visible, 3 * 4);
  EXPECT_EQ(s.hidden, 3 * 2);
}

}  // namespace
}  // namespace ksol::search
