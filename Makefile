# The verbs a user types. Set-up needs root (it installs packages and creates the job account).
.PHONY: setup test run list references summary clean

setup:            ## install Debian packages, ReFrame and the PyPI stacks
	bash ci/setup.sh

test:             ## the test command: set-up, pytest, quick ReFrame pass with references
	bash ci/test.sh

run: setup        ## the full point-to-point matrix on every stack, then the summary table
	bash ci/suite.sh full

list:             ## list the ReFrame checks for every stack
	. site/env.sh && cd reframe && reframe -c tests -l

references:       ## regenerate reframe/references/*.csv from the run reports given in REPORTS
	. site/env.sh && python3 -m testbed.references update $(REPORTS)

summary:          ## print the summary table of the last full run again
	. site/env.sh && python3 -m testbed.summary reframe/reports/last-full.json --out reframe/summary

clean:            ## remove run outputs (not the installed stacks)
	rm -rf reframe/output reframe/perflogs reframe/reports reframe/summary* reframe/reframe.log
	rm -rf /var/tmp/mpi-testbed-$$(id -un)
