# The two commands a new user runs (as root):
#   make run    install dependencies, build, start hutchd on 127.0.0.1:8080
#   make test   install dependencies, build with sanitizers, run the tests
STATE_DIR ?= /var/lib/hutch
LISTEN ?= 127.0.0.1:8080

.PHONY: run test test-all setup bench fuzz clean

setup:
	scripts/setup

run: setup
	build/hutchd --listen $(LISTEN) --state-dir $(STATE_DIR)

test:
	scripts/test

test-all:
	scripts/test --all

bench: setup
	scripts/bench

fuzz: setup
	scripts/fuzz --seconds 300

clean:
	rm -rf build
