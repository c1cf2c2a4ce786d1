"""gangcheck: admission-time feasibility checks for gang-scheduled GPU jobs on Kubernetes."""

__version__ = "0.1.0"
