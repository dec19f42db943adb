# SPDX-License-Identifier: GPL-2.0
#
# kloc: kernel locality tests. "make help" lists the targets.

KERNEL     ?=
KDIR       ?=
OUT        ?= out
TOPOLOGIES ?=
JOBS       ?= $(shell nproc)
TIMEOUT    ?=
RUNS       ?=
ALPHA      ?=
SECONDS    ?=
MDE        ?=
FORCE      ?=
PYTHON     ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
export KLOC_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kloc

KLOC  = PYTHONPATH='$(CURDIR)/tools' $(PYTHON) -m kloc
# A value as one shell word, whatever it holds (spaces, quotes).
q = '$(subst ','\'',$(1))'
# --flag 'VALUE' when the variable is set; the defaults live in tools/kloc/defaults.py.
opt = $(if $(2),$(1) $(call q,$(2)))
FORCE_OPT = $(if $(filter-out 0,$(FORCE)),--force)
TREE  = $(call opt,--kernel,$(KERNEL)) $(call opt,--kdir,$(KDIR)) $(FORCE_OPT)
NUMBERS = $(call opt,--timeout,$(TIMEOUT)) $(call opt,--runs,$(RUNS)) \
	$(call opt,--seconds,$(SECONDS)) $(call opt,--alpha,$(ALPHA)) $(call opt,--mde,$(MDE)) \
	$(call opt,--counted,$(COUNTED))

.PHONY: help deps tree install uninstall patches kunit kselftest guest compare review bench-aa mutants lava \
	known-failures \
	report run test check-tools lint clean

help:
	@echo 'kloc: kernel locality tests (see README.md)'
	@echo
	@echo '  make run         KUnit on every topology, the mutants, the kselftest; the summary'
	@echo "  make test        the package's own tests, lint, and KUnit on $$($(KLOC) registry make-test-kernels)"
	@echo
	@echo '  make deps        install missing Debian packages (as root), or list them'
	@echo "  make tree        extract the kernel tree (KERNEL=$$($(KLOC) registry kernels | tr ' ' '|')), print its path"
	@echo '  make install     install the tests and hooks into the tree'
	@echo '  make uninstall   restore the tree byte for byte'
	@echo '  make patches     export the series as git-am-able patches to $$(OUT)/patches'
	@echo '  make kunit       KUnit on every topology: KTAP, JSON, $$(OUT)/kunit/junit.xml'
	@echo '  make kselftest   build the kselftests standalone and in-tree; run them on this kernel'
	@echo '  make guest       build a minimal guest (ARCH=, ALLOC=slub|slab) and run the kselftest once'
	@echo '  make compare     SLUB vs SLAB guests (the newest kernel with SLAB), interleaved: table, JSON, SVG plot'
	@echo "  make review      PATCH=file: base vs patched kernel (KERNEL=$$($(KLOC) registry newest) by default), KUnit + loopback A/B; report"
	@echo '  make bench-aa    20 short A/A reviews: how often a null difference is called'
	@echo '  make mutants     apply each mutant to a copy of the tree; each must be caught'
	@echo '  make known-failures  each known upstream failure of KERNEL= fails stock and passes with its fix'
	@echo '  make lava        LAVA jobs for the KUnit kernels and the guest kselftest (RUN=1: run them here)'
	@echo '  make report      merge $$(OUT)/kunit into junit.xml and print the summary'
	@echo '  make check-tools unit tests of tools/'
	@echo '  make lint        checkpatch --strict, W=1 and sparse, mypy --strict, flake8, shellcheck'
	@echo '  make clean       remove $$(OUT)'
	@echo
	@echo "Variables: KERNEL=$(or $(KERNEL),(default: $$($(KLOC) registry default); review: the newest)) KDIR=$(KDIR) OUT=$(OUT) TOPOLOGIES=$(TOPOLOGIES)"
	@echo '           KLOC_CACHE=$(KLOC_CACHE) ARCH= ALLOC= TOPOLOGY= (guest, compare, review)'
	@echo '           PATCH= AA=1 (review) FORCE=1 (replace or restore files edited by hand)'
	@echo '           LAVA_URL= LAVA_TOKEN_FILE= (or LAVA_TOKEN=) LAVA_ARTIFACTS_URL= (compare, review: timed runs in a LAVA lab)'
	@echo
	@echo 'Numeric options and their defaults, per command:'
	@$(KLOC) defaults

