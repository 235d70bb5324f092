"""The peers' CPU tests: python3 -m unittest discover -s baselines/peers/tests -t . (from the repo root)."""
