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
KERNELS    ?=
PYTHON     ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
# Where the cache is, when KLOC_CACHE is not given: kloc says (tools/kloc/paths.py).
export KLOC_CACHE

# A value as one shell word, whatever it holds (spaces, quotes, $, `): every recipe
# passes user values only through q.
q = '$(subst ','\'',$(1))'
KLOC  = PYTHONPATH=$(call q,$(CURDIR)/tools) $(call q,$(PYTHON)) -m kloc
# OUT made and marked as kloc's (for make clean) before a script writes in it.
MARK_OUT = $(KLOC) out --out $(call q,$(OUT)) >/dev/null
# make stops with the message $(1), if there is one.
refuse = $(if $(strip $(1)),$(error $(strip $(1))))
# --flag 'VALUE' when the variable is set; the defaults live in tools/kloc/defaults.py.
# kloc reads FORCE, AA and RUN strictly (1, or 0 or nothing), and every number.
opt = $(if $(2),$(1) $(call q,$(2)))
TREE  = $(call opt,--kernel,$(KERNEL)) $(call opt,--kdir,$(KDIR)) $(call opt,--force,$(FORCE))

# A value with a newline would end a recipe's command line: refused, in one line.
define newline


endef
USER_VARIABLES = KERNEL KERNELS KDIR OUT TOPOLOGIES JOBS TIMEOUT RUNS ALPHA SECONDS MDE COUNTED \
	FORCE ARCH ALLOC TOPOLOGY PATCH AA REVIEW_PACKAGE BENCH ITS ITS_REMOTE_NS RUN V LAVA_URL LAVA_TOKEN_FILE LAVA_ARTIFACTS_URL \
	LAVA_INSECURE_HTTP REPEATS AA_RUNS AA_SECONDS AA_STREAMS KLOC_CACHE KLOC_TEST_USER PYTHON
$(foreach v,$(USER_VARIABLES),$(if $(findstring $(newline),$($(v))),$(error \
	$(v)=$(subst $(newline),\n,$($(v))) holds a newline: give $(v)= a value on one line)))
# V (make check-tools) is make's own yes-or-no: 1, or 0 or nothing.
empty :=
space := $(empty) $(empty)
ifneq ($(filter-out x x0 x1,x$(subst $(space),_,$(V))),)
$(error V=$(V) is not 0 or 1: give V=1 for a line per test module, class or test, or V=0 \
	(or nothing) for none)
endif
# make -n: recipes are shown, and nothing of theirs runs (not even make clean's check).
DRY_RUN = $(findstring n,$(filter-out -%,$(firstword $(MAKEFLAGS))))
NUMBERS = $(call opt,--timeout,$(TIMEOUT)) $(call opt,--runs,$(RUNS)) \
	$(call opt,--seconds,$(SECONDS)) $(call opt,--alpha,$(ALPHA)) $(call opt,--mde,$(MDE)) \
	$(call opt,--counted,$(COUNTED))

.PHONY: help deps tree patches kunit kselftest guest compare review bisect bench-aa bench-plugin-cost \
	mutants lava known-failures \
	report run test check-tools lint clean

