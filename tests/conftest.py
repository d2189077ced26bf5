"""Shared test setup: offline model loading, and the shared benchmark data folder when present."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if "SHORTLIST_DATA_DIR" not in os.environ and SHARED_DATA.is_dir():
    os.environ["SHORTLIST_DATA_DIR"] = str(SHARED_DATA)
