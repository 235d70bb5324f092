"""The peer runners (FSDP2, DeepSpeed ZeRO-3, the official code); each runs as python3 -m baselines.peers.NAME from the repo root."""