deps:
	@tools/deps.sh

tree: deps
	@$(KLOC) tree $(TREE)

install: deps
	@$(KLOC) install $(TREE)

uninstall: deps
	@$(KLOC) uninstall $(TREE)

patches: deps
	@$(KLOC) patches $(TREE) --out $(call q,$(OUT))

kunit: deps
	@$(KLOC) kunit $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--topologies,$(TOPOLOGIES))

guest: deps
	@$(KLOC) guest $(TREE) --arch $(call q,$(or $(ARCH),x86_64)) \
		--alloc $(call q,$(or $(ALLOC),slub)) --topology $(call q,$(or $(TOPOLOGY),x86_64_2n)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--seconds,$(SECONDS)) \
		$(call opt,--counted,$(COUNTED)) --out $(call q,$(OUT))

# LAVA_URL=: compare's and review's timed runs as jobs of a LAVA lab (docs/lava.md).
LAB = $(call opt,--lava-url,$(LAVA_URL)) $(call opt,--lava-token-file,$(LAVA_TOKEN_FILE)) \
	$(call opt,--artifacts-url,$(LAVA_ARTIFACTS_URL))

compare: deps
	@$(KLOC) compare $(TREE) --arch $(call q,$(or $(ARCH),x86_64)) \
		$(call opt,--topology,$(TOPOLOGY)) $(NUMBERS) $(LAB) --out $(call q,$(OUT))

review: deps
	@$(KLOC) review $(TREE) $(call opt,--patch,$(PATCH)) $(if $(AA),--aa) \
		$(call opt,--topologies,$(TOPOLOGIES)) $(call opt,--bench-topology,$(TOPOLOGY)) \
		$(NUMBERS) $(LAB) --jobs $(call q,$(JOBS)) --out $(call q,$(OUT))

# A benchmark, not a test: the share of A/A reviews that call a difference.
bench-aa: deps
	@OUT=$(call q,$(OUT)) PYTHON=$(PYTHON) KERNEL=$(call q,$(KERNEL)) \
		REPEATS=$(call q,$(or $(REPEATS),20)) RUNS=$(call q,$(or $(AA_RUNS),6)) \
		AA_SECONDS=$(call q,$(or $(AA_SECONDS),1)) ALPHA=$(call q,$(or $(ALPHA),0.05)) \
		tools/bench-aa.sh

kselftest: deps
	@OUT=$(call q,$(OUT)) PYTHON=$(PYTHON) KERNEL=$(call q,$(KERNEL)) tools/kselftest-host.sh

mutants: deps
	@$(KLOC) mutants $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT))

# tools/kloc/kunit/known.py: each entry of KERNEL= fails on the stock kernel, passes fixed.
known-failures: deps
	@$(KLOC) known-failures $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT))

# LAVA job definitions of the built kernels; RUN=1 runs them here with lava-run.
lava: deps
	@$(KLOC) lava $(TREE) --out $(call q,$(OUT)) $(call opt,--topologies,$(TOPOLOGIES)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--seconds,$(SECONDS)) \
		$(call opt,--artifacts-url,$(LAVA_ARTIFACTS_URL)) $(if $(filter-out 0,$(RUN)),--run)

report:
	@$(KLOC) report --out $(call q,$(OUT))

# Every step runs; the summary comes last; the exit code says if any failed.
run: deps
	@rc=0; \
	$(KLOC) kunit $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--topologies,$(TOPOLOGIES)) \
		>/dev/null || rc=1; \
	$(KLOC) mutants $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT)) || rc=1; \
	OUT=$(call q,$(OUT)) PYTHON=$(PYTHON) KERNEL=$(call q,$(KERNEL)) tools/kselftest-host.sh \
		>/dev/null || rc=1; \
	echo; $(KLOC) report --out $(call q,$(OUT)) || rc=1; \
	exit $$rc

check-tools:
	@cd tools && $(PYTHON) -m tests.run --jobs $(call q,$(JOBS)) $(if $(V),-v)

lint: deps
	@OUT=$(call q,$(OUT)) PYTHON=$(PYTHON) tools/lint.sh

test: deps
	@OUT=$(call q,$(OUT)) PYTHON=$(PYTHON) JOBS=$(call q,$(JOBS)) \
		TIMEOUT=$(call q,$(TIMEOUT)) tools/make-test.sh

clean:
	rm -rf $(call q,$(OUT))
