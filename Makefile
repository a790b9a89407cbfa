.PHONY: build check lint format-check typecheck cython-lint test schema models

PY_PATHS = mnnpy tests tools examples setup.py

build:
	pip install -e ".[test]"

# What CI runs before the tests (.ci/run); the tools come from the dev extra: pip install -e ".[dev]"
check: lint format-check typecheck cython-lint

lint:
	ruff check $(PY_PATHS)

format-check:
	ruff format --check $(PY_PATHS)

typecheck:
	mypy

cython-lint:
	cython-lint mnnpy/backend/cpu/kernels mnnpy/_netread.pyx mnnpy/_memplan.pyx mnnpy/_arenas.pyx mnnpy/_shapefast.pyx mnnpy/_unitfast.pyx mnnpy/geometry/_regions.pyx mnnpy/geometry/_compose.pyx mnnpy/geometry/_describe.pyx

test:
	pytest

schema:
	tools/gen_schema.sh

models:
	python tools/make_test_models.py
