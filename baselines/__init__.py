"""The baselines measured beside megatrain: the peers (baselines.peers)."""
