// Where ksol keeps its files: the store under XDG_DATA_HOME, the caches under XDG_CACHE_HOME,
// each overridden as the README says (KSOL_CACHE_DIR, --store), in the library and in the binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "core/util.h"
#include "sol/peaks.h"

namespace fs = std::filesystem;

namespace {

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(Paths, StoreAndCachesFollowXdgWithOverrides) {
  EnvVar home("HOME", "/home/someone");
  {
    EnvVar data("XDG_DATA_HOME", std::nullopt), cache("XDG_CACHE_HOME", std::nullopt), ksol_cache("KSOL_CACHE_DIR", std::nullopt);
    EXPECT_EQ(ksol::data_dir(), "/home/someone/.local/share/ksol");
    EXPECT_EQ(ksol::default_store_path(), "/home/someone/.local/share/ksol/ksol.db");
    EXPECT_EQ(ksol::cache_dir(), "/home/someone/.cache/ksol");
    EXPECT_EQ(ksol::sol::cache_root(), fs::path("/home/someone/.cache/ksol"));  // the calibrations are in the same cache
  }
  {
    EnvVar data("XDG_DATA_HOME", "/xdg/data"), cache("XDG_CACHE_HOME", "/xdg/cache"), ksol_cache("KSOL_CACHE_DIR", std::nullopt);
    EXPECT_EQ(ksol::default_store_path(), "/xdg/data/ksol/ksol.db");
    EXPECT_EQ(ksol::cache_dir(), "/xdg/cache/ksol");
  }
  {
    // KSOL_CACHE_DIR wins over XDG; a relative XDG_* path is ignored, as the spec says.
    EnvVar data("XDG_DATA_HOME", "relative/data"), cache("XDG_CACHE_HOME", "/xdg/cache"), ksol_cache("KSOL_CACHE_DIR", "/explicit");
    EXPECT_EQ(ksol::default_store_path(), "/home/someone/.local/share/ksol/ksol.db");
    EXPECT_EQ(ksol::cache_dir(), "/explicit");
    EXPECT_EQ(ksol::sol::cache_root(), fs::path("/explicit"));
  }
}

// The binary's default store is where the library says, and --store replaces it.
TEST(Paths, TheCliLooksForTheStoreWhereXdgSays) {
  const std::string home = (fs::temp_directory_path() / ("ksol-paths-" + std::to_string(::getpid()))).string();
  fs::remove_all(home);
  fs::create_directories(home);
  const std::string bin = std::string(KSOL_BUILD_DIR) + "/ksol";
  auto first_line = [](const ksol::ProcessResult& r) { return r.output.substr(0, r.output.find('\n')); };
  const std::string missing = " (ksol eval, bench and optimize create it; --store names another)";
  ksol::ProcessResult r = ksol::run_process({"env", "-u", "XDG_DATA_HOME", "HOME=" + home, bin, "runs"}, 60, home);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r), "error: no store at " + home + "/.local/share/ksol/ksol.db" + missing);
  r = ksol::run_process({"env", "HOME=" + home, "XDG_DATA_HOME=" + home + "/data", bin, "runs"}, 60, home);
  EXPECT_EQ(first_line(r), "error: no store at " + home + "/data/ksol/ksol.db" + missing);
  r = ksol::run_process({"env", "HOME=" + home, "XDG_DATA_HOME=" + home + "/data", bin, "--store", "mine.db", "runs"}, 60, home);
  EXPECT_EQ(first_line(r), "error: no store at mine.db" + missing);
  EXPECT_TRUE(fs::is_empty(home)) << "looking for a store creates nothing";
  r = ksol::run_process({"env", "HOME=" + home, "XDG_DATA_HOME=" + home + "/data", bin, "--help"}, 60, home);
  EXPECT_NE(r.output.find("--store TEXT=" + home + "/data/ksol/ksol.db"), std::string::npos) << r.output;
  fs::remove_all(home);
}
