"""Model assembly: layers, the two architectures, the builder, parameter counts."""

from ablate.model.builder import build_model
from ablate.model.inspect import attention_weights
from ablate.model.params import count_parameters

__all__ = ["attention_weights", "build_model", "count_parameters"]
