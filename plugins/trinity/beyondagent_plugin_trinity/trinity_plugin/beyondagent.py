"""Loaded by Trinity-RFT's plugin loader (`TRINITY_PLUGIN_DIRS`): registers BeyondAgent's Workflow and
ADVANTAGE_FN as `beyondagent` in trinity's registries (see beyondagent_plugin_trinity/registration.py)."""

from beyondagent_plugin_trinity.registration import register

register()
