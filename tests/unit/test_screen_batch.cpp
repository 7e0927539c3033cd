// A screen's batch through a worker that may break under it (src/coord/screen_batch.h): the
// replies' times land on their libraries, a reply that names its culprit has that library blamed,
// and a group that breaks the worker without naming one is halved until the culprit is alone.
#include <gtest/gtest.h>

#include <algorithm>

#include "coord/screen_batch.h"

using namespace ksol;
using nlohmann::json;

namespace {

// A worker over libraries 0..n-1: library `crash` kills it, library `sticky` leaves a sticky CUDA
// error that the reply names; the others take 10 * (index + 1) us.
struct FakeWorker {
  int crash = -1, sticky = -1;
  // Libraries whose times the bracket rule refuses in the first `refuse_calls` calls (a host busy
  // with compiles), and in every call for `always_refused` (a launcher that reports short times).
  std::vector<size_t> refused;
  int refuse_calls = 0;
  int always_refused = -1;
  std::vector<std::vector<size_t>> calls;
  WorkerReply operator()(const std::vector<size_t>& group) {
    calls.push_back(group);
    WorkerReply r;
    r.seconds = 1;
    for (size_t k = 0; k < group.size(); ++k) {
      if (static_cast<int>(group[k]) == crash) {
        r.failure = "crash";
        r.message = "the worker died (signal 11)";
        return r;
      }
      if (static_cast<int>(group[k]) == sticky) {
        r.failure = "fatal";
        r.message = "an illegal memory access";
        r.body = {{"ok", false}, {"fatal", true}, {"candidate", k}};
        return r;
      }
    }
    r.ok = true;
    json results = json::array();
    for (size_t i : group) {
      double us = 10.0 * static_cast<double>(i + 1) + static_cast<double>(calls.size() - 1);  // each pass a little apart
      const bool bracket = static_cast<int>(i) == always_refused ||
                           (static_cast<int>(calls.size()) <= refuse_calls && std::find(refused.begin(), refused.end(), i) != refused.end());
      if (bracket) {
        results.push_back({{"status", "failed"}, {"error_class", "timing_inconsistent"},
                           {"message", "timing not consistent with the harness's clock: the round trips exceed the reported times"}});
        continue;
      }
      results.push_back({{"status", "ok"}, {"median_us", us}, {"ci_low_us", us}, {"ci_high_us", us}, {"min_us", us},
                         {"samples", {us, us, us}}, {"dropped", i == 3}});
    }
    r.body = {{"ok", true}, {"result", {{"results", results}}}};
    return r;
  }
};

}  // namespace

TEST(ScreenBatch, OneCallTimesTheWholeBatch) {
  FakeWorker w;
  ScreenBatch sb = screen_in_groups(5, std::ref(w));
  ASSERT_EQ(sb.times.size(), 5u);
  EXPECT_EQ(sb.calls, 1);
  EXPECT_DOUBLE_EQ(sb.worker_seconds, 1.0);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sb.times[i].status, "ok");
    EXPECT_DOUBLE_EQ(sb.times[i].median_us, 10.0 * static_cast<double>(i + 1));
    EXPECT_EQ(sb.times[i].samples, 3);
    EXPECT_EQ(sb.times[i].dropped, i == 3);
  }
  EXPECT_EQ(screen_in_groups(0, std::ref(w)).calls, 0) << "nothing to screen: no call";
}

// A bracket refused in a pass is timed again with every library that ran, so that every time
// returned comes from one pass; a library refused again stays refused.
TEST(ScreenBatch, ABracketRefusalScreensTheBatchOnceMore) {
  FakeWorker w;
  w.refused = {1, 4};
  w.refuse_calls = 1;
  ScreenBatch sb = screen_in_groups(5, std::ref(w));
  EXPECT_EQ(sb.calls, 2);
  EXPECT_EQ(sb.bracket_refused_first, 2);
  EXPECT_DOUBLE_EQ(sb.worker_seconds, 2.0);
  ASSERT_EQ(w.calls.size(), 2u);
  EXPECT_EQ(w.calls[1], (std::vector<size_t>{0, 1, 2, 3, 4}));
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sb.times[i].status, "ok") << i << ": " << sb.times[i].message;
    EXPECT_DOUBLE_EQ(sb.times[i].median_us, 10.0 * static_cast<double>(i + 1) + 1.0) << "the second pass's time, for every library";
  }

  FakeWorker liar;
  liar.always_refused = 2;
  ScreenBatch sl = screen_in_groups(4, std::ref(liar));
  EXPECT_EQ(sl.calls, 2) << "screened once more, not again and again";
  EXPECT_EQ(sl.times[2].status, "failed");
  EXPECT_EQ(sl.times[2].error_class, "timing_inconsistent");
  for (size_t i : {0, 1, 3}) EXPECT_EQ(sl.times[i].status, "ok");

  FakeWorker calm;
  ScreenBatch sc = screen_in_groups(3, std::ref(calm));
  EXPECT_EQ(sc.calls, 1);
  EXPECT_EQ(sc.bracket_refused_first, 0);

  // A library blamed for breaking the worker in the first pass is not screened again.
  FakeWorker mixed;
  mixed.sticky = 3;
  mixed.refused = {1};
  mixed.refuse_calls = 2;
  ScreenBatch sm = screen_in_groups(5, std::ref(mixed));
  ASSERT_EQ(mixed.calls.size(), 3u);  // [0..4] breaks on 3; [0, 1, 2, 4] refuses 1; [0, 1, 2, 4] again
  EXPECT_EQ(mixed.calls[2], (std::vector<size_t>{0, 1, 2, 4}));
  EXPECT_EQ(sm.bracket_refused_first, 1);
  EXPECT_EQ(sm.times[3].error_class, "sticky_cuda_error");
  for (size_t i : {0, 1, 2, 4}) EXPECT_EQ(sm.times[i].status, "ok") << i << ": " << sm.times[i].message;
}

