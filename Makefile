# The two Quickstart commands. Both set everything up from scratch (idempotently) first.
.PHONY: run test setup kb bench

VENV := .venv
BIN  := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

run:
	@scripts/setup.sh
	@$(BIN)/trainfix ingest
	@$(BIN)/trainfix chat

test:
	@scripts/setup.sh dev
	@$(BIN)/python -m pytest

setup:
	@scripts/setup.sh dev
