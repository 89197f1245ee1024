# The verbs a user types. Set-up needs root (it installs packages and creates the job account).
.PHONY: setup test run list references summary report clean slowdown ab compare spread sweep generate history studies \
        cluster-up cluster-check cluster-status cluster-down cluster-pull cluster-images setup-images images images-run pull-images fresh-machine \
        bind-image \
        site

setup:            ## install Debian packages, ReFrame and the PyPI stacks
	bash ci/setup.sh

test:             ## the test command: set-up, pytest, quick ReFrame pass with references
	bash ci/test.sh

run: setup        ## everything in full (the studies' own tests: make studies), then on the emulated cluster [STACKS=a,b FAMILY=p2p|peers|hpl|su3|startup|pvm|knobs|rma]
	TESTBED_STACKS="$(STACKS)" bash ci/suite.sh full $(if $(FAMILY),-t $(FAMILY)); rc=$$?; \
	TESTBED_CLUSTER_STACKS="$(STACKS)" bash ci/cluster.sh full $(if $(FAMILY),-t $(FAMILY)) || rc=1; \
	exit $$rc

list:             ## list the ReFrame checks for every stack
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && cd reframe && reframe -c tests -l

generate:         ## regenerate spack-envs/ and containers/ from the registry
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 -m testbed_site.generate

references:       ## make references on this machine from RUNS (3) quick passes, or REPORTS, or stored SESSIONS
	if [ -n "$(REPORTS)" ]; then TESTBED_REFERENCE_KIND=$(or $(KIND),all) bash ci/references.sh --reports $(REPORTS); \
	elif [ -n "$(SESSIONS)" ]; then TESTBED_REFERENCE_KIND=$(or $(KIND),all) bash ci/references.sh --sessions $(SESSIONS); \
	else bash ci/references.sh $(or $(RUNS),3) $(or $(KIND),absolute); fi

studies:          ## the four studies beside the originals: their ReFrame cases (QUICK=1 the short variant, STACKS=a,b some stacks, CLUSTER=0 without the cluster, REPORTS= no runs), then reframe/reports/studies/<id>.md; exit 1 when an asserted direction fails
	$(if $(REPORTS),TESTBED_STUDIES_REPORTS="$(REPORTS)") $(if $(filter 0,$(CLUSTER)),TESTBED_STUDIES_CLUSTER=0) \
	$(if $(STACKS),TESTBED_STACKS="$(STACKS)" TESTBED_CLUSTER_STACKS="$(STACKS)") \
	bash ci/studies.sh $(if $(QUICK),quick,full)

summary:          ## print the summary table of the last full run again
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 -m testbed.summary reframe/reports/last-full.json --out reframe/summary

# The report's default inputs: the last quick and full runs and any release sweeps present.
REPORT_INPUTS = reframe/reports/last-quick.json \
                $(wildcard reframe/reports/last-full.json reframe/reports/sweep-*.json)

report:           ## HTML report of REPORTS (default: last quick, full, sweeps) in reframe/report/
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && \
	python3 -m testbed.report --out reframe/report $(or $(REPORTS),$(REPORT_INPUTS)) && \
	if command -v chromium >/dev/null 2>&1; then python3 -m testbed.report.browser reframe/report; \
	else echo "no chromium: no screenshots (make setup installs it)"; fi

clean:            ## remove run outputs (not the installed stacks)
	rm -rf reframe/output reframe/perflogs reframe/reports reframe/summary* reframe/reframe.log
	rm -rf /var/tmp/mpi-testbed-$$(id -un)

# make compare and make ab exit as their programs do: 0 same, 1 slower, 2 bad input. Make itself
# exits 2 whenever a recipe fails, whatever its status, so the program runs while make reads this
# file (its table kept in a file and printed, its progress on stderr as it runs), and its status
# picks make's: 1 is made by -q (a phony goal is "not up to date"), 2 by a failing recipe.
COMPARE_CMD = TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 -m testbed.compare "$(A)" "$(B)" \
	    $(if $(STACK_A),--stack-a "$(STACK_A)") $(if $(STACK_B),--stack-b "$(STACK_B)") \
	    $(if $(THRESHOLD),--threshold "$(THRESHOLD)") $(if $(TESTS),--tests "$(TESTS)") \
	    $(if $(ALLOW_MACHINES),--allow-machines)
AB_CMD = $(if $(ROUNDS),TESTBED_AB_ROUNDS="$(ROUNDS)") $(if $(INJECT),TESTBED_AB_INJECT="$(INJECT)") \
	$(if $(THRESHOLD),TESTBED_AB_THRESHOLD="$(THRESHOLD)") bash ci/ab.sh "$(A)" "$(B)" $(ARGS)
ifneq ($(filter $(MAKECMDGOALS),compare ab),)
VERDICT_OUT := $(shell mktemp /tmp/testbed-verdict.XXXXXX)
VERDICT_RUN := $(shell $(if $(filter compare,$(MAKECMDGOALS)),$(COMPARE_CMD),$(AB_CMD)) > $(VERDICT_OUT))
VERDICT_STATUS := $(.SHELLSTATUS)
VERDICT_TEXT := $(file < $(VERDICT_OUT))
$(if $(VERDICT_TEXT),$(info $(VERDICT_TEXT)))
$(shell rm -f $(VERDICT_OUT))
ifeq ($(VERDICT_STATUS),1)
MAKEFLAGS += -q
endif
endif

compare:          ## is B slower than A? A, B: run reports or stored session UUIDs [STACK_A= STACK_B= THRESHOLD= TESTS= ALLOW_MACHINES=1]; exit 0 same, 1 slower, 2 bad input
	@[ "$(VERDICT_STATUS)" = 0 ] || [ "$(VERDICT_STATUS)" = 1 ] || exit 2