help:
	@echo 'kloc: kernel locality tests (see README.md)'
	@echo
	@echo '  make run         the whole mission: KUnit, mutants, kselftest, SLUB vs SLAB on 6.1, the ITS path'
	@echo "  make test        the package's own tests, lint, and KUnit on $$($(KLOC) registry make-test-kernels)"
	@echo
	@echo '  make deps        install missing Debian packages (as root), or list them'
	@echo "  make tree        refresh kloc's copy of the tree (KERNEL=$$($(KLOC) registry kernels | tr ' ' '|') or KDIR=), the series applied; print its path"
	@echo '  make patches     export the series as git-am-able patches to $$(OUT)/patches'
	@echo '  make kunit       KUnit on every topology: KTAP, JSON, $$(OUT)/kunit/junit.xml'
	@echo '  make kselftest   build the kselftests standalone and in-tree; run them on this kernel'
	@echo '  make guest       build a minimal guest (ARCH=, ALLOC=slub|slab) and run the kselftest once'
	@echo '  make compare     SLUB vs SLAB guests (the newest kernel with SLAB), interleaved: table, JSON, SVG plot'
	@echo "  make review      PATCH=file: base vs patched kernel (KERNEL=$$($(KLOC) registry newest) by default), KUnit + loopback A/B (timed and counted); report"
	@echo '  make bisect      KDIR=<git clone> GOOD= BAD=: the first commit that breaks each KUnit case or moves each counted figure (the tree only read)'
	@echo '  make bench-aa    REPEATS= layout-only A/A'"'"' reviews at review'"'"'s defaults, and two sanity checks: how often the verdict calls a change'
	@echo '  make bench-plugin-cost  RUNS= boots each: no plugin, kloc-count, cache.c (icount) and timed: wall time, peak RSS'
	@echo '  make mutants     apply each mutant to a copy of the tree; each must be caught'
	@echo '  make known-failures  each known upstream failure of KERNEL= fails stock and passes with its fix'
	@echo '  make lava        LAVA jobs for the KUnit kernels and the guest kselftest (RUN=1: run them here)'
	@echo '  make report      merge $$(OUT)/kunit into junit.xml and print the summary'
	@echo '  make check-tools unit tests of tools/'
	@echo '  make lint        checkpatch --strict, W=1 and sparse, mypy --strict, flake8, shellcheck'
	@echo '  make clean       remove what kloc wrote in $$(OUT) (all of it, if kloc made it)'
	@echo
	@printf 'Variables: KERNEL=%s KDIR=%s OUT=%s TOPOLOGIES=%s\n' \
		$(if $(KERNEL),$(call q,$(KERNEL)),"(default: $$($(KLOC) registry default); review: the newest)") \
		$(call q,$(KDIR)) $(call q,$(OUT)) $(call q,$(TOPOLOGIES))
	@printf '           KLOC_CACHE=%s ARCH= ALLOC= TOPOLOGY= (guest, compare, review)\n' \
		$(if $(KLOC_CACHE),$(call q,$(KLOC_CACHE)),"$$($(KLOC) registry cache)")
	@echo '           PATCH= AA=1 REVIEW_PACKAGE=1 BENCH=0 (review, bisect: KUnit only) FORCE=1 (mutants on a tree with uncommitted edits)'
	@echo '           GOOD= BAD= (bisect: revisions of KDIR) KUNIT=0 (bisect: the counted figures only)'
	@echo '           LAVA_URL= LAVA_TOKEN_FILE= (or LAVA_TOKEN=) LAVA_ARTIFACTS_URL= (compare, review: timed runs in a LAVA lab)'
	@echo '           LAVA_INSECURE_HTTP=1 (plain http to a LAVA host that is not this machine)'
	@echo '           yes-or-no variables (FORCE, AA, REVIEW_PACKAGE, RUN, V) take 1, or 0 or nothing'
	@echo
	@echo 'Numeric options and their defaults, per command:'
	@$(KLOC) defaults

deps:
	@tools/deps.sh

tree: deps
	@$(KLOC) tree $(TREE)

patches: deps
	@$(KLOC) patches $(TREE) --out $(call q,$(OUT))

kunit: deps
	@$(KLOC) kunit $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--topologies,$(TOPOLOGIES))

guest: deps
	@$(KLOC) guest $(TREE) $(call opt,--arch,$(ARCH)) \
		$(call opt,--alloc,$(ALLOC)) $(call opt,--topology,$(TOPOLOGY)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--seconds,$(SECONDS)) \
		$(call opt,--counted,$(COUNTED)) $(call opt,--its-remote-ns,$(ITS_REMOTE_NS)) \
		--jobs $(call q,$(JOBS)) --out $(call q,$(OUT))

# LAVA_URL=: compare's and review's timed runs as jobs of a LAVA lab (docs/lava.md).
LAB = $(call opt,--lava-url,$(LAVA_URL)) $(call opt,--lava-token-file,$(LAVA_TOKEN_FILE)) \
	$(call opt,--artifacts-url,$(LAVA_ARTIFACTS_URL))

compare: deps
	@$(KLOC) compare $(TREE) $(call opt,--arch,$(ARCH)) \
		$(call opt,--topology,$(TOPOLOGY)) $(NUMBERS) $(LAB) --jobs $(call q,$(JOBS)) \
		--out $(call q,$(OUT))

review: deps
	@$(KLOC) review $(TREE) $(call opt,--patch,$(PATCH)) $(call opt,--aa,$(AA)) \
		$(call opt,--review-package,$(REVIEW_PACKAGE)) $(call opt,--bench,$(BENCH)) \
		$(call opt,--timed,$(TIMED)) \
		$(call opt,--topologies,$(TOPOLOGIES)) $(call opt,--bench-topology,$(TOPOLOGY)) \
		$(call opt,--arch,$(ARCH)) $(call opt,--its,$(ITS)) \
		$(call opt,--its-remote-ns,$(ITS_REMOTE_NS)) \
		$(NUMBERS) $(LAB) --jobs $(call q,$(JOBS)) --out $(call q,$(OUT))

