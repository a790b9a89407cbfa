.PHONY: build lint typecheck test schema models

build:
	pip install -e ".[test]"

lint:
	ruff check mnnpy tests tools
	cython-lint mnnpy/backend/cpu/kernels

typecheck:
	mypy

test:
	pytest

schema:
	tools/gen_schema.sh

models:
	python tools/make_test_models.py
