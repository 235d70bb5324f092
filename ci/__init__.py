"""CI's Python: the A/B statistics (ci.ab_stats) and the GPU campaign (ci.gpu_campaign)."""
