"""srl: reinforcement learning as a dataflow of separated workers, from one laptop to a cluster."""

__version__ = "0.1.0"
