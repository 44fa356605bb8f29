# tdax -- build, test, demo. `make` builds the product, build/bin/tdax and
# build/lib/libtdax.so, and the test build beside it: build/test/bin/tdax and
# build/test/lib/libtdax.so, the same sources with -DTDAX_TEST_BUILD, which
# adds the test aids (src/testaid.h) that the product does not have.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
ALLFLAGS = $(WARN) $(CFLAGS) -fPIC -pthread -Isrc -Iinclude -I$(B)/gen
# libpmem2 and ISA-L are not linked: tdax loads them when it maps a region
# (src/core/pmem.h, src/core/crc32c.h).
LDLIBS  := -pthread -ldl
CLI_LIBS := -linih  # the configuration file's parser (src/cli/config.c); never preloaded

B       := build
# The layers (docs/design.md): core, policy, preload and cli, one folder
# each; every dependency points from preload or cli down to policy or core
# (scripts/check_layers.py). The test aids are core files the product leaves out.
TESTAID := core/shadow core/pmtrace
CORE    := $(filter-out $(TESTAID),$(patsubst src/%.c,%,$(wildcard src/core/*.c)))
POLICY  := $(patsubst src/%.c,%,$(wildcard src/policy/*.c))
PRELOAD := $(patsubst src/%.c,%,$(wildcard src/preload/*.c))
CLI     := $(patsubst src/%.c,%,$(wildcard src/cli/*.c))
# The prototypes of the ways to see raw system calls (bench/intercept/).
PROTOS  := $(patsubst bench/intercept/%.c,%,$(wildcard bench/intercept/*.c))
CORE_O  := $(CORE:%=$(B)/obj/%.o) $(POLICY:%=$(B)/obj/%.o)
PRELOAD_O := $(PRELOAD:%=$(B)/obj/%.o)
CLI_O   := $(CLI:%=$(B)/obj/%.o)
# The test build: every object again with -DTDAX_TEST_BUILD, plus the aids.
T       := $(B)/test
TESTFLAGS := -DTDAX_TEST_BUILD
TCORE_O := $(CORE_O:$(B)/obj/%=$(T)/obj/%) $(TESTAID:%=$(T)/obj/%.o)
TPRELOAD_O := $(PRELOAD_O:$(B)/obj/%=$(T)/obj/%)
SAN_O   := $(TCORE_O:$(T)/obj/%=$(B)/san/%)
TSAN_O  := $(TCORE_O:$(T)/obj/%=$(B)/tsan/%)
TSANFLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
SANFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
CTESTS  := $(patsubst tests/c/%.c,%,$(filter-out tests/c/harness.c,$(wildcard tests/c/test_*.c)))
HDRS    := $(wildcard src/*/*.h) include/tdax.h tests/c/harness.h

.SECONDARY:
.PHONY: all deps install uninstall deb FORCE test check-layers test-c test-fuzz test-crash test-py test-cpython test-vm vmtest crashtest fuzz demo bench bench-deps bench-log bench-pages bench-runtime bench-intercept bench-policy bench-dual-path sim-doc clean
all: $(B)/bin/tdax $(B)/lib/libtdax.so $(B)/lib/libtdaxtrack.so $(T)/bin/tdax $(T)/lib/libtdax.so $(T)/venv $(B)/bench $(CTESTS:%=$(B)/tests/%) $(CTESTS:%=$(B)/san/%) $(B)/tsan/test_log $(B)/bin/tdax-logbench $(B)/bin/tdax-appendloop $(B)/bin/tdax-smallfiles $(B)/bin/tdax-windows $(B)/tests/logwriter $(B)/tests/sizes $(B)/tests/tdax-vforkclose $(B)/tests/tdax-voldisk $(B)/tests/tdax-oracle $(B)/tests/tdax-daxlog $(B)/tests/tdax-pmorder $(B)/tests/tdax-rocksdb-client $(PROTOS:%=$(B)/bin/tdax-proto-%)

# The version (VERSION) and build (the commit) `tdax --version` prints.
$(B)/gen/version.h: FORCE
	@mkdir -p $(@D)
	@scripts/version.sh $@
$(B)/obj/cli/main.o $(T)/obj/cli/main.o: $(B)/gen/version.h

$(B)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) -c $< -o $@

$(T)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $(TESTFLAGS) -c $< -o $@

# The C unit tests run on the test build (test_recover kills recovery).
$(B)/san/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(WARN) $(SANFLAGS) $(TESTFLAGS) -pthread -Isrc -Iinclude -c $< -o $@

$(B)/tsan/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(WARN) $(TSANFLAGS) $(TESTFLAGS) -pthread -Isrc -Iinclude -c $< -o $@

# Where threads meet: the log's concurrent appenders under ThreadSanitizer.
$(B)/tsan/test_log: tests/c/test_log.c tests/c/harness.c $(TSAN_O) $(HDRS)
	$(CC) $(WARN) $(TSANFLAGS) $(TESTFLAGS) -pthread -Isrc $< tests/c/harness.c $(TSAN_O) -o $@ $(LDLIBS)

$(B)/bin/tdax: $(CLI_O) $(CORE_O)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $^ -o $@ $(CLI_LIBS) $(LDLIBS)

# The policy alone, for the simulator (tdax sim runs the runtime's own code).
$(B)/lib/libtdaxtrack.so: $(POLICY:%=$(B)/obj/%.o)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) -shared $^ -o $@

