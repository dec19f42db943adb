# SPDX-License-Identifier: GPL-2.0
#
# kloc: kernel locality tests. "make help" lists the targets.

KERNEL     ?= 6.12
KDIR       ?=
OUT        ?= out
TOPOLOGIES ?=
JOBS       ?= $(shell nproc)
TIMEOUT    ?= 300
RUNS       ?=
ALPHA      ?= 0.05
SECONDS    ?=
PYTHON     ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
export KLOC_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kloc

KLOC  = PYTHONPATH=$(CURDIR)/tools $(PYTHON) -m kloc
TREE  = --kernel $(KERNEL) $(if $(KDIR),--kdir $(KDIR))
# make compare needs SLAB, so it defaults to 6.1 unless KERNEL is given.
COMPARE_TREE = --kernel $(if $(filter file,$(origin KERNEL)),6.1,$(KERNEL)) \
	$(if $(KDIR),--kdir $(KDIR))

.PHONY: help deps tree install uninstall patches kunit kselftest guest compare review bench-aa mutants report run test \
	check-tools lint clean

help:
	@echo 'kloc: kernel locality tests (see README.md)'
	@echo
	@echo '  make run         KUnit on every topology, the mutants, the kselftest; the summary'
	@echo '  make test        the package'"'"'s own tests, lint, and KUnit on 6.12 and 6.1'
	@echo
	@echo '  make deps        install missing Debian packages (as root), or list them'
	@echo '  make tree        extract the kernel tree (KERNEL=6.12|6.1), print its path'
	@echo '  make install     install the tests and hooks into the tree'
	@echo '  make uninstall   restore the tree byte for byte'
	@echo '  make patches     export the series as git-am-able patches to $$(OUT)/patches'
	@echo '  make kunit       KUnit on every topology: KTAP, JSON, $$(OUT)/kunit/junit.xml'
	@echo '  make kselftest   build the kselftests standalone and in-tree; run them on this kernel'
	@echo '  make guest       build a minimal guest (ARCH=, ALLOC=slub|slab) and run the kselftest once'
	@echo '  make compare     SLUB vs SLAB guests (6.1), interleaved: table, JSON, SVG plot'
	@echo '  make review      PATCH=file: base vs patched kernel, KUnit + loopback A/B; report'
	@echo '  make bench-aa    20 short A/A reviews: how often a null difference is called'
	@echo '  make mutants     apply each mutant to a copy of the tree; each must be caught'
	@echo '  make report      merge $$(OUT)/kunit into junit.xml and print the summary'
	@echo '  make check-tools unit tests of tools/'
	@echo '  make lint        checkpatch --strict, W=1 and sparse, mypy --strict, shellcheck'
	@echo '  make clean       remove $$(OUT)'
	@echo
	@echo 'Variables: KERNEL=$(KERNEL) KDIR=$(KDIR) OUT=$(OUT) TOPOLOGIES=$(TOPOLOGIES)'
	@echo '           JOBS=$(JOBS) TIMEOUT=$(TIMEOUT) KLOC_CACHE=$(KLOC_CACHE)'
	@echo '           ARCH= ALLOC= TOPOLOGY= (guest, compare, review) ALPHA=$(ALPHA)'
	@echo '           RUNS= SECONDS= (compare: 10, 2; review: 30, 1) PATCH= AA=1 (review)'

deps:
	@tools/deps.sh

tree: deps
	@$(KLOC) tree $(TREE)

install: deps
	@$(KLOC) install $(TREE)

uninstall: deps
	@$(KLOC) uninstall $(TREE)

patches: deps
	@$(KLOC) patches $(TREE) --out $(OUT)

kunit: deps
	@$(KLOC) kunit $(TREE) --out $(OUT) --jobs $(JOBS) --timeout $(TIMEOUT) \
		$(if $(TOPOLOGIES),--topologies $(TOPOLOGIES))

guest: deps
	@$(KLOC) guest $(TREE) --arch $(or $(ARCH),x86_64) --alloc $(or $(ALLOC),slub) \
		--topology $(or $(TOPOLOGY),x86_64_2n) --out $(OUT)

compare: deps
	@$(KLOC) compare $(COMPARE_TREE) --arch $(or $(ARCH),x86_64) \
		$(if $(TOPOLOGY),--topology $(TOPOLOGY)) $(if $(RUNS),--runs $(RUNS)) \
		$(if $(SECONDS),--seconds $(SECONDS)) --alpha $(ALPHA) --out $(OUT)

review: deps
	@$(KLOC) review $(TREE) $(if $(PATCH),--patch $(PATCH)) $(if $(AA),--aa) \
		$(if $(TOPOLOGIES),--topologies $(TOPOLOGIES)) \
		$(if $(TOPOLOGY),--bench-topology $(TOPOLOGY)) $(if $(RUNS),--runs $(RUNS)) \
		$(if $(SECONDS),--seconds $(SECONDS)) --alpha $(ALPHA) --jobs $(JOBS) --out $(OUT)

# A benchmark, not a test: the share of A/A reviews that call a difference.
bench-aa: deps
	@OUT=$(OUT) PYTHON=$(PYTHON) KERNEL=$(KERNEL) REPEATS=$(or $(REPEATS),20) \
		RUNS=$(or $(AA_RUNS),6) SECONDS=$(or $(AA_SECONDS),1) ALPHA=$(ALPHA) \
		tools/bench-aa.sh

kselftest: deps
	@OUT=$(OUT) PYTHON=$(PYTHON) KERNEL=$(KERNEL) tools/kselftest-host.sh

mutants: deps
	@$(KLOC) mutants $(TREE) --out $(OUT) --jobs $(JOBS)

report:
	@$(KLOC) report --out $(OUT)

# Every step runs; the summary comes last; the exit code says if any failed.
run: deps
	@rc=0; \
	$(KLOC) kunit $(TREE) --out $(OUT) --jobs $(JOBS) --timeout $(TIMEOUT) \
		$(if $(TOPOLOGIES),--topologies $(TOPOLOGIES)) >/dev/null || rc=1; \
	$(KLOC) mutants $(TREE) --out $(OUT) --jobs $(JOBS) || rc=1; \
	OUT=$(OUT) PYTHON=$(PYTHON) KERNEL=$(KERNEL) tools/kselftest-host.sh >/dev/null || rc=1; \
	echo; $(KLOC) report --out $(OUT) || rc=1; \
	exit $$rc

check-tools:
	@cd tools && $(PYTHON) -m unittest discover -s tests -t . $(if $(V),-v)

lint: deps
	@OUT=$(OUT) PYTHON=$(PYTHON) tools/lint.sh

test: deps
	@OUT=$(OUT) PYTHON=$(PYTHON) JOBS=$(JOBS) TIMEOUT=$(TIMEOUT) tools/make-test.sh

clean:
	rm -rf $(OUT)
