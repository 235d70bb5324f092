"""The GPU campaign: python3 -m ci.gpu_campaign.main from the repo root (ci/gpu_campaign.sh)."""