# The first bad commit of each signal between GOOD and BAD of a git KDIR, only read.
bisect: deps
	@$(KLOC) bisect $(call opt,--kdir,$(KDIR)) $(call opt,--good,$(GOOD)) \
		$(call opt,--bad,$(BAD)) $(call opt,--topologies,$(TOPOLOGIES)) \
		$(call opt,--bench-topology,$(TOPOLOGY)) $(call opt,--bench,$(BENCH)) \
		$(call opt,--kunit,$(KUNIT)) $(call opt,--timeout,$(TIMEOUT)) \
		$(call opt,--seconds,$(SECONDS)) $(call opt,--alpha,$(ALPHA)) $(call opt,--mde,$(MDE)) \
		$(call opt,--counted,$(COUNTED)) --jobs $(call q,$(JOBS)) --out $(call q,$(OUT))

# A benchmark, not a test: the share of A/A reviews that call a difference.
bench-aa: deps
	@$(MARK_OUT) && OUT=$(call q,$(OUT)) PYTHON=$(call q,$(PYTHON)) KERNEL=$(call q,$(KERNEL)) \
		REPEATS=$(call q,$(REPEATS)) RUNS=$(call q,$(AA_RUNS)) \
		AA_SECONDS=$(call q,$(AA_SECONDS)) ALPHA=$(call q,$(ALPHA)) \
		COUNTED=$(call q,$(COUNTED)) STREAMS=$(call q,$(AA_STREAMS)) tools/bench-aa.sh

# A benchmark, not a test: what the counting plugin costs against QEMU's cache.c.
bench-plugin-cost: deps
	@$(KLOC) bench-plugin-cost $(TREE) $(call opt,--runs,$(RUNS)) \
		$(call opt,--timeout,$(TIMEOUT)) --out $(call q,$(OUT))

kselftest: deps
	@$(MARK_OUT) && OUT=$(call q,$(OUT)) PYTHON=$(call q,$(PYTHON)) KERNEL=$(call q,$(KERNEL)) \
		tools/kselftest-host.sh

mutants: deps
	@$(KLOC) mutants $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT))

# tools/kloc/kunitpy/known.py: each entry of KERNEL= fails on the stock kernel, passes fixed.
known-failures: deps
	@$(KLOC) known-failures $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT))

# LAVA job definitions of the built kernels; RUN=1 runs them here with lava-run.
lava: deps
	@$(KLOC) lava $(TREE) --out $(call q,$(OUT)) $(call opt,--topologies,$(TOPOLOGIES)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--seconds,$(SECONDS)) \
		$(call opt,--artifacts-url,$(LAVA_ARTIFACTS_URL)) $(call opt,--run,$(RUN))

report:
	@$(KLOC) report --out $(call q,$(OUT))

# Every step runs; the summary comes last; the exit code says if any failed.
# The whole mission, each part as its own command (tools/kloc/run/): one screen, run.json.
run: deps
	@$(KLOC) run $(TREE) --out $(call q,$(OUT)) --jobs $(call q,$(JOBS)) \
		$(call opt,--timeout,$(TIMEOUT)) $(call opt,--topologies,$(TOPOLOGIES))

check-tools:
	@cd tools && $(call q,$(PYTHON)) -m tests.run --jobs $(call q,$(JOBS)) $(if $(filter 1,$(V)),-v)

lint: deps
	@$(MARK_OUT) && OUT=$(call q,$(OUT)) PYTHON=$(call q,$(PYTHON)) KERNELS=$(call q,$(KERNELS)) \
		tools/lint.sh

test: deps
	@$(MARK_OUT) && OUT=$(call q,$(OUT)) PYTHON=$(call q,$(PYTHON)) JOBS=$(call q,$(JOBS)) \
		TIMEOUT=$(call q,$(TIMEOUT)) KERNELS=$(call q,$(KERNELS)) tools/make-test.sh

# Removes only what kloc wrote in OUT (kloc clean): OUT whole if kloc made it, else
# kloc's outputs. A symlink, or a folder kloc did not mark, is refused; the check runs
# as the recipe is expanded, so that the refusal is make's one error line.
clean:
	@$(if $(DRY_RUN),,$(call refuse,$(shell $(KLOC) clean --check --out $(call q,$(OUT)) 2>&1 >/dev/null)))
	@$(KLOC) clean --out $(call q,$(OUT))
