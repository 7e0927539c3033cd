// ksol bench and ksol optimize over the ranks of an MPI job (mpirun, srun). Every rank starts one
// ksol-worker per local GPU; rank 0 runs the command as on one host, with every other rank's
// workers as more sessions, and is the only process that touches the store. Ranks above 0 are
// relays: they forward protocol calls from rank 0 to their workers and the replies back
// (docs/PROTOCOL.md, "Over MPI").
//
// Only ksol-mpi links MPI. In plain ksol, Cluster::join re-executes ksol-mpi beside it with the
// same arguments, or fails with how to build it; so `mpirun ksol bench --mpi` works with either.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "coord/session.h"

namespace ksol::mpi {

// Whether this process is one rank of an MPI job: asked for (--mpi), or started by a launcher
// with more than one rank (OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1, or PMIX_RANK under an srun
// step of several tasks).
bool wanted(bool flag);

class Cluster {
 public:
  // MPI_Init. A ksol built without MPI re-executes ksol-mpi (never returns) or throws.
  static std::unique_ptr<Cluster> join();
  // Rank 0: stops every worker, tells the relays to finish, and finalizes MPI (skipped when a
  // rank was lost: MPI_Finalize would wait for it).
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const;
  int size() const;
  // Ranks above 0, the whole of their part: starts one worker per device in `gpus` (one on the
  // default device when empty), relays rank 0's calls until it says stop; the exit status.
  int relay(const std::vector<std::string>& worker_argv, const std::vector<int>& gpus);
  // Rank 0: one session per worker of the job, its own first (as open_sessions), then each
  // relay's in rank order. Throws when a rank does not see `shared_paths` (the task folders; the
  // compile cache is always checked): the job needs them on a filesystem every node shares.
  std::vector<std::unique_ptr<Session>> open_sessions(const Session::Options& base, const std::vector<int>& gpus,
                                                      const std::vector<std::string>& shared_paths);

  struct Impl;

 private:
  explicit Cluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ksol::mpi
