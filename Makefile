# The two commands of the README, and a few more. Each one sets up .venv first if needed.
PYTHON ?= python3

.PHONY: lab test setup lock bench exercises execute
lab:        ## set up and open the book in JupyterLab at its first page
	$(PYTHON) tools/book.py lab
test:       ## set up and run every test
	$(PYTHON) tools/book.py test
setup:
	$(PYTHON) tools/book.py setup
lock:       ## regenerate requirements.txt from requirements.in
	$(PYTHON) tools/book.py lock
bench:      ## benchmarks (not tests): writes bench-results/
	$(PYTHON) tools/book.py bench
exercises:  ## regenerate exercises/ from solutions/ (never overwrites a student's edits)
	$(PYTHON) tools/book.py setup && .venv/bin/python tools/make_exercises.py
