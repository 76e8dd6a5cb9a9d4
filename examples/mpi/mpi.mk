# MPI from C (examples/mpi/heat2d.c).  Included by tests/tests.mk.
#
#   make mpi-deps    Debian's OpenMPI (mpicc, mpirun), with apt-get when run as
#                    root; otherwise says what to install
#   make test-mpi    heat2d on 2 (and 3) ranks on cpu against the one-process run;
#                    a visible "skipped: ..." line where there is no MPI
#   make bench-mpi   strong and weak scaling on 1 and 2 ranks, as efficiencies

MPI_PACKAGES = libopenmpi-dev openmpi-bin
MPICC       ?= mpicc
MPIRUN      ?= mpirun
# mpirun refuses root unless told; CI runs as root.  Shared-memory transfers
# without CMA, which containers often forbid (the rows sent are small).  A
# rank waiting in MPI_Sendrecv yields its core instead of spinning: on a
# machine shared with other work (this one: 2 cores, load often above 4) a
# spinning rank kept the other from running, and 2 ranks took 3x as long.
MPI_ENV = OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1 \
          $$(test "$$(id -u)" = 0 && echo OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
MPI_RUN = env $(MPI_ENV) $(MPIRUN) --oversubscribe --bind-to none

.PHONY: mpi-deps test-mpi bench-mpi

mpi-deps:
	@missing=""; for p in $(MPI_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } || \
	      echo "mpi-deps: apt-get could not install$$missing"; \
	  else \
	    echo "mpi-deps: MPI is missing; run: sudo apt-get install -y$$missing"; \
	  fi; \
	fi

$(BUILD)/mpi/heat2d: examples/mpi/heat2d.c runtime/kjit.h $(BUILD)/libkjit.so
	@mkdir -p $(dir $@)
	$(MPICC) -std=c11 -O2 -Wall -Wextra -Iruntime -o $@ $< -L$(BUILD) -lkjit -lm \
	  -Wl,-rpath,'$$ORIGIN/..'

test-mpi: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-mpi: export KJIT_VERIFY = 1
# 2 ranks, then 3 over a grid whose rows do not divide evenly; then the halo
# exchange left out, which the check must catch.
test-mpi: mpi-deps $(BUILD)/libkjit.so
	@if ! command -v $(MPICC) >/dev/null || ! command -v $(MPIRUN) >/dev/null; then \
	  echo "test-mpi: skipped: no MPI here ($(MPICC) or $(MPIRUN) missing; make mpi-deps as root installs OpenMPI)"; \
	  exit 0; fi; \
	$(MAKE) --no-print-directory $(BUILD)/mpi/heat2d >/dev/null || exit 1; \
	run() { $(MPI_RUN) -np $$1 $(BUILD)/mpi/heat2d --check --every 25 $$2 > $(BUILD)/mpi/out.txt 2>&1; }; \
	for case in "2:--rows 1000 --cols 600 --steps 100" "3:--rows 301 --cols 77 --steps 40" \
	            "2:--weak --rows 200 --cols 300 --steps 60 --target parallel"; do \
	  run $${case%%:*} "$${case#*:}" || { cat $(BUILD)/mpi/out.txt; \
	    echo "test-mpi: heat2d -np $${case%%:*} $${case#*:} failed"; exit 1; }; \
	  grep -q "^check: the field matches" $(BUILD)/mpi/out.txt || { cat $(BUILD)/mpi/out.txt; exit 1; }; \
	  grep "^heat2d:" $(BUILD)/mpi/out.txt; \
	done; \
	if run 2 "--rows 200 --cols 100 --steps 20 --no-exchange"; then cat $(BUILD)/mpi/out.txt; \
	  echo "test-mpi: stale halos went unnoticed"; exit 1; fi; \
	grep -q "^check: FAILED: .* points differ" $(BUILD)/mpi/out.txt || { cat $(BUILD)/mpi/out.txt; exit 1; }; \
	echo "test-mpi: heat2d on 2 and 3 ranks matches the one-process run; stale halos are caught"

# Strong scaling: one grid on 1 and 2 ranks, efficiency t1 / (2 t2).  Weak:
# the same rows per rank, efficiency t1 / t2.  Each figure the best of
# MPI_BENCH_REPEAT runs (the machine is shared).
MPI_BENCH_ROWS   ?= 4096
MPI_BENCH_COLS   ?= 4096
MPI_BENCH_STEPS  ?= 100
MPI_BENCH_TARGET ?= cpu
MPI_BENCH_REPEAT ?= 3
bench-mpi: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
bench-mpi: mpi-deps $(BUILD)/libkjit.so
	@command -v $(MPICC) >/dev/null && command -v $(MPIRUN) >/dev/null || \
	  { echo "bench-mpi: no MPI here (make mpi-deps as root installs OpenMPI)"; exit 1; }
	@$(MAKE) --no-print-directory $(BUILD)/mpi/heat2d >/dev/null
	@best() { b=""; for k in $$(seq $(MPI_BENCH_REPEAT)); do \
	    t=$$($(MPI_RUN) -np $$1 $(BUILD)/mpi/heat2d --target $(MPI_BENCH_TARGET) --cols $(MPI_BENCH_COLS) \
	         --steps $(MPI_BENCH_STEPS) --every $(MPI_BENCH_STEPS) $$2 | \
	         sed -n 's/^heat2d: .*: \([0-9.]*\) s .*/\1/p'); \
	    [ -n "$$t" ] || { echo "bench-mpi: heat2d -np $$1 failed" >&2; exit 1; }; \
	    b=$$(python3 -c "print(min(x for x in [$$t, $${b:-1e30}]))"); done; echo $$b; }; \
	s1=$$(best 1 "--rows $(MPI_BENCH_ROWS)") && s2=$$(best 2 "--rows $(MPI_BENCH_ROWS)") && \
	w1=$$(best 1 "--weak --rows $(MPI_BENCH_ROWS)") && w2=$$(best 2 "--weak --rows $(MPI_BENCH_ROWS)") || exit 1; \
	echo "heat2d, $(MPI_BENCH_TARGET), $(MPI_BENCH_STEPS) steps, $(MPI_BENCH_COLS) columns, best of $(MPI_BENCH_REPEAT), $$(nproc) cores:"; \
	python3 -c "s1,s2,w1,w2=$$s1,$$s2,$$w1,$$w2; \
	print(f'  strong ({$(MPI_BENCH_ROWS)} rows):         1 rank {s1:.3f} s, 2 ranks {s2:.3f} s: speed-up {s1/s2:.2f}x, efficiency {s1/(2*s2):.0%}'); \
	print(f'  weak ({$(MPI_BENCH_ROWS)} rows per rank): 1 rank {w1:.3f} s, 2 ranks {w2:.3f} s: efficiency {w1/w2:.0%}')"
