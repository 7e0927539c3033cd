// The worker's case cache (src/harness/case_cache.h): hits, the one-task scope, the cap, and a
// changed entry caught on its next hit.
#include <gtest/gtest.h>

#include "harness/case_cache.h"

namespace ksol {
namespace {

std::vector<HostTensor> tensors(size_t n, uint8_t fill) {
  std::vector<HostTensor> v(2);
  v[0].bytes.assign(n, fill);
  v[1].f64.assign(n / 8 + 1, fill * 0.5);
  return v;
}

struct Probe {
  CaseCache& c;
  int made = 0, hits = 0, misses = 0;
  std::shared_ptr<const std::vector<HostTensor>> get(const std::string& scope, const std::string& key, size_t n = 4096) {
    return c.get<std::vector<HostTensor>>(
        scope, key, [&] { ++made; return tensors(n, static_cast<uint8_t>(key.size())); },
        [](const std::vector<HostTensor>& v) { return digest(v); }, [](const std::vector<HostTensor>& v) { return bytes_of(v); }, &hits,
        &misses);
  }
};

TEST(CaseCache, MakesEachCaseOnceWithinATask) {
  CaseCache c(1 << 20);
  Probe p{c};
  auto a = p.get("task-a", "in|small|normal|1");
  auto b = p.get("task-a", "in|small|normal|1");
  EXPECT_EQ(a.get(), b.get());
  p.get("task-a", "in|small|normal|2");
  EXPECT_EQ(p.made, 2);
  EXPECT_EQ(p.hits, 1);
  EXPECT_EQ(p.misses, 2);
}

TEST(CaseCache, AnotherTaskClearsIt) {
  CaseCache c(1 << 20);
  Probe p{c};
  p.get("task-a", "k");
  p.get("task-b", "k");
  EXPECT_EQ(p.made, 2) << "a key of another task (spec or reference library) must not hit";
  EXPECT_EQ(c.entries(), 1u);
  p.get("task-a", "k");
  EXPECT_EQ(p.made, 3);
}

TEST(CaseCache, TakesOnlyWhatFitsUnderItsCapAndEvictsNothing) {
  const size_t entry = 4096 + (4096 / 8 + 1) * 8;  // bytes_of one entry of tensors(4096, .)
  CaseCache c(2 * entry + 100);                      // room for two
  Probe p{c};
  p.get("t", "a");
  p.get("t", "b");
  p.get("t", "c");  // does not fit: made, returned, not kept
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.total_bytes(), 2 * entry);
  p.get("t", "a");
  p.get("t", "c");
  EXPECT_EQ(p.made, 4) << "a and b stay; c is made again";
  CaseCache off(0);
  Probe q{off};
  q.get("t", "a");
  q.get("t", "a");
  EXPECT_EQ(q.made, 2) << "a cap of 0 turns the cache off";
}

TEST(CaseCache, AChangedEntryIsNeverServedAgain) {
  CaseCache c(64 << 20);
  Probe p{c};
  auto a = p.get("t", "a", 3 << 20);  // several digest chunks
  p.get("t", "b");
  const_cast<HostTensor&>((*a)[0]).bytes[(2 << 20) + 5] ^= 1;
  auto again = p.get("t", "a", 3 << 20);
  EXPECT_NE(again.get(), a.get()) << "made again, not served";
  EXPECT_EQ((*again)[0].bytes[(2 << 20) + 5], static_cast<uint8_t>(1)) << "as the maker makes it";
  EXPECT_EQ(c.discards(), 1u);
  EXPECT_EQ(c.entries(), 1u) << "the other entries went with it";
  EXPECT_EQ(p.made, 3);
}

TEST(CaseCache, TheEvaluationThatChangedAnEntryIsTheOneCaught) {
  CaseCache c(64 << 20);
  Probe p{c};
  c.begin();
  auto a = p.get("t", "a");
  p.get("t", "b");
  EXPECT_TRUE(c.verify_touched()) << "nothing changed";
  c.begin();
  a = p.get("t", "a");  // a hit: this evaluation uses it
  const_cast<HostTensor&>((*a)[1]).f64[3] += 1.0;
  std::string which;
  EXPECT_FALSE(c.verify_touched(&which));
  EXPECT_EQ(which, "a");
  EXPECT_EQ(c.entries(), 0u) << "a cache that was written to is dropped whole";
}

TEST(CaseCache, DigestDependsOnEveryByteAndOnLengthNotOnThreads) {
  std::vector<uint8_t> x(5 << 20, 7);
  uint64_t d0 = digest_bytes(x.data(), x.size(), 0);
  EXPECT_EQ(d0, digest_bytes(x.data(), x.size(), 0));
  x.back() = 8;
  EXPECT_NE(d0, digest_bytes(x.data(), x.size(), 0));
  x.back() = 7;
  EXPECT_NE(d0, digest_bytes(x.data(), x.size() - 1, 0));
}

}  // namespace
}  // namespace ksol