ab:               ## A and B in one job, launch by launch (ABBA), the quick p2p matrix [ROUNDS=24 INJECT= THRESHOLD=0.02]; exit 0 same, 1 slower, 2 bad input
	@[ "$(VERDICT_STATUS)" = 0 ] || [ "$(VERDICT_STATUS)" = 1 ] || exit 2

history:          ## change points over the stored sessions of one PROFILE (quick) and MACHINE type (this one's; ALL) [SINCE=YYYY-MM-DD STACK= FIGURE=regex ORDER=version]; exit 0, 2 bad input
	@TESTBED_REPO="$(CURDIR)" . ./site/env.sh && cd reframe && python3 -m testbed.history \
	    --profile "$(or $(PROFILE),quick)" $(if $(MACHINE),--machine "$(MACHINE)") \
	    $(if $(SINCE),--since "$(SINCE)") $(if $(STACK),--stack "$(STACK)") \
	    $(if $(FIGURE),--figure "$(FIGURE)") $(if $(ORDER),--order "$(ORDER)")

spread:           ## run-to-run CV of the small-size latencies over REPORTS, or the newest RUNS (3) archived quick runs
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && \
	python3 -m testbed.spread $(or $(REPORTS),--archive $(or $(RUNS),3)) $(if $(SIZES),--sizes "$(SIZES)") \
	    $(if $(STATISTIC),--statistic "$(STATISTIC)")

slowdown:         ## prove the references bite: the p2p quick tests slowed by FACTOR (e.g. 1.2) [CALLS= SCOPE=job|run SENDS=after|before WAITS=block|poll]
	$(if $(CALLS),TESTBED_INJECT_CALLS="$(CALLS)") $(if $(SCOPE),TESTBED_INJECT_SCOPE="$(SCOPE)") \
	$(if $(SENDS),TESTBED_INJECT_SENDS="$(SENDS)") $(if $(WAITS),TESTBED_INJECT_WAITS="$(WAITS)") \
	bash ci/slowdown.sh "$(FACTOR)" $(ARGS)

sweep:            ## version sweep: install SERIES (mpich|openmpi|stack list) of site/versions.toml, run ARGS, table
	bash ci/sweep.sh "$(SERIES)" $(ARGS)

setup-images:     ## install podman, runc, mmdebstrap, skopeo, umoci, charliecloud-runtime (Debian) for make images and cluster-pull
	bash ci/setup_images.sh

images: setup-images  ## the OCI image of every stack (containers/), STACKS=a,b for some; sizes
	STACKS="$(STACKS)" bash ci/images.sh

fresh-machine: setup-images  ## the test command (or COMMAND="make run") from a fresh clone in RUNS (1) new bare Debian containers, one by one
	$(if $(COMMAND),TESTBED_FRESH_COMMAND="$(COMMAND)") bash ci/fresh_machine.sh $(or $(RUNS),1)

bind-image: setup-images  ## the bind model's one image (containers/bind-abi): p2p for the MPICH and standard ABIs, no MPI inside; then reframe -c tests/bind_model.py
	bash ci/bind_image.sh

images-run:       ## p2p matrix (quick) on the host and inside each built image; container/host
	bash ci/images_run.sh $(ARGS)

cluster-pull:     ## every node of the emulated cluster pulls the stacks' images from its registry (STACKS=a,b); then --system testbed-cluster-images
	bash ci/cluster_pull.sh

cluster-images: setup-images  ## images built, pushed and pulled by each node, then the quick suite with every rank in its image and the container tax (STACKS=a,b ROUNDS=24)
	STACKS="$(STACKS)" ROUNDS="$(ROUNDS)" bash ci/cluster_images.sh

pull-images:      ## on a cluster with Apptainer: pull every stack's image into SIF_DIR (REGISTRY_URL=docker://HOST:PORT or oras://HOST/ORG, TAG, STACKS=a,b, NO_HTTPS=1; docs/apptainer.md)
	REGISTRY_URL="$(REGISTRY_URL)" TAG="$(TAG)" SIF_DIR="$(SIF_DIR)" STACKS="$(STACKS)" NO_HTTPS="$(NO_HTTPS)" sh ci/pull_images.sh

# Variables, never edits of the file: each one given is passed on (site/make_site.py --help).
SITE_VARS = ACCOUNT QOS RESERVATION PARTITIONS OUT PROVIDE MODULES SIF_DIR STAGEDIR AGENT NODES STACKS

site:             ## on a Slurm login node: write its ReFrame configuration (site/generated/<cluster>-site.py) [ACCOUNT= QOS= RESERVATION= PARTITIONS= OUT= PROVIDE= MODULES= SIF_DIR= STAGEDIR= AGENT= NODES= STACKS=]
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 -m testbed_site.make_site \
	    $(foreach v,$(SITE_VARS),$(if $($(v)),--$(subst _,-,$(shell echo $(v) | tr A-Z a-z))="$($(v))")) $(ARGS)

cluster-up:       ## start the emulated cluster: NODES (2, up to 4), PROFILE (native|gige|10gige), MTU
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 site/cluster/cluster.py up --nodes "$(or $(NODES),2)" --profile "$(or $(PROFILE),native)" --mtu "$(or $(MTU),1500)"

cluster-check:    ## the link profile's rate: a raw TCP stream between two nodes reaches 90-102 % of it
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 site/cluster/cluster.py check

cluster-status:   ## what of the emulated cluster is up
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 site/cluster/cluster.py status

cluster-down:     ## stop it and remove every namespace, link, daemon and state (also after a crash); KEEP_REGISTRY=1 keeps the registry's images
	TESTBED_REPO="$(CURDIR)" . ./site/env.sh && python3 site/cluster/cluster.py down $(if $(KEEP_REGISTRY),--keep-registry)
