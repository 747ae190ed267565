# The two commands of the README, and a few more. Each one sets up .venv first if needed.
# ARGS passes options through, e.g. make lab ARGS="--port 8890 --no-browser" (remote use: README),
# make test ARGS="-k decode", make book ARGS=--without-solutions, make exercises ARGS=--force.
PYTHON ?= python3
ARGS ?=

.PHONY: lab test setup lock bench exercises book browser-test
lab:        ## set up and open the book in JupyterLab at its first page
	$(PYTHON) tools/book.py lab $(ARGS)
test:       ## set up and run every test
	$(PYTHON) tools/book.py test $(ARGS)
setup:
	$(PYTHON) tools/book.py setup
lock:       ## regenerate requirements.txt from requirements.in
	$(PYTHON) tools/book.py lock
bench:      ## benchmarks (not tests): writes bench-results/
	$(PYTHON) tools/book.py bench $(ARGS)
exercises:  ## regenerate exercises/ from solutions/ (never overwrites a student's edits)
	$(PYTHON) tools/book.py setup && .venv/bin/python tools/make_exercises.py $(ARGS)
book:       ## build the book as a static, offline HTML site in book/_build/html
	$(PYTHON) tools/book.py book $(ARGS)
browser-test: ## build the book, check every page in headless Chromium, and read a chapter in JupyterLab
	$(PYTHON) tools/book.py browser-test $(ARGS)
