// The MPI job in a ksol built without MPI: ksol-mpi, built beside it when CMake found MPI, runs
// the same command instead.
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "core/util.h"
#include "mpi/cluster.h"

namespace ksol::mpi {

struct Cluster::Impl {};

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;

std::unique_ptr<Cluster> Cluster::join() {
  std::string twin = self_exe_dir() + "/ksol-mpi";
  if (::access(twin.c_str(), X_OK) != 0)
    throw std::runtime_error("this ksol was built without MPI and no ksol-mpi is beside it (" + twin +
                             "): install an MPI (Debian: libopenmpi-dev openmpi-bin) and build again; CMake then builds ksol-mpi");
  // The same arguments, read back from the kernel: nothing of this process has run yet that the
  // new image would miss (no store, no worker).
  std::string raw = read_file("/proc/self/cmdline");
  std::vector<std::string> args;
  for (size_t a = 0; a < raw.size();) {
    size_t b = raw.find('\0', a);
    if (b == std::string::npos) b = raw.size();
    args.push_back(raw.substr(a, b - a));
    a = b + 1;
  }
  std::vector<char*> argv;
  argv.push_back(twin.data());
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(args[i].data());
  argv.push_back(nullptr);
  ::execv(twin.c_str(), argv.data());
  throw std::runtime_error("could not start " + twin);
}

int Cluster::rank() const { return 0; }
int Cluster::size() const { return 1; }
int Cluster::relay(const std::vector<std::string>&, const std::vector<int>&) { return 1; }
std::vector<std::unique_ptr<Session>> Cluster::open_sessions(const Session::Options& base, const std::vector<int>& gpus,
                                                             const std::vector<std::string>&) {
  return ksol::open_sessions(base, gpus);
}

}  // namespace ksol::mpi
