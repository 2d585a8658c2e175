# The two Quickstart commands. Both set everything up from scratch (idempotently) first.
.PHONY: run test setup kb bench screenshots

VENV := .venv
BIN  := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export GRADIO_ANALYTICS_ENABLED := False

run:
	@scripts/setup.sh
	@$(BIN)/trainfix ingest
	@$(BIN)/trainfix web

test:
	@scripts/setup.sh dev
	@$(BIN)/python -m pytest

setup:
	@scripts/setup.sh dev

# The web chat screenshots in docs/ (shown in the README), from a real server and headless Chromium.
screenshots:
	@scripts/setup.sh dev
	@fc-list :lang=zh 2>/dev/null | grep -q . || { echo "screenshots: installing a CJK font for the Chinese picture (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-zenhei >/dev/null; }
	@$(BIN)/trainfix ingest
	@$(BIN)/python scripts/screenshots.py

# Every benchmark side by side (about 30 minutes on 2 cores); rewrites the README's Performance table.
bench:
	@scripts/setup.sh dev
	@$(BIN)/trainfix ingest
	@$(BIN)/python -m bench.all --update-readme
