# The two commands of the README, and a few more. Each one sets up .venv first if needed.
PYTHON ?= python3

.PHONY: lab test setup lock bench exercises book browser-test
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
book:       ## build the book as a static, offline HTML site in book/_build/html
	$(PYTHON) tools/book.py book
browser-test: ## build the book, then check every page in headless Chromium (screenshots in test-artifacts/book)
	$(PYTHON) tools/book.py browser-test
