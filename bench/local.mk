# bench/: the GPU all-reduce benchmark (collx against NCCL's Socket
# transport).  Nothing here is built by `make`: bench/run.sh builds and runs
# it on a machine with a GPU, NCCL and MPI.  `make dist` ships the sources so
# that the tarball alone is enough there.
EXTRA_DIST += bench/allreduce.c bench/run.sh bench/plot.py bench/README.md bench/NOTES.md bench/sweep.sh bench/timeline.py \
	bench/nccl-tests.sh bench/build-nccl.sh bench/nt_report.py bench/ab.sh bench/thread_cpu.py \
	bench/profiler/run.sh bench/stats_ab.sh bench/stats_cost.c bench/gpu-build.sh
