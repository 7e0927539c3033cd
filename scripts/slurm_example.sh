#!/usr/bin/env bash
# An example Slurm job: ksol bench over every baseline of the suite, then ksol optimize over every
# task with a seed program, on 2 nodes x 4 GPUs, one MPI rank per GPU (rank 0 also coordinates and
# writes the store). Needs ksol built with MPI (build/ksol-mpi beside build/ksol) and this tree,
# the store's folder and the compile cache on a filesystem every node sees. Edit the partition and
# the counts, then: sbatch scripts/slurm_example.sh
#SBATCH --job-name=ksol
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --time=02:00:00
#SBATCH --output=ksol-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
# Shared paths: the compile cache (candidate and reference libraries every rank loads) and the store.
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-$PWD/.ksol-cache}
store=${KSOL_STORE:-$PWD/ksol.db}
# --no-kill and --kill-on-bad-exit=0 keep the step alive when a node or a rank is lost: its
# evaluation in flight runs again on another rank. With --mpi=pmix or pmi2, whichever the site uses.
launch=(srun --no-kill --kill-on-bad-exit=0 --cpu-bind=none)
"${launch[@]}" ./build/ksol --store "$store" bench --mpi --json-out "bench-$SLURM_JOB_ID.json"
# The search reuses the bench's baseline timings (--resume of the bench run is optional):
"${launch[@]}" ./build/ksol --store "$store" optimize --mpi --budget-total-seconds 3000 --report "runs/slurm-$SLURM_JOB_ID"
# Interrupted (time limit, a lost rank 0)? Resume the run by its id, for instance:
#   "${launch[@]}" ./build/ksol --store "$store" optimize --mpi --resume RUN
