// The pool an MPI job's sessions share: a call whose worker's rank is lost runs again on another
// worker, and only a job with no worker left fails the call.
#include <gtest/gtest.h>

#include "coord/worker_pool.h"

namespace {

// Answers ok, or "lost" from its `lose_at`-th call on (0: never).
class FakeWorker : public ksol::Worker {
 public:
  FakeWorker(std::string name, int lose_at, std::vector<std::string>* log) : name_(std::move(name)), lose_at_(lose_at), log_(log) {}
  ksol::WorkerReply call(nlohmann::json request, double) override {
    ++calls_;
    ksol::WorkerReply r;
    if (lose_at_ > 0 && calls_ >= lose_at_) {
      r.failure = "lost";
      r.message = name_ + " went away";
      return r;
    }
    log_->push_back(name_ + " " + request.value("op", ""));
    r.ok = true;
    r.body = {{"ok", true}};
    return r;
  }
  int restarts() const override { return 0; }
  void stop() override {}

 private:
  std::string name_;
  int lose_at_, calls_ = 0;
  std::vector<std::string>* log_;
};

}  // namespace

TEST(WorkerPool, ACallOnALostWorkerRunsOnAnotherAndLaterCallsBorrow) {
  std::vector<std::string> log, notes;
  ksol::WorkerPool pool([&](const std::string& l) { notes.push_back(l); });
  pool.add(std::make_unique<FakeWorker>("a", 0, &log), "rank 0");
  pool.add(std::make_unique<FakeWorker>("b", 2, &log), "rank 1");
  std::unique_ptr<ksol::Worker> home_b = pool.handle(1);
  EXPECT_TRUE(home_b->call({{"op", "hello"}}, 1).ok);
  ksol::WorkerReply r = home_b->call({{"op", "eval"}}, 1);  // b is lost under it
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(home_b->call({{"op", "eval"}}, 1).ok);
  EXPECT_EQ(log, (std::vector<std::string>{"b hello", "a eval", "a eval"}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "rank 1 lost (b went away); its call runs again on another worker");
  EXPECT_EQ(pool.lost(), 1u);
}

TEST(WorkerPool, WithEveryWorkerLostACallFailsAsACrash) {
  std::vector<std::string> log;
  ksol::WorkerPool pool;
  pool.add(std::make_unique<FakeWorker>("a", 1, &log), "rank 0");
  pool.add(std::make_unique<FakeWorker>("b", 1, &log), "rank 1");
  ksol::WorkerReply r = pool.handle(0)->call({{"op", "eval"}}, 1);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "crash");  // recorded against no candidate's merit: --resume runs it again
  EXPECT_EQ(r.message, "every worker of the MPI job is lost");
  EXPECT_TRUE(log.empty());
}