TEST(ScreenBatch, ACrashIsBlamedOnItsLibraryAlone) {
  FakeWorker w;
  w.crash = 5;
  ScreenBatch sb = screen_in_groups(8, std::ref(w));
  for (size_t i = 0; i < 8; ++i) {
    if (i == 5) {
      EXPECT_EQ(sb.times[i].status, "failed");
      EXPECT_EQ(sb.times[i].error_class, "crash");
      EXPECT_NE(sb.times[i].message.find("signal 11"), std::string::npos) << sb.times[i].message;
    } else {
      EXPECT_EQ(sb.times[i].status, "ok") << i << ": " << sb.times[i].message;
    }
  }
  // Halved until the culprit was alone: 8, 4+4, 2+2 (of the broken half), 1+1 (of the broken pair).
  EXPECT_EQ(sb.calls, 7);
  EXPECT_NE(std::find(w.calls.begin(), w.calls.end(), std::vector<size_t>{5}), w.calls.end());
}

TEST(ScreenBatch, ANamedCulpritIsDroppedAndTheRestScreenedAgain) {
  FakeWorker w;
  w.sticky = 2;
  ScreenBatch sb = screen_in_groups(4, std::ref(w));
  EXPECT_EQ(sb.calls, 2);
  EXPECT_EQ(sb.times[2].error_class, "sticky_cuda_error");
  EXPECT_NE(sb.times[2].message.find("illegal memory access"), std::string::npos);
  EXPECT_EQ(w.calls[1], (std::vector<size_t>{0, 1, 3}));
  for (size_t i : {0, 1, 3}) EXPECT_EQ(sb.times[i].status, "ok");
}

TEST(ScreenBatch, AMalformedReplyIsNoTime) {
  auto short_reply = [](const std::vector<size_t>& group) {
    WorkerReply r;
    r.ok = true;
    r.body = {{"result", {{"results", json::array({{{"status", "ok"}, {"median_us", 0.0}}})}}}};
    if (group.size() == 1) return r;  // one result for one library: read, but it has no time
    r.body["result"]["results"] = json::array();  // too few results for the group
    return r;
  };
  ScreenBatch sb = screen_in_groups(2, short_reply);
  EXPECT_EQ(sb.calls, 3);
  for (auto& st : sb.times) {
    EXPECT_EQ(st.status, "failed");
    EXPECT_EQ(st.error_class, "no_samples");
  }
}

// A worker that answers with an error of its own (the problem did not load) fails the group once;
// a timeout after the log named a candidate blames that one and screens the rest again.
TEST(ScreenBatch, AWorkersOwnErrorFailsTheGroupOnceAndATimeoutBlamesTheNamedOne) {
  int calls = 0;
  ScreenBatch err = screen_in_groups(6, [&](const std::vector<size_t>&) {
    ++calls;
    WorkerReply r;
    r.failure = "error";
    r.message = "FileNotFoundError: /p/gone.py";
    return r;
  });
  EXPECT_EQ(calls, 1) << "not halved: every part would fail the same way";
  for (auto& st : err.times) {
    EXPECT_EQ(st.error_class, "worker_error");
    EXPECT_NE(st.message.find("gone.py"), std::string::npos) << st.message;
  }
  FakeWorker w;
  std::vector<std::vector<size_t>> seen;
  ScreenBatch hung = screen_in_groups(5, [&](const std::vector<size_t>& group) {
    seen.push_back(group);
    if (std::find(group.begin(), group.end(), size_t{3}) == group.end()) return w(group);
    WorkerReply r;
    r.failure = "timeout";
    // The log names the group's index of the library that hung (3 here is the 4th of the group).
    size_t k = static_cast<size_t>(std::find(group.begin(), group.end(), size_t{3}) - group.begin());
    r.message = "no reply within 170 s; the worker was killed\n[ksol worker] screen: candidate 0\n[ksol worker] screen: candidate " +
                std::to_string(k) + "\n";
    return r;
  });
  EXPECT_EQ(hung.calls, 2) << "blamed at once, not halved";
  EXPECT_EQ(hung.times[3].error_class, "timeout");
  EXPECT_EQ(seen[1], (std::vector<size_t>{0, 1, 2, 4}));
  for (size_t i : {0, 1, 2, 4}) EXPECT_EQ(hung.times[i].status, "ok") << i;
}