# libtdax.so exports its hooks (the EXPORT functions of src/preload/interpose*.c)
# and the calls of include/tdax.h (src/preload/explicit.c), nothing else: tdax's
# own functions are bound inside it, without the PLT.
$(B)/libtdax.map: $(wildcard src/preload/interpose*.c) src/preload/explicit.c
	@mkdir -p $(@D)
	{ echo '{ global:'; grep -h '^EXPORT ' $^ | sed -E 's/.*[ *]([A-Za-z_0-9]+)\(.*/  \1;/'; \
	  grep -h '^EXPORT_ALIAS(' $^ | sed -E 's/^EXPORT_ALIAS\(([A-Za-z_0-9]+),.*/  \1;/'; \
	  echo 'local: *; };'; } > $@

$(B)/lib/libtdax.so: $(CORE_O) $(PRELOAD_O) $(B)/libtdax.map
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) -shared $(CORE_O) $(PRELOAD_O) -o $@ -Wl,-soname,libtdax.so -Wl,--version-script=$(B)/libtdax.map $(LDLIBS)

# The test CLI's `tdax run` preloads its sibling, build/test/lib/libtdax.so.
$(T)/bin/tdax: $(CLI_O:$(B)/obj/%=$(T)/obj/%) $(TCORE_O)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $^ -o $@ $(CLI_LIBS) $(LDLIBS)

$(T)/lib/libtdax.so: $(TCORE_O) $(TPRELOAD_O) $(B)/libtdax.map
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) -shared $(TCORE_O) $(TPRELOAD_O) -o $@ -Wl,-soname,libtdax.so -Wl,--version-script=$(B)/libtdax.map $(LDLIBS)

# tdax bench, trace and sim hand over to Python by paths relative to the
# binary (src/cli/cmd_python.c): ../venv and ../../bench. For the test CLI those are
# build/test/venv and build/bench: links to the real ones.
$(T)/venv:
	@mkdir -p $(@D)
	ln -sfn ../venv $@

$(B)/bench:
	@mkdir -p $(@D)
	ln -sfn ../bench $@

$(B)/bin/tdax-logbench: bench/logbench.c $(CORE_O) $(HDRS)
	$(CC) $(ALLFLAGS) $< $(CORE_O) -o $@ $(LDLIBS)

$(B)/bin/tdax-windows: bench/windows.c $(CORE_O) $(HDRS)
	$(CC) $(ALLFLAGS) $< $(CORE_O) -o $@ $(LDLIBS)

$(B)/bin/tdax-appendloop: bench/appendloop.c
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $< -o $@

$(B)/bin/tdax-smallfiles: bench/smallfiles.c
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $< -o $@

$(B)/tests/tdax-voldisk: tests/crash/voldisk.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) $$(pkg-config --cflags fuse3) $< -o $@ $$(pkg-config --libs fuse3)

$(B)/tests/tdax-oracle: tests/crash/oracle.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) $< -o $@ -lisal

