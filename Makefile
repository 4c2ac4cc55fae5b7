# The two commands a newcomer needs are `make run` and `make test`; both install what is missing.
.PHONY: setup test-setup run test down status lint schemas bench

setup:
	@bash infra/bootstrap.sh

test-setup:
	@TRIBUNAL_TEST_DEPS=1 bash infra/bootstrap.sh

run: setup
	.venv/bin/tribunal run

test: test-setup lint
	.venv/bin/pytest

down:
	-.venv/bin/tribunal infra down

status:
	.venv/bin/tribunal infra status

lint:
	.venv/bin/ruff check streams schemas tests bench
	.venv/bin/mypy
	.venv/bin/lint-imports

schemas:
	.venv/bin/python -m schemas.export
	.venv/bin/python -m streams.asyncapi

bench: setup
	.venv/bin/python bench/infra_startup.py
	.venv/bin/python bench/core_fold.py
	.venv/bin/python bench/replay_file.py
	.venv/bin/python bench/groups_fold.py
	.venv/bin/python bench/replay_kafka.py
