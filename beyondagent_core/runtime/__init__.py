"""The workflow runtime every backend shares: episodes, the react workflow, token sequences."""