# An application of include/tdax.h, linked with libtdax.so as any would be
# (under `tdax run` the preloaded copy serves it: the same soname).
$(B)/tests/tdax-daxlog: tests/crash/daxlog.c include/tdax.h $(B)/lib/libtdax.so
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) -Iinclude $< -o $@ -L$(B)/lib -ltdax -Wl,-rpath,'$$ORIGIN/../lib' -lisal

$(B)/tests/tdax-rocksdb-client: tests/crash/rocksdb_client.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) $< -o $@ -lrocksdb

$(B)/tests/tdax-pmorder: tests/crash/pmorder.c $(TCORE_O) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $(TESTFLAGS) $< $(TCORE_O) -o $@ $(LDLIBS)

$(B)/tests/logwriter: tests/c/logwriter.c $(CORE_O) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $< $(CORE_O) -o $@ $(LDLIBS)

$(B)/tests/tdax-vforkclose: tests/c/vforkclose.c
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $< -o $@

# The layouts of the C structs the simulator re-declares in Python, as JSON
# (tests/py/test_sim.py compares them with bench/tdaxsim).
$(B)/tests/sizes: tests/c/sizes.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $< -o $@

$(B)/tests/test_%: tests/c/test_%.c tests/c/harness.c $(TCORE_O) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(ALLFLAGS) $(TESTFLAGS) $< tests/c/harness.c $(TCORE_O) -o $@ $(LDLIBS)

$(B)/san/test_%: tests/c/test_%.c tests/c/harness.c $(SAN_O) $(HDRS)
	$(CC) $(WARN) $(SANFLAGS) $(TESTFLAGS) -pthread -Isrc $< tests/c/harness.c $(SAN_O) -o $@ $(LDLIBS)

deps:
	@scripts/deps.sh

