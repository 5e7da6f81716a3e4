# gpugen: make help lists the targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.DEFAULT_GOAL := help
.PHONY: help render check check-inventory plan schema lint test test-slow tools validate kubernetes-pins bench demo lock clean-venv

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Exact versions from constraints.txt (make lock), within pyproject.toml's ranges.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints.txt
	$(PY) -m pip install --quiet -e '.[test]' -c constraints.txt
	touch $@

render: $(VENV)/.installed ## Render gpu_classes.yaml into rendered/, bootstrap/ and docs/runtimes.md (a no-op render touches no file)
	$(PY) -m generator render

check: $(VENV)/.installed ## Fail (exit 1) listing added/changed/removed files if any rendered output is stale
	$(PY) -m generator render --check

schema: $(VENV)/.installed ## Re-export the inventory's JSON Schema for editors (schema/gpu_classes.schema.json)
	$(PY) -m generator schema --out schema/gpu_classes.schema.json

plan: $(VENV)/.installed ## What the inventory change does to the cluster, against the committed tree (BASE=HEAD)
	$(PY) -m generator plan --base $(or $(BASE),HEAD)

lint: $(VENV)/.installed ## ruff over the Python code with pyproject.toml's rules (the pinned ruff; CI runs it first)
	$(VENV)/bin/ruff check .

tools: $(VENV)/.installed ## Build every pinned upstream tool (Kubernetes, etcd, Kyverno, Kueue, JobSet, Trainer, helm, KWOK, crane, kubeconform, Argo CD, Prometheus, promtool) into ~/.cache/gpugen
	bash tools/build.sh

validate: $(VENV)/.installed tools ## kubeconform over rendered/ on both Kubernetes lines, then the real kube-apiserver tier on both
	bash tools/kubeconform.sh
	KUBERNETES=$$(sed -n 's/^KUBERNETES_PREVIOUS_VERSION=//p' generator/versions.env) bash tools/kubeconform.sh
	$(PY) -m pytest -q tests/apiserver

kubernetes-pins: $(VENV)/.installed ## Pin a Kubernetes release and its etcd: KUBERNETES=vX.Y.Z ETCD=vA.B.C (a newer minor moves the newest to the previous line)
	$(PY) -m tools.kubernetes_pins $(KUBERNETES) $(ETCD)

test: $(VENV)/.installed tools ## Everything CI runs: build tools, all tests (the simulated FLAME's beside the other tiers), drift check
	$(PY) -m tests.run
	$(PY) -m generator render --check

test-slow: $(VENV)/.installed tools ## The whole suite on one core (taskset -c 0): a machine twice as slow; verdicts must not change
	taskset -c 0 $(PY) -m tests.run
	$(PY) -m generator render --check

# The tools the inventory's checks run, and those checks: the drift check (an invalid inventory fails here, with the
# same FILE:LINE:COL message as everywhere), kubeconform, the strict API-server tier, the policy corpus against
# the rendered policies, the rendered queues in the real Kueue, promtool on the rendered rules, then the plan.
INVENTORY_TOOLS := kubeconform etcd kube-apiserver etcd-previous kube-apiserver-previous kyverno kueue promtool
INVENTORY_TESTS := tests/apiserver/test_kubeconform.py tests/apiserver/test_apiserver.py tests/unit/test_policies.py \
	"tests/e2e/test_kueue_admission.py::test_every_queue_is_active" \
	"tests/e2e/test_kueue_admission.py::test_kueue_webhooks_validate_the_rendered_queues" \
	"tests/unit/test_prometheus_rules.py::test_every_rule_file_passes_promtool_check"

check-inventory: $(VENV)/.installed ## CI for a change to the inventory and its rendered trees only (tools/ci_path.sh); BASE=origin/main for the plan
	$(PY) -m generator render --check
	bash tools/build.sh $(INVENTORY_TOOLS)
	$(if $(GPUGEN_TEST_TMP),mkdir -p $(GPUGEN_TEST_TMP))
	$(PY) -m pytest -q $(INVENTORY_TESTS) $(if $(GPUGEN_TEST_TMP),--basetemp=$(GPUGEN_TEST_TMP)/inventory)
	$(PY) -m generator plan --base $(or $(BASE),HEAD)

demo: $(VENV)/.installed tools ## Simulated FLAME bootstrapped by the real Argo CD from the committed tree: prints KUBECONFIGs, runs until Ctrl-C
	$(PY) -m simulation.demo

bench: $(VENV)/.installed tools ## Benchmarks at national scale; rewrites the results table in benchmarks/README.md
	$(PY) -m benchmarks.run --apiserver --profile --write-readme

lock: ## Re-resolve the Python dependencies within pyproject.toml's ranges into constraints.txt (commit both)
	bash tools/lock.sh

clean-venv: ## Remove the virtualenv (the tool cache in ~/.cache/gpugen is kept)
	rm -rf $(VENV)
