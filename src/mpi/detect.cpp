#include <cstdlib>
#include <string>

#include "mpi/cluster.h"

namespace ksol::mpi {

namespace {
long env_number(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : 0;
}
}  // namespace

bool wanted(bool flag) {
  if (flag) return true;
  // OpenMPI's mpirun, then the PMI-1/PMI-2 launchers (MPICH's hydra, srun --mpi=pmi2), then srun
  // with PMIx, which names the rank but not the size (the step's task count does).
  if (env_number("OMPI_COMM_WORLD_SIZE") > 1 || env_number("PMI_SIZE") > 1) return true;
  return std::getenv("PMIX_RANK") && env_number("SLURM_STEP_NUM_TASKS") > 1;
}

}  // namespace ksol::mpi