# make install [PREFIX=/usr/local] [DESTDIR=]: the command, the libraries it
# preloads and the simulator (PREFIX/lib/tdax, where an installed tdax looks:
# src/cli/paths.h), the explicit API's header (PREFIX/include/tdax.h; link
# with -LPREFIX/lib/tdax -ltdax -Wl,-rpath,PREFIX/lib/tdax), the man page, bash completion, the boot-time recovery
# units and an example configuration file (dist/). make uninstall removes
# exactly these. The Debian package has the example as /etc/tdax/tdax.conf.
PREFIX  ?= /usr/local
UNITDIR ?= $(PREFIX)/lib/systemd/system
VERSION := $(shell cat VERSION)
LIBDIR  := $(PREFIX)/lib/tdax
INSTALLED := $(PREFIX)/bin/tdax $(LIBDIR)/libtdax.so $(LIBDIR)/libtdaxtrack.so \
	$(patsubst bench/%,$(LIBDIR)/python/%,$(wildcard bench/tdaxsim/*.py)) \
	$(PREFIX)/share/man/man1/tdax.1 $(PREFIX)/share/bash-completion/completions/tdax \
	$(UNITDIR)/tdax-recover@.service $(UNITDIR)/tdax-recover.service \
	$(PREFIX)/share/doc/tdax/tdax.conf.example $(PREFIX)/include/tdax.h
SUBST   := sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@BINDIR@|$(PREFIX)/bin|g' \
	-e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@UNITDIR@|$(UNITDIR)|g'

install: $(B)/bin/tdax $(B)/lib/libtdax.so $(B)/lib/libtdaxtrack.so
	install -D -m 0755 $(B)/bin/tdax $(DESTDIR)$(PREFIX)/bin/tdax
	install -D -m 0644 $(B)/lib/libtdax.so $(DESTDIR)$(LIBDIR)/libtdax.so
	install -D -m 0644 $(B)/lib/libtdaxtrack.so $(DESTDIR)$(LIBDIR)/libtdaxtrack.so
	install -d $(DESTDIR)$(LIBDIR)/python/tdaxsim
	install -m 0644 bench/tdaxsim/*.py $(DESTDIR)$(LIBDIR)/python/tdaxsim/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(UNITDIR)
	$(SUBST) dist/tdax.1 > $(DESTDIR)$(PREFIX)/share/man/man1/tdax.1
	install -m 0644 dist/tdax.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/tdax
	$(SUBST) dist/tdax-recover@.service > $(DESTDIR)$(UNITDIR)/tdax-recover@.service
	$(SUBST) dist/tdax-recover.service > $(DESTDIR)$(UNITDIR)/tdax-recover.service
	install -D -m 0644 dist/tdax.conf $(DESTDIR)$(PREFIX)/share/doc/tdax/tdax.conf.example
	install -D -m 0644 include/tdax.h $(DESTDIR)$(PREFIX)/include/tdax.h

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rm -rf $(DESTDIR)$(LIBDIR)/python/tdaxsim/__pycache__
	-rmdir $(DESTDIR)$(LIBDIR)/python/tdaxsim $(DESTDIR)$(LIBDIR)/python $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/share/doc/tdax 2>/dev/null

# make deb: build/tdax_VERSION_ARCH.deb, the same files under /usr (the unit
# in /lib/systemd/system, Debian 12's place), stripped, plus the copyright,
# changelog and lintian overrides Debian's tools ask for; built with dpkg-deb.
deb: $(B)/bin/tdax $(B)/lib/libtdax.so $(B)/lib/libtdaxtrack.so
	@scripts/deb.sh $(B) $(VERSION)

# Every test: C unit tests (plain, ASan+UBSan, TSan), fuzzing, power cuts, the
# VM guests, pytest, then CPython's file-API suites under tdax.
test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-c test-fuzz test-crash test-vm test-py test-cpython

# libFuzzer on the region parser and recovery (tests/fuzz/README.md).
FUZZ_SECONDS ?= 600
FUZZCC := clang-14
FUZZ_SRC := $(CORE:%=src/%.c) $(POLICY:%=src/%.c)
$(B)/fuzz/fuzz_recover: tests/fuzz/fuzz_recover.c $(FUZZ_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(FUZZCC) -std=c11 -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -pthread -Isrc $< $(FUZZ_SRC) -o $@ $(LDLIBS)

test-fuzz: $(B)/fuzz/fuzz_recover
	@cd $(B)/fuzz && ./fuzz_recover -max_total_time=20 -timeout=10 -rss_limit_mb=4096 > fuzz.log 2>&1; \
		rc=$$?; tail -3 fuzz.log; [ $$rc = 0 ] || { grep -A30 "ERROR\|deadly" fuzz.log | head -60; exit $$rc; }

fuzz: deps $(B)/fuzz/fuzz_recover
	cd $(B)/fuzz && ./fuzz_recover -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096

# Power cuts on a volatile disk, a short version: two rounds per application
# and fault model, four at once (each waits on its disk much of the time:
# ~5.6 minutes here against ~6.3 three at once), and the positive control (make crashtest
# ROUNDS=200 for more); then crash images of the device from a persist-order
# trace (pmreorder.py).
test-crash: all
	$(B)/venv/bin/python tests/crash/crashtest.py --rounds 2 --jobs 4 --control
	$(B)/venv/bin/python tests/crash/pmreorder.py --control --subsets 1

ROUNDS ?= 20
JOBS ?= 1
PM_COUNT ?= 1000
crashtest: deps
	@$(MAKE) --no-print-directory all
	$(B)/venv/bin/python tests/crash/crashtest.py --rounds $(ROUNDS) --jobs $(JOBS) --control
	$(B)/venv/bin/python tests/crash/pmreorder.py --control --count $(PM_COUNT) --subsets 4

# tdax on real kernel DAX (NVDIMM and CXL Type-3, fsdax and devdax) in QEMU
# guests, with real power cuts (docs/vm.md). CUTS per scenario, besides the control.
CUTS ?= 5
vmtest: deps
	@$(MAKE) --no-print-directory test-vm

# Exit status 77: no QEMU here; the skip is said, not hidden.
test-vm: all
	@$(B)/venv/bin/python tests/vm/vmtest.py --cuts $(CUTS); rc=$$?; \
		[ $$rc = 77 ] && echo "test-vm: SKIPPED (no QEMU; 'make deps' installs it)" && exit 0; exit $$rc

# The layers point down, no two files call each other in a circle, and no
# object of libtdax.so but the hooks calls a name libtdax.so hooks.
check-layers: all
	@$(B)/venv/bin/python scripts/check_layers.py --lib $(B)/lib/libtdax.so $(B)/obj
	@$(B)/venv/bin/python scripts/check_layers.py --lib $(T)/lib/libtdax.so $(T)/obj

test-c: all check-layers
	@set -e; for t in $(CTESTS); do echo "== $$t"; $(B)/tests/$$t; done
	@set -e; for t in $(CTESTS); do echo "== $$t (asan+ubsan)"; \
		ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(B)/san/$$t; done
	@echo "== test_log (tsan)"; TSAN_OPTIONS=halt_on_error=1 $(B)/tsan/test_log concurrent_threads_append_without_losing_or_sharing_sequence_numbers
	@TSAN_OPTIONS=halt_on_error=1 $(B)/tsan/test_log threads_that_come_and_go_at_once_adopt_without_losing_or_sharing

# One case at a time: many wait for a background pass or a deadline, which
# two or three at once (pytest-xdist) made late on this 2-vCPU machine
# (a failure in most runs, a different case each time).
test-py: all
	$(B)/venv/bin/python -m pytest -q tests/py

# CPython's file-API suites (Debian's libpython3.11-testsuite) without tdax,
# then under --policy always and thesis: a test case that passes without
# tdax must pass under it (tests/cpython/run.py; about 2.5 minutes).
test-cpython: all
	$(B)/venv/bin/python tests/cpython/run.py

demo: deps
	@$(MAKE) --no-print-directory all
	@$(B)/venv/bin/python scripts/demo.py

bench-log: all
	$(B)/bin/tdax-logbench

bench-runtime: deps
	@$(MAKE) --no-print-directory all
	$(B)/venv/bin/python bench/runtime_bench.py

# Device memory on 4 KiB pages (tmpfs) against 2 MiB pages (hugetlbfs), side
# by side: bypass and coherent append loops, random reads (root: it reserves
# huge pages for the run).
bench-pages: deps
	@$(MAKE) --no-print-directory all
	$(B)/venv/bin/python bench/page_size.py

# The size-aware dual path (TDAX_BIG_WRITE): appends of each size logged
# against the block path, side by side (docs/performance.md).
bench-dual-path: deps
	@$(MAKE) --no-print-directory all
	$(B)/venv/bin/python bench/dual_path.py

# The prototypes of the ways to see raw system calls (docs/design.md,
# "Programs that skip libc"): the cost of a trapped call, each way.
$(B)/bin/tdax-proto-%: bench/intercept/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) -pthread $< -o $@
$(B)/bin/tdax-proto-fuse: bench/intercept/fuse.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) $$(pkg-config --cflags fuse3) $< -o $@ $$(pkg-config --libs fuse3)

bench-intercept: deps $(PROTOS:%=$(B)/bin/tdax-proto-%)
	$(B)/bin/tdax-proto-sud
	$(B)/bin/tdax-proto-zpoline
	$(B)/bin/tdax-proto-notif
	SYNC_WAKE=1 $(B)/bin/tdax-proto-notif
	$(B)/bin/tdax-proto-fuse 20000 /var/tmp

# The packages the benchmark suites need (also installed by `make deps`).
bench-deps:
	@scripts/deps.sh fio

# Every benchmark suite, short runs in 5 interleaved rounds, each checked by a
# control pair (about 15 minutes); writes docs/benchmarks.md and its plots
# from that one run.
bench: bench-deps
	@$(MAKE) --no-print-directory all
	$(B)/bin/tdax bench all --quick
	$(B)/venv/bin/python scripts/benchdoc.py

# Traces of four applications, every policy simulated: docs/simulator.md.
sim-doc: bench-deps
	@$(MAKE) --no-print-directory all
	$(B)/venv/bin/python scripts/simdoc.py

bench-policy: deps
	@$(MAKE) --no-print-directory all
	$(B)/bin/tdax-windows
	$(B)/venv/bin/python bench/policy_bench.py

clean:
	rm -rf $(B)/obj $(B)/san $(B)/tsan $(B)/bin $(B)/lib $(B)/tests $(B)/fuzz $(T) $(B)/bench
