# The two commands a newcomer needs are `make run` and `make test`; both install what is missing.
.PHONY: setup test-setup run test test-fast test-integration down status lint docs schemas grpc-stubs bench

setup:
	@bash infra/bootstrap.sh

test-setup:
	@TRIBUNAL_TEST_DEPS=1 bash infra/bootstrap.sh

run: setup
	.venv/bin/tribunal run

# The whole suite, as CI runs it: every test, the hypothesis `ci` profile, the 25 slowest listed; then the pure
# core's tests again as pure Python (TRIBUNAL_PURE=1, 10 examples a property), as setup compiled it where it could.
test: test-setup lint docs
	HYPOTHESIS_PROFILE=ci .venv/bin/pytest --durations=25
	TRIBUNAL_PURE=1 HYPOTHESIS_PROFILE=dev .venv/bin/pytest -q -m "not integration" tests/core

# The inner loop: the pure core, schemas, replay and audit on logs, no broker (under a minute).
test-fast: test-setup
	.venv/bin/pytest -m "not integration" -q

# What needs the real broker and ZooKeeper (started by the fixtures); `-m "integration and not chaos"` skips
# the kill, broker-loss, scale-out, fuzz and secured-stack runs.
test-integration: test-setup
	HYPOTHESIS_PROFILE=ci .venv/bin/pytest -m integration --durations=25

down:
	-.venv/bin/tribunal infra down

status:
	.venv/bin/tribunal infra status

lint:
	.venv/bin/ruff check streams schemas tests bench docs/hooks
	.venv/bin/mypy
	.venv/bin/lint-imports

# The documentation site (docs/, mkdocs.yml) into .site/; strict: a broken link or a missing page fails.
docs: test-setup
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

schemas:
	.venv/bin/python -m schemas.export
	.venv/bin/python -m streams.asyncapi

# KEDA's external scaler stubs, from the vendored proto (tests/decider/test_keda.py checks they are current).
grpc-stubs:
	.venv/bin/python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. --pyi_out=. \
		streams/decider/keda/externalscaler.proto

bench: setup
	.venv/bin/python bench/infra_startup.py
	.venv/bin/python bench/core_fold.py
	.venv/bin/python bench/replay_file.py
	.venv/bin/python bench/groups_fold.py
	.venv/bin/python bench/replay_kafka.py
